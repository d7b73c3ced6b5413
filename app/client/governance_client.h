#pragma once
// The console's governance calls (docs/governance.md): the review queue, environment decisions and
// tier overrides, cost and budgets. GrpcGovernanceClient (grpc_governance_client.h) is the real one;
// ConsoleClient::governance() hands it out (nullptr for a client without one, e.g. the fake).
//
// Threads: lives on the GUI thread; call every method there. Each call is answered by exactly one
// signal, emitted on the GUI thread, with a CallError that says what went wrong (an UNIMPLEMENTED
// answer is CallError::Code::Unsupported: an older broker that does not offer this yet).

#include "models/governance_types.h"

#include <QHash>
#include <QObject>

namespace paddock::console {

class GovernanceClient : public QObject {
    Q_OBJECT

public:
    using QObject::QObject;
    ~GovernanceClient() override = default;

    // Review queue. state: "pending" (the default) or "all". Listed items carry change_preview only.
    virtual void listReviewItems(const QString &state) = 0;
    // The full change; the broker records that the caller fetched it (required before a high-risk
    // approval).
    virtual void getReviewItem(const QString &id) = 0;
    // All of one kind; changeHashes: id -> the change_hash fetched (required to approve).
    virtual void decideReviewItems(const QStringList &ids, bool approve, const QString &reason,
                                   const QHash<QString, QString> &changeHashes) = 0;
    virtual void getApproverStats() = 0;

    // Environment decisions.
    virtual void listDecisions(const DecisionFilter &filter) = 0;
    // groupBy: tier, agent or chooser.
    virtual void getDecisionStats(const QString &groupBy) = 0;
    virtual void overrideTier(const QString &sessionId, const QString &tier, const QString &reason) = 0;

    // Cost and budgets.
    virtual void getCostSummary(const CostQuery &query) = 0;
    virtual void listBudgets() = 0;

signals:
    void reviewItemsListed(const QList<paddock::console::ReviewItemInfo> &items, const paddock::console::CallError &error);
    // On error, item carries only the id asked for.
    void reviewItemArrived(const paddock::console::ReviewItemInfo &item, const paddock::console::CallError &error);
    void reviewItemsDecided(const QStringList &ids, bool approve, const QList<paddock::console::ReviewItemInfo> &items,
                            const paddock::console::CallError &error);
    void approverStatsArrived(const QList<paddock::console::ApproverStatInfo> &stats, const paddock::console::CallError &error);
    void decisionsListed(const QList<paddock::console::DecisionInfo> &decisions, const paddock::console::CallError &error);
    void decisionStatsArrived(const QString &groupBy, const QList<paddock::console::DecisionStatsLineInfo> &lines,
                              const paddock::console::CallError &error);
    void tierOverridden(const QString &sessionId, const paddock::console::DecisionInfo &decision,
                        const paddock::console::CallError &error);
    void costSummaryArrived(const paddock::console::CostQuery &query, const QList<paddock::console::CostLineInfo> &lines,
                            qint64 totalMicros, const paddock::console::CallError &error);
    void budgetsListed(const QList<paddock::console::BudgetInfo> &budgets, const paddock::console::CallError &error);
};

} // namespace paddock::console
