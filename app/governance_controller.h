#pragma once
// Wires the governance views (Review queue, Decisions, Cost, the override dialog) to the client's
// GovernanceClient: polls the review queue every 2 s while connected (and says when new items
// arrive: a tray message where there is a system tray, else the status bar, plus a count on the
// view's navigation entry), fetches the full change of the item being read, sends decisions with
// the change hashes that were read, refreshes decisions and cost while their page is shown, and
// runs tier overrides.
//
// Threads: GUI thread only. The client answers on the GUI thread; nothing here blocks.
//
// Known limits: ListReviewItems is polled (the proto has no watch of the queue); a broker that
// answers UNIMPLEMENTED is asked again every 30 s, so an upgrade is noticed without a restart.

#include "models/console_types.h"
#include "models/governance_types.h"

#include <QHash>
#include <QObject>
#include <QPointer>

class QSystemTrayIcon;
class QTimer;
class QWidget;

namespace paddock::console {

class ConsoleClient;
class CostBreakdown;
class CostView;
class DecisionTableModel;
class DecisionsView;
class GovernanceClient;
class ReviewQueueModel;
class ReviewQueueView;
class SessionTableModel;

class GovernanceController : public QObject {
    Q_OBJECT

public:
    static constexpr int kReviewPollMs = 2000;
    static constexpr int kUnsupportedPollMs = 30'000;
    static constexpr int kPagePollMs = 5000;

    // dialogParent: where the override dialog opens. The views and models must outlive this.
    GovernanceController(ConsoleClient *client, SessionTableModel *sessions, ReviewQueueView *reviewView,
                         DecisionsView *decisionsView, CostView *costView, QWidget *dialogParent);
    ~GovernanceController() override;

    ReviewQueueModel *reviewModel() const { return m_reviewModel; }
    DecisionTableModel *decisionModel() const { return m_decisionModel; }
    const CostBreakdown &costBreakdown() const { return *m_breakdown; }
    int pendingCount() const;
    // Whether the client has governance calls at all (the fake of the window tests has none).
    bool available() const { return m_governance != nullptr; }

    // The tiers the healthy pools offer (for the override dialog and the decisions filter).
    void setTiers(const QList<TierInfo> &tiers);
    // Which governance page is shown (they refresh while shown): none, "reviews", "decisions", "cost".
    void setVisiblePage(const QString &page);
    // Whether the caller may decide reviews / override tiers, and why not (AUTH's permissions).
    void setDecideAllowed(bool allowed, const QString &reason);
    // Who the broker knows the caller as (empty: unknown): Approve is off for their own requests.
    void setSelf(const QString &principal);
    void setOverrideAllowed(bool allowed, const QString &reason);
    bool overrideAllowed() const { return m_overrideAllowed; }
    QString overrideWhyNot() const { return m_overrideWhyNot; }

    // Asks again for whatever the shown page shows (F5), and for the queue.
    void refresh();

    // Opens the override dialog for a session; on OK sends OverrideTier.
    void overrideTier(const QString &sessionId);

signals:
    // For the status bar.
    void message(const QString &text);
    // The number of pending items changed (the navigation entry shows it).
    void pendingCountChanged(int count);
    // New items arrived since the last poll (after the first).
    void itemsArrived(int count);
    void openSessionRequested(const QString &sessionId);

private:
    // The constructor's set-up, in its order; wireGovernanceClient() only when the client has the calls.
    void createTimers();
    void wireViews();
    void wireGovernanceClient();
    void onConnectionState(ConnectionState state);
    void pollReviews();
    void refreshPage();
    void onReviewItemsListed(const QList<ReviewItemInfo> &items, const CallError &error);
    void onReviewItemArrived(const ReviewItemInfo &item, const CallError &error);
    void onDecideRequested(const QStringList &ids, bool approve, const QString &reason);
    void sendPendingDecision();
    void onDecided(const QStringList &ids, bool approve, const QList<ReviewItemInfo> &items, const CallError &error);
    void notifyArrivals(const QList<ReviewItemInfo> &fresh);
    void updateSessionContext();

    ConsoleClient *m_client;
    GovernanceClient *m_governance = nullptr;
    SessionTableModel *m_sessions;
    ReviewQueueView *m_reviewView;
    DecisionsView *m_decisionsView;
    CostView *m_costView;
    QPointer<QWidget> m_dialogParent;

    ReviewQueueModel *m_reviewModel = nullptr;
    DecisionTableModel *m_decisionModel = nullptr;
    CostBreakdown *m_breakdown = nullptr;
    QTimer *m_reviewTimer = nullptr;
    QTimer *m_pageTimer = nullptr;
    QSystemTrayIcon *m_tray = nullptr;

    QList<TierInfo> m_tiers;
    QString m_visiblePage;
    bool m_connected = false;
    bool m_listInFlight = false;
    bool m_reviewsUnsupported = false;
    QHash<QString, ReviewItemInfo> m_fetched;   // full items the approver read (with change and hash)

    struct PendingDecision {
        QStringList ids;
        bool approve = false;
        QString reason;
        QStringList waitingFor;   // items being fetched before an approval can name their hashes
        bool active = false;
    } m_pending;

    bool m_overrideAllowed = true;
    QString m_overrideWhyNot;
};

} // namespace paddock::console
