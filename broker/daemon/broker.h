#pragma once
// One running broker: the store, the configured pools, the broker's core (broker_core.h: policy,
// agents, decisions, cost, reviews, models, the step engine and the service) and the gRPC server on
// its sockets, started and stopped in order.
//
// Threads: start() and stop() from the main thread. Everything else runs on the threads of its
// parts (store writer, step workers, stream pump, gRPC).

#include "broker/config/broker_config.h"
#include "broker/daemon/store_opening.h"

#include <memory>

namespace paddock::daemon {

using broker_config::BrokerConfig;

class Broker {
public:
    explicit Broker(BrokerConfig config);
    ~Broker();

    Broker(const Broker &) = delete;
    Broker &operator=(const Broker &) = delete;

    // How start() waits between attempts to reach a PostgreSQL store that does not answer yet
    // (store_opening.h); by default it sleeps. paddockd's stops early on SIGTERM or SIGINT.
    void setStartWait(StartWait wait) { m_startWait = std::move(wait); }

    // Opens the store, connects the pools and starts serving on the socket. Errors name the fix;
    // Cancelled when the start wait was told to stop.
    Status start();
    // Stops accepting calls, ends the streams, lets each worker finish its step, commits and
    // checkpoints the store. Idempotent.
    void stop();

    const BrokerConfig &config() const { return m_config; }
    // The TCP port listen_tcp bound (useful with port 0); 0 without listen_tcp.
    int tcpPort() const { return m_tcpPort; }

private:
    struct Parts;
    BrokerConfig m_config;
    int m_tcpPort = 0;
    StartWait m_startWait = sleepingStartWait();
    std::unique_ptr<Parts> m_parts;
};

} // namespace paddock::daemon
