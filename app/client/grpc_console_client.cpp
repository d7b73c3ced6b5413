#include "app/client/grpc_console_client.h"
#include "app/client/grpc_text.h"

#include "app/client/grpc_governance_client.h"

#include "common/paths.h"

#include "rpc/broker_stubs.h"

#include <grpcpp/grpcpp.h>

#include <QHash>
#include <QLoggingCategory>
#include <QPointer>
#include <QSet>
#include <QTimer>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>

namespace paddock::console {
namespace {

Q_LOGGING_CATEGORY(lcClient, "paddock.console.client")

constexpr int kUnaryDeadlineMs = 10'000;
constexpr int kPoolsDeadlineMs = 5'000;
constexpr int kHistoryDeadlineMs = 30'000;
constexpr int kShutdownWaitMs = 5'000;

constexpr int kSampleWatchDeadlineMs = 24 * 3600 * 1000;   // a watch lasts while its sandbox is claimed

SessionInfo toSessionInfo(const v1::Session &s)
{
    SessionInfo info;
    info.id = qs(s.id());
    info.agent = qs(s.agent());
    info.goal = qs(s.goal());
    info.model = qs(s.model());
    info.playbook = qs(s.playbook());
    info.tier = qs(s.tier());
    info.pool = qs(s.pool());
    info.sandboxId = qs(s.sandbox_id());
    info.statusReason = qs(s.status_reason());
    info.lastEventKind = qs(s.last_event_kind());
    for (const auto &tag : s.tags())
        info.tags << qs(tag);
    // The console's enum follows the proto's numbering.
    const int status = s.status();
    info.status = status >= 0 && status <= static_cast<int>(SessionStatus::Cancelled) ? static_cast<SessionStatus>(status)
                                                                                      : SessionStatus::Unknown;
    info.steps = s.steps();
    info.costMicros = s.cost_micros();
    info.createdUnixMs = s.created_unix_ms();
    info.updatedUnixMs = s.updated_unix_ms();
    info.lastSeq = s.last_seq();
    info.tierChooser = qs(s.tier_chooser());
    info.submittedBy = qs(s.submitted_by());
    info.modelCostMicros = s.model_cost_micros();
    info.sandboxCostMicros = s.sandbox_cost_micros();
    info.budgetMicros = s.budget_micros();
    return info;
}

PoolInfo toPoolInfo(const v1::PoolInfo &p)
{
    PoolInfo info;
    info.name = qs(p.name());
    info.endpoint = qs(p.endpoint());
    info.healthy = p.healthy();
    info.local = p.local();
    info.error = qs(p.error());
    for (const auto &t : p.tiers()) {
        TierInfo tier;
        tier.name = qs(t.tier().name());
        tier.runtime = qs(t.tier().runtime());
        tier.warm = t.warm();
        tier.claimed = t.claimed();
        tier.max = t.max();
        tier.hitRate = t.hit_rate();
        tier.coldFallbacks = t.cold_fallbacks();
        for (const auto bucket : t.claim_latency_us_buckets())
            tier.latencyBucketsUs.append(bucket);
        for (const auto count : t.claim_latency_counts())
            tier.latencyCounts.append(count);
        tier.refillPerSecond = t.refill_per_second();
        tier.pricePerHourUsd = t.tier().price_per_hour_usd();
        tier.cpu = t.tier().limits().cpu();
        tier.memoryBytes = t.tier().limits().memory_bytes();
        tier.network = t.tier().network() == v1::NETWORK_POLICY_ALLOWLIST ? QStringLiteral("allowlist") : QStringLiteral("none");
        tier.isolationIdentity = qs(t.isolation_identity());
        tier.isolationSeccomp = qs(t.isolation_seccomp());
        tier.isolationEtc = qs(t.isolation_etc());
        info.tiers.append(tier);
    }
    for (const auto &h : p.history())
        info.history.append({h.time_unix_ms(), h.healthy(), h.warm(), h.claimed()});
    return info;
}

QByteArray bytes(const std::string &data)
{
    return QByteArray(data.data(), static_cast<qsizetype>(data.size()));
}

PostMortemInfo toPostMortem(const v1::PostMortem &p)
{
    PostMortemInfo pm;
    pm.pool = qs(p.pool());
    pm.sandboxId = qs(p.sandbox_id());
    pm.sessionId = qs(p.session_id());
    pm.tier = qs(p.tier());
    pm.runtime = qs(p.runtime());
    pm.reason = qs(p.reason());
    pm.detail = qs(p.detail());
    pm.exitCode = p.exit_code();
    pm.signal = p.signal();
    for (const auto &arg : p.argv())
        pm.argv << qs(arg);
    pm.durationMs = p.duration_ms();
    pm.lastStdout = bytes(p.last_stdout());
    pm.lastStderr = bytes(p.last_stderr());
    pm.stdoutBytes = p.stdout_bytes();
    pm.stderrBytes = p.stderr_bytes();
    for (const auto &sample : p.samples())
        pm.samples.append({sample.time_unix_ms(), sample.cpu_cores(), sample.memory_bytes(), sample.pids(),
                           sample.cpu_throttled()});
    for (const auto &process : p.processes())
        pm.processes.append({process.pid(), process.ppid(), qs(process.state()), process.rss_bytes(), qs(process.command())});
    pm.processesNote = qs(p.processes_note());
    pm.snapshotRef = qs(p.snapshot_ref());
    pm.snapshotError = qs(p.snapshot_error());
    pm.snapshotSizeBytes = p.snapshot_size_bytes();
    pm.timeUnixMs = p.time_unix_ms();
    pm.cpuLimit = p.limits().cpu();
    pm.memoryLimitBytes = p.limits().memory_bytes();
    pm.pidsLimit = p.limits().pids();
    return pm;
}

SnapshotEntry toSnapshotEntry(const v1::SnapshotFile &f)
{
    return SnapshotEntry{qs(f.path()), f.is_dir(), f.is_symlink(), qs(f.symlink_target()), f.size(), f.mode(),
                         f.mtime_unix_ms()};
}

DebugShellInfo toDebugShell(const v1::DebugShell &d)
{
    DebugShellInfo shell;
    shell.shellId = qs(d.shell_id());
    shell.pool = qs(d.pool());
    shell.sandboxId = qs(d.sandbox_id());
    shell.tier = qs(d.tier());
    shell.sessionId = qs(d.session_id());
    shell.postMortemSandboxId = qs(d.post_mortem_sandbox_id());
    shell.snapshotRef = qs(d.snapshot_ref());
    shell.openedBy = qs(d.opened_by());
    shell.idleTimeoutMs = d.idle_timeout_ms();
    return shell;
}

// Kinds repeat endlessly; sharing one QString per kind keeps an EventRecord's kind free of its own
// allocation. One per reactor: a call's reactions never run concurrently.
class KindInterner {
public:
    QString intern(const std::string &kind)
    {
        const auto found = m_kinds.constFind(QByteArray::fromRawData(kind.data(), static_cast<qsizetype>(kind.size())));
        if (found != m_kinds.constEnd())
            return *found;
        const QByteArray key(kind.data(), static_cast<qsizetype>(kind.size()));
        return *m_kinds.insert(key, QString::fromUtf8(key));
    }

private:
    QHash<QByteArray, QString> m_kinds;
};

EventRecord toEventRecord(const v1::Event &e, KindInterner &kinds)
{
    return EventRecord{e.seq(), e.time_unix_ms(), kinds.intern(e.kind()),
                       QByteArray(e.payload_json().data(), static_cast<qsizetype>(e.payload_json().size())),
                       e.cost_micros()};
}

QString describe(const grpc::Status &status)
{
    QString message = qs(status.error_message());
    if (message.isEmpty())
        message = QStringLiteral("gRPC status %1").arg(static_cast<int>(status.error_code()));
    return message;
}

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
        QList<SessionInfo> sessions;
        sessions.reserve(m_response.sessions_size());
        for (const auto &s : m_response.sessions())
            sessions.append(toSessionInfo(s));
        {
            std::lock_guard lock(m_shared->mutex);
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
                {Shared::Completion::WatchDone, m_serial, {}, status.error_code(), describe(status)});
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
                                          describe(status), m_ended});
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
            qCWarning(lcClient).noquote() << "history of" << m_id << "failed:" << describe(status);
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

} // namespace

