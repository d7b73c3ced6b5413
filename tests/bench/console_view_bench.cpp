// Console view benchmarks. Print figures next to their budgets (ARCHITECTURE.md); not tests.
//
//   console_view_bench [all|paint|scroll|stream|stream-output|replot] [stream seconds=10]
//
// paint   first paint of a 1,000,000-event trace: the TraceModel already holds the events; the
//         figure is from showing the session view to its first painted frame. Budget: 1 s.
// scroll  the trace scrolled by pages; each step's scroll + synchronous repaint. Budget p99 16 ms.
// stream  a real broker (its gRPC services + SQLite store + StreamHub, the code paddockd runs, in this
//         process on a unix socket) receives 50,000 events/s for one session, appended through its
//         store; the real GrpcConsoleClient and MainWindow follow that session. A 1 ms QTimer probe
//         measures the GUI thread's stalls; trace repaints count frames. Budgets: stall p99 50 ms,
//         >= 10 frames/s, memory < 500 MB. The producers, the broker and gRPC share the two cores
//         with the GUI, so this overstates what a console on its own would see.
// stream-output  the same with half of the events a running command's tool.output chunks (320
//         bytes each: 8 MiB/s, the broker's cap on all live output), folded into their call's row
//         as they come. Same budgets.
// replot  CostPlot (QCustomPlot, adaptive sampling on) with 1,000,000 points. Budget 50 ms.
//
// Run offscreen: QT_QPA_PLATFORM=offscreen (set here when unset).

#include "app/client/grpc_console_client.h"
#include "app/main_window.h"
#include "models/cost_series.h"
#include "models/session_table_model.h"
#include "models/trace_model.h"
#include "views/cost_plot.h"
#include "views/session_view.h"
#include "views/theme.h"
#include "views/trace_view.h"

#include "tests/support/in_process_broker.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QEvent>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QScrollBar>
#include <QTimer>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>
#include <qcustomplot.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <future>
#include <thread>
#include <vector>

using namespace paddock;
using namespace paddock::console;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kEvents = 1'000'000;

double percentile(std::vector<double> values, double p)
{
    if (values.empty())
        return 0;
    std::sort(values.begin(), values.end());
    return values[std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())))];
}

