#include "pool/server/pool_metrics_endpoint.h"

#include "metrics/listen_address.h"
#include "metrics/registry.h"
#include "metrics/server/metrics_server.h"
#include "pool/metrics/pool_metrics.h"

#include <climits>

namespace paddock::pool {

namespace {

using metrics::Exposition;
using metrics::Type;

constexpr const char *kSetting = "[metrics] listen in pool.toml";

// One gauge family, a sample per tier.
template <typename F>
void perTier(Exposition &out, const PoolStats &stats, const char *name, const char *help, Type type, F value)
{
    out.family(name, help, type);
    for (const auto &tier : stats.tiers)
        out.sample({{"tier", tier.config.name}}, static_cast<double>(value(tier)));
}

// The claim-latency histogram of a tier, from the pool's microsecond buckets (the last one
// unbounded) to seconds.
metrics::HistogramSnapshot claimHistogram(const TierStats &tier)
{
    metrics::HistogramSnapshot out;
    for (size_t i = 0; i < tier.latencyBucketsUs.size() && i < tier.latencyCounts.size(); ++i) {
        if (tier.latencyBucketsUs[i] != INT64_MAX)
            out.bounds.push_back(static_cast<double>(tier.latencyBucketsUs[i]) / 1e6);
        out.counts.push_back(static_cast<uint64_t>(tier.latencyCounts[i]));
    }
    if (out.counts.size() == out.bounds.size())
        out.counts.push_back(0);   // no unbounded bucket in the pool's list: +Inf holds nothing more
    out.sum = static_cast<double>(tier.claimUsTotal) / 1e6;
    return out;
}

} // namespace

void writePoolState(Exposition &out, const PoolStats &stats)
{
    perTier(out, stats, "paddock_pool_warm_sandboxes", "Warm sandboxes ready to claim, by tier", Type::Gauge,
            [](const TierStats &t) { return t.warm; });
    perTier(out, stats, "paddock_pool_claimed_sandboxes", "Sandboxes claimed by sessions, by tier", Type::Gauge,
            [](const TierStats &t) { return t.claimed; });
    perTier(out, stats, "paddock_pool_starting_sandboxes", "Sandboxes starting (refills and cold starts), by tier",
            Type::Gauge, [](const TierStats &t) { return t.starting; });
    perTier(out, stats, "paddock_pool_max_sandboxes", "The tier's max_count: warm, claimed and starting together",
            Type::Gauge, [](const TierStats &t) { return t.config.maxCount; });
    perTier(out, stats, "paddock_pool_warm_target_sandboxes", "The tier's warm_count: warm sandboxes the pool keeps",
            Type::Gauge, [](const TierStats &t) { return t.config.warmCount; });
    perTier(out, stats, "paddock_pool_cold_fallbacks_total",
            "Claims that found no warm sandbox and started one cold, by tier", Type::Counter,
            [](const TierStats &t) { return t.coldFallbacks; });
    out.family("paddock_pool_claim_duration_seconds", "Time to claim a sandbox, warm or cold, by tier",
               Type::Histogram);
    for (const auto &tier : stats.tiers)
        out.histogram({{"tier", tier.config.name}}, claimHistogram(tier));
    out.family("paddock_pool_uptime_seconds", "Seconds since the pool started", Type::Gauge);
    out.sample(static_cast<double>(stats.uptimeMs) / 1000.0);
}

std::string checkPoolMetrics(const PoolConfig &config, const PoolTlsOptions &tls)
{
    if (config.metricsListen.empty())
        return {};
    auto address = metrics::parseListenAddress(config.metricsListen, kSetting);
    if (!address)
        return address.error().message;
    if (metrics::isLoopbackHost(address->host) || (!tls.certFile.empty() && !tls.tokenFile.empty()))
        return {};
    return std::string(kSetting) + " is \"" + config.metricsListen + "\", not a loopback address, and a scrape from "
        "another host must use TLS and a bearer token, as the pool's gRPC port does: start paddock-pool with "
        "--tls-cert, --tls-key and --token-file (scrapes then send that token), or listen on 127.0.0.1";
}

Result<std::unique_ptr<PoolMetricsEndpoint>> PoolMetricsEndpoint::start(const PoolConfig &config,
                                                                        const PoolTlsOptions &tls,
                                                                        const SandboxPool &pool)
{
    if (auto problem = checkPoolMetrics(config, tls); !problem.empty())
        return fail(ErrorCode::InvalidArgument, problem);
    pool_metrics::poolMetrics();   // every instrument on the first page
    metrics::MetricsServerOptions options;
    options.listen = config.metricsListen;
    options.setting = kSetting;
    options.tlsCert = tls.certFile;
    options.tlsKey = tls.keyFile;
    options.clientCa = tls.clientCaFile;
    if (!tls.tokenFile.empty()) {
        auto token = readPoolToken(tls.tokenFile);
        if (!token)
            return std::unexpected(token.error());
        options.checkToken = [token = std::move(*token)](std::string_view presented) -> std::string {
            if (constantTimeEquals(presented, token))
                return {};
            return "the bearer token is not this pool's (--token-file); give Prometheus the pool's token "
                   "(authorization.credentials_file in its scrape config)";
        };
        options.tokenHint = "give Prometheus the pool's token, the one line of its --token-file "
                            "(authorization.credentials_file in the scrape config)";
    }
    auto server = metrics::MetricsServer::start(std::move(options));
    if (!server)
        return std::unexpected(server.error());
    std::unique_ptr<PoolMetricsEndpoint> endpoint(new PoolMetricsEndpoint());
    endpoint->m_server = std::move(*server);
    endpoint->m_collector = metrics::registry().addCollector([&pool](Exposition &out) { writePoolState(out, pool.stats()); });
    return endpoint;
}

PoolMetricsEndpoint::~PoolMetricsEndpoint()
{
    stop();
}

void PoolMetricsEndpoint::stop()
{
    if (m_server)
        m_server->stop();
    if (m_collector) {
        metrics::registry().removeCollector(m_collector);
        m_collector = 0;
    }
}

std::string PoolMetricsEndpoint::url() const
{
    return m_server ? m_server->url() : std::string();
}

} // namespace paddock::pool
