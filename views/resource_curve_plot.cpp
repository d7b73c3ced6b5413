#include "views/resource_curve_plot.h"

#include "models/resource_series.h"
#include "views/plot_style.h"
#include "views/theme.h"

#include <QEvent>
#include <QLabel>
#include <QTimer>
#include <QVBoxLayout>

#include <qcustomplot.h>

namespace paddock::console {

namespace {
constexpr int kReplotIntervalMs = 100;

QColor memoryColor() { return plotAccentColor(); }
QColor cpuColor() { return Theme::isDark() ? QColor(0xd2, 0x99, 0x22) : QColor(0x9a, 0x67, 0x00); }
} // namespace

ResourceCurvePlot::ResourceCurvePlot(QWidget *parent)
    : QWidget(parent)
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(2);
    m_summary = new QLabel(this);
    m_summary->setObjectName(QStringLiteral("resourceSummary"));
    m_summary->setWordWrap(true);
    layout->addWidget(m_summary);

    m_plot = new QCustomPlot(this);
    m_plot->setMinimumHeight(180);
    m_memory = m_plot->addGraph(m_plot->xAxis, m_plot->yAxis);
    m_memory->setName(tr("memory (MiB)"));
    m_memory->setLineStyle(QCPGraph::lsLine);
    m_memory->setAdaptiveSampling(true);
    m_cpu = m_plot->addGraph(m_plot->xAxis, m_plot->yAxis2);
    m_cpu->setName(tr("CPU (cores)"));
    m_cpu->setAdaptiveSampling(true);
    m_plot->yAxis2->setVisible(true);
    m_plot->xAxis->setLabel(tr("seconds since the first sample"));
    m_plot->yAxis->setLabel(tr("memory (MiB)"));
    m_plot->yAxis2->setLabel(tr("CPU (cores)"));
    m_plot->legend->setVisible(true);
    m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);

    m_limitLine = new QCPItemStraightLine(m_plot);
    m_limitLine->setClipAxisRect(m_plot->axisRect());
    m_limitLabel = new QCPItemText(m_plot);
    m_limitLabel->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
    m_limitLabel->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
    m_limitLabel->position->setTypeY(QCPItemPosition::ptPlotCoords);
    m_failureLine = new QCPItemStraightLine(m_plot);
    m_failureLine->setVisible(false);
    m_emptyLabel = new QCPItemText(m_plot);
    m_emptyLabel->position->setType(QCPItemPosition::ptAxisRectRatio);
    m_emptyLabel->position->setCoords(0.5, 0.5);
    m_emptyLabel->setVisible(false);
    layout->addWidget(m_plot, 1);

    m_timer = new QTimer(this);
    m_timer->setInterval(kReplotIntervalMs);
    connect(m_timer, &QTimer::timeout, this, &ResourceCurvePlot::onTimer);
    m_timer->start();
    m_emptyText = tr("No resource samples");
    applyColors();
}

void ResourceCurvePlot::setSeries(ResourceSeries *series)
{
    m_series = series;
    m_dirty = true;
}

void ResourceCurvePlot::setCompact(bool compact)
{
    m_compact = compact;
    m_plot->setMinimumHeight(compact ? 90 : 180);
    m_plot->xAxis->setLabel(compact ? QString() : tr("seconds since the first sample"));
    m_plot->yAxis->setLabel(compact ? tr("MiB") : tr("memory (MiB)"));
    m_plot->yAxis2->setLabel(compact ? tr("cores") : tr("CPU (cores)"));
    m_plot->legend->setVisible(!compact);
    for (QCPAxis *axis : {m_plot->xAxis, m_plot->yAxis, m_plot->yAxis2})
        axis->ticker()->setTickCount(compact ? 3 : 5);
    m_dirty = true;
}

void ResourceCurvePlot::setEmptyText(const QString &text)
{
    m_emptyText = text;
    m_dirty = true;
}

void ResourceCurvePlot::setFailureAt(double seconds, const QString &)
{
    m_failureAt = seconds;
    m_failureLine->setVisible(seconds >= 0);
    m_dirty = true;
}

int ResourceCurvePlot::pointCount() const { return m_memory->data()->size(); }

QString ResourceCurvePlot::summaryText() const { return m_summary->text(); }

void ResourceCurvePlot::onTimer()
{
    if (!isVisible())
        return;
    if (m_dirty || (m_series && m_series->isDirty()))
        replotNow();
}

