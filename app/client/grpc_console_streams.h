#pragma once
// The console client's calls in flight, as gRPC callback reactors: the session watch, the follows,
// history pages and the callback streams of the operator calls (snapshot reads, downloads, debug
// shells, live samples), and Shared, what the reactors hand over to the GUI thread.
//
// Threads: reactions run on gRPC's threads and only enqueue into Shared under its mutex, then ask
// the GUI thread for one tick (Shared::wakeLocked); the GUI thread pulls under the same lock
// (grpc_console_client.cpp). Internal to app/client.

#include "app/client/grpc_console_client.h"
#include "app/client/grpc_convert.h"
#include "app/client/grpc_text.h"

#include "rpc/broker_stubs.h"

#include <grpcpp/grpcpp.h>

#include <QHash>
#include <QList>
#include <QLoggingCategory>
#include <QSet>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

namespace paddock::console {

Q_DECLARE_LOGGING_CATEGORY(lcClient)

inline constexpr int kUnaryDeadlineMs = 10'000;
inline constexpr int kPoolsDeadlineMs = 5'000;
inline constexpr int kHistoryDeadlineMs = 30'000;
inline constexpr int kShutdownWaitMs = 5'000;
inline constexpr int kSampleWatchDeadlineMs = 24 * 3600 * 1000;   // a watch lasts while its sandbox is claimed
// A broker whose session watch has not opened by then is treated as gone (the next one is tried).
inline constexpr int kWatchOpenTimeoutMs = 5'000;
// A submit is sent at most this many times (the same request_id each time), and waits at most
// this long for a connection before it is answered as failed.
inline constexpr int kSubmitAttempts = 4;
inline constexpr int kSubmitWaitMs = 30'000;

// What the reactors hand to the GUI thread. Everything here is guarded by mutex.
struct Shared {
    struct Completion {
        enum Kind { WatchOpened, WatchDone, FollowDone } kind;
        quint64 call = 0;   // serial of the call
        QString sessionId;
        grpc::StatusCode code = grpc::StatusCode::OK;
        QString message;
        bool endOfSession = false;
    };
    struct History {
        QString sessionId;
        QList<EventRecord> events;
    };
    struct Action {
        QString action;
        bool ok = false;
        QString message;
        QString sessionId;
    };

    std::mutex mutex;
    std::condition_variable idle;
    int active = 0;                         // calls started and not yet done
    GrpcConsoleClient *client = nullptr;    // cleared when the client goes away
    bool wakePosted = false;

    QList<SessionInfo> sessions;
    bool sessionsDirty = false;
    QHash<QString, QList<EventRecord>> events;
    QHash<QString, qint64> followNext;      // per followed session: the next seq wanted
    QHash<QString, qint64> sessionSeq;      // per watched session: the last seq its row showed
    QSet<QString> eventsDirty;
    QList<History> histories;
    QList<Action> actions;
    bool poolsReady = false;
    QList<PoolInfo> pools;
    bool localExecution = false;
    QList<Completion> completions;
    // Operator answers, run on the GUI thread in order (they emit the client's signals).
    QList<std::function<void(GrpcConsoleClient *)>> answers;
    QHash<int, QPair<qint64, qint64>> downloadProgress;   // id -> (received, total), the latest only

    // Call with mutex held: asks the GUI thread for one tick, once per interval.
    void wakeLocked();
    void callStarted()
    {
        std::lock_guard lock(mutex);
        ++active;
    }
    void post(std::function<void(GrpcConsoleClient *)> answer)
    {
        std::lock_guard lock(mutex);
        answers.append(std::move(answer));
        wakeLocked();
    }
    void callDone()
    {
        std::lock_guard lock(mutex);
        if (--active == 0)
            idle.notify_all();
    }
};

// A streaming read call that can be cancelled from the GUI thread at any time, before or after it
// ends. It keeps itself alive until OnDone.
template <typename Response>
class StreamCall : public grpc::ClientReadReactor<Response> {
public:
    StreamCall(std::shared_ptr<Shared> shared, quint64 serial) : m_shared(std::move(shared)), m_serial(serial) {}

    void cancel()
    {
        std::lock_guard lock(m_cancelMutex);
        m_cancelled = true;
        if (!m_done)
            m_context.TryCancel();
    }
    bool cancelledByUs()
    {
        std::lock_guard lock(m_cancelMutex);
        return m_cancelled;
    }
    quint64 serial() const { return m_serial; }

    // The context, for cancelling at shutdown through a weak reference.
    std::shared_ptr<grpc::ClientContext> contextRef(const std::shared_ptr<StreamCall> &self)
    {
        return std::shared_ptr<grpc::ClientContext>(self, &m_context);
    }

protected:
    // Before StartCall: the call owns itself until OnDone.
    void keepAlive(std::shared_ptr<StreamCall> self)
    {
        m_keepAlive = std::move(self);
        m_shared->callStarted();
    }
    // Call last in OnDone: after it the object may be gone.
    void finished()
    {
        {
            std::lock_guard lock(m_cancelMutex);
            m_done = true;
        }
        auto shared = m_shared;
        auto keep = std::move(m_keepAlive);
        keep.reset();
        shared->callDone();
    }