void Shared::wakeLocked()
{
    if (!client || wakePosted)
        return;
    wakePosted = true;
    // Queued to the GUI thread; Qt drops it if the client is destroyed first, and the destructor
    // clears `client` under this mutex before that can happen.
    QMetaObject::invokeMethod(client, "onWake", Qt::QueuedConnection);
}

class GrpcConsoleClient::Private {
public:
    struct Follow {
        qint64 fromSeq = 1;
        std::shared_ptr<FollowCall> call;
        bool ended = false;
    };

    explicit Private(GrpcConsoleClient *owner) : q(owner), shared(std::make_shared<Shared>())
    {
        shared->client = owner;
        notifyTimer.setSingleShot(true);
        notifyTimer.setInterval(50);
        reconnectTimer.setSingleShot(true);
    }

    void setState(ConnectionState next, const QString &detail)
    {
        if (state == next)
            return;
        state = next;
        emit q->connectionStateChanged(next, detail);
    }

    void startAttempt();
    void stopCalls();
    void refreshPermissions();
    std::shared_ptr<grpc::ChannelCredentials> channelCredentials() const
    {
        if (target.starts_with("unix:"))
            return grpc::InsecureChannelCredentials();
        grpc::SslCredentialsOptions ssl;
        ssl.pem_root_certs = tlsCaPem;
        auto credentials = grpc::SslCredentials(ssl);
        if (token.empty())
            return credentials;   // the broker answers UNAUTHENTICATED saying how to get one
        return grpc::CompositeChannelCredentials(credentials, grpc::AccessTokenCredentials(token));
    }
    void connectionLost(const QString &why);
    void tick();
    void startFollow(const QString &id, Follow &follow);
    void finishAction(const QString &action, bool ok, const QString &message, const QString &sessionId = {})
    {
        std::lock_guard lock(shared->mutex);
        shared->actions.append({action, ok, message, sessionId});
        shared->wakeLocked();
    }
    template <typename Request, typename Response, typename Interface, typename Done>
    void unary(AsyncMethod<Interface, Request, Response> method, Request request, int deadlineMs, Done done);
    void sessionAction(const QString &action, const QString &id,
                       AsyncMethod<v1::SessionService::StubInterface::async_interface, v1::SessionActionRequest, v1::Session> method);
    // Calls that are not watch or follow streams, for cancelling at shutdown.
    void track(std::weak_ptr<grpc::ClientContext> context);

    GrpcConsoleClient *q;
    std::shared_ptr<Shared> shared;
    QString address;
    std::string target;
    std::string tlsCaPem;
    std::string token;     // never logged
    Permissions permissions;
    ConnectionState state = ConnectionState::Disconnected;
    bool wanted = false;   // connectToBroker() was called and disconnectFromBroker() was not

    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<rpc::BrokerStubs> stubs;
    quint64 nextSerial = 1;
    std::shared_ptr<WatchCall> watch;
    QHash<QString, Follow> follows;

    std::vector<std::weak_ptr<grpc::ClientContext>> others;
    QHash<int, std::weak_ptr<grpc::ClientContext>> downloads;
    int nextDownload = 0;
    // The one live sample watch (watchSandboxSamples), cancelled by the next one or at shutdown.
    std::shared_ptr<CallbackStream<v1::WatchSandboxSamplesRequest, v1::SandboxSamples>> samplesCall;
    QTimer notifyTimer;
    QTimer reconnectTimer;
    int initialBackoffMs = 100;
    int maxBackoffMs = 5'000;
    int backoffMs = 100;
    // The governance calls share the channel while connected.
    GrpcGovernanceClient *governance = nullptr;
};

