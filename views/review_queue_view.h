#pragma once
// The review queue, for approvers: pending items (kind, risk, requester, age, impact, cost); the
// selected item's change (a unified diff highlighted, records as a table), justification, policy
// verdict and its session's context; approve or reject with a reason; several items of one kind
// decided at once behind a confirmation that summarises the whole selection; per-approver stats.
// Keyboard on the table: j/k move, a approves, r rejects.
//
// Threads: GUI thread only. The view does no I/O: it emits what the user asked for (an item to
// read, a decision) and the window answers through showItem(), decisionFinished() and the model.

#include "models/console_types.h"
#include "models/governance_types.h"

#include <QSyntaxHighlighter>
#include <QWidget>

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSortFilterProxyModel;
class QSplitter;
class QStackedWidget;
class QTableView;
class QTableWidget;

namespace paddock::console {

class ReviewQueueModel;

// Colours a unified diff by line class (models/review_change.h): added, removed, hunk, headers.
class DiffHighlighter : public QSyntaxHighlighter {
    Q_OBJECT

public:
    using QSyntaxHighlighter::QSyntaxHighlighter;

protected:
    void highlightBlock(const QString &text) override;
};

class ReviewQueueView : public QWidget {
    Q_OBJECT

public:
    explicit ReviewQueueView(QWidget *parent = nullptr);

    void setModel(ReviewQueueModel *model);

    // The full item (GetReviewItem's answer) for the detail pane; ignored unless it is the current one.
    void showItem(const ReviewItemInfo &item, const CallError &error);
    // The current item's session (goal, agent, tier, cost so far); known false when the console does
    // not have it.
    void setSessionContext(const SessionInfo &session, bool known);
    void setApproverStats(const QList<ApproverStatInfo> &stats, const CallError &error);
    // A line over the table: why the queue is empty or stale (an older broker, no permission, ...).
    void setQueueStatus(const QString &text, bool problem);
    // Whether the caller's role may decide (AUTH's permissions); reason says why not.
    void setDecideAllowed(bool allowed, const QString &reason);
    // Who the broker knows the caller as: nobody approves their own request, so Approve is off
    // for items this principal requested (rejecting one's own stays possible). Empty: unknown.
    void setSelf(const QString &principal);
    // The answer to decideRequested: clears the reason on success, shows the error otherwise.
    void decisionFinished(bool approve, const QStringList &ids, const CallError &error);

    QString currentItemId() const;
    QStringList selectedItemIds() const;
    QList<ReviewItemInfo> selectedItems() const;
    void selectItems(const QStringList &ids);

    QTableView *tableView() const { return m_table; }
    QLineEdit *reasonEdit() const { return m_reason; }
    QPushButton *approveButton() const { return m_approve; }
    QPushButton *rejectButton() const { return m_reject; }
    QPlainTextEdit *changeView() const { return m_change; }
    QTableWidget *recordsTable() const { return m_records; }
    QTableWidget *statsTable() const { return m_stats; }
    QString detailText() const;      // header, justification, verdict and context, for tests
    QString queueStatusText() const;

public slots:
    void approveSelected();
    void rejectSelected();

signals:
    // The user made id the current item: the window fetches its full change (GetReviewItem).
    void itemRequested(const QString &id);
    // After the confirmation (several items) or directly (one).
    void decideRequested(const QStringList &ids, bool approve, const QString &reason);
    void openSessionRequested(const QString &sessionId);

protected:
    bool eventFilter(QObject *watched, QEvent *event) override;

private:
    // The constructor's widgets, in the order it creates them.
    void createQueueTable();
    QWidget *createDetailPane();
    QWidget *createQueueSide();
    void onCurrentChanged();
    void updateButtons();
    void showDetail(const ReviewItemInfo &item);
    void decide(bool approve);
    void moveCurrent(int delta);

    ReviewQueueModel *m_model = nullptr;
    QSortFilterProxyModel *m_proxy = nullptr;
    QLabel *m_queueStatus = nullptr;
    QTableView *m_table = nullptr;
    QLabel *m_header = nullptr;
    QLabel *m_context = nullptr;
    QLabel *m_justification = nullptr;
    QLabel *m_verdict = nullptr;
    QLabel *m_changeStatus = nullptr;
    QStackedWidget *m_changePages = nullptr;
    QPlainTextEdit *m_change = nullptr;
    QTableWidget *m_records = nullptr;
    DiffHighlighter *m_highlighter = nullptr;
    QLineEdit *m_reason = nullptr;
    QPushButton *m_approve = nullptr;
    QPushButton *m_reject = nullptr;
    QLabel *m_decideHint = nullptr;
    QTableWidget *m_stats = nullptr;
    QLabel *m_statsStatus = nullptr;

    ReviewItemInfo m_shown;           // the current item as last fetched (with its change)
    QString m_contextSessionId;
    bool m_decideAllowed = true;
    QString m_notAllowedReason;
    QString m_self;
    bool m_ownRequestSelected = false;   // of the last updateButtons
    bool m_deciding = false;
};

} // namespace paddock::console
