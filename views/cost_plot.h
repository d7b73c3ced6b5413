#pragma once
// Cost over time (QCustomPlot): one step line of cumulative cost in dollars against the time since
// the session's first event.
//
// Threads: GUI thread only. Data changes only set a dirty flag; a 100 ms timer replots when the
// flag is set and the plot is visible, so a burst of events costs one replot and a hidden plot
// costs nothing (STYLE 13). Adaptive sampling stays on, so a million points replot in a few ms.

#include <QSharedPointer>
#include <QVector>

#include <limits>
#include <QWidget>

class QCustomPlot;
class QCPAxisTicker;
class QCPGraph;
class QLabel;
class QTimer;

namespace paddock::console {
class CostSeries;
}

namespace paddock::console {

class CostPlot : public QWidget {
    Q_OBJECT

public:
    explicit CostPlot(QWidget *parent = nullptr);

    // Follows a series: on each tick, if the series is dirty and the plot visible, takes its new
    // points (only the appended ones when it merely grew) and replots. The series outlives the plot.
    void setSeries(CostSeries *series);

    // keys: unix seconds (double); values: cumulative cost in dollars. Sorted by key.
    void setPoints(const QVector<double> &keys, const QVector<double> &values);
    void appendPoints(const QVector<double> &keys, const QVector<double> &values);
    void clear();
    int pointCount() const;

    // Replots now if there is anything new (benchmarks and screenshots).
    void replotNow();
    bool isDirty() const { return m_dirty; }
    QCustomPlot *plot() const { return m_plot; }

protected:
    void showEvent(QShowEvent *event) override;
    void changeEvent(QEvent *event) override;

private:
    void markDirty();
    void onTimer();
    void applyColors();

    void syncFromSeries();
    QVector<double> relative(const QVector<double> &keys, qsizetype from = 0);

    CostSeries *m_series = nullptr;
    int m_seriesTaken = 0;          // points of m_series already in the graph
    double m_seriesFirstKey = 0;    // its first key then, to notice dropped points
    double m_origin = std::numeric_limits<double>::quiet_NaN();   // key of the first point (unix s)
    QSharedPointer<QCPAxisTicker> m_secondsTicker;
    QSharedPointer<QCPAxisTicker> m_timeTicker;
    QCustomPlot *m_plot = nullptr;
    QCPGraph *m_graph = nullptr;
    QLabel *m_total = nullptr;
    QTimer *m_timer = nullptr;
    bool m_dirty = false;
};

} // namespace paddock::console
