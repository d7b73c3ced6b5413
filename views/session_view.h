#pragma once
// One session: its header (goal, status, agent, model, cost), the span timeline over the trace
// table with expandable details (tool output, model text), the sandbox card and the cost-over-time
// plot. The trace folds cost and checkpoint events into their step's row; "Every event" shows each
// as a row of its own.
//
// The timeline and the table select together: a span clicked selects its rows (from the event that
// opened it to the one that ended it, or the newest while it runs); the table's current row selects
// the span it belongs to (SpanModel::spanAtSeq) and brings it into view.
//
// The details pane follows its row while it grows: a running command's output, a model's answer
// as it streams, a call's result when it arrives (at most every 100 ms, kept scrolled to its end
// when it was there).
//
// Threads: GUI thread only. The window feeds TraceModel and CostSeries from the client; this view
// only reads them (the plot polls the series' dirty flag on its timer). The SpanModel is the
// view's own: it follows the TraceModel given to setModels.

#include "models/console_types.h"

#include <QWidget>

class QCheckBox;
class QLabel;
class QLayout;
class QModelIndex;
class QPlainTextEdit;
class QSplitter;
class QTimer;
class QToolBar;
class QToolButton;

namespace paddock::console {

class CostPlot;
class CostSeries;
class SandboxCard;
class SpanModel;
class SpanTimeline;
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
    // "Every event": checked shows cost and checkpoint events as rows; unchecked folds them.
    QCheckBox *everyEventBox() const { return m_everyEvent; }
    TraceView *traceView() const { return m_trace; }
    SpanTimeline *spanTimeline() const { return m_timeline; }
    SpanModel *spanModel() const { return m_spanModel; }
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
    // The shown row changed or rows came: its details again, soon (m_detailsRefresh).
    void refreshDetailsSoon();
    void refreshDetails();
    // What the pane shows for a row; notes whether a later row may still change it.
    QString detailsFor(int row);
    void toggleDetails(const QModelIndex &index);
    void showEveryEvent(bool every);
    // Selection both ways between the timeline and the table.
    void selectRowsOfSpan(int id);
    void selectSpanOfRow(const QModelIndex &current);

    TraceModel *m_traceModel = nullptr;
    SpanModel *m_spanModel = nullptr;
    SessionInfo m_session;
    bool m_syncingSelection = false;
    bool m_stale = false;

    QLabel *m_title = nullptr;
    QLabel *m_status = nullptr;
    QLabel *m_meta = nullptr;
    QLabel *m_reason = nullptr;
    QLabel *m_staleBanner = nullptr;
    QToolBar *m_toolBar = nullptr;
    QToolButton *m_followButton = nullptr;
    QCheckBox *m_everyEvent = nullptr;
    QSplitter *m_mainSplitter = nullptr;
    QSplitter *m_traceSplitter = nullptr;
    SpanTimeline *m_timeline = nullptr;
    TraceView *m_trace = nullptr;
    QPlainTextEdit *m_details = nullptr;
    QTimer *m_detailsRefresh = nullptr;
    int m_detailsRow = -1;                // the trace row the pane shows
    bool m_detailsAwaitResult = false;    // it is a tool call whose result has not come yet
    SandboxCard *m_card = nullptr;
    CostPlot *m_costPlot = nullptr;
    QLabel *m_costSplit = nullptr;
};

} // namespace paddock::console
