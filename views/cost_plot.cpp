#include "views/cost_plot.h"

#include "models/cost_series.h"
#include "views/plot_style.h"

#include <QEvent>

#include <cmath>
#include <limits>
#include <QLabel>
#include <QTimer>
#include <QVBoxLayout>

#include <qcustomplot.h>

namespace paddock::console {

namespace {
constexpr int kReplotIntervalMs = 100;
}

CostPlot::CostPlot(QWidget *parent)
    : QWidget(parent)
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(2);
    m_total = new QLabel(this);
    m_total->setObjectName(QStringLiteral("costTotal"));
    layout->addWidget(m_total);

    m_plot = new QCustomPlot(this);
    m_plot->setMinimumHeight(140);
    m_plot->setNoAntialiasingOnDrag(true);
    m_graph = m_plot->addGraph();
    m_graph->setLineStyle(QCPGraph::lsStepLeft);
    m_graph->setAdaptiveSampling(true);

    m_secondsTicker = QSharedPointer<QCPAxisTicker>::create();
    m_secondsTicker->setTickCount(5);
    auto timeTicker = QSharedPointer<QCPAxisTickerTime>::create();
    timeTicker->setTimeFormat(QStringLiteral("%h:%m:%s"));
    timeTicker->setTickCount(5);
    m_timeTicker = timeTicker;
    m_plot->xAxis->setTicker(m_secondsTicker);
    m_plot->xAxis->setLabel(tr("seconds since the first event"));
    m_plot->yAxis->setLabel(tr("cost ($)"));
    m_plot->yAxis->setNumberFormat(QStringLiteral("f"));
    m_plot->yAxis->setNumberPrecision(4);
    m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    m_plot->axisRect()->setRangeDrag(Qt::Horizontal);
    m_plot->axisRect()->setRangeZoom(Qt::Horizontal);
    layout->addWidget(m_plot, 1);

    m_timer = new QTimer(this);
    m_timer->setInterval(kReplotIntervalMs);
    connect(m_timer, &QTimer::timeout, this, &CostPlot::onTimer);
    m_timer->start();
    applyColors();
    m_total->setText(tr("No cost recorded yet"));
}

QVector<double> CostPlot::relative(const QVector<double> &keys, qsizetype from)
{
    // The axis counts from the first event: "12:57:26" on every tick says nothing for a session
    // that lasts seconds, and small keys keep full precision.
    if (std::isnan(m_origin) && from < keys.size())
        m_origin = keys.at(from);
    QVector<double> out;
    out.reserve(keys.size() - from);
    for (qsizetype i = from; i < keys.size(); ++i)
        out.append(keys.at(i) - m_origin);
    return out;
}

void CostPlot::setPoints(const QVector<double> &keys, const QVector<double> &values)
{
    m_origin = std::numeric_limits<double>::quiet_NaN();
    m_graph->setData(relative(keys), values, /*alreadySorted=*/true);
    markDirty();
}

void CostPlot::appendPoints(const QVector<double> &keys, const QVector<double> &values)
{
    m_graph->addData(relative(keys), values, /*alreadySorted=*/true);
    markDirty();
}

void CostPlot::clear()
{
    m_graph->data()->clear();
    m_origin = std::numeric_limits<double>::quiet_NaN();
    markDirty();
}

int CostPlot::pointCount() const { return m_graph->data()->size(); }

void CostPlot::markDirty() { m_dirty = true; }

void CostPlot::setSeries(CostSeries *series)
{
    m_series = series;
    m_seriesTaken = 0;
    clear();
    if (m_series)
        m_series->clearDirty();
    syncFromSeries();
}

void CostPlot::syncFromSeries()
{
    if (!m_series)
        return;
    const QList<double> &keys = m_series->keys();
    const QList<double> &values = m_series->values();
    const int size = int(keys.size());
    const bool grewOnly = m_seriesTaken > 0 && size >= m_seriesTaken && keys.first() == m_seriesFirstKey;
    if (grewOnly) {
        if (size > m_seriesTaken)
            m_graph->addData(relative(keys, m_seriesTaken), values.mid(m_seriesTaken), true);
    } else {
        m_origin = std::numeric_limits<double>::quiet_NaN();
        m_graph->setData(relative(keys), values, true);
    }
    m_seriesTaken = size;
    m_seriesFirstKey = size > 0 ? keys.first() : 0;
    m_series->clearDirty();
    markDirty();
}

void CostPlot::onTimer()
{
    if (!isVisible())
        return;
    if (m_series && m_series->isDirty())
        syncFromSeries();
    if (m_dirty)
        replotNow();
}

void CostPlot::replotNow()
{
    if (m_series && m_series->isDirty())
        syncFromSeries();
    m_dirty = false;
    const auto points = m_graph->data();
    if (points->isEmpty()) {
        m_total->setText(tr("No cost recorded yet"));
        m_plot->xAxis->setRange(0, 1);
        m_plot->yAxis->setRange(0, 0.01);
    } else {
        // Data is sorted and cumulative: the ranges are the ends, no scan of a million points.
        const double first = points->constBegin()->key;
        const double lastKey = (points->constEnd() - 1)->key;
        const double last = (points->constEnd() - 1)->value;
        const double span = qMax(lastKey - first, 1.0);
        const bool longSpan = span >= 120;
        m_plot->xAxis->setTicker(longSpan ? m_timeTicker : m_secondsTicker);
        m_plot->xAxis->setLabel(longSpan ? tr("time since the first event") : tr("seconds since the first event"));
        m_plot->xAxis->setRange(first - span * 0.02, first + span * 1.02);
        const double top = last > 0 ? last * 1.15 : 0.01;
        // Enough decimals that neighbouring ticks differ ("0.0025", not "0.00" twice).
        const int decimals = qBound(2, int(-std::floor(std::log10(top / 4))) + 1, 6);
        m_plot->yAxis->setNumberPrecision(decimals);
        m_plot->yAxis->setRange(0, top);
        m_total->setText(last > 0 ? tr("Total $%1 · %n point(s)", nullptr, points->size()).arg(last, 0, 'f', 4)
                                  : tr("$0 so far: no billed model call or sandbox time yet"));
    }
    m_plot->replot(QCustomPlot::rpImmediateRefresh);
}

void CostPlot::showEvent(QShowEvent *event)
{
    QWidget::showEvent(event);
    // Data that came while hidden was never drawn.
    QTimer::singleShot(0, this, &CostPlot::onTimer);
}

void CostPlot::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) {
        applyColors();
        markDirty();
    }
}

void CostPlot::applyColors()
{
    colorPlot(m_plot, palette(), {m_plot->xAxis, m_plot->yAxis});
    const QColor line = plotAccentColor();
    m_graph->setPen(QPen(line, 2));
    QColor fill = line;
    fill.setAlpha(40);
    m_graph->setBrush(fill);
}

} // namespace paddock::console
