#pragma once
// The BrokerService gRPC API: sessions, their logs and the pools. Translates between protobuf and
// the broker's own types and validates every request before it reaches the store.
//
// Threads: methods run on gRPC's callback threads. Unary calls do their (short) store work inline;
// the streaming calls hand off to the StreamHub's pump.

#include "broker/engine/step_engine.h"
#include "broker/pools/pool_set.h"
#include "broker/server/stream_hub.h"
#include "broker/store/event_store.h"

#include "paddock/v1/broker.grpc.pb.h"

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace paddock::server {

struct BrokerServiceOptions {
    std::filesystem::path playbookDir;
    std::string defaultTier = "lite";
    std::vector<std::string> modelNames;      // for messages listing what is configured
};

class BrokerService final : public v1::BrokerService::CallbackService {
public:
    BrokerService(store::EventStore &store, StreamHub &hub, const pools::PoolSet &pools,
                  engine::ModelLookup models, BrokerServiceOptions options);

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
    grpc::ServerUnaryReactor *ListPools(grpc::CallbackServerContext *context, const v1::ListPoolsRequest *request,
                                        v1::ListPoolsResponse *response) override;

private:
    Result<core::SessionState> submit(const v1::SubmitSessionRequest &request);
    Result<core::SessionState> getSession(const std::string &id);
    // Appends state.changed {status, reason} when allowed(current) holds, re-checking after a lost race.
    Result<core::SessionState> changeStatus(const std::string &id, core::SessionStatus status,
                                            const std::string &reason, const char *verb,
                                            const std::function<bool(core::SessionStatus)> &allowed);

    store::EventStore &m_store;
    StreamHub &m_hub;
    const pools::PoolSet &m_pools;
    engine::ModelLookup m_models;
    BrokerServiceOptions m_options;
};

} // namespace paddock::server
