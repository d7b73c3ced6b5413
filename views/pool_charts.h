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

// What both plots share: a title above one plot, rebuilt from the data when shown after a change
// (never while hidden), recoloured on a palette change.
class TitledPlot : public QWidget {
    Q_OBJECT

public:
    QString titleText() const;
    QCustomPlot *plot() const { return m_plot; }

protected:
    TitledPlot(const QString &titleObjectName, QWidget *parent);
    void changeEvent(QEvent *event) override;
    void showEvent(QShowEvent *event) override;

    // Rebuilds the plot from the data (and clears m_dirty).
    virtual void rebuild() = 0;
    virtual void applyColors() = 0;
    // After applyColors() on a palette change, while visible: a replot, unless colours are baked
    // into items that must be made again.
    virtual void showNewColors();

    QLabel *m_title = nullptr;
    QCustomPlot *m_plot = nullptr;
    bool m_dirty = true;
};

class LatencyHistogramPlot : public TitledPlot {
    Q_OBJECT

public:
    explicit LatencyHistogramPlot(QWidget *parent = nullptr);
    void setTier(const QString &pool, const TierInfo &tier);
    int barCount() const;

private:
    void rebuild() override;
    void applyColors() override;

    QString m_pool;
    TierInfo m_tier;
    QCPBars *m_bars = nullptr;
};

class HealthTimelinePlot : public TitledPlot {
    Q_OBJECT

public:
    explicit HealthTimelinePlot(QWidget *parent = nullptr);
    void setHistory(const QString &pool, const QList<PoolHealthPoint> &history);
    int unhealthySpans() const { return m_unhealthySpans; }

private:
    void rebuild() override;
    void applyColors() override;
    void showNewColors() override;   // the unhealthy spans' shade follows the theme

    QString m_pool;
    QList<PoolHealthPoint> m_history;
    QCPGraph *m_warm = nullptr;
    QCPGraph *m_claimed = nullptr;
    int m_unhealthySpans = 0;
};

} // namespace paddock::console
