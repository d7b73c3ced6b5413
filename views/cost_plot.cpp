#include "views/cost_plot.h"

#include "models/cost_series.h"
#include "views/theme.h"

#include <QEvent>
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

    auto ticker = QSharedPointer<QCPAxisTickerDateTime>::create();
    ticker->setDateTimeFormat(QStringLiteral("HH:mm:ss"));
    ticker->setTickCount(4);
    m_plot->xAxis->setTicker(ticker);
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

void CostPlot::setPoints(const QVector<double> &keys, const QVector<double> &values)
{
    m_graph->setData(keys, values, /*alreadySorted=*/true);
    markDirty();
}

void CostPlot::appendPoints(const QVector<double> &keys, const QVector<double> &values)
{
    m_graph->addData(keys, values, /*alreadySorted=*/true);
    markDirty();
}

void CostPlot::clear()
{
    m_graph->data()->clear();
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
            m_graph->addData(keys.mid(m_seriesTaken), values.mid(m_seriesTaken), true);
    } else {
        m_graph->setData(keys, values, true);
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
        bool found = false;
        const QCPRange keys = m_graph->getKeyRange(found);
        double span = keys.size();
        if (span < 1)
            span = 1;
        m_plot->xAxis->setRange(keys.lower - span * 0.02, keys.upper + span * 0.02);
        const double last = (points->constEnd() - 1)->value;
        const QCPRange values = m_graph->getValueRange(found);
        m_plot->yAxis->setRange(0, qMax(values.upper * 1.1, 0.0001));
        m_total->setText(tr("Total $%1 over %2 points").arg(last, 0, 'f', 4).arg(points->size()));
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
    const QPalette pal = palette();
    const QColor fg = pal.color(QPalette::Text);
    const QColor grid = pal.color(QPalette::Mid);
    m_plot->setBackground(pal.color(QPalette::Base));
    for (QCPAxis *axis : {m_plot->xAxis, m_plot->yAxis}) {
        axis->setBasePen(QPen(grid));
        axis->setTickPen(QPen(grid));
        axis->setSubTickPen(QPen(grid));
        axis->setTickLabelColor(fg);
        axis->setLabelColor(fg);
        axis->grid()->setPen(QPen(grid, 0, Qt::DotLine));
    }
    const QColor line = Theme::isDark() ? QColor(0x58, 0xa6, 0xff) : QColor(0x09, 0x69, 0xda);
    m_graph->setPen(QPen(line, 2));
    QColor fill = line;
    fill.setAlpha(40);
    m_graph->setBrush(fill);
}

} // namespace paddock::console