void GrpcConsoleClient::Private::startAttempt()
{
    stopCalls();
    grpc::ChannelArguments args;
    // A channel of our own each attempt, with its own subchannels: gRPC's shared pool would keep its
    // own (up to 120 s) reconnect backoff across our attempts.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, initialBackoffMs);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, initialBackoffMs);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, maxBackoffMs);
    // Batches of tool results can be large (each output keeps up to 64 KiB).
    args.SetMaxReceiveMessageSize(-1);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
    channel = grpc::CreateCustomChannel(target, channelCredentials(), args);
    stubs = std::make_shared<rpc::BrokerStubs>(channel);
    watch = WatchCall::start(shared, *stubs, nextSerial++);
}

void GrpcConsoleClient::Private::stopCalls()
{
    if (samplesCall) {
        samplesCall->cancel();
        samplesCall.reset();
    }
    if (watch) {
        watch->cancel();
        watch.reset();
    }
    for (Follow &follow : follows) {
        if (follow.call) {
            follow.call->cancel();
            follow.call.reset();
        }
    }
}

void GrpcConsoleClient::Private::startFollow(const QString &id, Follow &follow)
{
    if (follow.call) {
        follow.call->cancel();
        follow.call.reset();
    }
    qint64 from = follow.fromSeq;
    {
        std::lock_guard lock(shared->mutex);
        auto next = shared->followNext.find(id);
        if (next == shared->followNext.end())
            next = shared->followNext.insert(id, from);
        from = *next;
    }
    follow.call = FollowCall::start(shared, *stubs, nextSerial++, id, from);
}

void GrpcConsoleClient::Private::connectionLost(const QString &why)
{
    stopCalls();
    setState(ConnectionState::Broken,
             QStringLiteral("broker unreachable at %1: %2; retrying").arg(address, why));
    if (!reconnectTimer.isActive()) {
        reconnectTimer.start(backoffMs);
        backoffMs = std::min(backoffMs * 2, maxBackoffMs);
    }
}

void GrpcConsoleClient::Private::tick()
{
    QList<Shared::Completion> completions;
    QList<Shared::History> histories;
    QList<Shared::Action> actions;
    QStringList eventIds;
    bool sessions = false;
    bool pools = false;
    QList<PoolInfo> poolList;
    bool local = false;
    QList<std::function<void(GrpcConsoleClient *)>> answers;
    QHash<int, QPair<qint64, qint64>> progress;
    {
        std::lock_guard lock(shared->mutex);
        shared->wakePosted = false;
        answers.swap(shared->answers);
        progress.swap(shared->downloadProgress);
        completions.swap(shared->completions);
        histories.swap(shared->histories);
        actions.swap(shared->actions);
        sessions = std::exchange(shared->sessionsDirty, false) && !shared->sessions.isEmpty();
        for (const QString &id : std::as_const(shared->eventsDirty)) {
            if (!shared->events.value(id).isEmpty())
                eventIds << id;
        }
        shared->eventsDirty.clear();
        pools = std::exchange(shared->poolsReady, false);
        poolList.swap(shared->pools);
        local = shared->localExecution;
    }

    for (const Shared::Completion &c : std::as_const(completions)) {
        switch (c.kind) {
        case Shared::Completion::WatchOpened:
            if (!watch || c.call != watch->serial())
                break;
            backoffMs = initialBackoffMs;
            setState(ConnectionState::Connected, QStringLiteral("connected to %1").arg(address));
            for (auto it = follows.begin(); it != follows.end(); ++it) {
                if (!it->ended && !it->call)
                    startFollow(it.key(), *it);
            }
            q->refreshPools();
            refreshPermissions();
            break;
        case Shared::Completion::WatchDone:
            if (!watch || c.call != watch->serial() || !wanted)
                break;
            watch.reset();
            connectionLost(c.message);
            break;
        case Shared::Completion::FollowDone: {
            auto it = follows.find(c.sessionId);
            if (it == follows.end() || !it->call || it->call->serial() != c.call)
                break;   // an old call: unfollowed, re-followed or replaced by a reconnect
            it->call.reset();
            if (c.code == grpc::StatusCode::OK || c.endOfSession) {
                it->ended = true;
            } else if (c.code == grpc::StatusCode::UNAVAILABLE || c.code == grpc::StatusCode::CANCELLED
                       || c.code == grpc::StatusCode::DEADLINE_EXCEEDED) {
                // The broker went away under the stream; the watch tells the same story and the
                // follow resumes after the reconnect. If the watch is still fine, resume now.
                if (state == ConnectionState::Connected && watch)
                    connectionLost(c.message);
            } else {
                qCWarning(lcClient).noquote() << "following" << c.sessionId << "failed:" << c.message;
                it->ended = true;
            }
            break;
        }
        }
    }

    if (sessions)
        emit q->sessionsChanged();
    for (const QString &id : std::as_const(eventIds))
        emit q->eventsArrived(id);
    for (const Shared::History &history : std::as_const(histories))
        emit q->historyArrived(history.sessionId, history.events);
    if (pools)
        emit q->poolsChanged(poolList, local);
    for (const Shared::Action &action : std::as_const(actions))
        emit q->actionFinished(action.action, action.ok, action.message, action.sessionId);
    for (auto it = progress.cbegin(); it != progress.cend(); ++it)
        emit q->downloadProgress(it.key(), it->first, it->second);
    for (const auto &answer : std::as_const(answers))
        answer(q);
}

// One unary call with a deadline; `done` runs on a gRPC thread with the status and the response.
void GrpcConsoleClient::Private::track(std::weak_ptr<grpc::ClientContext> context)
{
    std::erase_if(others, [](const auto &weak) { return weak.expired(); });
    others.push_back(std::move(context));
}

