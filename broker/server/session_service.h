#pragma once
// SessionService (proto/paddock/v1/sessions.proto): sessions and their durable logs. Submit records
// session.created with its environment decision; StreamEvents and WatchSessions serve history then
// the live tail through the StreamHub; cancel, pause and resume append state.changed after a
// compare-and-append against the session's last seq.
//
// Idempotent submits: a submit with a request_id makes at most one session per (principal,
// request_id), across brokers sharing a database and across restarts. The id's row commits with
// the session (store/submit_requests.h); a submit that finds it, or whose append loses the race for
// it, answers with that session, or ALREADY_EXISTS when the same id came with a different request.
//
// Threads: methods run on gRPC's callback threads (two on a two-core machine), so none of them
// waits for a commit it can hand off: a submit checks its request and decides its tier there, then
// queues its append (EventStore::appendThen); the writer hands the committed session to the
// finisher thread, which answers the call. Reads and the other unary calls do their (short) store
// work inline; the streaming calls hand off to the StreamHub's pump.
//
// Known limits: a refused call (permissions, a bad request) still waits on the callback thread for
// its audit record to commit (Access::conclude), and so do cancel, pause and resume, and a submit
// answered from its request_id's earlier session.

#include "broker/server/service_context.h"
#include "broker/store/submit_requests.h"

#include "paddock/v1/sessions.grpc.pb.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
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
    // Runs the end of calls whose commit came in (the answer, and the audit record of a failed
    // append) on a thread of its own, in the order posted. post() only enqueues, so the store's
    // writer may call it; the destructor runs what is queued, then joins.
    class Finisher {
    public:
        Finisher();
        ~Finisher();
        Finisher(const Finisher &) = delete;
        Finisher &operator=(const Finisher &) = delete;
        void post(std::function<void()> work);

    private:
        void loop();
        std::mutex m_mutex;
        std::condition_variable m_wake;
        std::deque<std::function<void()>> m_queue;   // guarded by m_mutex
        bool m_stopping = false;                     // guarded by m_mutex
        std::thread m_thread;
    };

    // A submit checked and decided, as the append that records it (session.created, env.decision,
    // the call's audit record and, with a request_id, its submit_requests row, in one transaction).
    Result<store::AppendRequest> prepareSubmit(const v1::SubmitSessionRequest &request,
                                               const std::string &fingerprint, Access::Call &call);
    // A submit whose request_id the same principal used before (store/submit_requests.h): the
    // session that submit made, or ALREADY_EXISTS naming it when the earlier request differs.
    grpc::Status answerRepeated(const store::SubmitRequestRecord &earlier, const std::string &fingerprint,
                                Access::Call &call, v1::Session *response);
    // The environment decision at session start, with the agent it was made for (decision.agent)
    // and that agent's per-session budget, from the one lookup of the agent.
    struct StartDecision {
        policy::TierDecision decision;
        std::optional<int64_t> agentBudgetMicros;   // nullopt: ask the budgets (the broker keeps no agents)
    };
    Result<StartDecision> decideStart(const v1::SubmitSessionRequest &request, const std::string &goal,
                                      const std::string &playbook);
    // The name and goal of a playbook's text (parsed once per text: a fleet submits the same few
    // playbooks over and over, and parsing one costs about as much as committing the session).
    struct PlaybookHead {
        std::string name;
        std::string goal;
    };
    Result<PlaybookHead> playbookHead(const std::string &toml, const std::string &sourceName);
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
    std::mutex m_playbooksMutex;
    std::unordered_map<std::string, PlaybookHead> m_playbooks;   // by source name + '\0' + text; m_playbooksMutex
    Finisher m_finisher;   // last: its thread stops before anything it uses goes
};

} // namespace paddock::server
