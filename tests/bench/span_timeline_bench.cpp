// span_timeline_bench: the session view's span timeline against the console's budgets
// (ARCHITECTURE.md, "Budgets"). Prints figures next to their budgets, as ratios; not a ctest.
//
//  1. Live: 1,000,000 events arriving in batches of 2,500 (50,000 events/s in 50 ms ticks), every
//     one of them a span's event (a model response, a tool call, its result: the worst case; output
//     chunks cost next to nothing). The GUI thread's work per tick, TraceModel alone (the raw
//     mechanism, measured in the same run) and TraceModel + SpanModel; budget 50 ms a tick.
//  2. Open: the same 1,000,000 events already in the TraceModel when the SpanModel attaches (a
//     session whose history was paged in): the longest slice the GUI thread spends at once (budget
//     50 ms), the time to the first painted timeline (budget 1 s), and the time until every span is
//     built (drawn as they come; no budget).
//  3. Memory: resident growth of the spans against the TraceModel's own (budget: 500 MB for the
//     console).
//  4. Paint: the timeline (1280 wide) with every span, fitted, zoomed into the middle and panned;
//     each a synchronous repaint, p50/p99/max; budget 16 ms.
//
// Run offscreen: QT_QPA_PLATFORM=offscreen (set here when unset).

#include "models/span_model.h"
#include "models/trace_model.h"
#include "views/span_timeline.h"
#include "views/theme.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QScrollBar>

#include <algorithm>
#include <functional>
#include <cstdio>
#include <vector>

using namespace paddock::console;

namespace {

constexpr int kEvents = 1'000'000;
constexpr int kBatch = 2'500;
constexpr qint64 kT0 = 1'796'000'000'000;

double percentile(std::vector<double> values, double p)
{
    if (values.empty())
        return 0;
    std::sort(values.begin(), values.end());
    return values[std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())))];
}

void report(const char *what, double figure, const char *unit, double budget)
{
    std::printf("  %-50s %10.2f %-3s budget %8.2f %-3s ratio %.3f  %s\n", what, figure, unit, budget, unit,
                figure / budget, figure <= budget ? "met" : "MISSED");
    std::fflush(stdout);
}

double rssMb()
{
    QFile status(QStringLiteral("/proc/self/status"));
    if (!status.open(QIODevice::ReadOnly))
        return 0;
    for (const QByteArray &line : status.readAll().split('\n')) {
        if (line.startsWith("VmRSS:"))
            return line.mid(6).trimmed().split(' ').first().toDouble() / 1024.0;
    }
    return 0;
}

// A step every 3 events, 400 ms apart: a model response (its latency before it), a tool call and
// its result; payloads as a broker sends them.
QList<EventRecord> batch(qint64 firstSeq, int n)
{
    static const QString kinds[] = {QStringLiteral("model.response"), QStringLiteral("tool.call"),
                                    QStringLiteral("tool.result")};
    QList<EventRecord> out;
    out.reserve(n);
    for (int i = 0; i < n; ++i) {
        const qint64 seq = firstSeq + i;
        const QByteArray id = "c" + QByteArray::number(seq / 3);
        EventRecord e;
        e.seq = seq;
        e.timeUnixMs = kT0 + seq / 3 * 400 + (seq % 3) * 120;
        e.kind = kinds[seq % 3];
        switch (seq % 3) {
        case 0:
            e.payloadJson = R"({"model":"scripted","text":"","tool_calls":[{"id":")" + id
                + R"(","name":"run_command","arguments":{"command":"make -j2 test"}}],"usage":{"input_tokens":1234,"output_tokens":56},"latency_ms":100,"attempts":1})";
            e.costMicros = 1200;
            break;
        case 1:
            e.payloadJson = R"({"call_id":")" + id + R"(","name":"run_command","arguments":{"command":"make -j2 test"}})";
            break;
        default:
            e.payloadJson = R"({"call_id":")" + id
                + R"(","name":"run_command","command":"make -j2 test","exit_code":0,"stdout":"cc -O2 -c a.c\nall 12 tests passed\n","stderr":"","duration_ms":110})";
            break;
        }
        out.append(std::move(e));
    }
    return out;
}

