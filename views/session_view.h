#pragma once
// One session: its header (goal, status, agent, model, cost), the trace timeline with expandable
// details (tool output, model text), the sandbox card and the cost-over-time plot.
//
// Threads: GUI thread only. The window feeds TraceModel and CostSeries from the client; this view
// only reads them (the plot polls the series' dirty flag on its timer).

#include "models/console_types.h"

#include <QWidget>

class QLabel;
class QLayout;
class QModelIndex;
class QPlainTextEdit;
class QSplitter;
class QToolBar;
class QToolButton;

namespace paddock::console {

class CostPlot;
class CostSeries;
class SandboxCard;
class TraceModel;
class TraceView;

class SessionView : public QWidget {
    Q_OBJECT

public:
    explicit SessionView(QWidget *parent = nullptr);

    void setModels(TraceModel *trace, CostSeries *cost);

    // A new session: resets the header, the card and the details. The trace model is reset by
    // the caller (TraceModel::setSession).
    void showSession(const SessionInfo &session);
    void updateSession(const SessionInfo &session);
    QString sessionId() const { return m_session.id; }
    // The events the window just appended to the trace (for the sandbox card).
    void addEvents(const QList<EventRecord> &events);
    void setStale(bool stale);

    // Expanding a row shows its details (a tool call with its result's output, a model response's
    // text) in the pane under the trace.
    bool isDetailsExpanded() const;
    void setDetailsExpanded(bool expanded);
    QString detailsText() const;

    QByteArray saveLayout() const;
    void restoreLayout(const QByteArray &state);

    QToolBar *toolBar() const { return m_toolBar; }
    TraceView *traceView() const { return m_trace; }
    CostPlot *costPlot() const { return m_costPlot; }
    // "Model $0.0120 · sandbox $0.0040 · budget $1.00 (2%)": the session's cost split.
    QString costSplitText() const;
    SandboxCard *sandboxCard() const { return m_card; }

protected:
    void changeEvent(QEvent *event) override;
    bool eventFilter(QObject *watched, QEvent *event) override;

private:
    // The constructor's widgets, in the order it creates them.
    QLayout *createHeaderRow();
    void createTraceSplitter();
    QWidget *createSidePane();
    void refreshHeader();
    void showDetailsFor(const QModelIndex &index);
    QString detailsFor(int row) const;
    void toggleDetails(const QModelIndex &index);

    TraceModel *m_traceModel = nullptr;
    SessionInfo m_session;
    bool m_stale = false;

    QLabel *m_title = nullptr;
    QLabel *m_status = nullptr;
    QLabel *m_meta = nullptr;
    QLabel *m_reason = nullptr;
    QLabel *m_staleBanner = nullptr;
    QToolBar *m_toolBar = nullptr;
    QToolButton *m_followButton = nullptr;
    QSplitter *m_mainSplitter = nullptr;
    QSplitter *m_traceSplitter = nullptr;
    TraceView *m_trace = nullptr;
    QPlainTextEdit *m_details = nullptr;
    SandboxCard *m_card = nullptr;
    CostPlot *m_costPlot = nullptr;
    QLabel *m_costSplit = nullptr;
};

} // namespace paddock::console