    std::shared_ptr<Shared> m_shared;
    const quint64 m_serial;
    grpc::ClientContext m_context;
    Response m_response;

private:
    std::mutex m_cancelMutex;
    bool m_cancelled = false;
    bool m_done = false;
    std::shared_ptr<StreamCall> m_keepAlive;
};

class WatchCall final : public StreamCall<v1::SessionChanges> {
public:
    using StreamCall::StreamCall;

    static std::shared_ptr<WatchCall> start(const std::shared_ptr<Shared> &shared, rpc::BrokerStubs &stubs,
                                            quint64 serial)
    {
        auto call = std::make_shared<WatchCall>(shared, serial);
        call->keepAlive(call);
        stubs.sessions->async()->WatchSessions(&call->m_context, &call->m_request, call.get());
        call->StartRead(&call->m_response);
        call->StartCall();
        return call;
    }

    void OnReadDone(bool ok) override
    {
        if (!ok)
            return;   // OnDone follows with the status
        QList<SessionInfo> received;
        received.reserve(m_response.sessions_size());
        for (const auto &s : m_response.sessions())
            received.append(toSessionInfo(s));
        QList<SessionInfo> sessions;
        sessions.reserve(received.size());
        {
            std::lock_guard lock(m_shared->mutex);
            // Against the last seq seen of each session, so a watch started again on another broker
            // (its snapshot repeats every row) hands over only what moved on since.
            for (SessionInfo &session : received) {
                auto seen = m_shared->sessionSeq.find(session.id);
                if (seen != m_shared->sessionSeq.end() && session.lastSeq <= *seen)
                    continue;
                m_shared->sessionSeq.insert(session.id, session.lastSeq);
                sessions.append(std::move(session));
            }
            if (!m_opened) {
                m_opened = true;
                m_shared->completions.append({Shared::Completion::WatchOpened, m_serial});
            }
            m_shared->sessions.append(std::move(sessions));
            m_shared->sessionsDirty = true;
            m_shared->wakeLocked();
        }
        StartRead(&m_response);
    }

    void OnDone(const grpc::Status &status) override
    {
        {
            std::lock_guard lock(m_shared->mutex);
            m_shared->completions.append(
                {Shared::Completion::WatchDone, m_serial, {}, status.error_code(), statusText(status)});
            m_shared->wakeLocked();
        }
        finished();
    }

private:
    v1::WatchSessionsRequest m_request;
    bool m_opened = false;
};

class FollowCall final : public StreamCall<v1::EventBatch> {
public:
    FollowCall(std::shared_ptr<Shared> shared, quint64 serial, QString id)
        : StreamCall(std::move(shared), serial), m_id(std::move(id))
    {
    }

    static std::shared_ptr<FollowCall> start(const std::shared_ptr<Shared> &shared, rpc::BrokerStubs &stubs,
                                             quint64 serial, const QString &id, qint64 fromSeq)
    {
        auto call = std::make_shared<FollowCall>(shared, serial, id);
        call->keepAlive(call);
        call->m_request.set_session_id(ss(id));
        call->m_request.set_from_seq(fromSeq);
        call->m_request.set_follow(true);
        stubs.sessions->async()->StreamEvents(&call->m_context, &call->m_request, call.get());
        call->StartRead(&call->m_response);
        call->StartCall();
        return call;
    }

    void OnReadDone(bool ok) override
    {
        if (!ok)
            return;
        m_ended = m_ended || m_response.end_of_session();
        QList<EventRecord> batch;
        batch.reserve(m_response.events_size());
        for (const auto &e : m_response.events())
            batch.append(toEventRecord(e, m_kinds));
        {
            std::lock_guard lock(m_shared->mutex);
            const auto next = m_shared->followNext.find(m_id);
            if (next != m_shared->followNext.end()) {
                // Against the shared next seq, so a late batch of an old call (before a reconnect or
                // a re-follow) can never repeat what a newer call already delivered.
                QList<EventRecord> &queue = m_shared->events[m_id];
                for (EventRecord &event : batch) {
                    if (event.seq < *next)
                        continue;
                    *next = event.seq + 1;
                    queue.append(std::move(event));
                }
                m_shared->eventsDirty.insert(m_id);
                m_shared->wakeLocked();
            }
        }
        StartRead(&m_response);
    }

