#pragma once
// What the broker's four gRPC services share (proto/paddock/v1: SessionService, GovernanceService,
// OperationsService, AccessService): the store, the stream hub, the pools, the models, the options
// the daemon configured, and Access (who may call, the audit log). broker_api.h owns one and hands
// it to each service; the services translate between protobuf and the broker's own types and
// validate every request before it reaches the store.
//
// Threads: built and destroyed on the owner's thread; used from gRPC's callback threads. Every part
// is thread-safe on its own (the store, the hub, the pool set, Access).

#include "broker/auth/principals.h"
#include "broker/checkpoints/checkpoint_collector.h"
#include "broker/checkpoints/post_mortem_archive.h"
#include "broker/core/session_state.h"
#include "broker/cost/budgets.h"
#include "broker/engine/environment_decider.h"
#include "broker/engine/step_engine.h"
#include "broker/placement/pool_set.h"
#include "broker/review/review_desk.h"
#include "broker/secrets/secret_store.h"
#include "broker/server/access.h"
#include "broker/server/stream_hub.h"
#include "broker/store/cost_index.h"
#include "broker/store/decision_store.h"
#include "broker/store/event_store.h"
#include "rpc/status.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace paddock::server {

struct ServiceOptions {
    std::filesystem::path playbookDir;
    std::string defaultTier = "lite";
    std::vector<std::string> modelNames;      // for messages listing what is configured
    secrets::SecretStore *secrets = nullptr;  // nullptr: no secrets; grants are refused, the RPCs say why
    int64_t debugShellIdleTimeoutMs = 600000; // a debug shell unused this long is closed
    // Who may call (broker/auth/principals.h); nullptr: the embedded default (this process's user
    // is admin on the unix socket).
    std::shared_ptr<const auth::PrincipalMap> principals;
    // Cost and the review queue (governance_service.cpp); nullptr: those RPCs answer UNAVAILABLE.
    store::CostQueries *costs = nullptr;
    review::ReviewDesk *reviews = nullptr;
    const cost::BudgetSource *budgets = nullptr;
    // Agents, tier rules and the tier catalogue (docs/governance.md). nullptr: only the built-in
    // agent, every session on the submitted or default tier, the agent RPCs answer FAILED_PRECONDITION.
    const engine::EnvironmentDecider *decider = nullptr;
    store::DecisionStore *decisions = nullptr;   // ListDecisions, GetDecisionStats
    // Post-mortems copied off the pools' hosts and the checkpoint store (operator_desk.h); nullptr:
    // operators see only what the pools answer.
    checkpoints::PostMortemArchive *postMortems = nullptr;
    checkpoints::Checkpointer *checkpointer = nullptr;
    // The checkpoint store's figures and collection (GetStorage, CollectStorage); nullptr: they
    // answer FAILED_PRECONDITION.
    checkpoints::CheckpointCollector *storage = nullptr;
};

class ServiceContext {
public:
    ServiceContext(store::EventStore &store, StreamHub &hub, const placement::PoolSet &pools,
                   engine::ModelLookup models, ServiceOptions options);

    ServiceContext(const ServiceContext &) = delete;
    ServiceContext &operator=(const ServiceContext &) = delete;

    // The session, or NotFound / InvalidArgument with the message a user of paddockctl reads.
    Result<core::SessionState> getSession(const std::string &id) const;
    // The payload with every secret value the broker holds replaced by its marker.
    std::string redactedJson(const nlohmann::json &payload) const;

    store::EventStore &store;
    StreamHub &hub;
    const placement::PoolSet &pools;
    const engine::ModelLookup models;
    const ServiceOptions options;
    Access access;
};

// "a, b, c" for a message naming what is configured or offered; "(none)" for nothing.
std::string joined(const std::vector<std::string> &names);

// A unary call's answer: its status, or the status a result's error maps to.
template <typename T>
grpc::Status statusOf(const Result<T> &result)
{
    return result ? grpc::Status::OK : rpc::toGrpcStatus(result.error());
}

inline grpc::ServerUnaryReactor *finish(grpc::CallbackServerContext *context, const grpc::Status &status)
{
    return finishUnary(context, status);
}

template <typename T>
grpc::ServerUnaryReactor *finish(grpc::CallbackServerContext *context, const Result<T> &result)
{
    return finish(context, statusOf(result));
}

} // namespace paddock::server
