#pragma once
// GovernanceService (proto/paddock/v1/governance.proto; docs/governance.md): agents and their
// records, environment (tier) decisions and a human's override, the review queue, cost sums and
// budgets.
//
// Threads: methods run on gRPC's callback threads and do their (short) store work inline.

#include "broker/server/service_context.h"

#include "paddock/v1/governance.grpc.pb.h"

namespace paddock::server {

class GovernanceService final : public v1::GovernanceService::CallbackService {
public:
    explicit GovernanceService(ServiceContext &context) : m_context(context) {}

    // Agents: durable identities with tier bounds, budgets and records.
    grpc::ServerUnaryReactor *CreateAgent(grpc::CallbackServerContext *ctx, const v1::Agent *req, v1::Agent *resp) override;
    grpc::ServerUnaryReactor *GetAgent(grpc::CallbackServerContext *ctx, const v1::GetAgentRequest *req,
                                       v1::Agent *resp) override;
    grpc::ServerUnaryReactor *ListAgents(grpc::CallbackServerContext *ctx, const v1::ListAgentsRequest *req,
                                         v1::ListAgentsResponse *resp) override;
    grpc::ServerUnaryReactor *UpdateAgent(grpc::CallbackServerContext *ctx, const v1::Agent *req, v1::Agent *resp) override;

    // Environment decisions, and a human moving a live session to another tier at its next step
    // boundary (tier.override; the engine snapshots, claims, restores and records sandbox.moved).
    grpc::ServerUnaryReactor *ListDecisions(grpc::CallbackServerContext *ctx, const v1::ListDecisionsRequest *req,
                                            v1::ListDecisionsResponse *resp) override;
    grpc::ServerUnaryReactor *GetDecisionStats(grpc::CallbackServerContext *ctx, const v1::GetDecisionStatsRequest *req,
                                               v1::DecisionStats *resp) override;
    grpc::ServerUnaryReactor *OverrideTier(grpc::CallbackServerContext *context, const v1::OverrideTierRequest *request,
                                           v1::EnvironmentDecision *response) override;

    // The review queue.
    grpc::ServerUnaryReactor *ListReviewItems(grpc::CallbackServerContext *ctx, const v1::ListReviewItemsRequest *req,
                                              v1::ListReviewItemsResponse *resp) override;
    grpc::ServerUnaryReactor *GetReviewItem(grpc::CallbackServerContext *ctx, const v1::GetReviewItemRequest *req,
                                            v1::ReviewItem *resp) override;
    grpc::ServerUnaryReactor *DecideReviewItems(grpc::CallbackServerContext *ctx, const v1::DecideReviewItemsRequest *req,
                                                v1::DecideReviewItemsResponse *resp) override;
    grpc::ServerUnaryReactor *GetApproverStats(grpc::CallbackServerContext *ctx, const v1::GetApproverStatsRequest *req,
                                               v1::ApproverStats *resp) override;

    // Cost.
    grpc::ServerUnaryReactor *GetCostSummary(grpc::CallbackServerContext *ctx, const v1::GetCostSummaryRequest *req,
                                             v1::CostSummary *resp) override;
    grpc::ServerUnaryReactor *ListBudgets(grpc::CallbackServerContext *ctx, const v1::ListBudgetsRequest *req,
                                          v1::ListBudgetsResponse *resp) override;

private:
    // An agent from the request, validated; FailedPrecondition when the broker keeps no agents.
    Result<agents::Agent> agentFromProto(const v1::Agent &request) const;
    Result<policy::TierDecision> overrideTier(const v1::OverrideTierRequest &request, Access::Call &call);

    ServiceContext &m_context;
};

} // namespace paddock::server
