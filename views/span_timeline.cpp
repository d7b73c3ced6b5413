// SpanTimeline's geometry, view (fit, follow, zoom, pan, scroll bar) and input; the painting is in
// span_timeline_paint.cpp.

#include "views/span_timeline.h"

#include "models/span_model.h"

#include <QApplication>
#include <QKeyEvent>
#include <QScrollBar>
#include <QTimer>
#include <QToolTip>

#include <cmath>

namespace paddock::console {

namespace {
constexpr int kLaneLabelWidth = 72;
constexpr int kRightMargin = 10;
constexpr double kWheelZoom = 1.25;   // per wheel notch and per + or -
constexpr double kMinMsPerPx = 0.01;
constexpr double kEdgeRoom = 0.02;    // of the visible range, left beside the first and newest span
// The widest scroll bar range; beyond it, a step is more than a pixel.
constexpr double kMaxScrollSteps = 1e9;
} // namespace

SpanTimeline::SpanTimeline(QWidget *parent)
    : QAbstractScrollArea(parent)
{
    setObjectName(QStringLiteral("spanTimeline"));
    setFocusPolicy(Qt::StrongFocus);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOn);
    setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
    viewport()->setMouseTracking(false);
    m_live = new QTimer(this);
    m_live->setInterval(kLiveRepaintMs);
    connect(m_live, &QTimer::timeout, this, [this] {
        settleView();
        viewport()->update();
    });
    m_coalesce = new QTimer(this);
    m_coalesce->setSingleShot(true);
    m_coalesce->setInterval(kCoalesceMs);
    connect(m_coalesce, &QTimer::timeout, viewport(), qOverload<>(&QWidget::update));
    connect(horizontalScrollBar(), &QScrollBar::valueChanged, this, &SpanTimeline::onScrollBar);
}

void SpanTimeline::setModel(SpanModel *model)
{
    if (m_model)
        disconnect(m_model, nullptr, this, nullptr);
    m_model = model;
    m_selected = -1;
    m_selectedSeq = 0;
    m_fit = true;
    m_following = true;
    if (model) {
        connect(model, &SpanModel::spansChanged, this, &SpanTimeline::onModelChanged);
        connect(model, &SpanModel::spansReset, this, [this] {
            // Ids are new: find the selected span again by the event that opened it.
            const qint64 seq = m_selectedSeq;
            m_selected = -1;
            if (seq > 0 && m_model) {
                const int id = m_model->spanAtSeq(seq);
                m_selected = id >= 0 && m_model->span(id).startSeq == seq ? id : -1;
            }
            if (m_model && m_model->count() == 0) {
                m_fit = true;
                m_following = true;
            }
            onModelChanged();
        });
    }
    onModelChanged();
}

void SpanTimeline::onModelChanged()
{
    // The view's range follows at once (it is cheap); the paint waits for the next coalesced tick.
    settleView();
    updateLiveTimer();
    if (!m_coalesce->isActive())
        m_coalesce->start();
}

bool SpanTimeline::isLiveRepainting() const { return m_live->isActive(); }

void SpanTimeline::updateLiveTimer()
{
    const bool live = m_model && m_model->openCount() > 0 && isVisible();
    if (live && !m_live->isActive())
        m_live->start();
    else if (!live)
        m_live->stop();
}

void SpanTimeline::showEvent(QShowEvent *event)
{
    QAbstractScrollArea::showEvent(event);
    settleView();
    updateLiveTimer();
}

void SpanTimeline::hideEvent(QHideEvent *event)
{
    QAbstractScrollArea::hideEvent(event);
    updateLiveTimer();
}

void SpanTimeline::resizeEvent(QResizeEvent *event)
{
    QAbstractScrollArea::resizeEvent(event);
    settleView();
}

void SpanTimeline::changeEvent(QEvent *event)
{
    QAbstractScrollArea::changeEvent(event);
    if (event->type() == QEvent::FontChange)
        updateGeometry();
}

// Geometry: the lane names on the left, the time axis on top, one lane under another.
int SpanTimeline::laneHeight() const { return fontMetrics().height() + 10; }
int SpanTimeline::axisHeight() const { return fontMetrics().height() + 8; }
int SpanTimeline::plotLeft() const { return kLaneLabelWidth; }
int SpanTimeline::plotWidth() const { return qMax(1, viewport()->width() - kLaneLabelWidth - kRightMargin); }

QRect SpanTimeline::laneRect(int lane) const
{
    return QRect(plotLeft(), axisHeight() + lane * laneHeight(), plotWidth(), laneHeight());
}

