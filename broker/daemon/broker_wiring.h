#pragma once
// What a broker serves with, wired from its config as paddockd runs it: the agents' and decisions'
// stores, the policy file's review and tier tables, the cost ledger and budgets, the review desk,
// the models, the secrets, the stream hub, the environment decider, the checkpoint store with its
// collection (broker/checkpoints/checkpoint_collector.h), the step engine and the gRPC API over
// them (broker/server/broker_api.h). Broker (broker.h) puts the configured pools, the
// sockets and the gRPC server around it; tests/support/in_process_broker puts a test's pools and
// socket around the same wiring, so the tests serve what paddockd serves.
//
// Threads: create(), startEngine(), startReviews(), beginShutdown() and stop() on the owner's
// thread. The parts run on their own threads (step workers, stream pump, review expiry, the
// checkpoint collection, started by create()) and the service on gRPC's.

#include "broker/auth/principals.h"
#include "broker/placement/pool_set.h"
#include "broker/config/broker_config.h"
#include "broker/store/event_store.h"
#include "common/result.h"

#include <memory>

namespace paddock::server {
class BrokerApi;
class StreamHub;
} // namespace paddock::server

namespace paddock::daemon {

using broker_config::BrokerConfig;

class BrokerWiring {
public:
    // store and pools outlive the wiring; the pools are added before the first session runs.
    // principals: who may call, built by the caller (from config.principals, or a test's own map).
    static Result<std::unique_ptr<BrokerWiring>> create(const BrokerConfig &config, store::EventStore &store,
                                                      placement::PoolSet &pools,
                                                      std::shared_ptr<const auth::PrincipalMap> principals);
    ~BrokerWiring();

    BrokerWiring(const BrokerWiring &) = delete;
    BrokerWiring &operator=(const BrokerWiring &) = delete;

    server::BrokerApi &api();
    server::StreamHub &hub();

    // The step workers take sessions from now on (a broker without them keeps sessions queued).
    void startEngine();
    // Due review items expire every second from now on (without it they expire when read).
    void startReviews();
    // Live streams end with UNAVAILABLE; call before shutting the gRPC server down.
    void beginShutdown();
    // Stops the review expiry, lets each worker finish its step and joins the stream pump. Call
    // after the gRPC server has shut down. Idempotent; the destructor calls it.
    void stop();

private:
    struct Parts;
    BrokerWiring();
    std::unique_ptr<Parts> m_parts;
};

} // namespace paddock::daemon
