#pragma once
// The Pools view's two plots (QCustomPlot): a tier's claim latency histogram, and a pool's health
// over time (warm and claimed sandboxes as lines, unhealthy spans shaded).
//
// Threads: GUI thread only. Both replot when given new data and only while visible.

#include "models/console_types.h"

#include <QWidget>

class QCustomPlot;
class QCPBars;
class QCPGraph;
class QLabel;

namespace paddock::console {

class LatencyHistogramPlot : public QWidget {
    Q_OBJECT

public:
    explicit LatencyHistogramPlot(QWidget *parent = nullptr);
    void setTier(const QString &pool, const TierInfo &tier);
    QString titleText() const;
    int barCount() const;
    QCustomPlot *plot() const { return m_plot; }

protected:
    void changeEvent(QEvent *event) override;
    void showEvent(QShowEvent *event) override;

private:
    void rebuild();
    void applyColors();

    QString m_pool;
    TierInfo m_tier;
    QLabel *m_title = nullptr;
    QCustomPlot *m_plot = nullptr;
    QCPBars *m_bars = nullptr;
    bool m_dirty = true;
};

class HealthTimelinePlot : public QWidget {
    Q_OBJECT

public:
    explicit HealthTimelinePlot(QWidget *parent = nullptr);
    void setHistory(const QString &pool, const QList<PoolHealthPoint> &history);
    QString titleText() const;
    int unhealthySpans() const { return m_unhealthySpans; }
    QCustomPlot *plot() const { return m_plot; }

protected:
    void changeEvent(QEvent *event) override;
    void showEvent(QShowEvent *event) override;

private:
    void rebuild();
    void applyColors();

    QString m_pool;
    QList<PoolHealthPoint> m_history;
    QLabel *m_title = nullptr;
    QCustomPlot *m_plot = nullptr;
    QCPGraph *m_warm = nullptr;
    QCPGraph *m_claimed = nullptr;
    int m_unhealthySpans = 0;
    bool m_dirty = true;
};

} // namespace paddock::console
