#pragma once
// A sandbox's resources over time (QCustomPlot): memory in MiB against the tier's limit (a dashed
// line) on the left axis, CPU in cores on the right, x in seconds since the first sample. The
// inspector shows a post-mortem's curve up to the failure; the session's sandbox card shows the
// live one in a compact form.
//
// Threads: GUI thread only. Like CostPlot: data changes set the series' dirty flag; a 100 ms timer
// replots only when it is set and the plot is visible.

#include <QWidget>

class QCustomPlot;
class QCPGraph;
class QCPItemStraightLine;
class QCPItemText;
class QLabel;
class QTimer;

namespace paddock::console {

class ResourceSeries;

class ResourceCurvePlot : public QWidget {
    Q_OBJECT

public:
    explicit ResourceCurvePlot(QWidget *parent = nullptr);

    // The series outlives the plot (or is replaced first).
    void setSeries(ResourceSeries *series);
    // Compact: no axis labels, a smaller minimum height (the sandbox card).
    void setCompact(bool compact);
    // Said in the plot when there are no samples ("no samples: ...").
    void setEmptyText(const QString &text);
    // A vertical line where the sandbox failed (seconds since the first sample; <0: none).
    void setFailureAt(double seconds, const QString &label);

    void replotNow();
    QString summaryText() const;
    QCustomPlot *plot() const { return m_plot; }
    int pointCount() const;

protected:
    void showEvent(QShowEvent *event) override;
    void changeEvent(QEvent *event) override;

private:
    void onTimer();
    void applyColors();

    ResourceSeries *m_series = nullptr;
    QCustomPlot *m_plot = nullptr;
    QCPGraph *m_memory = nullptr;
    QCPGraph *m_cpu = nullptr;
    QCPItemStraightLine *m_limitLine = nullptr;
    QCPItemText *m_limitLabel = nullptr;
    QCPItemStraightLine *m_failureLine = nullptr;
    QCPItemText *m_emptyLabel = nullptr;
    QLabel *m_summary = nullptr;
    QTimer *m_timer = nullptr;
    QString m_emptyText;
    double m_failureAt = -1;
    bool m_compact = false;
    bool m_dirty = true;
};

} // namespace paddock::console
