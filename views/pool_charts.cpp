#include "views/pool_charts.h"

#include "models/pools_model.h"
#include "views/plot_style.h"
#include "views/theme.h"

#include <QEvent>
#include <QLabel>
#include <QVBoxLayout>

#include <qcustomplot.h>

namespace paddock::console {

namespace {
QLabel *titleLabel(QWidget *parent)
{
    auto *label = new QLabel(parent);
    QFont font = label->font();
    font.setWeight(QFont::DemiBold);
    label->setFont(font);
    label->setWordWrap(true);
    return label;
}
} // namespace

TitledPlot::TitledPlot(const QString &titleObjectName, QWidget *parent)
    : QWidget(parent)
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_title = titleLabel(this);
    m_title->setObjectName(titleObjectName);
    layout->addWidget(m_title);
    m_plot = new QCustomPlot(this);
    m_plot->setMinimumHeight(150);
    layout->addWidget(m_plot, 1);
}

QString TitledPlot::titleText() const { return m_title->text(); }

void TitledPlot::showEvent(QShowEvent *event)
{
    QWidget::showEvent(event);
    if (m_dirty)
        rebuild();
}

void TitledPlot::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) {
        applyColors();
        if (isVisible())
            showNewColors();
    }
}

void TitledPlot::showNewColors() { m_plot->replot(); }

LatencyHistogramPlot::LatencyHistogramPlot(QWidget *parent)
    : TitledPlot(QStringLiteral("latencyTitle"), parent)
{
    m_bars = new QCPBars(m_plot->xAxis, m_plot->yAxis);
    m_bars->setWidth(0.75);
    m_plot->yAxis->setLabel(tr("claims"));
    m_plot->xAxis->setTickLabelRotation(35);
    m_plot->xAxis->grid()->setVisible(false);
    applyColors();
    setTier({}, {});
}

void LatencyHistogramPlot::setTier(const QString &pool, const TierInfo &tier)
{
    m_pool = pool;
    m_tier = tier;
    m_dirty = true;
    qint64 total = 0;
    for (qint64 count : tier.latencyCounts)
        total += count;
    if (tier.name.isEmpty()) {
        m_title->setText(tr("Claim latency: choose a tier"));
    } else if (total == 0) {
        m_title->setText(tr("Claim latency · %1 / %2: no claims yet").arg(pool, tier.name));
    } else {
        bool over50 = false;
        bool over99 = false;
        const qint64 p50 = latencyPercentileUs(tier, 0.5, &over50);
        const qint64 p99 = latencyPercentileUs(tier, 0.99, &over99);
        m_title->setText(tr("Claim latency · %1 / %2 · %n claim(s) · p50 %3%4 · p99 %5%6", nullptr, int(total))
                             .arg(pool, tier.name, over50 ? QStringLiteral(">") : QStringLiteral("≤"), formatLatencyUs(p50),
                                  over99 ? QStringLiteral(">") : QStringLiteral("≤"), formatLatencyUs(p99)));
    }
    if (isVisible())
        rebuild();
}

void LatencyHistogramPlot::rebuild()
{
    m_dirty = false;
    QVector<double> keys;
    QVector<double> values;
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    const qsizetype n = qMin(m_tier.latencyBucketsUs.size(), m_tier.latencyCounts.size());
    double top = 1;
    for (qsizetype i = 0; i < n; ++i) {
        keys << double(i);
        values << double(m_tier.latencyCounts.at(i));
        top = qMax(top, double(m_tier.latencyCounts.at(i)));
        ticker->addTick(double(i), latencyBucketLabel(m_tier, int(i)));
    }
    m_bars->setData(keys, values, true);
    m_plot->xAxis->setTicker(ticker);
    m_plot->xAxis->setRange(-0.7, qMax<double>(n, 1) - 0.3);
    m_plot->yAxis->setRange(0, top * 1.15);
    m_plot->replot();
}

int LatencyHistogramPlot::barCount() const { return m_bars->data()->size(); }

void LatencyHistogramPlot::applyColors()
{
    colorPlot(m_plot, palette(), {m_plot->xAxis, m_plot->yAxis});
    const QColor bar = plotAccentColor();
    m_bars->setPen(QPen(bar.darker(120)));
    QColor fill = bar;
    fill.setAlpha(170);
    m_bars->setBrush(fill);
}