void ResourceCurvePlot::replotNow()
{
    m_dirty = false;
    const bool empty = !m_series || m_series->isEmpty();
    if (m_series && empty)
        m_series->clearDirty();
    m_emptyLabel->setVisible(empty);
    m_emptyLabel->setText(m_emptyText);
    if (empty) {
        m_memory->data()->clear();
        m_cpu->data()->clear();
        m_limitLine->setVisible(false);
        m_limitLabel->setVisible(false);
        m_plot->xAxis->setRange(0, 10);
        m_plot->yAxis->setRange(0, 1);
        m_plot->yAxis2->setRange(0, 1);
        m_summary->setText(m_emptyText);
        m_summary->setVisible(!m_compact);   // the plot says it already
        m_plot->replot(QCustomPlot::rpImmediateRefresh);
        return;
    }
    // A copy of a few thousand points at most (an hour of samples).
    m_series->clearDirty();
    // Few samples (a command that failed within seconds): dots, or a single one would not show.
    const QCPScatterStyle dots(m_series->size() < 30 ? QCPScatterStyle::ssDisc : QCPScatterStyle::ssNone, 5);
    m_memory->setScatterStyle(dots);
    m_cpu->setScatterStyle(dots);
    m_memory->setData(m_series->keys(), m_series->memoryMiB(), true);
    m_cpu->setData(m_series->keys(), m_series->cpuCores(), true);
    const double lastKey = m_series->keys().last();
    const double span = qMax(lastKey, 5.0);
    m_plot->xAxis->setRange(-span * 0.02, span * 1.04);
    const double limit = m_series->memoryLimitMiB();
    const double peak = m_series->peakMemoryMiB();
    m_plot->yAxis->setRange(0, qMax(qMax(limit, peak) * 1.15, 1.0));
    const double cpuTop = qMax(qMax(m_series->cpuLimit(), m_series->peakCpuCores()) * 1.15, 0.1);
    m_plot->yAxis2->setRange(0, cpuTop);
    m_limitLine->setVisible(limit > 0);
    m_limitLabel->setVisible(limit > 0 && !m_compact);
    if (limit > 0) {
        m_limitLine->point1->setCoords(0, limit);
        m_limitLine->point2->setCoords(1, limit);
        m_limitLabel->position->setCoords(0.99, limit);
        m_limitLabel->setText(tr("memory limit %1 MiB").arg(limit, 0, 'f', 0));
    }
    if (m_failureAt >= 0) {
        m_failureLine->point1->setCoords(m_failureAt, 0);
        m_failureLine->point2->setCoords(m_failureAt, 1);
    }
    m_summary->setVisible(true);
    QString summary = tr("Memory peak %1 MiB").arg(peak, 0, 'f', 1);
    if (limit > 0)
        summary += tr(" of %1 MiB (%2%)").arg(limit, 0, 'f', 0).arg(qRound(peak * 100 / limit));
    summary += tr(" · CPU peak %1 cores").arg(m_series->peakCpuCores(), 0, 'f', 2);
    if (m_series->cpuLimit() > 0)
        summary += tr(" of %1").arg(m_series->cpuLimit(), 0, 'f', 1);
    if (m_series->throttledSamples() > 0)
        summary += tr(" · throttled in %n sample(s)", nullptr, m_series->throttledSamples());
    if (!m_compact)
        summary += tr(" · %n sample(s)", nullptr, m_series->size());
    m_summary->setText(summary);
    Theme::setTextRole(m_summary, m_series->reachedMemoryLimit() ? TextRole::Error : TextRole::Normal);
    m_plot->replot(QCustomPlot::rpImmediateRefresh);
}

void ResourceCurvePlot::showEvent(QShowEvent *event)
{
    QWidget::showEvent(event);
    QTimer::singleShot(0, this, &ResourceCurvePlot::onTimer);
}

void ResourceCurvePlot::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) {
        applyColors();
        m_dirty = true;
    }
}

void ResourceCurvePlot::applyColors()
{
    colorPlot(m_plot, palette(), {m_plot->xAxis, m_plot->yAxis, m_plot->yAxis2});
    m_plot->yAxis2->grid()->setVisible(false);
    m_memory->setPen(QPen(memoryColor(), 2));
    QColor fill = memoryColor();
    fill.setAlpha(40);
    m_memory->setBrush(fill);
    m_cpu->setPen(QPen(cpuColor(), 1.5));
    m_limitLine->setPen(QPen(Theme::errorColor(), 1.5, Qt::DashLine));
    m_limitLabel->setColor(Theme::errorColor());
    m_failureLine->setPen(QPen(Theme::errorColor(), 1, Qt::DotLine));
    m_emptyLabel->setColor(Theme::mutedTextColor());
}

} // namespace paddock::console