// 1. Per tick, with and without the spans; the SpanModel's slices continue between ticks, so the
// events loop runs between batches as it would.
void benchLive()
{
    std::printf("live: %d events in batches of %d (50,000 events/s in 50 ms ticks), all of them span events\n",
                kEvents, kBatch);
    std::vector<double> raw;
    std::vector<double> withSpans;
    double longestSlice = 0;
    {
        TraceModel trace;
        trace.setSession(QStringLiteral("s"));
        for (qint64 seq = 1; seq <= kEvents; seq += kBatch) {
            const QList<EventRecord> events = batch(seq, kBatch);
            QElapsedTimer t;
            t.start();
            trace.appendEvents(events);
            raw.push_back(double(t.nsecsElapsed()) / 1e6);
        }
    }
    {
        TraceModel trace;
        SpanModel spans;
        spans.setTraceModel(&trace);
        trace.setSession(QStringLiteral("s"));
        for (qint64 seq = 1; seq <= kEvents; seq += kBatch) {
            const QList<EventRecord> events = batch(seq, kBatch);
            QElapsedTimer t;
            t.start();
            trace.appendEvents(events);
            double tick = double(t.nsecsElapsed()) / 1e6;
            longestSlice = std::max(longestSlice, tick);
            // What is left goes in slices from the event loop before the next tick.
            while (spans.isBuilding()) {
                t.start();
                QCoreApplication::processEvents();
                const double slice = double(t.nsecsElapsed()) / 1e6;
                longestSlice = std::max(longestSlice, slice);
                tick += slice;
            }
            withSpans.push_back(tick);
        }
        std::printf("  %d spans\n", spans.count());
    }
    std::printf("  TraceModel alone (raw):      p50 %6.2f ms  p99 %6.2f ms per tick\n", percentile(raw, 0.5), percentile(raw, 0.99));
    std::printf("  TraceModel + SpanModel:      p50 %6.2f ms  p99 %6.2f ms per tick (ratio to raw p50 %.1fx)\n",
                percentile(withSpans, 0.5), percentile(withSpans, 0.99), percentile(withSpans, 0.5) / percentile(raw, 0.5));
    report("GUI work per 50 ms tick p99 (trace + spans)", percentile(withSpans, 0.99), "ms", 50);
    report("longest uninterrupted GUI work (stall)", longestSlice, "ms", 50);
}

// 2-4. A full window opened, its memory, and painting it.
void benchOpenAndPaint()
{
    TraceModel trace;
    trace.setSession(QStringLiteral("s"));
    for (qint64 seq = 1; seq <= kEvents; seq += kBatch)
        trace.appendEvents(batch(seq, kBatch));
    const double rssTrace = rssMb();

    SpanModel spans;
    SpanTimeline timeline;
    timeline.resize(1280, 180);
    timeline.setModel(&spans);
    QElapsedTimer open;
    open.start();
    QElapsedTimer slice;
    slice.start();
    spans.setTraceModel(&trace);
    double longest = double(slice.nsecsElapsed()) / 1e6;
    timeline.show();
    timeline.viewport()->repaint();
    const double firstPaintMs = double(open.nsecsElapsed()) / 1e6;
    while (spans.isBuilding()) {
        slice.start();
        QCoreApplication::processEvents();
        longest = std::max(longest, double(slice.nsecsElapsed()) / 1e6);
    }
    const double builtMs = double(open.nsecsElapsed()) / 1e6;
    const double rssSpans = rssMb();
    std::printf("open: %d events already in the window; the SpanModel attaches and builds %d spans in slices\n",
                kEvents, spans.count());
    report("first painted timeline", firstPaintMs, "ms", 1000);
    report("longest slice on the GUI thread (stall)", longest, "ms", 50);
    std::printf("  every span built after %.0f ms (drawn as they come)\n", builtMs);
    std::printf("memory: TraceModel with %d events: process %.0f MB; spans +%.1f MB (%.0f bytes a span, %.2fx the "
                "trace's events)\n",
                kEvents, rssTrace, rssSpans - rssTrace, (rssSpans - rssTrace) * 1048576.0 / std::max(1, spans.count()),
                (rssSpans - rssTrace) / std::max(1.0, rssTrace));
    report("process resident memory", rssSpans, "MB", 500);

    const auto paints = [&](const char *what, const std::function<void(int)> &move) {
        std::vector<double> ms;
        for (int i = 0; i < 60; ++i) {
            move(i);
            QElapsedTimer t;
            t.start();
            timeline.viewport()->repaint();
            ms.push_back(double(t.nsecsElapsed()) / 1e6);
        }
        std::printf("paint, %s: p50 %.2f ms, max %.2f ms\n", what, percentile(ms, 0.5),
                    *std::max_element(ms.begin(), ms.end()));
        report("  repaint p99", percentile(ms, 0.99), "ms", 16);
    };
    timeline.fitAll();
    paints("every span in view (fitted)", [](int) {});
    timeline.setFocus();
    for (int i = 0; i < 20; ++i)
        timeline.zoomIn();
    QScrollBar *bar = timeline.horizontalScrollBar();
    paints("zoomed in 20 steps, panned a page at a time", [&](int i) { bar->setValue(bar->maximum() / 2 + i * bar->pageStep()); });
    std::srand(7);
    paints("zoomed in, thumb jumps anywhere",
           [&](int) { bar->setValue(int(double(std::rand()) / RAND_MAX * bar->maximum())); });
}

} // namespace

int main(int argc, char **argv)
{
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    Theme::captureSystemPalette();
    Theme::apply(ThemeMode::Light);
    const QString which = argc > 1 ? QString::fromLocal8Bit(argv[1]) : QStringLiteral("all");
    if (which == u"all" || which == u"live")
        benchLive();
    if (which == u"all" || which == u"open")
        benchOpenAndPaint();
    return 0;
}
