#include "app/governance_controller.h"

#include "app/client/console_client.h"
#include "app/client/governance_client.h"
#include "models/console_format.h"
#include "models/cost_breakdown.h"
#include "models/decision_table_model.h"
#include "models/review_change.h"
#include "models/review_queue_model.h"
#include "models/session_table_model.h"
#include "views/cost_view.h"
#include "views/decisions_view.h"
#include "views/override_dialog.h"
#include "views/review_queue_view.h"

#include <QApplication>
#include <QDateTime>
#include <QIcon>
#include <QSystemTrayIcon>
#include <QTimer>

namespace paddock::console {

namespace {
const QString kNoReviews = QStringLiteral("This broker does not offer reviews yet (it answers UNIMPLEMENTED): upgrade "
                                          "paddockd to use the review queue.");
const QString kNoDecisions = QStringLiteral("This broker does not record environment decisions yet (it answers "
                                            "UNIMPLEMENTED): upgrade paddockd.");
const QString kNoCost = QStringLiteral("This broker does not sum costs yet (it answers UNIMPLEMENTED): upgrade paddockd.");
const QString kNoGovernance = QStringLiteral("This console's client has no governance calls.");

QString sentence(const QString &text)
{
    return text.isEmpty() ? text : text.left(1).toUpper() + text.mid(1) + (text.endsWith(u'.') ? QString() : QStringLiteral("."));
}
} // namespace

GovernanceController::GovernanceController(ConsoleClient *client, SessionTableModel *sessions, ReviewQueueView *reviewView,
                                           DecisionsView *decisionsView, CostView *costView, QWidget *dialogParent)
    : QObject(dialogParent)
    , m_client(client)
    , m_governance(client->governance())
    , m_sessions(sessions)
    , m_reviewView(reviewView)
    , m_decisionsView(decisionsView)
    , m_costView(costView)
    , m_dialogParent(dialogParent)
{
    m_reviewModel = new ReviewQueueModel(this);
    m_decisionModel = new DecisionTableModel(this);
    m_breakdown = new CostBreakdown;
    m_reviewView->setModel(m_reviewModel);
    m_decisionsView->setModel(m_decisionModel);

    createTimers();
    wireViews();

    connect(m_client, &ConsoleClient::connectionStateChanged, this,
            [this](ConnectionState state, const QString &) { onConnectionState(state); });

    if (!m_governance) {
        m_reviewView->setQueueStatus(kNoGovernance, true);
        m_decisionsView->setStatus(kNoGovernance, true);
        m_costView->setSpendStatus(kNoGovernance, true);
        return;
    }
    wireGovernanceClient();

    onConnectionState(m_client->connectionState());
}

void GovernanceController::createTimers()
{
    m_reviewTimer = new QTimer(this);
    m_reviewTimer->setInterval(kReviewPollMs);
    connect(m_reviewTimer, &QTimer::timeout, this, &GovernanceController::pollReviews);
    m_pageTimer = new QTimer(this);
    m_pageTimer->setInterval(kPagePollMs);
    connect(m_pageTimer, &QTimer::timeout, this, [this] {
        // Ages move on the wall clock; the rest is asked again.
        m_reviewModel->refreshAges();
        refreshPage();
    });
}

// The views' requests, and the sessions' changes for the review item's context.
void GovernanceController::wireViews()
{
    connect(m_reviewView, &ReviewQueueView::itemRequested, this, [this](const QString &id) {
        const auto fetched = m_fetched.constFind(id);
        if (fetched != m_fetched.constEnd())
            m_reviewView->showItem(*fetched, CallError::none());
        if (m_governance)
            m_governance->getReviewItem(id);   // again even when read before: the broker records the fetch
        updateSessionContext();
    });
    connect(m_reviewView, &ReviewQueueView::decideRequested, this, &GovernanceController::onDecideRequested);
    connect(m_reviewView, &ReviewQueueView::openSessionRequested, this, &GovernanceController::openSessionRequested);
    connect(m_decisionsView, &DecisionsView::filterChanged, this, [this] { refreshPage(); });
    connect(m_decisionsView, &DecisionsView::overrideRequested, this, &GovernanceController::overrideTier);
    connect(m_decisionsView, &DecisionsView::openSessionRequested, this, &GovernanceController::openSessionRequested);
    connect(m_costView, &CostView::queryChanged, this, [this] { refreshPage(); });
    connect(m_sessions, &QAbstractItemModel::dataChanged, this, &GovernanceController::updateSessionContext);
}

// The governance client's answers, into the models and views.
void GovernanceController::wireGovernanceClient()
{
    connect(m_governance, &GovernanceClient::reviewItemsListed, this, &GovernanceController::onReviewItemsListed);
    connect(m_governance, &GovernanceClient::reviewItemArrived, this, &GovernanceController::onReviewItemArrived);
    connect(m_governance, &GovernanceClient::reviewItemsDecided, this, &GovernanceController::onDecided);
    connect(m_governance, &GovernanceClient::approverStatsArrived, m_reviewView, &ReviewQueueView::setApproverStats);
    connect(m_governance, &GovernanceClient::decisionsListed, this,
            [this](const QList<DecisionInfo> &decisions, const CallError &error) {
                if (!error.ok()) {
                    m_decisionsView->setStatus(error.code == CallError::Code::Unsupported ? kNoDecisions : sentence(error.message),
                                               true);
                    return;
                }
                m_decisionModel->setDecisions(decisions);
                int over = 0;
                int under = 0;
                for (const DecisionInfo &d : decisions) {
                    const int allocation = DecisionTableModel::allocation(d);
                    over += allocation > 0;
                    under += allocation < 0;
                }
                m_decisionsView->setStatus(
                    decisions.isEmpty() ? tr("No environment decisions match.")
                                        : tr("%n decision(s), newest first · %1 over-allocated · %2 under-allocated "
                                             "(tinted; the last column names the tier that would have fitted)",
                                             nullptr, int(decisions.size()))
                                              .arg(over)
                                              .arg(under),
                    false);
            });
    connect(m_governance, &GovernanceClient::decisionStatsArrived, this,
            [this](const QString &groupBy, const QList<DecisionStatsLineInfo> &lines, const CallError &error) {
                if (error.ok())
                    m_decisionsView->setStats(groupBy, lines);
            });
    connect(m_governance, &GovernanceClient::costSummaryArrived, this,
            [this](const CostQuery &query, const QList<CostLineInfo> &lines, qint64, const CallError &error) {
                if (!error.ok()) {
                    m_costView->setSpendStatus(error.code == CallError::Code::Unsupported ? kNoCost : sentence(error.message), true);
                    return;
                }
                if (query.groupBy != m_costView->groupBy())
                    return;   // an answer to an earlier choice
                m_costView->setSpendStatus(QString(), false);
                m_breakdown->setLines(lines, query.bucketMs, query.fromUnixMs, query.toUnixMs);
                m_costView->setSpend(*m_breakdown);
            });
    connect(m_governance, &GovernanceClient::budgetsListed, this, [this](const QList<BudgetInfo> &budgets, const CallError &error) {
        if (!error.ok()) {
            m_costView->setBudgetStatus(error.code == CallError::Code::Unsupported ? kNoCost : sentence(error.message), true);
            return;
        }
        m_costView->setBudgetStatus(budgets.isEmpty() ? tr("No agent has a budget (agents' budget_per_day).") : QString(), false);
        m_costView->setBudgets(budgets);
    });
    connect(m_governance, &GovernanceClient::tierOverridden, this,
            [this](const QString &sessionId, const DecisionInfo &decision, const CallError &error) {
                if (!error.ok()) {
                    emit message(sentence(error.message));
                    return;
                }
                emit message(tr("Session %1 moves to tier %2 at its next step (decision %3, chosen by %4).")
                                 .arg(sessionId, decision.chosenTier, decision.id, decision.chooser));
                refreshPage();
            });
}

GovernanceController::~GovernanceController()
{
    delete m_breakdown;
}

int GovernanceController::pendingCount() const { return m_reviewModel->itemCount(); }

void GovernanceController::setTiers(const QList<TierInfo> &tiers)
{
    m_tiers = tiers;
    QStringList names;
    for (const TierInfo &tier : tiers) {
        if (!names.contains(tier.name))
            names << tier.name;
    }
    m_decisionsView->setTiers(names);
}

void GovernanceController::setVisiblePage(const QString &page)
{
    if (page == m_visiblePage)
        return;
    m_visiblePage = page;
    if (page.isEmpty()) {
        m_pageTimer->stop();
        return;
    }
    m_pageTimer->start();
    refreshPage();
}

void GovernanceController::setDecideAllowed(bool allowed, const QString &reason)
{
    m_reviewView->setDecideAllowed(allowed, reason);
}

void GovernanceController::setSelf(const QString &principal)
{
    m_reviewView->setSelf(principal);
}

void GovernanceController::setOverrideAllowed(bool allowed, const QString &reason)
{
    m_overrideAllowed = allowed;
    m_overrideWhyNot = reason;
    m_decisionsView->setOverrideAllowed(allowed, reason);
}

void GovernanceController::refresh()
{
    m_reviewsUnsupported = false;
    pollReviews();
    refreshPage();
}

void GovernanceController::onConnectionState(ConnectionState state)
{
    const bool connected = state == ConnectionState::Connected;
    if (connected == m_connected)
        return;
    m_connected = connected;
    if (!m_governance)
        return;
    if (connected) {
        m_reviewsUnsupported = false;
        m_reviewTimer->setInterval(kReviewPollMs);
        m_reviewTimer->start();
        pollReviews();
        refreshPage();
    } else {
        m_reviewTimer->stop();
        m_listInFlight = false;
        if (state == ConnectionState::Broken)
            m_reviewView->setQueueStatus(tr("Not connected to the broker: the queue below may be out of date."), true);
    }
}

void GovernanceController::pollReviews()
{
    if (!m_governance || !m_connected || m_listInFlight)
        return;
    m_listInFlight = true;
    m_governance->listReviewItems(QStringLiteral("pending"));
}

void GovernanceController::refreshPage()
{
    if (!m_governance || !m_connected)
        return;
    if (m_visiblePage == u"reviews") {
        m_governance->getApproverStats();
    } else if (m_visiblePage == u"decisions") {
        m_governance->listDecisions(m_decisionsView->filter());
        m_governance->getDecisionStats(QStringLiteral("tier"));
        m_governance->getDecisionStats(QStringLiteral("chooser"));
    } else if (m_visiblePage == u"cost") {
        m_governance->getCostSummary(m_costView->query(QDateTime::currentMSecsSinceEpoch()));
        m_governance->listBudgets();
    }
}

void GovernanceController::onReviewItemsListed(const QList<ReviewItemInfo> &items, const CallError &error)
{
    m_listInFlight = false;
    if (!error.ok()) {
        if (error.code == CallError::Code::Unsupported) {
            m_reviewsUnsupported = true;
            m_reviewTimer->setInterval(kUnsupportedPollMs);
            m_reviewView->setQueueStatus(kNoReviews, true);
        } else {
            m_reviewView->setQueueStatus(sentence(error.message), true);
        }
        return;
    }
    if (m_reviewsUnsupported || m_reviewTimer->interval() != kReviewPollMs) {
        m_reviewsUnsupported = false;
        m_reviewTimer->setInterval(kReviewPollMs);
    }
    const int before = m_reviewModel->itemCount();
    const QList<ReviewItemInfo> fresh = m_reviewModel->setItems(items);
    // Keep only the reads of items still pending.
    for (auto it = m_fetched.begin(); it != m_fetched.end();) {
        if (m_reviewModel->rowOf(it.key()) < 0)
            it = m_fetched.erase(it);
        else
            ++it;
    }
    m_reviewView->setQueueStatus(items.isEmpty() ? tr("Nothing waits for review.")
                                                 : tr("%n item(s) pending · %1 in all · oldest first · j/k move, a "
                                                      "approve, r reject",
                                                      nullptr, int(items.size()))
                                                       .arg(formatCost(m_reviewModel->totalCostMicros())),
                                 false);
    if (before != m_reviewModel->itemCount())
        emit pendingCountChanged(m_reviewModel->itemCount());
    if (!fresh.isEmpty())
        notifyArrivals(fresh);
}

void GovernanceController::notifyArrivals(const QList<ReviewItemInfo> &fresh)
{
    const ReviewItemInfo &first = fresh.first();
    const QString title = tr("%n new review item(s)", nullptr, int(fresh.size()));
    const QString body = fresh.size() == 1 ? tr("%1 (%2 risk) from %3: %4")
                                                 .arg(reviewKindLabel(first.kind), first.risk, first.requester, first.summary)
                                           : tr("%1 and %2 more").arg(first.summary).arg(fresh.size() - 1);
    if (QSystemTrayIcon::isSystemTrayAvailable()) {
        if (!m_tray) {
            m_tray = new QSystemTrayIcon(QApplication::windowIcon(), this);
            m_tray->setToolTip(tr("Paddock"));
            m_tray->show();
        }
        m_tray->showMessage(title, body, QSystemTrayIcon::Information, 8000);
    }
    emit message(title + QStringLiteral(": ") + body);
    emit itemsArrived(int(fresh.size()));
}

void GovernanceController::onReviewItemArrived(const ReviewItemInfo &item, const CallError &error)
{
    if (error.ok())
        m_fetched.insert(item.id, item);
    m_reviewView->showItem(item, error);
    updateSessionContext();
    if (m_pending.active && m_pending.waitingFor.removeAll(item.id) > 0) {
        if (!error.ok()) {
            const PendingDecision failed = std::exchange(m_pending, {});
            m_reviewView->decisionFinished(failed.approve, failed.ids, error);
            return;
        }
        if (m_pending.waitingFor.isEmpty())
            sendPendingDecision();
    }
}

void GovernanceController::updateSessionContext()
{
    const QString current = m_reviewView->currentItemId();
    const int itemRow = m_reviewModel->rowOf(current);
    if (itemRow < 0)
        return;
    const QString sessionId = m_reviewModel->itemAt(itemRow).sessionId;
    const int row = m_sessions->rowOf(sessionId);
    if (row >= 0) {
        m_reviewView->setSessionContext(m_sessions->sessionAt(row), true);
    } else {
        SessionInfo unknown;
        unknown.id = sessionId;
        m_reviewView->setSessionContext(unknown, false);
    }
}

void GovernanceController::onDecideRequested(const QStringList &ids, bool approve, const QString &reason)
{
    if (!m_governance) {
        m_reviewView->decisionFinished(approve, ids, {CallError::Code::Unavailable, kNoGovernance});
        return;
    }
    m_pending = {ids, approve, reason, {}, true};
    // An approval names the hash of the change that was read: read the ones not read yet first.
    if (approve) {
        for (const QString &id : ids) {
            if (!m_fetched.contains(id))
                m_pending.waitingFor << id;
        }
        for (const QString &id : std::as_const(m_pending.waitingFor))
            m_governance->getReviewItem(id);
        if (!m_pending.waitingFor.isEmpty()) {
            emit message(tr("Reading %n change(s) before approving…", nullptr, int(m_pending.waitingFor.size())));
            return;
        }
    }
    sendPendingDecision();
}

void GovernanceController::sendPendingDecision()
{
    const PendingDecision decision = std::exchange(m_pending, {});
    QHash<QString, QString> hashes;
    for (const QString &id : decision.ids) {
        const auto fetched = m_fetched.constFind(id);
        if (fetched != m_fetched.constEnd() && !fetched->changeHash.isEmpty())
            hashes.insert(id, fetched->changeHash);
    }
    m_governance->decideReviewItems(decision.ids, decision.approve, decision.reason, hashes);
}

void GovernanceController::onDecided(const QStringList &ids, bool approve, const QList<ReviewItemInfo> &items,
                                     const CallError &error)
{
    Q_UNUSED(items);
    m_reviewView->decisionFinished(approve, ids, error);
    if (!error.ok()) {
        emit message(sentence(error.message));
        return;
    }
    m_reviewModel->removeItems(ids);
    for (const QString &id : ids)
        m_fetched.remove(id);
    emit pendingCountChanged(m_reviewModel->itemCount());
    emit message(approve ? tr("Approved %1: the change is applied and the session resumes.").arg(ids.join(QStringLiteral(", ")))
                         : tr("Rejected %1: the session resumes with the rejection.").arg(ids.join(QStringLiteral(", "))));
    if (m_governance)
        m_governance->getApproverStats();
}

void GovernanceController::overrideTier(const QString &sessionId)
{
    if (sessionId.isEmpty())
        return;
    if (!m_overrideAllowed) {
        emit message(m_overrideWhyNot);
        return;
    }
    if (!m_governance) {
        emit message(kNoGovernance);
        return;
    }
    const int row = m_sessions->rowOf(sessionId);
    SessionInfo session;
    session.id = sessionId;
    if (row >= 0)
        session = m_sessions->sessionAt(row);
    if (isTerminal(session.status)) {
        emit message(tr("Session %1 is %2: only a live session can move to another tier.")
                         .arg(sessionId, statusLabel(session.status).toLower()));
        return;
    }
    OverrideDialog dialog(session, m_tiers, m_dialogParent);
    if (dialog.exec() != QDialog::Accepted)
        return;
    m_governance->overrideTier(sessionId, dialog.tier(), dialog.reason());
    emit message(tr("Moving session %1 to tier %2…").arg(sessionId, dialog.tier()));
}

} // namespace paddock::console
