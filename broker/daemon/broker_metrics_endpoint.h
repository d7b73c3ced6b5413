#pragma once
// paddockd's /metrics (docs/metrics.md): the server [metrics] asks for, serving the broker's
// instruments (broker/metrics/broker_metrics.h: appends, steps, model calls, checkpoints) and what
// the broker reads from its own state at each scrape instead of keeping copies: sessions by status
// and the review queue (one grouped query each on the store's read connections), and each pool's
// health (the pool set's last check).
//
// Over TLS every scrape needs a bearer token of a principal the config lists, the same tokens
// listen_tcp takes (paddockctl tokens create); a refused scrape is audited like a refused call.
// Without TLS (a loopback address only: metrics_config.h) no token is asked for.
//
// Threads: start() and stop() on the broker's main thread; scrapes run on the server's threads
// (the store and the pool set are safe to read from any thread).

#include "broker/config/metrics_config.h"
#include "broker/placement/pool_set.h"
#include "broker/store/event_store.h"
#include "common/result.h"
#include "metrics/exposition.h"

#include <memory>
#include <string>

namespace paddock::server {
class Access;
}

namespace paddock::metrics {
class MetricsServer;
}

namespace paddock::daemon {

class BrokerMetricsEndpoint {
public:
    // Binds [metrics] listen and serves. store, pools and access outlive the endpoint. Errors name
    // [metrics] and the fix (an address in use, a certificate that does not load).
    static Result<std::unique_ptr<BrokerMetricsEndpoint>> start(const broker_config::MetricsConfig &config,
                                                                store::EventStore &store,
                                                                const placement::PoolSet &pools, server::Access &access);
    ~BrokerMetricsEndpoint();
    BrokerMetricsEndpoint(const BrokerMetricsEndpoint &) = delete;
    BrokerMetricsEndpoint &operator=(const BrokerMetricsEndpoint &) = delete;

    // Stops serving and removes the collector. Idempotent.
    void stop();
    // "http://127.0.0.1:9464/metrics", for the log.
    std::string url() const;

private:
    BrokerMetricsEndpoint() = default;
    std::unique_ptr<metrics::MetricsServer> m_server;
    int m_collector = 0;
};

// The families read from the broker's state at scrape time (the endpoint's collector).
void writeBrokerState(metrics::Exposition &out, store::EventStore &store, const placement::PoolSet &pools);

} // namespace paddock::daemon
