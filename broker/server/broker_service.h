#pragma once
// The BrokerService gRPC API: sessions, their logs and the pools. Translates between protobuf and
// the broker's own types and validates every request before it reaches the store.
//
// Threads: methods run on gRPC's callback threads. Unary calls do their (short) store work inline;
// the streaming calls hand off to the StreamHub's pump.

#include "broker/auth/principals.h"
#include "broker/cost/budgets.h"
#include "broker/engine/environment_decider.h"
#include "broker/engine/step_engine.h"
#include "broker/review/review_desk.h"
#include "broker/store/cost_index.h"
#include "broker/pools/pool_set.h"
#include "broker/secrets/secret_store.h"
#include "broker/server/access.h"
#include "broker/server/sample_watch.h"
#include "broker/server/stream_hub.h"
#include "broker/store/decision_store.h"
#include "broker/store/event_store.h"

#include "paddock/v1/broker.grpc.pb.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace paddock::server {

class OperatorService;

struct BrokerServiceOptions {
    std::filesystem::path playbookDir;
    std::string defaultTier = "lite";
    std::vector<std::string> modelNames;      // for messages listing what is configured
    secrets::SecretStore *secrets = nullptr;  // nullptr: no secrets; grants are refused, the RPCs say why
    int64_t debugShellIdleTimeoutMs = 600000; // a debug shell unused this long is closed
    // Who may call (broker/auth/principals.h); nullptr: the embedded default (this process's user
    // is admin on the unix socket).
    std::shared_ptr<const auth::PrincipalMap> principals;
    // Cost and the review queue (review_service.cpp); nullptr: those RPCs answer UNAVAILABLE.
    store::CostQueries *costs = nullptr;
    review::ReviewDesk *reviews = nullptr;
    const cost::BudgetSource *budgets = nullptr;
    // Agents, tier rules and the tier catalogue (docs/governance.md). nullptr: only the built-in
    // agent, every session on the submitted or default tier, the agent RPCs answer FAILED_PRECONDITION.
    const engine::EnvironmentDecider *decider = nullptr;
    store::DecisionStore *decisions = nullptr;   // ListDecisions, GetDecisionStats
};

class BrokerService final : public v1::BrokerService::CallbackService {
public:
    BrokerService(store::EventStore &store, StreamHub &hub, const pools::PoolSet &pools,
                  engine::ModelLookup models, BrokerServiceOptions options);
    ~BrokerService() override;

    grpc::ServerUnaryReactor *SubmitSession(grpc::CallbackServerContext *context,
                                            const v1::SubmitSessionRequest *request, v1::Session *response) override;
    grpc::ServerUnaryReactor *GetSession(grpc::CallbackServerContext *context, const v1::GetSessionRequest *request,
                                         v1::Session *response) override;
    grpc::ServerUnaryReactor *ListSessions(grpc::CallbackServerContext *context,
                                           const v1::ListSessionsRequest *request,
                                           v1::ListSessionsResponse *response) override;
    grpc::ServerWriteReactor<v1::SessionChanges> *WatchSessions(grpc::CallbackServerContext *context,
                                                                const v1::WatchSessionsRequest *request) override;
    grpc::ServerWriteReactor<v1::EventBatch> *StreamEvents(grpc::CallbackServerContext *context,
                                                           const v1::StreamEventsRequest *request) override;
    grpc::ServerUnaryReactor *CancelSession(grpc::CallbackServerContext *context,
                                            const v1::SessionActionRequest *request, v1::Session *response) override;
    grpc::ServerUnaryReactor *PauseSession(grpc::CallbackServerContext *context,
                                           const v1::SessionActionRequest *request, v1::Session *response) override;
    grpc::ServerUnaryReactor *ResumeSession(grpc::CallbackServerContext *context,
                                            const v1::SessionActionRequest *request, v1::Session *response) override;
    // Moves a live session to another tier at its next step boundary (tier.override; the engine
    // snapshots, claims, restores and records sandbox.moved).
    grpc::ServerUnaryReactor *OverrideTier(grpc::CallbackServerContext *context, const v1::OverrideTierRequest *request,
                                           v1::EnvironmentDecision *response) override;
    grpc::ServerUnaryReactor *ListPools(grpc::CallbackServerContext *context, const v1::ListPoolsRequest *request,
                                        v1::ListPoolsResponse *response) override;