double SpanTimeline::xOf(qint64 ms) const { return plotLeft() + (double(ms) - m_startMs) / m_msPerPx; }
qint64 SpanTimeline::msAt(double x) const { return qint64(std::llround(m_startMs + (x - plotLeft()) * m_msPerPx)); }

qint64 SpanTimeline::visibleStartMs() const { return qint64(std::llround(m_startMs)); }
qint64 SpanTimeline::visibleEndMs() const { return qint64(std::llround(m_startMs + plotWidth() * m_msPerPx)); }

QSize SpanTimeline::sizeHint() const
{
    const int lanes = int(SpanModel::Lane::Count);
    return {800, axisHeight() + lanes * laneHeight() + horizontalScrollBar()->sizeHint().height() + 2 * frameWidth() + 4};
}

QSize SpanTimeline::minimumSizeHint() const { return {200, sizeHint().height()}; }

void SpanTimeline::settleView()
{
    if (!m_model || m_model->count() == 0) {
        updateScrollBar();
        return;
    }
    const double first = double(m_model->firstMs());
    const double last = double(m_model->lastMs());
    const double width = plotWidth();
    if (m_fit) {
        const double range = std::max(last - first, 1000.0);   // a lone mark gets a second around it
        m_msPerPx = range * (1 + 2 * kEdgeRoom) / width;
        m_startMs = first - range * kEdgeRoom;
    } else if (m_following) {
        m_startMs = last + width * m_msPerPx * kEdgeRoom - width * m_msPerPx;
    }
    updateScrollBar();
}

void SpanTimeline::updateScrollBar()
{
    QScrollBar *bar = horizontalScrollBar();
    m_settingScrollBar = true;
    if (!m_model || m_model->count() == 0 || m_fit) {
        bar->setRange(0, 0);
        m_settingScrollBar = false;
        return;
    }
    const double visible = plotWidth() * m_msPerPx;
    const double first = std::min(double(m_model->firstMs()) - visible * kEdgeRoom, m_startMs);
    const double last = std::max(double(m_model->lastMs()) + visible * kEdgeRoom, m_startMs + visible);
    m_scrollUnitMs = std::max({m_msPerPx * 4, (last - first) / kMaxScrollSteps, 1e-3});
    bar->setRange(0, int((last - first - visible) / m_scrollUnitMs));
    bar->setPageStep(std::max(1, int(visible / m_scrollUnitMs)));
    bar->setSingleStep(std::max(1, bar->pageStep() / 10));
    bar->setValue(m_following ? bar->maximum() : int((m_startMs - first) / m_scrollUnitMs));
    bar->setProperty("firstMs", first);
    m_settingScrollBar = false;
}

void SpanTimeline::onScrollBar(int value)
{
    if (m_settingScrollBar || m_fit)
        return;
    const double first = horizontalScrollBar()->property("firstMs").toDouble();
    m_startMs = first + value * m_scrollUnitMs;
    const bool atEnd = value >= horizontalScrollBar()->maximum();
    if (atEnd != m_following) {
        m_following = atEnd;
        emit followingChanged(atEnd);
    }
    viewport()->update();
}

void SpanTimeline::userMoved()
{
    m_fit = false;
    if (m_model && m_model->count() > 0) {
        const double visible = plotWidth() * m_msPerPx;
        const double first = double(m_model->firstMs());
        const double last = double(m_model->lastMs());
        // Zoomed out past everything: back to showing it all.
        if (visible >= (last - first) * (1 + 2 * kEdgeRoom)) {
            m_fit = true;
        } else {
            m_startMs = std::clamp(m_startMs, first - visible * kEdgeRoom, last + visible * kEdgeRoom - visible);
        }
        const bool atEnd = m_fit || m_startMs + visible >= last;
        if (atEnd != m_following) {
            m_following = atEnd;
            emit followingChanged(atEnd);
        }
    }
    settleView();
    viewport()->update();
}

void SpanTimeline::zoomBy(double factor, double anchorX)
{
    if (m_fit)
        settleView();
    const double anchorMs = m_startMs + (anchorX - plotLeft()) * m_msPerPx;
    m_msPerPx = std::max(kMinMsPerPx, m_msPerPx * factor);
    m_startMs = anchorMs - (anchorX - plotLeft()) * m_msPerPx;
    userMoved();
}

void SpanTimeline::zoomIn()
{
    zoomBy(1 / kWheelZoom, m_following && !m_fit ? plotLeft() + plotWidth() : plotLeft() + plotWidth() / 2.0);
}

void SpanTimeline::zoomOut() { zoomBy(kWheelZoom, plotLeft() + plotWidth() / 2.0); }