    void OnDone(const grpc::Status &status) override
    {
        {
            std::lock_guard lock(m_shared->mutex);
            m_shared->completions.append({Shared::Completion::FollowDone, m_serial, m_id, status.error_code(),
                                          statusText(status), m_ended});
            m_shared->wakeLocked();
        }
        finished();
    }

private:
    const QString m_id;
    v1::StreamEventsRequest m_request;
    KindInterner m_kinds;
    bool m_ended = false;
};

// Reads a bounded piece of history (follow=false) and delivers it in one answer.
class HistoryCall final : public StreamCall<v1::EventBatch> {
public:
    HistoryCall(std::shared_ptr<Shared> shared, QString id, int count)
        : StreamCall(std::move(shared), 0), m_id(std::move(id)), m_count(count)
    {
    }

    static std::shared_ptr<HistoryCall> start(const std::shared_ptr<Shared> &shared, rpc::BrokerStubs &stubs,
                                              const QString &id, qint64 fromSeq, int count)
    {
        auto call = std::make_shared<HistoryCall>(shared, id, count);
        call->m_request.set_session_id(ss(id));
        call->m_request.set_from_seq(fromSeq);
        call->m_request.set_follow(false);
        call->m_request.set_max_batch(std::min(count, 5000));
        call->m_context.set_deadline(deadlineIn(kHistoryDeadlineMs));
        call->m_events.reserve(count);
        call->keepAlive(call);
        stubs.sessions->async()->StreamEvents(&call->m_context, &call->m_request, call.get());
        call->StartRead(&call->m_response);
        call->StartCall();
        return call;
    }

    void OnReadDone(bool ok) override
    {
        if (!ok)
            return;
        for (const auto &e : m_response.events()) {
            if (m_events.size() >= m_count)
                break;
            m_events.append(toEventRecord(e, m_kinds));
        }
        if (m_events.size() >= m_count) {
            cancel();   // the rest of the log is not wanted; OnDone follows
            return;
        }
        StartRead(&m_response);
    }

    void OnDone(const grpc::Status &status) override
    {
        const bool complete = status.ok() || (cancelledByUs() && m_events.size() >= m_count);
        if (!complete) {
            qCWarning(lcClient).noquote() << "history of" << m_id << "failed:" << statusText(status);
            m_events.clear();
        }
        {
            std::lock_guard lock(m_shared->mutex);
            m_shared->histories.append({m_id, std::move(m_events)});
            m_shared->wakeLocked();
        }
        finished();
    }

private:
    const QString m_id;
    const int m_count;
    v1::StreamEventsRequest m_request;
    QList<EventRecord> m_events;
    KindInterner m_kinds;
};

// A server stream whose messages and end go to callbacks, on gRPC's threads: snapshot file reads
// and downloads, debug-shell commands. onRead returns false to stop reading (the call is then
// cancelled and onDone sees cancelledByUs).
template <typename Request, typename Response>
class CallbackStream final : public StreamCall<Response> {
public:
    // A server-streaming method of one of the broker's services, e.g.
    // &v1::OperationsService::StubInterface::async_interface::DebugExec.
    template <typename Interface>
    using Method = void (Interface::*)(grpc::ClientContext *, const Request *, grpc::ClientReadReactor<Response> *);
    using OnRead = std::function<bool(const Response &)>;
    using OnDoneFn = std::function<void(const grpc::Status &, bool cancelledByUs)>;

    CallbackStream(std::shared_ptr<Shared> shared, OnRead onRead, OnDoneFn onDone)
        : StreamCall<Response>(std::move(shared), 0), m_onRead(std::move(onRead)), m_onDone(std::move(onDone))
    {
    }

    template <typename Interface>
    static std::shared_ptr<CallbackStream> start(const std::shared_ptr<Shared> &shared, rpc::BrokerStubs &stubs,
                                                 Method<Interface> method, Request request, int deadlineMs,
                                                 OnRead onRead, OnDoneFn onDone)
    {
        auto call = std::make_shared<CallbackStream>(shared, std::move(onRead), std::move(onDone));
        call->m_request = std::move(request);
        call->m_context.set_deadline(deadlineIn(deadlineMs));
        call->keepAlive(call);
        (stubs.async<Interface>()->*method)(&call->m_context, &call->m_request, call.get());
        call->StartRead(&call->m_response);
        call->StartCall();
        return call;
    }

    void OnReadDone(bool ok) override
    {
        if (!ok)
            return;
        if (!m_onRead(this->m_response)) {
            this->cancel();
            return;
        }
        this->StartRead(&this->m_response);
    }

    void OnDone(const grpc::Status &status) override
    {
        m_onDone(status, this->cancelledByUs());
        this->finished();
    }

private:
    Request m_request;
    OnRead m_onRead;
    OnDoneFn m_onDone;
};


// A unary method of one of the broker's services, e.g. &v1::SessionService::StubInterface::async_interface::GetSession.
template <typename Interface, typename Request, typename Response>
using AsyncMethod = void (Interface::*)(
    grpc::ClientContext *, const Request *, Response *, std::function<void(grpc::Status)>);

} // namespace paddock::console