template <typename Request, typename Response, typename Interface, typename Done>
void GrpcConsoleClient::Private::unary(AsyncMethod<Interface, Request, Response> method, Request request, int deadlineMs,
                                       Done done)
{
    struct Call {
        grpc::ClientContext context;
        Request request;
        Response response;
        std::shared_ptr<rpc::BrokerStubs> stubs;   // keeps the channel while in flight
    };
    auto call = std::make_shared<Call>();
    call->request = std::move(request);
    call->stubs = stubs;
    call->context.set_deadline(deadlineIn(deadlineMs));
    track(std::shared_ptr<grpc::ClientContext>(call, &call->context));
    shared->callStarted();
    auto sharedState = shared;
    (stubs->async<Interface>()->*method)(&call->context, &call->request, &call->response,
                             [call, sharedState, done = std::move(done)](grpc::Status status) mutable {
                                 done(status, call->response);
                                 sharedState->callDone();
                             });
}

void GrpcConsoleClient::Private::sessionAction(const QString &action, const QString &id,
                                               AsyncMethod<v1::SessionService::StubInterface::async_interface, v1::SessionActionRequest, v1::Session> method)
{
    if (!stubs) {
        finishAction(action, false, QStringLiteral("not connected to a broker: connect first"), id);
        return;
    }
    v1::SessionActionRequest request;
    request.set_id(ss(id));
    request.set_reason(ss(QStringLiteral("%1 from the console").arg(action)));
    auto sharedState = shared;
    unary<v1::SessionActionRequest, v1::Session>(
        method, std::move(request), kUnaryDeadlineMs,
        [sharedState, action, id](const grpc::Status &status, const v1::Session &session) {
            Shared::Action result{action, status.ok(), {}, id};
            if (status.ok()) {
                result.message = QStringLiteral("session %1 is %2").arg(id, statusName(toSessionInfo(session).status));
            } else {
                result.message = QStringLiteral("could not %1 session %2: %3").arg(action, id, describe(status));
            }
            std::lock_guard lock(sharedState->mutex);
            sharedState->actions.append(std::move(result));
            sharedState->wakeLocked();
        });
}

GrpcConsoleClient::GrpcConsoleClient(QObject *parent) : ConsoleClient(parent), d(std::make_unique<Private>(this))
{
    connect(&d->notifyTimer, &QTimer::timeout, this, [this] { d->tick(); });
    connect(&d->reconnectTimer, &QTimer::timeout, this, [this] {
        if (d->wanted)
            d->startAttempt();
    });
}

GrpcConsoleClient::~GrpcConsoleClient()
{
    delete d->governance;   // cancels and waits for its calls while the channel is still here
    d->governance = nullptr;
    {
        std::lock_guard lock(d->shared->mutex);
        d->shared->client = nullptr;
    }
    d->wanted = false;
    d->stopCalls();
    for (const auto &weak : d->others) {
        if (auto context = weak.lock())
            context->TryCancel();
    }
    // gRPC must be done with every reactor before the process may tear gRPC down; cancelled calls
    // finish promptly, so this wait is short.
    std::unique_lock lock(d->shared->mutex);
    if (!d->shared->idle.wait_for(lock, std::chrono::milliseconds(kShutdownWaitMs),
                                  [this] { return d->shared->active == 0; }))
        qCWarning(lcClient) << d->shared->active << "broker calls still running at shutdown";
}

GovernanceClient *GrpcConsoleClient::governance()
{
    if (!d->governance) {
        d->governance = new GrpcGovernanceClient(
            [this]() -> std::shared_ptr<grpc::Channel> {
                return d->state == ConnectionState::Connected ? d->channel : nullptr;
            },
            this);
    }
    return d->governance;
}

QString GrpcConsoleClient::defaultAddress()
{
    return QStringLiteral("unix:") + QString::fromStdString(paddock::defaultBrokerSocketPath().string());
}

void GrpcConsoleClient::connectToBroker(const QString &address)
{
    const QString next = address.trimmed().isEmpty() ? defaultAddress() : address.trimmed();
    if (next != d->address) {
        // Another broker: what we followed there means nothing here.
        for (auto &follow : d->follows) {
            if (follow.call)
                follow.call->cancel();
        }
        d->follows.clear();
        std::lock_guard lock(d->shared->mutex);
        d->shared->followNext.clear();
        d->shared->events.clear();
        d->shared->sessions.clear();
    }
    if (next != d->address && d->permissions.known()) {
        d->permissions = {};
        emit permissionsChanged(d->permissions);
    }
    d->address = next;
    if (next.startsWith(QLatin1String("unix:")))
        d->target = ss(next);
    else if (next.startsWith(QLatin1Char('/')) || next.startsWith(QLatin1String("./")))
        d->target = "unix:" + ss(next);
    else
        d->target = ss(next);
    d->wanted = true;
    d->backoffMs = d->initialBackoffMs;
    d->reconnectTimer.stop();
    d->setState(ConnectionState::Connecting, QStringLiteral("connecting to %1").arg(next));
    d->startAttempt();
}

void GrpcConsoleClient::Private::refreshPermissions()
{
    unary<v1::WhoAmIRequest, v1::Principal>(
        &v1::AccessService::StubInterface::async_interface::WhoAmI, v1::WhoAmIRequest(), kPoolsDeadlineMs,
        [shared = shared](const grpc::Status &status, const v1::Principal &me) {
            if (!status.ok()) {
                // An older broker without WhoAmI: nothing is disabled, the broker still checks.
                qCWarning(lcClient).noquote() << "asking who we are failed:" << describe(status);
                return;
            }
            QStringList methods;
            for (const auto &method : me.permitted_methods())
                methods << qs(method);
            Permissions answer(qs(me.name()), qs(me.role()), qs(me.via()), methods);
            shared->post([answer](GrpcConsoleClient *c) {
                if (c->d->permissions == answer)
                    return;
                c->d->permissions = answer;
                emit c->permissionsChanged(answer);
            });
        });
}