    // Agents and environment decisions (governance_service.cpp; docs/governance.md).
    grpc::ServerUnaryReactor *CreateAgent(grpc::CallbackServerContext *ctx, const v1::Agent *req, v1::Agent *resp) override;
    grpc::ServerUnaryReactor *GetAgent(grpc::CallbackServerContext *ctx, const v1::GetAgentRequest *req,
                                       v1::Agent *resp) override;
    grpc::ServerUnaryReactor *ListAgents(grpc::CallbackServerContext *ctx, const v1::ListAgentsRequest *req,
                                         v1::ListAgentsResponse *resp) override;
    grpc::ServerUnaryReactor *UpdateAgent(grpc::CallbackServerContext *ctx, const v1::Agent *req, v1::Agent *resp) override;
    grpc::ServerUnaryReactor *ListDecisions(grpc::CallbackServerContext *ctx, const v1::ListDecisionsRequest *req,
                                            v1::ListDecisionsResponse *resp) override;
    grpc::ServerUnaryReactor *GetDecisionStats(grpc::CallbackServerContext *ctx, const v1::GetDecisionStatsRequest *req,
                                               v1::DecisionStats *resp) override;
    grpc::ServerUnaryReactor *SetSecret(grpc::CallbackServerContext *context, const v1::SetSecretRequest *request,
                                        v1::SetSecretResponse *response) override;
    grpc::ServerUnaryReactor *ListSecrets(grpc::CallbackServerContext *context, const v1::ListSecretsRequest *request,
                                          v1::ListSecretsResponse *response) override;
    grpc::ServerUnaryReactor *DeleteSecret(grpc::CallbackServerContext *context,
                                           const v1::DeleteSecretRequest *request,
                                           v1::DeleteSecretResponse *response) override;

    // Operators: post-mortems, snapshot files and debug shells (operator_service.cpp).
    grpc::ServerUnaryReactor *ListPostMortems(grpc::CallbackServerContext *ctx, const v1::ListPoolPostMortemsRequest *req,
                                              v1::ListPoolPostMortemsResponse *resp) override;
    grpc::ServerUnaryReactor *GetPostMortem(grpc::CallbackServerContext *ctx, const v1::GetPoolPostMortemRequest *req,
                                            v1::PostMortem *resp) override;
    grpc::ServerUnaryReactor *ListSnapshotFiles(grpc::CallbackServerContext *ctx, const v1::ListPoolSnapshotFilesRequest *req,
                                                v1::ListSnapshotFilesResponse *resp) override;
    grpc::ServerWriteReactor<v1::FileChunk> *ReadSnapshotFile(grpc::CallbackServerContext *ctx,
                                                              const v1::ReadPoolSnapshotFileRequest *req) override;
    grpc::ServerUnaryReactor *OpenDebugShell(grpc::CallbackServerContext *ctx, const v1::OpenDebugShellRequest *req,
                                             v1::DebugShell *resp) override;
    grpc::ServerWriteReactor<v1::ExecResponse> *DebugExec(grpc::CallbackServerContext *ctx,
                                                          const v1::DebugExecRequest *req) override;
    grpc::ServerUnaryReactor *CloseDebugShell(grpc::CallbackServerContext *ctx, const v1::CloseDebugShellRequest *req,
                                              v1::CloseDebugShellResponse *resp) override;
    // Permissions (docs/permissions.md): who the caller is, tokens, the audit log.
    grpc::ServerUnaryReactor *WhoAmI(grpc::CallbackServerContext *context, const v1::WhoAmIRequest *request,
                                     v1::Principal *response) override;
    grpc::ServerUnaryReactor *CreateToken(grpc::CallbackServerContext *context, const v1::CreateTokenRequest *request,
                                          v1::CreatedToken *response) override;
    grpc::ServerUnaryReactor *ListTokens(grpc::CallbackServerContext *context, const v1::ListTokensRequest *request,
                                         v1::ListTokensResponse *response) override;
    grpc::ServerUnaryReactor *RevokeToken(grpc::CallbackServerContext *context, const v1::RevokeTokenRequest *request,
                                          v1::TokenInfo *response) override;
    grpc::ServerUnaryReactor *ListAudit(grpc::CallbackServerContext *context, const v1::ListAuditRequest *request,
                                        v1::ListAuditResponse *response) override;