HealthTimelinePlot::HealthTimelinePlot(QWidget *parent)
    : TitledPlot(QStringLiteral("healthTitle"), parent)
{
    m_warm = m_plot->addGraph();
    m_warm->setName(tr("warm"));
    m_warm->setLineStyle(QCPGraph::lsStepLeft);
    m_claimed = m_plot->addGraph();
    m_claimed->setName(tr("claimed"));
    m_claimed->setLineStyle(QCPGraph::lsStepLeft);
    // A dot per look: a single look has no line to draw.
    m_warm->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
    m_claimed->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
    m_plot->xAxis->setLabel(tr("seconds ago"));
    m_plot->yAxis->setLabel(tr("sandboxes"));
    m_plot->legend->setVisible(true);
    m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
    applyColors();
    setHistory({}, {});
}

void HealthTimelinePlot::setHistory(const QString &pool, const QList<PoolHealthPoint> &history)
{
    m_pool = pool;
    m_history = history;
    m_dirty = true;
    if (pool.isEmpty()) {
        m_title->setText(tr("Health over time: choose a pool"));
    } else {
        int unhealthy = 0;
        for (const PoolHealthPoint &point : history)
            unhealthy += point.healthy ? 0 : 1;
        const qint64 spanMs = history.size() > 1 ? history.last().timeUnixMs - history.first().timeUnixMs : 0;
        m_title->setText(tr("Health over time · %1 · %n look(s) over %2 · %3", nullptr, int(history.size()))
                             .arg(pool, QStringLiteral("%1 s").arg(spanMs / 1000),
                                  unhealthy == 0 ? tr("healthy throughout")
                                                 : tr("unhealthy in %1").arg(unhealthy)));
    }
    if (isVisible())
        rebuild();
}

void HealthTimelinePlot::rebuild()
{
    m_dirty = false;
    m_plot->clearItems();
    m_unhealthySpans = 0;
    QVector<double> keys;
    QVector<double> warm;
    QVector<double> claimed;
    const qint64 last = m_history.isEmpty() ? 0 : m_history.last().timeUnixMs;
    double top = 1;
    for (const PoolHealthPoint &point : std::as_const(m_history)) {
        keys << (point.timeUnixMs - last) / 1000.0;
        warm << point.warm;
        claimed << point.claimed;
        top = qMax(top, double(qMax(point.warm, point.claimed)));
    }
    m_warm->setData(keys, warm, true);
    m_claimed->setData(keys, claimed, true);
    const double first = keys.isEmpty() ? -60 : qMin(keys.first(), -10.0);
    m_plot->xAxis->setRange(first * 1.02, -first * 0.02);
    m_plot->yAxis->setRange(0, top * 1.25 + 0.5);
    // Unhealthy spans: from an unhealthy look to the next look (or now).
    QColor shade = Theme::errorColor();
    shade.setAlpha(Theme::isDark() ? 70 : 45);
    for (qsizetype i = 0; i < m_history.size(); ++i) {
        if (m_history.at(i).healthy)
            continue;
        qsizetype end = i;
        while (end + 1 < m_history.size() && !m_history.at(end + 1).healthy)
            ++end;
        const double x0 = keys.at(i);
        const double x1 = end + 1 < m_history.size() ? keys.at(end + 1) : qMax(keys.at(end), x0 + 1);
        auto *rect = new QCPItemRect(m_plot);
        rect->topLeft->setTypeY(QCPItemPosition::ptAxisRectRatio);
        rect->bottomRight->setTypeY(QCPItemPosition::ptAxisRectRatio);
        rect->topLeft->setCoords(x0, 0);
        rect->bottomRight->setCoords(x1, 1);
        rect->setPen(Qt::NoPen);
        rect->setBrush(shade);
        rect->setLayer(QStringLiteral("background"));
        ++m_unhealthySpans;
        i = end;
    }
    m_plot->replot();
}

void HealthTimelinePlot::showNewColors() { rebuild(); }

void HealthTimelinePlot::applyColors()
{
    colorPlot(m_plot, palette(), {m_plot->xAxis, m_plot->yAxis});
    m_warm->setPen(QPen(Theme::okColor(), 2));
    m_claimed->setPen(QPen(Theme::statusColor(SessionStatus::Running), 2));
}

} // namespace paddock::console