void GrpcConsoleClient::setCredentials(const QString &tlsCaPem, const QString &token)
{
    d->tlsCaPem = ss(tlsCaPem);
    d->token = ss(token.trimmed());
}

Permissions GrpcConsoleClient::permissions() const
{
    return d->permissions;
}

void GrpcConsoleClient::disconnectFromBroker()
{
    d->wanted = false;
    d->reconnectTimer.stop();
    d->stopCalls();
    d->setState(ConnectionState::Disconnected, QStringLiteral("disconnected from %1").arg(d->address));
}

QString GrpcConsoleClient::address() const
{
    return d->address;
}

ConnectionState GrpcConsoleClient::connectionState() const
{
    return d->state;
}

QList<SessionInfo> GrpcConsoleClient::takeSessionChanges()
{
    std::lock_guard lock(d->shared->mutex);
    return std::exchange(d->shared->sessions, {});
}

void GrpcConsoleClient::followSession(const QString &id, qint64 fromSeq)
{
    Private::Follow &follow = d->follows[id];
    follow.fromSeq = std::max<qint64>(1, fromSeq);
    follow.ended = false;
    {
        std::lock_guard lock(d->shared->mutex);
        d->shared->followNext.insert(id, follow.fromSeq);
        d->shared->events.remove(id);
    }
    if (d->state == ConnectionState::Connected && d->stubs)
        d->startFollow(id, follow);
    else if (follow.call) {
        follow.call->cancel();
        follow.call.reset();
    }
}

void GrpcConsoleClient::unfollowSession(const QString &id)
{
    auto it = d->follows.find(id);
    if (it != d->follows.end()) {
        if (it->call)
            it->call->cancel();
        d->follows.erase(it);
    }
    std::lock_guard lock(d->shared->mutex);
    d->shared->followNext.remove(id);
    d->shared->events.remove(id);
}

QList<EventRecord> GrpcConsoleClient::takeEvents(const QString &id)
{
    std::lock_guard lock(d->shared->mutex);
    auto it = d->shared->events.find(id);
    if (it == d->shared->events.end())
        return {};
    return std::exchange(*it, {});
}

void GrpcConsoleClient::fetchHistory(const QString &id, qint64 fromSeq, int count)
{
    if (!d->stubs || d->state != ConnectionState::Connected || count <= 0) {
        // Always answered, so the trace's page-in-flight flag clears.
        std::lock_guard lock(d->shared->mutex);
        d->shared->histories.append({id, {}});
        d->shared->wakeLocked();
        return;
    }
    auto call = HistoryCall::start(d->shared, *d->stubs, id, std::max<qint64>(1, fromSeq), count);
    d->track(call->contextRef(call));
}

void GrpcConsoleClient::refreshPools()
{
    if (!d->stubs)
        return;
    auto sharedState = d->shared;
    d->unary<v1::ListPoolsRequest, v1::ListPoolsResponse>(
        &v1::OperationsService::StubInterface::async_interface::ListPools, v1::ListPoolsRequest(), kPoolsDeadlineMs,
        [sharedState](const grpc::Status &status, const v1::ListPoolsResponse &response) {
            if (!status.ok()) {
                qCWarning(lcClient).noquote() << "listing pools failed:" << describe(status);
                return;
            }
            QList<PoolInfo> pools;
            for (const auto &pool : response.pools())
                pools.append(toPoolInfo(pool));
            std::lock_guard lock(sharedState->mutex);
            sharedState->pools = std::move(pools);
            sharedState->localExecution = response.local_execution();
            sharedState->poolsReady = true;
            sharedState->wakeLocked();
        });
}

void GrpcConsoleClient::submitSession(const SubmitRequest &request)
{
    if (!d->stubs) {
        d->finishAction(QStringLiteral("submit"), false, QStringLiteral("not connected to a broker: connect first"));
        return;
    }
    v1::SubmitSessionRequest out;
    out.set_playbook(ss(request.playbook));
    out.set_playbook_toml(ss(request.playbookToml));
    out.set_goal(ss(request.goal));
    out.set_model(ss(request.model));
    out.set_tier(ss(request.tier));
    out.set_agent(ss(request.agent));
    for (const QString &tag : request.tags)
        out.add_tags(ss(tag));
    auto sharedState = d->shared;
    d->unary<v1::SubmitSessionRequest, v1::Session>(
        &v1::SessionService::StubInterface::async_interface::SubmitSession, std::move(out), kUnaryDeadlineMs,
        [sharedState](const grpc::Status &status, const v1::Session &session) {
            Shared::Action result{QStringLiteral("submit"), status.ok(), {}, {}};
            if (status.ok()) {
                result.sessionId = qs(session.id());
                result.message = QStringLiteral("submitted session %1").arg(result.sessionId);
            } else {
                result.message = QStringLiteral("could not submit the session: %1").arg(describe(status));
            }
            std::lock_guard lock(sharedState->mutex);
            sharedState->actions.append(std::move(result));
            sharedState->wakeLocked();
        });
}

void GrpcConsoleClient::cancelSession(const QString &id)
{
    d->sessionAction(QStringLiteral("cancel"), id, &v1::SessionService::StubInterface::async_interface::CancelSession);
}

void GrpcConsoleClient::pauseSession(const QString &id)
{
    d->sessionAction(QStringLiteral("pause"), id, &v1::SessionService::StubInterface::async_interface::PauseSession);
}

void GrpcConsoleClient::resumeSession(const QString &id)
{
    d->sessionAction(QStringLiteral("resume"), id, &v1::SessionService::StubInterface::async_interface::ResumeSession);
}