    // The permission checks and the audit log; the TCP listener's token check comes from here.
    Access &access() { return m_access; }

    // Cost and the review queue (review_service.cpp).
    grpc::ServerUnaryReactor *ListReviewItems(grpc::CallbackServerContext *ctx, const v1::ListReviewItemsRequest *req,
                                              v1::ListReviewItemsResponse *resp) override;
    grpc::ServerUnaryReactor *GetReviewItem(grpc::CallbackServerContext *ctx, const v1::GetReviewItemRequest *req,
                                            v1::ReviewItem *resp) override;
    grpc::ServerUnaryReactor *DecideReviewItems(grpc::CallbackServerContext *ctx, const v1::DecideReviewItemsRequest *req,
                                                v1::DecideReviewItemsResponse *resp) override;
    grpc::ServerUnaryReactor *GetApproverStats(grpc::CallbackServerContext *ctx, const v1::GetApproverStatsRequest *req,
                                               v1::ApproverStats *resp) override;
    grpc::ServerUnaryReactor *GetCostSummary(grpc::CallbackServerContext *ctx, const v1::GetCostSummaryRequest *req,
                                             v1::CostSummary *resp) override;
    grpc::ServerUnaryReactor *ListBudgets(grpc::CallbackServerContext *ctx, const v1::ListBudgetsRequest *req,
                                          v1::ListBudgetsResponse *resp) override;
    // Live samples of a claimed sandbox (sample_watch.h).
    grpc::ServerWriteReactor<v1::SandboxSamples> *WatchSandboxSamples(grpc::CallbackServerContext *ctx,
                                                                      const v1::WatchSandboxSamplesRequest *req) override;

private:
    void initOperator();   // operator_service.cpp, where OperatorService is complete
    Result<core::SessionState> submit(const v1::SubmitSessionRequest &request, Access::Call &call);
    // The environment decision at session start (decider set), with the agent it was made for.
    Result<policy::TierDecision> decideStart(const v1::SubmitSessionRequest &request, const std::string &goal,
                                             const std::string &playbook);
    // An agent from the request, validated (governance_service.cpp); FailedPrecondition when the
    // broker keeps no agents.
    Result<agents::Agent> agentFromProto(const v1::Agent &request) const;
    // The granted names, deduplicated, or InvalidArgument naming the ones the broker does not hold.
    Result<std::vector<std::string>> checkGrants(const v1::SubmitSessionRequest &request) const;
    // The payload with every secret value the broker holds replaced by its marker.
    std::string redactedJson(const nlohmann::json &payload) const;
    Result<core::SessionState> getSession(const std::string &id);
    Result<policy::TierDecision> overrideTier(const v1::OverrideTierRequest &request, Access::Call &call);
    // Appends state.changed {status, reason} when allowed(current) holds, re-checking after a lost race.
    Result<core::SessionState> changeStatus(const std::string &id, core::SessionStatus status,
                                            const std::string &reason, const char *verb,
                                            const std::function<bool(core::SessionStatus)> &allowed,
                                            Access::Call &call);
    // A session action (cancel, pause, resume) from its request to its answer.
    grpc::ServerUnaryReactor *sessionAction(grpc::CallbackServerContext *context, const char *method,
                                            const v1::SessionActionRequest *request, v1::Session *response,
                                            core::SessionStatus status, const std::string &defaultReason,
                                            const std::function<bool(core::SessionStatus)> &allowed);

    store::EventStore &m_store;
    StreamHub &m_hub;
    const pools::PoolSet &m_pools;
    engine::ModelLookup m_models;
    BrokerServiceOptions m_options;
    Access m_access;
    // A deleter set where OperatorService is complete, so this header need not include it.
    std::unique_ptr<OperatorService, void (*)(OperatorService *)> m_operator{nullptr, nullptr};
    std::unique_ptr<SampleWatches> m_sampleWatches;
};

} // namespace paddock::server
