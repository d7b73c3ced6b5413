#pragma once
// The brokers one paddockctl command may use: the list of --broker / $PADDOCK_BROKER (one or more
// brokers of a team, sharing one PostgreSQL store), each with a channel of its own, and the one in
// use. With several, a command starts on the first, in the order given, that answers; when the one
// in use stops answering (UNAVAILABLE, connection refused, a deadline), failover() moves to the
// next that does. With one, failover() waits a little for it to answer again (a broker restarting).
//
// The stubs the commands hold (stubs()) stay the same object throughout: moving to another broker
// rebuilds them in place over its channel, so a BrokerCall made once keeps working after a move.
// Never move while an asynchronous call of those stubs is in flight.
//
// Threads: the caller's thread only, like the rest of paddockctl.

#include "cli/address.h"
#include "rpc/broker_stubs.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace paddock::cli {

class BrokerEndpoints {
public:
    struct Endpoint {
        BrokerAddress address;
        std::string shown;   // as the user wrote it
        std::shared_ptr<grpc::ChannelCredentials> credentials;
    };

    // endpoints: at least one. timeoutS: the deadline of every call that is not a follow.
    BrokerEndpoints(std::vector<Endpoint> endpoints, double timeoutS);

    // With several endpoints: uses the first, in order, that answers (each may take up to
    // kProbeMs); when none does, stays on the first, whose calls then fail naming the list.
    void start();
    // Another broker that answers: each other endpoint in list order after the one in use, the
    // one in use last, pass after pass until wait is over. True when one answered and is in use.
    bool failover(std::chrono::milliseconds wait);

    rpc::BrokerStubs &stubs() { return *m_stubs; }
    size_t count() const { return m_endpoints.size(); }
    // The endpoint in use, as the user wrote it.
    const std::string &shown() const { return m_endpoints[m_current].endpoint.shown; }
    // Every call that is not a follow gets a deadline: a broker that hangs must not hang scripts.
    void setDeadline(grpc::ClientContext &context) const;
    // Whether calls reach the broker in use. A status the broker itself returned leaves the
    // channel READY; a refused or lost connection does not.
    bool connected() const;

    // How long one endpoint may take to answer before the next is tried.
    static constexpr int kProbeMs = 3000;

private:
    struct Slot {
        Endpoint endpoint;
        std::shared_ptr<grpc::Channel> channel;
    };
    // Whether slot's broker accepts a connection before deadline; a refused one fails at once.
    static bool answers(Slot &slot, std::chrono::system_clock::time_point deadline);
    void use(size_t index);

    std::vector<Slot> m_endpoints;
    size_t m_current = 0;
    double m_timeoutS;
    std::unique_ptr<rpc::BrokerStubs> m_stubs;   // over m_endpoints[m_current]'s channel
};

} // namespace paddock::cli
