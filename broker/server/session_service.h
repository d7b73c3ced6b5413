#pragma once
// SessionService (proto/paddock/v1/sessions.proto): sessions and their durable logs. Submit records
// session.created with its environment decision; StreamEvents and WatchSessions serve history then
// the live tail through the StreamHub; cancel, pause and resume append state.changed after a
// compare-and-append against the session's last seq.
//
// Threads: methods run on gRPC's callback threads. Unary calls do their (short) store work inline;
// the streaming calls hand off to the StreamHub's pump.

#include "broker/server/service_context.h"

#include "paddock/v1/sessions.grpc.pb.h"

#include <functional>
#include <string>
#include <vector>

namespace paddock::server {

class SessionService final : public v1::SessionService::CallbackService {
public:
    explicit SessionService(ServiceContext &context);

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

private:
    Result<core::SessionState> submit(const v1::SubmitSessionRequest &request, Access::Call &call);
    // The environment decision at session start (decider set), with the agent it was made for.
    Result<policy::TierDecision> decideStart(const v1::SubmitSessionRequest &request, const std::string &goal,
                                             const std::string &playbook);
    // The granted names, deduplicated, or InvalidArgument naming the ones the broker does not hold.
    Result<std::vector<std::string>> checkGrants(const v1::SubmitSessionRequest &request) const;
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

    ServiceContext &m_context;
};

} // namespace paddock::server
