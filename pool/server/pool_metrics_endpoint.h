#pragma once
// paddock-pool's /metrics (docs/metrics.md): the server pool.toml's [metrics] listen asks for,
// serving the pool's instruments (pool/metrics/pool_metrics.h: egress refusals) and, read from
// SandboxPool::stats() at each scrape, every tier's warm, claimed, starting and max sandboxes, its
// claims, cold fallbacks and claim-latency histogram. The pool keeps those figures already; the
// scrape copies them, the claim path gains nothing.
//
// TLS and token are the pool's own (--tls-cert, --tls-key, --tls-client-ca, --token-file): with
// them the scrape is HTTPS and needs the same bearer token as the broker's calls. The rule of
// every listener (metrics/listen_address.h): an address other than loopback needs TLS and a token.
//
// Threads: checkPoolMetrics(), start() and stop() on the main thread; scrapes on the server's
// threads (SandboxPool::stats() may be called from any thread).

#include "common/result.h"
#include "metrics/exposition.h"
#include "pool/core/sandbox_pool.h"
#include "pool/server/pool_auth.h"

#include <memory>
#include <string>

namespace paddock::metrics {
class MetricsServer;
}

namespace paddock::pool {

// "" when [metrics] listen may serve with these TLS and token flags; otherwise the problem and
// its fix (the address does not parse, or it is not loopback and the pool has no TLS or no token).
std::string checkPoolMetrics(const PoolConfig &config, const PoolTlsOptions &tls);

class PoolMetricsEndpoint {
public:
    // Serves config.metricsListen; pool outlives the endpoint. Errors name [metrics] listen and the
    // fix (an address in use, a certificate that does not load, a token file that cannot be read).
    static Result<std::unique_ptr<PoolMetricsEndpoint>> start(const PoolConfig &config, const PoolTlsOptions &tls,
                                                              const SandboxPool &pool);
    ~PoolMetricsEndpoint();
    PoolMetricsEndpoint(const PoolMetricsEndpoint &) = delete;
    PoolMetricsEndpoint &operator=(const PoolMetricsEndpoint &) = delete;

    // Stops serving and removes the collector. Idempotent.
    void stop();
    std::string url() const;

private:
    PoolMetricsEndpoint() = default;
    std::unique_ptr<metrics::MetricsServer> m_server;
    int m_collector = 0;
};

// The families read from the pool's figures (the endpoint's collector).
void writePoolState(metrics::Exposition &out, const PoolStats &stats);

} // namespace paddock::pool