void report(const char *what, double figure, const char *unit, double budget, bool lowerIsBetter = true)
{
    const double ratio = figure / budget;
    const bool met = lowerIsBetter ? figure <= budget : figure >= budget;
    std::printf("  %-44s %10.2f %-5s budget %8.2f %-5s ratio %.3f  %s\n", what, figure, unit, budget, unit, ratio,
                met ? "met" : "MISSED");
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

// Counts paints of a widget (the trace's viewport): a frame drawn.
class PaintCounter : public QObject {
public:
    int paints = 0;
    bool eventFilter(QObject *, QEvent *event) override
    {
        if (event->type() == QEvent::Paint)
            ++paints;
        return false;
    }
};

QList<EventRecord> syntheticEvents(qint64 firstSeq, int count)
{
    static const QByteArray kinds[] = {"model.response", "tool.call", "tool.result", "state.changed"};
    static const QByteArray payloads[] = {
        R"({"model":"scripted","usage":{"input_tokens":1200,"output_tokens":80},"latency_ms":850,"tool_calls":[{"id":"c","name":"run_command"}]})",
        R"({"call_id":"c","name":"run_command","arguments":{"command":"make -j2"}})",
        R"({"call_id":"c","name":"run_command","command":"make -j2","exit_code":0,"stdout":"ok\n","stderr":"","duration_ms":1200})",
        R"({"status":"running"})",
    };
    QList<EventRecord> events;
    events.reserve(count);
    for (int i = 0; i < count; ++i) {
        const qint64 seq = firstSeq + i;
        EventRecord e;
        e.seq = seq;
        e.timeUnixMs = 1'796'000'000'000 + seq * 10;
        e.kind = QString::fromLatin1(kinds[seq % 4]);
        e.payloadJson = payloads[seq % 4];
        e.costMicros = seq % 4 == 0 ? 120 : 0;
        events.append(std::move(e));
    }
    return events;
}

struct FilledSession {
    TraceModel trace;
    CostSeries cost;
    FilledSession()
    {
        trace.setSession(QStringLiteral("s-bench"));
        trace.setTailStart(1);
        for (qint64 seq = 1; seq <= kEvents; seq += 5000) {
            const QList<EventRecord> batch = syntheticEvents(seq, 5000);
            trace.appendEvents(batch);
            cost.addEvents(batch);
        }
    }
};

void benchPaintAndScroll(bool paint, bool scroll)
{
    QElapsedTimer fill;
    fill.start();
    FilledSession session;
    std::printf("(filled TraceModel and CostSeries with %d events in %lld ms)\n", session.trace.rowCount(),
                static_cast<long long>(fill.elapsed()));

    SessionView view;
    view.resize(1280, 760);
    PaintCounter counter;
    view.traceView()->viewport()->installEventFilter(&counter);
    QElapsedTimer clock;
    clock.start();
    view.setModels(&session.trace, &session.cost);
    SessionInfo info;
    info.id = QStringLiteral("s-bench");
    info.goal = QStringLiteral("A million events");
    info.status = SessionStatus::Running;
    view.showSession(info);
    view.show();
    while (counter.paints == 0 && clock.elapsed() < 30000)
        QApplication::processEvents(QEventLoop::AllEvents, 5);
    const double firstPaintMs = double(clock.nsecsElapsed()) / 1e6;
    if (paint) {
        std::printf("first paint of a 1M-event trace (session view shown to first trace frame)\n");
        report("first paint", firstPaintMs, "ms", 1000);
    }
    if (!scroll)
        return;

    // Let the follow timer settle at the tail, then page up from there.
    QElapsedTimer settle;
    settle.start();
    while (settle.elapsed() < 300)
        QApplication::processEvents(QEventLoop::AllEvents, 5);
    QScrollBar *bar = view.traceView()->verticalScrollBar();
    std::vector<double> pageTimes;
    std::vector<double> jumpTimes;
    QWidget *viewport = view.traceView()->viewport();
    for (int i = 0; i < 400; ++i) {
        QElapsedTimer t;
        t.start();
        int next = bar->value() - bar->pageStep();
        if (next < bar->minimum())
            next = bar->maximum();
        bar->setValue(next);
        viewport->repaint();
        pageTimes.push_back(double(t.nsecsElapsed()) / 1e6);
    }
    // Jumps: dragging the thumb lands anywhere in the million rows.
    std::srand(7);
    for (int i = 0; i < 200; ++i) {
        QElapsedTimer t;
        t.start();
        bar->setValue(bar->minimum() + int(double(std::rand()) / RAND_MAX * (bar->maximum() - bar->minimum())));
        viewport->repaint();
        jumpTimes.push_back(double(t.nsecsElapsed()) / 1e6);
    }
    std::printf("scroll repaint of the 1M-event trace (%d rows visible)\n", bar->pageStep());
    report("page up: scroll + repaint p50", percentile(pageTimes, 0.5), "ms", 16);
    report("page up: scroll + repaint p99", percentile(pageTimes, 0.99), "ms", 16);
    report("thumb jump: scroll + repaint p99", percentile(jumpTimes, 0.99), "ms", 16);
}

void benchReplot()
{
    CostPlot plot;
    plot.resize(420, 600);
    QVector<double> keys(kEvents);
    QVector<double> values(kEvents);
    double total = 0;
    std::srand(11);
    for (int i = 0; i < kEvents; ++i) {
        keys[i] = 1'796'000'000.0 + i * 0.01;
        total += (std::rand() % 100 == 0) ? 0.001 * (std::rand() % 10) : 0;
        values[i] = total;
    }
    plot.setPoints(keys, values);
    plot.show();
    QApplication::processEvents();
    std::vector<double> adaptive;
    for (int i = 0; i < 20; ++i) {
        plot.plot()->xAxis->moveRange(0);   // same view; every replot redraws everything
        QElapsedTimer t;
        t.start();
        plot.plot()->replot(QCustomPlot::rpImmediateRefresh);
        adaptive.push_back(double(t.nsecsElapsed()) / 1e6);
    }
    // The raw mechanism for the ratio: the same replot with adaptive sampling off.
    plot.plot()->graph(0)->setAdaptiveSampling(false);
    std::vector<double> raw;
    for (int i = 0; i < 3; ++i) {
        QElapsedTimer t;
        t.start();
        plot.plot()->replot(QCustomPlot::rpImmediateRefresh);
        raw.push_back(double(t.nsecsElapsed()) / 1e6);
    }
    plot.plot()->graph(0)->setAdaptiveSampling(true);

    // A rolling window fed at 100,000 points/s: 10,000 points every 100 ms tick, then a replot.
    std::vector<double> rolling;
    double key = keys.last();
    for (int tick = 0; tick < 30; ++tick) {
        QVector<double> k(10000);
        QVector<double> v(10000);
        for (int i = 0; i < 10000; ++i) {
            key += 0.00001;
            k[i] = key;
            v[i] = total;
        }
        QElapsedTimer t;
        t.start();
        plot.appendPoints(k, v);
        plot.plot()->graph(0)->data()->removeBefore(plot.plot()->graph(0)->data()->at(10000)->key);
        plot.replotNow();
        rolling.push_back(double(t.nsecsElapsed()) / 1e6);
    }
    std::printf("replot of 1,000,000 points (QCustomPlot, adaptive sampling on; %.0f ms with it off)\n", percentile(raw, 0.5));
    report("replot p50", percentile(adaptive, 0.5), "ms", 50);
    report("replot max", *std::max_element(adaptive.begin(), adaptive.end()), "ms", 50);
    report("rolling 1M window at 100k points/s: tick p99", percentile(rolling, 0.99), "ms", 50);
}

// A session to stream into, appended straight to the in-process broker's store.
std::string newSession(test::InProcessBroker &broker)
{
    store::AppendRequest request;
    request.sessionId = "s-stream-bench";
    request.expectedLastSeq = 0;
    request.events.push_back({"session.created", R"({"goal":"50,000 events a second","model":"scripted"})"});
    request.events.push_back({"state.changed", R"({"status":"running"})"});
    return broker.store().appendSync(std::move(request))->state.id;
}

bool waitUntil(const std::function<bool()> &ready, int timeoutMs)
{
    QElapsedTimer t;
    t.start();
    while (!ready()) {
        if (t.elapsed() > timeoutMs)
            return false;
        QApplication::processEvents(QEventLoop::AllEvents, 10);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

// withOutput: half of the events are a running command's tool.output chunks (a 100 ms flush of a
// busy build: 320 bytes of compiler lines each, 8 MiB/s: the broker's cap on live output), which
// fold into their call's row as they arrive.
// The payload of a 320-byte chunk of compiler lines: 25,000 of them a second is 8 MiB/s, the most
// live output the broker records for all its sessions together (OutputRecorderOptions::
// maxBytesPerSecond), so no followed session gets more. The text is escaped once (the producer
// must keep up with 50,000 events/s on a core it shares with the console).
std::string outputChunk(const std::string &call, int chunk)
{
    static const std::string escapedText = [] {
        std::string text;
        for (int line = 0; text.size() < 320; ++line)
            text += "cc -O2 -c src/module_" + std::to_string(line) + ".c -o build/module.o\n";
        const std::string dumped = nlohmann::json(text).dump();
        return dumped.substr(1, dumped.size() - 2) + R"(","bytes":)" + std::to_string(text.size());
    }();
    return R"({"call_id":")" + call + R"(","stream":"stdout","offset":)" + std::to_string(chunk * 1024) + R"(,"text":")"
        + escapedText + "}";
}

void benchStream(double seconds, bool withOutput)
{
    const auto dir = std::filesystem::temp_directory_path() / ("paddock-view-bench-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    {
        test::InProcessBroker broker(dir);
        if (auto started = broker.start(); !started) {
            std::fprintf(stderr, "%s\n", started.error().message.c_str());
            std::exit(1);
        }
        const std::string sessionId = newSession(broker);

        GrpcConsoleClient client;
        MainWindow window(&client, MainWindow::Options{.persistSettings = false});
        window.resize(1280, 800);
        window.show();
        window.connectToBroker(QString::fromStdString(broker.address()));
        if (!waitUntil([&] { return window.sessionModel()->rowCount() > 0; }, 15000)) {
            std::printf("stream: the console never listed the session (connection: %s)\n",
                        qPrintable(window.connectionText()));
            return;
        }
        window.openSession(QString::fromStdString(sessionId));
        waitUntil([&] { return window.traceModel()->rowCount() >= 2; }, 5000);

        PaintCounter frames;
        window.sessionView()->traceView()->viewport()->installEventFilter(&frames);

        // The probe: a 1 ms timer; the gap between two firings beyond 1 ms is how long the GUI
        // thread was busy elsewhere.
        std::vector<double> gaps;
        gaps.reserve(size_t(seconds * 1200));
        QElapsedTimer probeClock;
        probeClock.start();
        qint64 lastNs = probeClock.nsecsElapsed();
        QTimer probe;
        probe.setTimerType(Qt::PreciseTimer);
        probe.setInterval(1);
        QObject::connect(&probe, &QTimer::timeout, [&] {
            const qint64 now = probeClock.nsecsElapsed();
            gaps.push_back(double(now - lastNs) / 1e6);
            lastNs = now;
        });

        constexpr int kBatch = 48;             // about 1,000 appends a second of 48 events
        constexpr double kRate = 50000;
        std::atomic<bool> stop{false};
        std::atomic<qint64> appended{0};
        std::thread producer([&] {
            const QByteArray payload =
                R"({"call_id":"call-17","name":"run_command","command":"make -j2","exit_code":0,"stdout":"ok\n","stderr":"","duration_ms":3.2})";
            std::deque<std::future<Result<store::AppendResult>>> inflight;
            const auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kBatch / kRate));
            auto next = Clock::now();
            while (!stop) {
                std::this_thread::sleep_until(next);
                next += interval;
                store::AppendRequest request;
                request.sessionId = sessionId;
                if (withOutput) {
                    // A call, half of the batch its output, then results like the plain stream's: a
                    // thousand commands a second, each printing 24 chunks.
                    const std::string call = "call-" + std::to_string(appended.load());
                    request.events.push_back({"tool.call", R"({"call_id":")" + call + R"(","name":"run_command","arguments":{"command":"make -j2"}})", 0});
                    for (int chunk = 0; chunk < kBatch / 2; ++chunk)
                        request.events.push_back({"tool.output", outputChunk(call, chunk), 0});
                    request.events.push_back({"tool.result", R"({"call_id":")" + call + R"(","name":"run_command","command":"make -j2","exit_code":0,"duration_ms":3.2})", 0});
                    while (request.events.size() < static_cast<size_t>(kBatch))
                        request.events.push_back({"tool.result", payload.toStdString(), 0});
                } else {
                    request.events.assign(kBatch, core::NewEvent{"tool.result", payload.toStdString(), 0});
                }
                inflight.push_back(broker.store().append(std::move(request)));
                while (inflight.size() > 8 || (!inflight.empty() && inflight.front().wait_for(std::chrono::seconds(0)) == std::future_status::ready)) {
                    if (inflight.front().get())
                        appended += kBatch;
                    inflight.pop_front();
                }
            }
            for (auto &f : inflight)
                if (f.get())
                    appended += kBatch;
        });

        probe.start();
        const qint64 eventsBefore = window.traceModel()->eventCount();
        QElapsedTimer run;
        run.start();
        double peakRss = 0;
        while (run.elapsed() < seconds * 1000) {
            QApplication::processEvents(QEventLoop::AllEvents, 50);
            if (run.elapsed() % 1000 < 5)
                peakRss = std::max(peakRss, rssMb());
        }
        stop = true;
        producer.join();
        const double elapsed = double(run.elapsed()) / 1000.0;
        const int paints = frames.paints;
        probe.stop();
        // Drain what is still in flight to see that every event arrived.
        const qint64 target = appended.load() + eventsBefore;
        waitUntil([&] { return window.traceModel()->eventCount() >= target; }, 20000);
        peakRss = std::max(peakRss, rssMb());

        // Skip the first 200 ms (the window's first follow-up layout).
        std::vector<double> steady(gaps.begin() + std::min<size_t>(gaps.size(), 200), gaps.end());
        std::printf("GUI thread while a real broker streams 50,000 events/s into the followed session (%.0f s)%s\n", elapsed,
                    withOutput ? ", half of them output chunks of 320 bytes (8 MiB/s)" : "");
        std::printf("  appended %.0f ev/s; the trace holds %lld of %lld events in %d rows; probe fired %zu times\n",
                    double(appended.load()) / elapsed, static_cast<long long>(window.traceModel()->eventCount()),
                    static_cast<long long>(target), window.traceModel()->rowCount(), gaps.size());
        report("GUI stall p99 (1 ms probe gap)", percentile(steady, 0.99), "ms", 50);
        report("GUI stall max", steady.empty() ? 0 : *std::max_element(steady.begin(), steady.end()), "ms", 50);
        report("trace frames per second", paints / elapsed, "fps", 10, /*lowerIsBetter=*/false);
        report("peak resident memory", peakRss, "MB", 500);
        window.close();
    }
    std::filesystem::remove_all(dir);
}

} // namespace

int main(int argc, char **argv)
{
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    spdlog::set_level(spdlog::level::warn);
    QApplication app(argc, argv);
    Theme::captureSystemPalette();
    Theme::apply(ThemeMode::Light);
    const QString which = argc > 1 ? QString::fromLocal8Bit(argv[1]) : QStringLiteral("all");
    const double seconds = argc > 2 ? std::atof(argv[2]) : 10.0;
    const bool all = which == u"all";
    if (all || which == u"paint" || which == u"scroll")
        benchPaintAndScroll(all || which == u"paint", all || which == u"scroll");
    if (all || which == u"replot")
        benchReplot();
    if (all || which == u"stream")
        benchStream(seconds, false);
    if (all || which == u"stream-output")
        benchStream(seconds, true);
    return 0;
}
