// SpanTimeline's painting: lane names, the time axis with its grid, bars and ticks in the colours
// of their kind, labels on the bars wide enough, the selection and "now"; where a span is drawn and
// which one is under a point; and the tooltips.
//
// Colours follow the theme: the palette for backgrounds and text, a light and a dark variant of
// each kind's colour (the trace table's egress, restore and move colours, so a span and its rows
// read alike).

#include "models/span_model.h"
#include "views/span_timeline.h"
#include "views/theme.h"

#include "models/console_format.h"

#include <QDateTime>
#include <QPainter>

#include <array>
#include <cmath>

namespace paddock::console {

namespace {

using Kind = SpanModel::Kind;
using Lane = SpanModel::Lane;

// Bars narrower than this merge with their neighbours into one bar per run of pixels.
constexpr int kMergeBelowPx = 4;
// A bar this wide gets its label.
constexpr int kLabelFromPx = 56;
constexpr int kLabelPadding = 4;
// Where labels go on the axis: at least this far apart.
constexpr int kAxisLabelSpacingPx = 96;

QColor kindColor(Kind kind, bool error)
{
    const bool dark = Theme::isDark();
    if (error)
        return Theme::errorColor();
    const auto pick = [dark](QRgb light, QRgb darkRgb) { return QColor::fromRgb(dark ? darkRgb : light); };
    switch (kind) {
    case Kind::ModelCall: return pick(0x6a3fd1, 0xb39dff);
    case Kind::ToolCall: return pick(0x1f6feb, 0x58a6ff);
    case Kind::SandboxClaim: return pick(0x00796b, 0x4db6ac);
    case Kind::SandboxRestore: return pick(0x4051b5, 0x8c9eff);
    case Kind::SandboxMove:
    case Kind::TierOverride: return pick(0x5f7000, 0xc3d825);
    case Kind::SandboxWait:
    case Kind::CheckpointWait: return pick(0x9a6700, 0xe3b341);
    case Kind::ApprovalWait:
    case Kind::BudgetWait:
    case Kind::Budget: return pick(0xb35900, 0xffa657);
    case Kind::Paused: return Theme::mutedTextColor();
    case Kind::DebugShell:
    case Kind::DebugCommand: return pick(0x953800, 0xf0883e);
    case Kind::EgressAllowed: return pick(0x007a78, 0x2dd4bf);
    case Kind::EgressRefused: return pick(0xbc4c00, 0xff8a4c);
    case Kind::SandboxFailure:
    case Kind::ModelError: return Theme::errorColor();
    case Kind::Count: break;
    }
    return Theme::mutedTextColor();
}

// Long spans that others happen inside (a debug shell and its commands, a pause) are drawn as a
// band along the lane's bottom, so what is inside them stays visible.
bool isBand(Kind kind) { return kind == Kind::DebugShell || kind == Kind::Paused; }

QColor textOn(const QColor &fill) { return fill.lightness() > 150 ? QColor(0x1b, 0x1f, 0x24) : QColor(Qt::white); }

// A step of 1, 2 or 5 times a power of ten ms, or a whole number of seconds, minutes, hours or days.
qint64 axisStep(double minStepMs)
{
    static constexpr std::array<qint64, 27> kSteps{
        1,          2,          5,          10,          20,         50,        100,        200,       500,
        1'000,      2'000,      5'000,      10'000,      15'000,     30'000,    60'000,     120'000,   300'000,
        600'000,    900'000,    1'800'000,  3'600'000,   7'200'000,  10'800'000, 21'600'000, 43'200'000, 86'400'000};
    for (const qint64 step : kSteps) {
        if (double(step) >= minStepMs)
            return step;
    }
    return qint64(std::ceil(minStepMs / 86'400'000.0)) * 86'400'000;
}

QString axisLabel(qint64 ms, qint64 step)
{
    const QDateTime time = QDateTime::fromMSecsSinceEpoch(ms);
    if (step < 1000 && ms % 1000 != 0) {
        // "12:03:04.25": the fraction without its trailing zeros; whole seconds read as seconds.
        QString text = time.toString(QStringLiteral("hh:mm:ss.zzz"));
        while (text.endsWith(u'0'))
            text.chop(1);
        return text;
    }
    if (step < 1000)
        return time.toString(QStringLiteral("hh:mm:ss"));
    if (step < 60'000)
        return time.toString(QStringLiteral("hh:mm:ss"));
    if (step < 86'400'000)
        return time.toString(QStringLiteral("hh:mm"));
    return time.toString(QStringLiteral("d MMM"));
}

QString duration(qint64 ms) { return formatLatency(ms); }

} // namespace

void SpanTimeline::paintEvent(QPaintEvent *)
{
    QPainter painter(viewport());
    const QPalette pal = palette();
    painter.fillRect(viewport()->rect(), pal.color(QPalette::Base));
    const int lanes = int(Lane::Count);
    for (int lane = 0; lane < lanes; ++lane) {
        const QRect row(0, axisHeight() + lane * laneHeight(), viewport()->width(), laneHeight());
        if (lane % 2 == 1)
            painter.fillRect(row, pal.color(QPalette::AlternateBase));
        painter.setPen(Theme::mutedTextColor());
        painter.drawText(row.adjusted(8, 0, 0, 0).intersected(QRect(0, row.top(), plotLeft() - 4, row.height())),
                         Qt::AlignVCenter | Qt::AlignLeft, SpanModel::laneName(Lane(lane)));
    }
    const QRect plot(plotLeft(), 0, plotWidth(), axisHeight() + lanes * laneHeight());
    if (!m_model || m_model->count() == 0) {
        painter.setPen(Theme::mutedTextColor());
        painter.drawText(plot.adjusted(0, axisHeight(), 0, 0), Qt::AlignCenter,
                         m_model && m_model->isBuilding() ? tr("Building the timeline…")
                                                          : tr("No spans yet: model calls, commands and waits appear here"));
        return;
    }
    paintAxis(painter, plot);
    painter.setClipRect(plot.adjusted(0, axisHeight(), 0, 0));
    paintSpans(painter);
}

void SpanTimeline::paintAxis(QPainter &painter, const QRect &area) const
{
    const qint64 step = axisStep(kAxisLabelSpacingPx * m_msPerPx);
    const qint64 first = qint64(std::floor(m_startMs / double(step))) * step;
    const qint64 last = visibleEndMs();
    QColor grid = palette().color(QPalette::Text);
    grid.setAlpha(Theme::isDark() ? 40 : 28);
    painter.setPen(palette().color(QPalette::Mid));
    painter.drawLine(area.left(), axisHeight() - 1, area.right(), axisHeight() - 1);
    int labelsEnd = area.left();   // where the last label drawn ends: none may overlap it
    for (qint64 t = first; t <= last + step; t += step) {
        const int x = int(std::lround(xOf(t)));
        if (x < area.left() || x > area.right())
            continue;
        painter.setPen(grid);
        painter.drawLine(x, axisHeight(), x, area.bottom());
        painter.setPen(Theme::mutedTextColor());
        painter.drawLine(x, axisHeight() - 5, x, axisHeight() - 1);
        const QString text = axisLabel(t, step);
        const int width = fontMetrics().horizontalAdvance(text);
        // The last label would run off the right edge: end it at the tick instead.
        const int left = x + 3 + width > area.right() ? x - 3 - width : x + 3;
        if (left < labelsEnd + 6)
            continue;
        labelsEnd = left + width;
        painter.drawText(QRect(left, 0, width, axisHeight() - 4), Qt::AlignVCenter | Qt::AlignLeft, text);
    }
}

void SpanTimeline::paintSpans(QPainter &painter) const
{
    struct Run {
        int left = 0;
        int right = -1;
        int color = -1;   // index in colors
    };
    struct Labelled {
        QRect rect;
        int id;
        QColor fill;
    };
    constexpr auto kLanes = size_t(Lane::Count);
    // Per paint, not per span: a zoomed-out million would otherwise build a million QColors.
    constexpr int kErrorColor = int(Kind::Count);
    std::array<QColor, size_t(Kind::Count) + 1> colors;
    for (int kind = 0; kind < int(Kind::Count); ++kind)
        colors[size_t(kind)] = kindColor(Kind(kind), false);
    colors[kErrorColor] = Theme::errorColor();
    std::array<QRect, kLanes> lanes;
    for (size_t lane = 0; lane < kLanes; ++lane)
        lanes[lane] = laneRect(int(lane));
    std::array<Run, kLanes> runs;
    std::array<int, kLanes> lastTick;
    lastTick.fill(-1000);
    std::vector<Labelled> labels;
    const auto flush = [&](size_t lane) {
        Run &run = runs[lane];
        if (run.right >= run.left) {
            const QRect &r = lanes[lane];
            painter.fillRect(QRect(run.left, r.top() + 4, run.right - run.left + 1, r.height() - 8), colors[size_t(run.color)]);
        }
        run = Run{};
    };
    // Bars a few pixels wide and less join the run of their lane when they touch it.
    const auto merge = [&](size_t lane, int left, int right, int color) {
        Run &run = runs[lane];
        if (run.right >= run.left && left <= run.right + 1 && run.color == color) {
            run.right = std::max(run.right, right);
            return;
        }
        flush(lane);
        run = Run{left, right, color};
    };
    const qint64 from = visibleStartMs();
    const qint64 to = visibleEndMs();
    const double leftEdge = plotLeft() - 2;
    const double rightEdge = plotLeft() + plotWidth() + 2;
    const auto pixels = [&](qint64 startMs, qint64 endMs) {
        const int left = int(std::floor(std::max(leftEdge, xOf(startMs))));
        return std::pair{left, std::max(left, int(std::ceil(std::min(rightEdge, xOf(endMs)))) - 1)};
    };
    const qint64 now = m_model->nowMs();
    const auto coarseMs = qint64(2 * m_msPerPx);

    const auto drawSpan = [&](int id, const SpanModel::Span &span) {
        const auto lane = size_t(span.lane);
        const QRect &r = lanes[lane];
        const int colorIndex = span.error ? kErrorColor : int(span.kind);
        if (span.mark) {
            const int x = int(std::lround(xOf(span.startMs)));
            if (x == lastTick[lane])
                return;   // a million egress attempts at one pixel draw one tick
            lastTick[lane] = x;
            painter.fillRect(QRect(x - 1, r.top() + 3, 2, r.height() - 6), colors[size_t(colorIndex)]);
            return;
        }
        const auto [left, right] = pixels(span.startMs, span.open() ? now : span.endMs);
        QColor color = colors[size_t(colorIndex)];
        if (isBand(span.kind)) {
            color.setAlpha(Theme::isDark() ? 150 : 120);
            painter.fillRect(QRect(left, r.bottom() - 5, right - left + 1, 4), color);
            return;
        }
        if (right - left + 1 < kMergeBelowPx && !span.open()) {
            merge(lane, left, right, colorIndex);
            return;
        }
        flush(lane);
        const bool running = span.open() && !span.queued;
        // A pixel between neighbours so back-to-back calls read as separate bars.
        const QRect bar(left, r.top() + 4, std::max(1, right - left), r.height() - 8);
        QColor fill = color;
        if (span.queued)
            fill.setAlpha(90);
        else if (running)
            fill.setAlpha(Theme::isDark() ? 150 : 170);
        painter.fillRect(bar, fill);
        if (running)
            painter.fillRect(QRect(bar.right() - 1, bar.top() - 2, 3, bar.height() + 4), color);   // "now"
        if (bar.width() >= kLabelFromPx)
            labels.push_back({bar, id, fill});
    };
    const auto drawBlock = [&](const SpanModel::LaneExtents &extents) {
        for (size_t lane = 0; lane < kLanes; ++lane) {
            const SpanModel::LaneExtent &e = extents[lane];
            if (e.kind == Kind::Count)
                continue;
            const auto [left, right] = pixels(e.startMs, e.endMs);
            merge(lane, left, right, e.error ? kErrorColor : int(e.kind));
        }
    };
    m_model->forEachIn(from, to, coarseMs, drawSpan, drawBlock);
    for (size_t lane = 0; lane < runs.size(); ++lane)
        flush(lane);

    for (const Labelled &label : labels) {
        const QRect textRect = label.rect.adjusted(kLabelPadding, 0, -kLabelPadding, 0);
        QString text = m_model->label(label.id);
        const SpanModel::Span &span = m_model->span(label.id);
        if (span.open() && !span.queued)
            text = tr("running %1 · %2").arg(duration(now - span.startMs), text);
        painter.setPen(textOn(label.fill));
        painter.drawText(textRect, Qt::AlignVCenter | Qt::AlignLeft,
                         fontMetrics().elidedText(text, Qt::ElideRight, textRect.width()));
    }

    if (m_model->openCount() > 0) {
        const int x = int(std::lround(xOf(now)));
        QColor line = palette().color(QPalette::Highlight);
        painter.setPen(QPen(line, 1, Qt::DashLine));
        painter.drawLine(x, axisHeight(), x, axisHeight() + int(Lane::Count) * laneHeight());
    }
    if (m_selected >= 0 && m_selected < m_model->count()) {
        const QRect r = spanRect(m_selected);
        if (!r.isEmpty()) {
            painter.setRenderHint(QPainter::Antialiasing);
            painter.setPen(QPen(palette().color(QPalette::Text), 2));
            painter.setBrush(Qt::NoBrush);
            painter.drawRoundedRect(QRectF(r).adjusted(-1.5, -1.5, 1.5, 1.5), 2, 2);
        }
    }
}

QRect SpanTimeline::spanRect(int id) const
{
    if (!m_model || id < 0 || id >= m_model->count())
        return {};
    const SpanModel::Span &span = m_model->span(id);
    const QRect lane = laneRect(int(span.lane));
    const double x0 = xOf(span.startMs);
    const double x1 = xOf(m_model->endOf(span));
    if (x1 < plotLeft() || x0 > plotLeft() + plotWidth())
        return {};
    const int left = int(std::floor(std::max<double>(x0, plotLeft())));
    const int right = int(std::ceil(std::min<double>(x1, plotLeft() + plotWidth())));
    if (span.mark)
        return QRect(left - 2, lane.top() + 3, 5, lane.height() - 6);
    return QRect(left, lane.top() + 4, std::max(3, right - left), lane.height() - 8);
}

int SpanTimeline::spanAt(const QPoint &pos) const
{
    if (!m_model || pos.x() < plotLeft() || pos.y() < axisHeight())
        return -1;
    const int lane = (pos.y() - axisHeight()) / laneHeight();
    if (lane >= int(SpanModel::Lane::Count))
        return -1;
    // A few pixels of slack so thin bars and ticks can be hit; the nearest start wins.
    const qint64 slack = qint64(std::ceil(3 * m_msPerPx));
    const qint64 at = msAt(pos.x());
    int best = -1;
    qint64 bestDistance = 0;
    m_model->forEachIn(at - slack, at + slack, [&](int id, const SpanModel::Span &span) {
        if (int(span.lane) != lane)
            return;
        const qint64 end = m_model->endOf(span);
        const qint64 distance = at < span.startMs ? span.startMs - at : at > end ? at - end : 0;
        // Inside several (a debug shell and its command): the shorter one, drawn on top.
        if (best < 0 || distance < bestDistance
            || (distance == bestDistance && end - span.startMs <= m_model->endOf(m_model->span(best)) - m_model->span(best).startMs)) {
            best = id;
            bestDistance = distance;
        }
    });
    return best;
}

QString SpanTimeline::toolTipAt(const QPoint &pos) const
{
    if (pos.x() < plotLeft())
        return tr("Spans of the session on one time axis: the model's calls, tool calls, the sandbox's claims, "
                  "restores and moves, waits, and marks (egress attempts, failures, overrides, budget).\n"
                  "Wheel or + and - zoom, drag or Shift+wheel pans, 0 shows everything, End follows the newest.\n"
                  "Click a span to select its rows in the table.");
    const int id = spanAt(pos);
    if (id < 0 || !m_model)
        return {};
    const SpanModel::Span &span = m_model->span(id);
    QStringList lines;
    QString head = SpanModel::kindTitle(span.kind);
    if (span.mark)
        head += QStringLiteral(" · ") + QDateTime::fromMSecsSinceEpoch(span.startMs).toString(QStringLiteral("hh:mm:ss.zzz"));
    else if (span.queued)
        head += tr(" · queued behind the call before it");
    else if (span.open())
        head += tr(" · running for %1").arg(duration(m_model->nowMs() - span.startMs));
    else
        head += QStringLiteral(" · ") + duration(span.endMs - span.startMs);
    if (span.interrupted)
        head += tr(" · cut short by the session's end");
    lines << head << m_model->label(id);
    if (const QString outcome = m_model->outcome(id); !outcome.isEmpty())
        lines << outcome;
    const qint64 lastSeq = m_model->lastSeqOf(span);
    lines << (lastSeq > span.startSeq ? tr("events %1–%2").arg(span.startSeq).arg(lastSeq) : tr("event %1").arg(span.startSeq));
    return lines.join(QLatin1Char('\n'));
}

} // namespace paddock::console