void SpanTimeline::fitAll()
{
    m_fit = true;
    if (!m_following) {
        m_following = true;
        emit followingChanged(true);
    }
    settleView();
    viewport()->update();
}

void SpanTimeline::setFollowing(bool following)
{
    if (following == m_following)
        return;
    m_following = following;
    emit followingChanged(following);
    settleView();
    viewport()->update();
}

void SpanTimeline::panByMs(double ms)
{
    if (m_fit)
        settleView();
    m_startMs += ms;
    userMoved();
}

void SpanTimeline::setSelectedSpan(int id)
{
    if (!m_model || id >= m_model->count())
        id = -1;
    m_selected = id;
    m_selectedSeq = id >= 0 ? m_model->span(id).startSeq : 0;
    viewport()->update();
}

void SpanTimeline::ensureVisible(int id)
{
    if (!m_model || id < 0 || id >= m_model->count())
        return;
    settleView();
    const SpanModel::Span &span = m_model->span(id);
    const double start = double(span.startMs);
    const double end = double(m_model->endOf(span));
    double visible = plotWidth() * m_msPerPx;
    if (start >= m_startMs && end <= m_startMs + visible)
        return;
    if (end - start > visible * (1 - 2 * kEdgeRoom)) {
        m_msPerPx = std::max(kMinMsPerPx, (end - start) * 1.25 / plotWidth());
        visible = plotWidth() * m_msPerPx;
    }
    m_startMs = (start + end) / 2 - visible / 2;
    userMoved();
}

void SpanTimeline::mousePressEvent(QMouseEvent *event)
{
    if (event->button() != Qt::LeftButton) {
        QAbstractScrollArea::mousePressEvent(event);
        return;
    }
    if (m_fit)
        settleView();
    m_pressed = true;
    m_dragging = false;
    m_pressPos = event->position().toPoint();
    m_pressStartMs = m_startMs;
    event->accept();
}

void SpanTimeline::mouseMoveEvent(QMouseEvent *event)
{
    if (!m_pressed)
        return;
    const QPoint delta = event->position().toPoint() - m_pressPos;
    if (!m_dragging && delta.manhattanLength() < QApplication::startDragDistance())
        return;
    if (!m_dragging)
        viewport()->setCursor(Qt::ClosedHandCursor);
    m_dragging = true;
    m_startMs = m_pressStartMs - delta.x() * m_msPerPx;
    userMoved();
}

void SpanTimeline::mouseReleaseEvent(QMouseEvent *event)
{
    if (!m_pressed || event->button() != Qt::LeftButton)
        return;
    m_pressed = false;
    if (m_dragging) {
        m_dragging = false;
        viewport()->unsetCursor();
        return;
    }
    const int id = spanAt(event->position().toPoint());
    setSelectedSpan(id);
    emit spanActivated(id);
}

void SpanTimeline::wheelEvent(QWheelEvent *event)
{
    const QPoint delta = event->angleDelta();
    if (delta.isNull())
        return;
    const bool pan = (event->modifiers() & Qt::ShiftModifier) || std::abs(delta.x()) > std::abs(delta.y());
    if (pan) {
        const int steps = std::abs(delta.x()) > std::abs(delta.y()) ? delta.x() : delta.y();
        panByMs(-steps / 120.0 * plotWidth() * m_msPerPx / 10);
    } else {
        zoomBy(std::pow(kWheelZoom, -delta.y() / 120.0), event->position().x());
    }
    event->accept();
}

void SpanTimeline::keyPressEvent(QKeyEvent *event)
{
    const double tenth = plotWidth() * m_msPerPx / 10;
    switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal: zoomIn(); break;
    case Qt::Key_Minus: zoomOut(); break;
    case Qt::Key_0: fitAll(); break;
    case Qt::Key_Left: panByMs(-tenth); break;
    case Qt::Key_Right: panByMs(tenth); break;
    case Qt::Key_Home:
        if (m_model && m_model->count() > 0)
            panByMs(double(m_model->firstMs()) - m_startMs);
        break;
    case Qt::Key_End: setFollowing(true); break;
    default: QAbstractScrollArea::keyPressEvent(event); return;
    }
    event->accept();
}

bool SpanTimeline::viewportEvent(QEvent *event)
{
    if (event->type() == QEvent::ToolTip) {
        auto *help = static_cast<QHelpEvent *>(event);
        const QString text = toolTipAt(help->pos());
        if (text.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), text, viewport());
        return true;
    }
    return QAbstractScrollArea::viewportEvent(event);
}

} // namespace paddock::console
