#pragma once
// Translations between the broker's own types and the generated protobuf/gRPC types. Only
// broker/server sees the generated code.

#include "broker/checkpoints/checkpoint_collector.h"
#include "broker/core/event.h"
#include "broker/core/session_state.h"
#include "broker/policy/environment.h"
#include "broker/pool_client/post_mortem_types.h"
#include "broker/store/decision_store.h"
#include "broker/store/event_store.h"
#include "common/result.h"
#include "rpc/status.h"

#include "paddock/v1/access.pb.h"
#include "paddock/v1/governance.pb.h"
#include "paddock/v1/operations.pb.h"
#include "paddock/v1/sessions.pb.h"

namespace paddock::server {

using rpc::toGrpcStatus;

void toProto(const core::Event &event, v1::Event *out);
void toProto(const core::SessionState &state, v1::Session *out);
void toProto(const policy::TierDecision &decision, v1::EnvironmentDecision *out);
void toProto(const store::DecisionRecord &decision, v1::EnvironmentDecision *out);
void toProto(const pool_client::ResourcePoint &point, v1::ResourceSample *out);
void toProto(const checkpoints::CollectionReport &report, v1::StorageCollection *out);
// The figures with what the collector knows besides: the store, the retention, the last collection.
void toProto(checkpoints::CheckpointCollector &collector, const checkpoints::StorageFigures &figures,
             v1::StorageInfo *out);

v1::SessionStatus toProto(core::SessionStatus status);
std::optional<core::SessionStatus> fromProto(v1::SessionStatus status);

// The store query for a filter; InvalidArgument for an unspecified status in the list.
Result<store::SessionQuery> toQuery(const v1::SessionFilter &filter);
bool matches(const v1::SessionFilter &filter, const core::SessionState &state);

} // namespace paddock::server
