#pragma once
// GovernanceClient over gRPC: unary callback calls on the console client's channel (so they share
// its address and credentials), each answered on the GUI thread.
//
// Threads: lives on the GUI thread, like the ConsoleClient that owns it. A call's callback runs on
// gRPC's thread and only converts the response to the console's value types and queues one answer
// to the GUI thread; nothing here blocks the GUI thread except the destructor, which cancels what
// is in flight and waits (bounded) for gRPC to finish it.

#include "app/client/governance_client.h"

#include <functional>
#include <memory>

namespace grpc {
class Channel;
}

namespace paddock::console {

class GrpcGovernanceClient final : public GovernanceClient {
    Q_OBJECT

public:
    // channel: the current channel to the broker, or nullptr while not connected (calls then answer
    // at once with a "not connected" error).
    explicit GrpcGovernanceClient(std::function<std::shared_ptr<grpc::Channel>()> channel, QObject *parent = nullptr);
    ~GrpcGovernanceClient() override;

    void listReviewItems(const QString &state) override;
    void getReviewItem(const QString &id) override;
    void decideReviewItems(const QStringList &ids, bool approve, const QString &reason,
                           const QHash<QString, QString> &changeHashes) override;
    void getApproverStats() override;
    void listDecisions(const DecisionFilter &filter) override;
    void getDecisionStats(const QString &groupBy) override;
    void overrideTier(const QString &sessionId, const QString &tier, const QString &reason) override;
    void getCostSummary(const CostQuery &query) override;
    void listBudgets() override;

private:
    class Private;
    std::unique_ptr<Private> d;
};

} // namespace paddock::console
