#pragma once
// A broker whose SessionService answers SubmitSession as the test scripts it, served by a real gRPC
// server on a unix socket: each submit takes the next scripted answer (UNAVAILABLE at once, or no
// answer until the caller's deadline passes, or a session) and every request is recorded. For the
// clients' retry tests (paddockctl, the console), where a real broker cannot be made to fail
// exactly once. WatchSessions sends an empty first snapshot and stays open (a console connects);
// other methods are UNIMPLEMENTED.
//
// Threads: script() and submits() from any thread; SubmitSession runs on gRPC's threads.

#include "paddock/v1/sessions.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace paddock::test {

class ScriptedSessionService final : public v1::SessionService::CallbackService {
public:
    enum class Answer { Unavailable, NoAnswer, Session };

    // The answers of the next submits, in order; once they run out every submit gets a session.
    void script(std::vector<Answer> answers)
    {
        std::lock_guard lock(m_mutex);
        m_script = std::move(answers);
        m_next = 0;
    }

    std::vector<v1::SubmitSessionRequest> submits() const
    {
        std::lock_guard lock(m_mutex);
        return m_submits;
    }

    grpc::ServerUnaryReactor *SubmitSession(grpc::CallbackServerContext *context,
                                            const v1::SubmitSessionRequest *request, v1::Session *response) override
    {
        Answer answer = Answer::Session;
        size_t number = 0;
        {
            std::lock_guard lock(m_mutex);
            m_submits.push_back(*request);
            number = m_submits.size();
            if (m_next < m_script.size())
                answer = m_script[m_next++];
        }
        if (answer == Answer::NoAnswer)
            return new Silent();
        auto *reactor = context->DefaultReactor();
        if (answer == Answer::Unavailable) {
            reactor->Finish({grpc::StatusCode::UNAVAILABLE, "scripted: the broker is going away"});
            return reactor;
        }
        // One session per request id, as the real broker makes.
        response->set_id("s-scripted-" + (request->request_id().empty() ? std::to_string(number) : request->request_id()));
        response->set_status(v1::SESSION_STATUS_QUEUED);
        response->set_goal(request->goal());
        reactor->Finish(grpc::Status::OK);
        return reactor;
    }

    grpc::ServerWriteReactor<v1::SessionChanges> *WatchSessions(grpc::CallbackServerContext *,
                                                                const v1::WatchSessionsRequest *) override
    {
        return new Watch();
    }

private:
    // An empty first snapshot, then nothing until the caller goes away.
    class Watch final : public grpc::ServerWriteReactor<v1::SessionChanges> {
    public:
        Watch()
        {
            m_snapshot.set_initial(true);
            StartWrite(&m_snapshot);
        }
        void OnWriteDone(bool) override { finishOnce(false); }
        void OnCancel() override { finishOnce(true); }
        void OnDone() override { delete this; }

    private:
        // Finishes once the write is done and the caller has gone, whichever comes last.
        void finishOnce(bool cancelled)
        {
            std::lock_guard lock(m_mutex);
            (cancelled ? m_cancelled : m_written) = true;
            if (m_cancelled && m_written && !m_finished) {
                m_finished = true;
                Finish(grpc::Status::OK);
            }
        }
        std::mutex m_mutex;
        bool m_written = false;
        bool m_cancelled = false;
        bool m_finished = false;
        v1::SessionChanges m_snapshot;
    };

    // Answers nothing: the call ends when the caller gives up (its deadline) or the server stops.
    class Silent final : public grpc::ServerUnaryReactor {
    public:
        void OnCancel() override { Finish({grpc::StatusCode::CANCELLED, "scripted: the caller gave up"}); }
        void OnDone() override { delete this; }
    };

    mutable std::mutex m_mutex;
    std::vector<Answer> m_script;
    size_t m_next = 0;
    std::vector<v1::SubmitSessionRequest> m_submits;
};

// The service above on unix:<socket>, until destroyed.
class ScriptedBroker {
public:
    explicit ScriptedBroker(const std::filesystem::path &socket) : m_address("unix:" + socket.string())
    {
        std::filesystem::remove(socket);
        grpc::ServerBuilder builder;
        builder.AddListeningPort(m_address, grpc::InsecureServerCredentials());
        builder.RegisterService(&m_service);
        m_server = builder.BuildAndStart();
    }
    ~ScriptedBroker()
    {
        if (m_server)
            m_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    }
    ScriptedBroker(const ScriptedBroker &) = delete;
    ScriptedBroker &operator=(const ScriptedBroker &) = delete;

    bool serving() const { return m_server != nullptr; }
    const std::string &address() const { return m_address; }
    ScriptedSessionService &service() { return m_service; }

private:
    std::string m_address;
    ScriptedSessionService m_service;
    std::unique_ptr<grpc::Server> m_server;
};

} // namespace paddock::test
