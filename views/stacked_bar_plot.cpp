#include "views/stacked_bar_plot.h"

#include "views/plot_style.h"
#include "views/theme.h"

#include <QEvent>
#include <QLabel>
#include <QVBoxLayout>

#include <qcustomplot.h>

namespace paddock::console {

StackedBarPlot::StackedBarPlot(QWidget *parent) : QWidget(parent)
{
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_title = new QLabel(this);
    m_title->setObjectName(QStringLiteral("stackedBarTitle"));
    QFont bold = m_title->font();
    bold.setBold(true);
    m_title->setFont(bold);
    layout->addWidget(m_title);
    m_plot = new QCustomPlot(this);
    m_plot->setMinimumHeight(140);
    m_plot->legend->setVisible(true);
    // Beside the bars, not over them: inside the axis rect it hid the top of the last bar (the
    // demo's one bucket of spend, the tallest category).
    // A column of its own, the legend at its top and an empty element taking the rest of the height
    // (a legend alone in a cell spreads its entries over the whole height).
    auto *side = new QCPLayoutGrid;
    m_plot->plotLayout()->addElement(0, 1, side);
    m_plot->plotLayout()->setColumnStretchFactor(1, 0.001);
    side->addElement(0, 0, m_plot->legend);
    side->addElement(1, 0, new QCPLayoutElement(m_plot));
    side->setRowStretchFactor(0, 0.001);
    side->setRowSpacing(0);
    m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    m_plot->axisRect()->setRangeDrag(Qt::Horizontal);
    m_plot->axisRect()->setRangeZoom(Qt::Horizontal);
    layout->addWidget(m_plot, 1);
}

void StackedBarPlot::setTitle(const QString &title) { m_title->setText(title); }
QString StackedBarPlot::titleText() const { return m_title->text(); }

void StackedBarPlot::setValueLabel(const QString &label)
{
    m_plot->yAxis->setLabel(label);
}

void StackedBarPlot::setEmptyText(const QString &text)
{
    m_emptyText = text;
    m_dirty = true;
    if (isVisible())
        rebuild();
}

void StackedBarPlot::setCategories(const QStringList &categories, const QList<Series> &series)
{
    m_time = false;
    m_categories = categories;
    m_keys.clear();
    for (int i = 0; i < categories.size(); ++i)
        m_keys << i;
    m_width = 0.6;
    m_series = series;
    m_dirty = true;
    if (isVisible())
        rebuild();
}

void StackedBarPlot::setTimeBuckets(const QList<double> &startsUnixSeconds, double bucketSeconds, const QList<Series> &series)
{
    m_time = true;
    m_categories.clear();
    m_keys.clear();
    // A bar is centred on its bucket.
    for (double start : startsUnixSeconds)
        m_keys << start + bucketSeconds / 2;
    m_width = bucketSeconds * 0.85;
    m_series = series;
    m_dirty = true;
    if (isVisible())
        rebuild();
}

double StackedBarPlot::stackTotal(int bar) const
{
    double sum = 0;
    for (const Series &s : m_series)
        sum += s.values.value(bar);
    return sum;
}

void StackedBarPlot::replotNow()
{
    if (m_dirty)
        rebuild();
}

void StackedBarPlot::rebuild()
{
    m_dirty = false;
    m_plot->clearPlottables();
    m_plot->clearItems();
    colorPlot(m_plot, palette(), {m_plot->xAxis, m_plot->yAxis});

    QCPBars *below = nullptr;
    const QVector<double> keys(m_keys.cbegin(), m_keys.cend());
    double top = 0;
    for (int i = 0; i < m_series.size(); ++i) {
        const Series &s = m_series.at(i);
        auto *bars = new QCPBars(m_plot->xAxis, m_plot->yAxis);
        bars->setName(s.name);
        bars->setWidth(m_width);
        const QColor color = s.color.isValid() ? s.color : plotSeriesColor(i);
        // No outline: a layer that is zero in a bar would still draw one as a line across it.
        bars->setPen(Qt::NoPen);
        QColor fill = color;
        fill.setAlpha(200);
        bars->setBrush(fill);
        bars->setStackingGap(0);
        QVector<double> values(s.values.cbegin(), s.values.cend());
        values.resize(keys.size());
        bars->setData(keys, values, true);
        if (below)
            bars->moveAbove(below);
        below = bars;
    }
    for (int bar = 0; bar < m_keys.size(); ++bar)
        top = qMax(top, stackTotal(bar));

    if (m_time) {
        QSharedPointer<QCPAxisTickerDateTime> ticker(new QCPAxisTickerDateTime);
        const double span = m_keys.isEmpty() ? 3600 : m_keys.last() - m_keys.first();
        ticker->setDateTimeFormat(span > 2 * 86400 ? QStringLiteral("MMM d\nhh:mm") : QStringLiteral("hh:mm"));
        m_plot->xAxis->setTicker(ticker);
        if (!m_keys.isEmpty())
            m_plot->xAxis->setRange(m_keys.first() - m_width, m_keys.last() + m_width);
    } else {
        QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
        for (int i = 0; i < m_categories.size(); ++i)
            ticker->addTick(i, m_categories.at(i));
        m_plot->xAxis->setTicker(ticker);
        m_plot->xAxis->setRange(-0.7, qMax<double>(m_categories.size(), 1) - 0.3);
    }
    // Categories need no vertical grid: its lines (the zero line at the first category above all)
    // would show through the bars, which are slightly translucent.
    m_plot->xAxis->grid()->setVisible(m_time);
    m_plot->yAxis->setRange(0, top > 0 ? top * 1.2 : 1);
    m_plot->legend->setVisible(!m_series.isEmpty());

    if (top <= 0 && !m_emptyText.isEmpty()) {
        auto *text = new QCPItemText(m_plot);
        text->position->setType(QCPItemPosition::ptAxisRectRatio);
        text->position->setCoords(0.5, 0.5);
        text->setText(m_emptyText);
        text->setColor(Theme::mutedTextColor());
    }
    m_plot->replot();
}

void StackedBarPlot::showEvent(QShowEvent *event)
{
    QWidget::showEvent(event);
    if (m_dirty)
        rebuild();
}

void StackedBarPlot::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) {
        m_dirty = true;
        if (isVisible())
            rebuild();
    }
}

} // namespace paddock::console
