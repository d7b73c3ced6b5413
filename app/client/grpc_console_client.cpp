// GrpcConsoleClient: the connection to the broker (reconnect with backoff, credentials), the
// session watch and follows, history pages, pools and the session actions. The reactors are in
// grpc_console_streams.h, the conversions in grpc_convert.h, the operator calls in
// grpc_operator_calls.cpp.

#include "app/client/grpc_console_client.h"
#include "app/client/grpc_console_private.h"

#include "common/paths.h"

#include <grpcpp/grpcpp.h>

#include <QPointer>
#include <QUuid>

#include <chrono>

namespace paddock::console {

Q_LOGGING_CATEGORY(lcClient, "paddock.console.client")

void Shared::wakeLocked()
{
    if (!client || wakePosted)
        return;
    wakePosted = true;
    // Queued to the GUI thread; Qt drops it if the client is destroyed first, and the destructor
    // clears `client` under this mutex before that can happen.
    QMetaObject::invokeMethod(client, "onWake", Qt::QueuedConnection);
}


std::string GrpcConsoleClient::Private::targetOf(const QString &entry)
{
    if (entry.startsWith(QLatin1String("unix:")))
        return ss(entry);
    if (entry.startsWith(QLatin1Char('/')) || entry.startsWith(QLatin1String("./")))
        return "unix:" + ss(entry);
    return ss(entry);
}

void GrpcConsoleClient::Private::startAttempt()
{
    stopCalls();
    target = targetOf(endpoints.value(current));
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
    openTimer.start(kWatchOpenTimeoutMs);
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
    openTimer.stop();
    const QString lost = endpoints.value(current);
    if (endpoints.size() > 1) {
        // Several brokers: the next one at once, until each has been tried once; then the backoff.
        current = (current + 1) % endpoints.size();
        if (++failedInRound < endpoints.size()) {
            setState(ConnectionState::Broken,
                     QStringLiteral("broker unreachable at %1: %2; trying %3").arg(lost, why, endpoints.value(current)));
            reconnectTimer.start(0);
            return;
        }
        failedInRound = 0;
    }
    setState(ConnectionState::Broken, QStringLiteral("broker unreachable at %1: %2; retrying").arg(lost, why));
    if (!reconnectTimer.isActive()) {
        reconnectTimer.start(backoffMs);
        backoffMs = std::min(backoffMs * 2, maxBackoffMs);
    }
}

void GrpcConsoleClient::Private::sendSubmit(v1::SubmitSessionRequest request, int attempt)
{
    if (state != ConnectionState::Connected || !stubs) {
        // Sent once a broker of the list answers; answered as failed if none does in time.
        const quint64 id = nextSubmit++;
        pendingSubmits.push_back({id, std::move(request), attempt});
        QTimer::singleShot(kSubmitWaitMs, q, [this, id] {
            auto it = std::find_if(pendingSubmits.begin(), pendingSubmits.end(),
                                   [id](const PendingSubmit &p) { return p.id == id; });
            if (it == pendingSubmits.end())
                return;
            const std::string requestId = it->request.request_id();
            pendingSubmits.erase(it);
            finishAction(QStringLiteral("submit"), false,
                         QStringLiteral("could not submit the session: no broker answered within %1 s (request id %2; "
                                        "if one recorded it, it is in the sessions list). Check the connection and "
                                        "submit again")
                             .arg(kSubmitWaitMs / 1000)
                             .arg(qs(requestId)));
        });
        return;
    }
    auto sharedState = shared;
    const v1::SubmitSessionRequest sent = request;
    unary<v1::SubmitSessionRequest, v1::Session>(
        &v1::SessionService::StubInterface::async_interface::SubmitSession, std::move(request), kUnaryDeadlineMs,
        [sharedState, sent, attempt](const grpc::Status &status, const v1::Session &session) {
            const bool unknown = status.error_code() == grpc::StatusCode::UNAVAILABLE
                || status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
            if (unknown && attempt < kSubmitAttempts) {
                // No answer: the same request, the same request_id, again (to another broker once
                // the connection moves): the broker makes one session of it however often it comes.
                qCInfo(lcClient).noquote() << "submit got no answer (" << statusText(status) << "); sending it again";
                sharedState->post([sent, attempt](GrpcConsoleClient *c) { c->d->sendSubmit(sent, attempt + 1); });
                return;
            }
            Shared::Action result{QStringLiteral("submit"), status.ok(), {}, {}};
            if (status.ok()) {
                result.sessionId = qs(session.id());
                result.message = QStringLiteral("submitted session %1").arg(result.sessionId);
            } else {
                result.message = QStringLiteral("could not submit the session: %1").arg(statusText(status));
            }
            std::lock_guard lock(sharedState->mutex);
            sharedState->actions.append(std::move(result));
            sharedState->wakeLocked();
        });
}

void GrpcConsoleClient::Private::flushSubmits()
{
    auto waiting = std::exchange(pendingSubmits, {});
    for (auto &pending : waiting)
        sendSubmit(std::move(pending.request), pending.attempt);
}

void GrpcConsoleClient::Private::failSubmits(const QString &why)
{
    auto waiting = std::exchange(pendingSubmits, {});
    for (const auto &pending : waiting) {
        finishAction(QStringLiteral("submit"), false,
                     QStringLiteral("could not submit the session: %1 (request id %2)").arg(why, qs(pending.request.request_id())));
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
            failedInRound = 0;
            openTimer.stop();
            setState(ConnectionState::Connected, QStringLiteral("connected to %1").arg(endpoints.value(current)));
            flushSubmits();
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
                result.message = QStringLiteral("could not %1 session %2: %3").arg(action, id, statusText(status));
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
    connect(&d->openTimer, &QTimer::timeout, this, [this] {
        if (d->wanted && d->state != ConnectionState::Connected && d->watch)
            d->connectionLost(QStringLiteral("no answer within %1 s").arg(kWatchOpenTimeoutMs / 1000));
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

QStringList GrpcConsoleClient::splitAddress(const QString &address)
{
    QStringList out;
    for (const QString &entry : address.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        if (!entry.trimmed().isEmpty())
            out << entry.trimmed();
    }
    return out;
}

void GrpcConsoleClient::connectToBroker(const QString &address)
{
    const QString next = address.trimmed().isEmpty() ? defaultAddress() : address.trimmed();
    if (next != d->address) {
        // Other brokers: what we followed there means nothing here. (Brokers of one list share
        // one store: moving between them keeps everything.)
        for (auto &follow : d->follows) {
            if (follow.call)
                follow.call->cancel();
        }
        d->follows.clear();
        d->failSubmits(QStringLiteral("the console connected to %1 before it was sent").arg(next));
        std::lock_guard lock(d->shared->mutex);
        d->shared->followNext.clear();
        d->shared->events.clear();
        d->shared->sessions.clear();
        d->shared->sessionSeq.clear();
    }
    if (next != d->address && d->permissions.known()) {
        d->permissions = {};
        emit permissionsChanged(d->permissions);
    }
    d->address = next;
    d->endpoints = splitAddress(next);
    if (d->endpoints.isEmpty())
        d->endpoints << defaultAddress();
    d->current = 0;
    d->failedInRound = 0;
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
                qCWarning(lcClient).noquote() << "asking who we are failed:" << statusText(status);
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
    d->openTimer.stop();
    d->stopCalls();
    d->failSubmits(QStringLiteral("the console disconnected before it was sent"));
    d->setState(ConnectionState::Disconnected, QStringLiteral("disconnected from %1").arg(d->address));
}

QString GrpcConsoleClient::address() const
{
    return d->address;
}

QString GrpcConsoleClient::endpoint() const
{
    return d->endpoints.value(d->current, d->address);
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
                qCWarning(lcClient).noquote() << "listing pools failed:" << statusText(status);
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
    // The figures may take the broker a while to count (it keeps them a minute): a longer deadline.
    d->unary<v1::GetStorageRequest, v1::StorageInfo>(
        &v1::OperationsService::StubInterface::async_interface::GetStorage, v1::GetStorageRequest(), kUnaryDeadlineMs,
        [sharedState](const grpc::Status &status, const v1::StorageInfo &response) {
            CheckpointStorage storage;
            QString error;
            if (status.ok())
                storage = toCheckpointStorage(response);
            else
                error = QStringLiteral("could not read the checkpoint store's figures: %1").arg(statusText(status));
            sharedState->post([storage, error](GrpcConsoleClient *c) { emit c->storageChanged(storage, error); });
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
    // One id per user action (the dialog makes it), the same on every retry of it.
    out.set_request_id(ss(request.requestId.isEmpty() ? QUuid::createUuid().toString(QUuid::WithoutBraces)
                                                      : request.requestId));
    d->sendSubmit(std::move(out), 1);
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
