#pragma once
// GrpcConsoleClient's private part, shared by the files that implement it: the connection and the
// session calls (grpc_console_client.cpp) and the operator calls (grpc_operator_calls.cpp).
// Internal to app/client.
//
// Threads: everything here is the GUI thread's, except `shared` (see grpc_console_streams.h).

#include "app/client/grpc_console_streams.h"
#include "app/client/grpc_governance_client.h"

#include <QTimer>

#include <string>
#include <vector>

namespace paddock::console {

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
        openTimer.setSingleShot(true);
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
    // The gRPC target of one entry of the address list ("unix:/p", "/p", "./p" or "host:port").
    static std::string targetOf(const QString &entry);
    // A submit with its request_id, sent now when connected, else when the connection is back
    // (to whichever broker of the list answers); after kSubmitAttempts it is answered as failed.
    void sendSubmit(v1::SubmitSessionRequest request, int attempt);
    // Sends the submits that wait for a connection; answers them as failed when there will be none.
    void flushSubmits();
    void failSubmits(const QString &why);
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
    QString address;       // as given: one broker, or several separated by commas
    QStringList endpoints; // address split at its commas: the brokers to move between
    int current = 0;       // the entry of endpoints in use
    int failedInRound = 0; // entries tried one after the other without a watch opening
    std::string target;    // endpoints[current] as gRPC dials it
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
    // Started with each attempt: a broker that accepts and never answers the watch is left for
    // the next one when it fires.
    QTimer openTimer;
    struct PendingSubmit {
        quint64 id = 0;
        v1::SubmitSessionRequest request;
        int attempt = 1;
    };
    std::vector<PendingSubmit> pendingSubmits;   // waiting for a connection, oldest first
    quint64 nextSubmit = 1;
    int initialBackoffMs = 100;
    int maxBackoffMs = 5'000;
    int backoffMs = 100;
    // The governance calls share the channel while connected.
    GrpcGovernanceClient *governance = nullptr;
};

// One unary call with a deadline; done(status, response) runs on gRPC's thread.
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

} // namespace paddock::console
