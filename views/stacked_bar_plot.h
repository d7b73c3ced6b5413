#pragma once
// Stacked bars (QCustomPlot): one bar per category (tiers, choosers) or per time bucket, one layer
// per series (outcomes, agents, models), each in plotSeriesColor order unless given a colour. Used
// by the Decisions view (outcomes by tier and by chooser) and the Cost view (spend over time).
//
// Threads: GUI thread only. New data only marks the plot dirty; it rebuilds when shown, so a
// hidden page costs nothing (STYLE 13).

#include <QColor>
#include <QList>
#include <QStringList>
#include <QWidget>

class QCustomPlot;
class QLabel;

namespace paddock::console {

class StackedBarPlot : public QWidget {
    Q_OBJECT

public:
    struct Series {
        QString name;
        QList<double> values;   // one per category / bucket
        QColor color = {};      // invalid: the i-th series colour
    };

    explicit StackedBarPlot(QWidget *parent = nullptr);

    void setTitle(const QString &title);
    void setValueLabel(const QString &label);
    // Bars at 0..n-1 labelled with the categories.
    void setCategories(const QStringList &categories, const QList<Series> &series);
    // Bars at bucket starts (Unix seconds), each bucketSeconds wide, on a date-time axis.
    void setTimeBuckets(const QList<double> &startsUnixSeconds, double bucketSeconds, const QList<Series> &series);
    // Shown over the plot area when there is nothing to draw (e.g. "no decisions yet").
    void setEmptyText(const QString &text);

    QString titleText() const;
    int seriesCount() const { return int(m_series.size()); }
    int barCount() const { return int(m_keys.size()); }
    // The top of the stack at bar i (the sum of every series).
    double stackTotal(int bar) const;
    QCustomPlot *plot() const { return m_plot; }
    // Rebuilds now if dirty (screenshots, tests).
    void replotNow();

protected:
    void showEvent(QShowEvent *event) override;
    void changeEvent(QEvent *event) override;

private:
    void rebuild();

    QLabel *m_title = nullptr;
    QCustomPlot *m_plot = nullptr;
    QStringList m_categories;
    QList<double> m_keys;
    double m_width = 0.6;
    bool m_time = false;
    QList<Series> m_series;
    QString m_emptyText;
    bool m_dirty = true;
};

} // namespace paddock::console