void GrpcConsoleClient::setReconnectBackoff(int initialMs, int maxMs)
{
    d->initialBackoffMs = std::max(1, initialMs);
    d->maxBackoffMs = std::max(d->initialBackoffMs, maxMs);
    d->backoffMs = d->initialBackoffMs;
}

void GrpcConsoleClient::setNotifyInterval(int ms)
{
    d->notifyTimer.setInterval(std::clamp(ms, 1, 1000));
}

void GrpcConsoleClient::onWake()
{
    if (!d->notifyTimer.isActive())
        d->notifyTimer.start();
}

} // namespace paddock::console

// ---- Operators: post-mortems, snapshots, debug shells ----

namespace paddock::console {

namespace {
constexpr int kSnapshotReadDeadlineMs = 30'000;
constexpr int kDownloadDeadlineMs = 30 * 60'000;
constexpr int kDebugExecDeadlineMs = 10 * 60'000;
const QString kNotConnected = QStringLiteral("not connected to a broker: connect first (File > Connect)");
} // namespace

void GrpcConsoleClient::listPostMortems(const QString &sessionId)
{
    if (!d->stubs) {
        d->shared->post([sessionId](GrpcConsoleClient *c) { emit c->postMortemsListed(sessionId, {}, {}, kNotConnected); });
        return;
    }
    v1::ListPoolPostMortemsRequest request;
    request.set_session_id(ss(sessionId));
    auto shared = d->shared;
    d->unary<v1::ListPoolPostMortemsRequest, v1::ListPoolPostMortemsResponse>(
        &v1::OperationsService::StubInterface::async_interface::ListPostMortems, std::move(request), kUnaryDeadlineMs,
        [shared, sessionId](const grpc::Status &status, const v1::ListPoolPostMortemsResponse &response) {
            QList<PostMortemInfo> list;
            QStringList poolErrors;
            QString error;
            if (status.ok()) {
                for (const auto &pm : response.post_mortems())
                    list.append(toPostMortem(pm));
                for (const auto &e : response.pool_errors())
                    poolErrors << qs(e.pool()) + QStringLiteral(": ") + qs(e.error());
            } else {
                error = QStringLiteral("could not list post-mortems: %1").arg(describe(status));
            }
            shared->post([sessionId, list, poolErrors, error](GrpcConsoleClient *c) {
                emit c->postMortemsListed(sessionId, list, poolErrors, error);
            });
        });
}

void GrpcConsoleClient::getPostMortem(const QString &pool, const QString &sandboxId)
{
    PostMortemInfo asked;
    asked.pool = pool;
    asked.sandboxId = sandboxId;
    if (!d->stubs) {
        d->shared->post([asked](GrpcConsoleClient *c) { emit c->postMortemArrived(asked, kNotConnected); });
        return;
    }
    v1::GetPoolPostMortemRequest request;
    request.set_pool(ss(pool));
    request.set_sandbox_id(ss(sandboxId));
    auto shared = d->shared;
    d->unary<v1::GetPoolPostMortemRequest, v1::PostMortem>(
        &v1::OperationsService::StubInterface::async_interface::GetPostMortem, std::move(request), kUnaryDeadlineMs,
        [shared, asked](const grpc::Status &status, const v1::PostMortem &response) {
            PostMortemInfo pm = asked;
            QString error;
            if (status.ok()) {
                pm = toPostMortem(response);
                if (pm.pool.isEmpty())
                    pm.pool = asked.pool;
            } else {
                error = QStringLiteral("could not read the post-mortem of %1 on %2: %3")
                            .arg(asked.sandboxId, asked.pool, describe(status));
            }
            shared->post([pm, error](GrpcConsoleClient *c) { emit c->postMortemArrived(pm, error); });
        });
}

void GrpcConsoleClient::listSnapshotFiles(const QString &pool, const QString &snapshotRef, const QString &pathPrefix)
{
    if (!d->stubs) {
        d->shared->post([pool, snapshotRef](GrpcConsoleClient *c) {
            emit c->snapshotFilesListed(pool, snapshotRef, {}, kNotConnected);
        });
        return;
    }
    v1::ListPoolSnapshotFilesRequest request;
    request.set_pool(ss(pool));
    request.set_snapshot_ref(ss(snapshotRef));
    request.set_path_prefix(ss(pathPrefix));
    auto shared = d->shared;
    d->unary<v1::ListPoolSnapshotFilesRequest, v1::ListSnapshotFilesResponse>(
        &v1::OperationsService::StubInterface::async_interface::ListSnapshotFiles, std::move(request), kUnaryDeadlineMs,
        [shared, pool, snapshotRef](const grpc::Status &status, const v1::ListSnapshotFilesResponse &response) {
            QList<SnapshotEntry> files;
            QString error;
            if (status.ok()) {
                files.reserve(response.files_size());
                for (const auto &f : response.files())
                    files.append(toSnapshotEntry(f));
            } else {
                error = QStringLiteral("could not list snapshot %1: %2").arg(snapshotRef, describe(status));
            }
            shared->post([pool, snapshotRef, files, error](GrpcConsoleClient *c) {
                emit c->snapshotFilesListed(pool, snapshotRef, files, error);
            });
        });
}

void GrpcConsoleClient::readSnapshotFile(const QString &pool, const QString &snapshotRef, const QString &path,
                                         qint64 maxBytes)
{
    if (!d->stubs) {
        d->shared->post([pool, snapshotRef, path](GrpcConsoleClient *c) {
            emit c->snapshotFileRead(pool, snapshotRef, path, {}, 0, kNotConnected);
        });
        return;
    }
    v1::ReadPoolSnapshotFileRequest request;
    request.set_pool(ss(pool));
    request.set_snapshot_ref(ss(snapshotRef));
    request.set_path(ss(path));
    request.set_max_bytes(std::max<qint64>(0, maxBytes));
    struct Read {
        QByteArray content;
        qint64 size = 0;
    };
    auto read = std::make_shared<Read>();
    auto shared = d->shared;
    auto call = CallbackStream<v1::ReadPoolSnapshotFileRequest, v1::FileChunk>::start(
        shared, *d->stubs, &v1::OperationsService::StubInterface::async_interface::ReadSnapshotFile, std::move(request),
        kSnapshotReadDeadlineMs,
        [read, maxBytes](const v1::FileChunk &chunk) {
            read->size = std::max<qint64>(read->size, chunk.size());
            read->content.append(chunk.data().data(), static_cast<qsizetype>(chunk.data().size()));
            return !chunk.eof() && (maxBytes <= 0 || read->content.size() < maxBytes);
        },
        [shared, read, pool, snapshotRef, path, maxBytes](const grpc::Status &status, bool cancelledByUs) {
            QString error;
            if (!status.ok() && !cancelledByUs)
                error = QStringLiteral("could not read %1 from snapshot %2: %3").arg(path, snapshotRef, describe(status));
            if (maxBytes > 0 && read->content.size() > maxBytes)
                read->content.truncate(maxBytes);
            shared->post([pool, snapshotRef, path, read, error](GrpcConsoleClient *c) {
                emit c->snapshotFileRead(pool, snapshotRef, path, error.isEmpty() ? read->content : QByteArray(),
                                         read->size, error);
            });
        });
    d->track(call->contextRef(call));
}

int GrpcConsoleClient::downloadSnapshotFile(const QString &pool, const QString &snapshotRef, const QString &path,
                                            const QString &localFile)
{
    const int id = ++d->nextDownload;
    if (!d->stubs) {
        d->shared->post([id](GrpcConsoleClient *c) { emit c->downloadFinished(id, false, kNotConnected); });
        return id;
    }
    v1::ReadPoolSnapshotFileRequest request;
    request.set_pool(ss(pool));
    request.set_snapshot_ref(ss(snapshotRef));
    request.set_path(ss(path));
    // Written on gRPC's thread as the chunks come, under a temporary name renamed at the end, so a
    // broken download never leaves a file that looks whole.
    struct Sink {
        std::string target;
        std::string part;
        std::FILE *file = nullptr;
        qint64 received = 0;
        qint64 total = 0;
        bool eof = false;
        QString error;
        ~Sink()
        {
            if (file)
                std::fclose(file);
        }
    };
    auto sink = std::make_shared<Sink>();
    sink->target = localFile.toStdString();
    sink->part = sink->target + ".part";
    auto shared = d->shared;
    auto call = CallbackStream<v1::ReadPoolSnapshotFileRequest, v1::FileChunk>::start(
        shared, *d->stubs, &v1::OperationsService::StubInterface::async_interface::ReadSnapshotFile, std::move(request),
        kDownloadDeadlineMs,
        [sink, shared, id](const v1::FileChunk &chunk) {
            if (!sink->file) {
                sink->file = std::fopen(sink->part.c_str(), "wb");
                if (!sink->file) {
                    sink->error = QStringLiteral("cannot write %1: %2")
                                      .arg(QString::fromStdString(sink->part), QString::fromLocal8Bit(std::strerror(errno)));
                    return false;
                }
            }
            const auto &data = chunk.data();
            if (!data.empty() && std::fwrite(data.data(), 1, data.size(), sink->file) != data.size()) {
                sink->error = QStringLiteral("cannot write %1: %2")
                                  .arg(QString::fromStdString(sink->part), QString::fromLocal8Bit(std::strerror(errno)));
                return false;
            }
            sink->received += static_cast<qint64>(data.size());
            sink->total = std::max<qint64>(chunk.size(), sink->received);
            sink->eof = chunk.eof();
            {
                std::lock_guard lock(shared->mutex);
                shared->downloadProgress.insert(id, {sink->received, sink->total});
                shared->wakeLocked();
            }
            return !chunk.eof();
        },
        [sink, shared, id, path, snapshotRef](const grpc::Status &status, bool cancelledByUs) {
            bool ok = false;
            QString message = sink->error;
            if (sink->file) {
                if (std::fclose(sink->file) != 0 && message.isEmpty())
                    message = QStringLiteral("cannot write %1").arg(QString::fromStdString(sink->part));
                sink->file = nullptr;
            }
            if (message.isEmpty()) {
                if (sink->eof || (status.ok() && sink->received == sink->total)) {
                    if (sink->received == 0) {
                        // An empty file sends no data to write; create it anyway.
                        if (std::FILE *f = std::fopen(sink->part.c_str(), "wb"))
                            std::fclose(f);
                    }
                    if (std::rename(sink->part.c_str(), sink->target.c_str()) == 0) {
                        ok = true;
                        message = QStringLiteral("saved %1 (%2 bytes)").arg(QString::fromStdString(sink->target)).arg(sink->received);
                    } else {
                        message = QStringLiteral("cannot rename the download to %1: %2")
                                      .arg(QString::fromStdString(sink->target), QString::fromLocal8Bit(std::strerror(errno)));
                    }
                } else if (cancelledByUs) {
                    message = QStringLiteral("download of %1 cancelled").arg(path);
                } else {
                    message = QStringLiteral("could not download %1 from snapshot %2: %3")
                                  .arg(path, snapshotRef, status.ok() ? QStringLiteral("the stream ended early") : describe(status));
                }
            }
            if (!ok)
                std::remove(sink->part.c_str());
            shared->post([id, ok, message](GrpcConsoleClient *c) { emit c->downloadFinished(id, ok, message); });
        });
    auto context = call->contextRef(call);
    d->track(context);
    d->downloads.insert(id, context);
    return id;
}

void GrpcConsoleClient::cancelDownload(int downloadId)
{
    if (auto context = d->downloads.take(downloadId).lock())
        context->TryCancel();
}

void GrpcConsoleClient::openDebugShell(const QString &pool, const QString &sandboxId, const QString &tier)
{
    if (!d->stubs) {
        d->shared->post([](GrpcConsoleClient *c) { emit c->debugShellOpened({}, kNotConnected); });
        return;
    }
    v1::OpenDebugShellRequest request;
    request.set_pool(ss(pool));
    request.set_sandbox_id(ss(sandboxId));
    request.set_tier(ss(tier));
    auto shared = d->shared;
    // Claiming and restoring can take a cold start: a minute.
    d->unary<v1::OpenDebugShellRequest, v1::DebugShell>(
        &v1::OperationsService::StubInterface::async_interface::OpenDebugShell, std::move(request), 60'000,
        [shared, sandboxId](const grpc::Status &status, const v1::DebugShell &response) {
            DebugShellInfo shell;
            QString error;
            if (status.ok())
                shell = toDebugShell(response);
            else
                error = QStringLiteral("could not open a debug shell on the snapshot of %1: %2").arg(sandboxId, describe(status));
            shared->post([shell, error](GrpcConsoleClient *c) { emit c->debugShellOpened(shell, error); });
        });
}

void GrpcConsoleClient::debugExec(const QString &shellId, const QString &commandLine)
{
    if (!d->stubs) {
        d->shared->post([shellId](GrpcConsoleClient *c) { emit c->debugExecFinished(shellId, -1, 0, kNotConnected); });
        return;
    }
    v1::DebugExecRequest request;
    request.set_shell_id(ss(shellId));
    request.add_argv("/bin/sh");
    request.add_argv("-c");
    request.add_argv(ss(commandLine));
    struct Exit {
        bool seen = false;
        int code = -1;
        int signal = 0;
        QString reason;
    };
    auto exit = std::make_shared<Exit>();
    auto shared = d->shared;
    auto call = CallbackStream<v1::DebugExecRequest, v1::ExecResponse>::start(
        shared, *d->stubs, &v1::OperationsService::StubInterface::async_interface::DebugExec, std::move(request),
        kDebugExecDeadlineMs,
        [shared, shellId, exit](const v1::ExecResponse &response) {
            if (!response.stdout().empty() || !response.stderr().empty()) {
                const QByteArray out = bytes(response.stdout());
                const QByteArray err = bytes(response.stderr());
                shared->post([shellId, out, err](GrpcConsoleClient *c) { emit c->debugOutput(shellId, out, err); });
            }
            if (response.has_exit()) {
                exit->seen = true;
                exit->code = response.exit().exit_code();
                exit->signal = response.exit().signal();
                exit->reason = qs(response.exit().reason());
            }
            return true;
        },
        [shared, shellId, exit](const grpc::Status &status, bool) {
            QString error;
            if (!status.ok())
                error = QStringLiteral("the command did not run: %1").arg(describe(status));
            else if (!exit->seen)
                error = QStringLiteral("the command's end was not reported");
            else if (!exit->reason.isEmpty())
                error = exit->reason;   // timeout, oom_killed: said next to the exit
            const int code = exit->code;
            const int signal = exit->signal;
            shared->post([shellId, code, signal, error](GrpcConsoleClient *c) {
                emit c->debugExecFinished(shellId, code, signal, error);
            });
        });
    d->track(call->contextRef(call));
}

void GrpcConsoleClient::closeDebugShell(const QString &shellId)
{
    if (!d->stubs) {
        d->shared->post([shellId](GrpcConsoleClient *c) { emit c->debugShellClosed(shellId, kNotConnected); });
        return;
    }
    v1::CloseDebugShellRequest request;
    request.set_shell_id(ss(shellId));
    auto shared = d->shared;
    d->unary<v1::CloseDebugShellRequest, v1::CloseDebugShellResponse>(
        &v1::OperationsService::StubInterface::async_interface::CloseDebugShell, std::move(request), kUnaryDeadlineMs,
        [shared, shellId](const grpc::Status &status, const v1::CloseDebugShellResponse &) {
            const QString error = status.ok() ? QString()
                                              : QStringLiteral("could not close debug shell %1: %2").arg(shellId, describe(status));
            shared->post([shellId, error](GrpcConsoleClient *c) { emit c->debugShellClosed(shellId, error); });
        });
}

void GrpcConsoleClient::watchSandboxSamples(const QString &pool, const QString &sandboxId)
{
    if (d->samplesCall) {
        d->samplesCall->cancel();
        d->samplesCall.reset();
    }
    if (sandboxId.isEmpty() || !d->stubs)
        return;
    v1::WatchSandboxSamplesRequest request;
    request.set_pool(ss(pool));
    request.set_sandbox_id(ss(sandboxId));
    auto shared = d->shared;
    d->samplesCall = CallbackStream<v1::WatchSandboxSamplesRequest, v1::SandboxSamples>::start(
        shared, *d->stubs, &v1::OperationsService::StubInterface::async_interface::WatchSandboxSamples, std::move(request),
        kSampleWatchDeadlineMs,
        [shared, sandboxId](const v1::SandboxSamples &batch) {
            QList<ResourcePoint> points;
            points.reserve(batch.samples_size());
            for (const auto &s : batch.samples())
                points.append(ResourcePoint{s.time_unix_ms(), s.cpu_cores(), s.memory_bytes(), s.pids(), s.cpu_throttled()});
            shared->post([sandboxId, points](GrpcConsoleClient *c) { emit c->sandboxSamplesArrived(sandboxId, points); });
            return true;
        },
        [pool, sandboxId](const grpc::Status &status, bool cancelledByUs) {
            // OK: the sandbox was released; the card keeps the curve it has.
            if (!status.ok() && !cancelledByUs)
                qCInfo(lcClient).noquote() << "live samples of" << pool << sandboxId << "ended:" << describe(status);
        });
}

bool GrpcConsoleClient::canWatchSandboxSamples() const
{
    return true;
}

} // namespace paddock::console
