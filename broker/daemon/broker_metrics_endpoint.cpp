#include "broker/daemon/broker_metrics_endpoint.h"

#include "broker/auth/tokens.h"
#include "broker/core/session_state.h"
#include "broker/metrics/broker_metrics.h"
#include "broker/review/review_policy.h"
#include "broker/server/access.h"
#include "broker/store/auth_tables.h"
#include "common/clock.h"
#include "metrics/registry.h"
#include "metrics/server/metrics_server.h"

#include <spdlog/spdlog.h>

#include <map>

namespace paddock::daemon {

namespace {

using metrics::Exposition;
using metrics::Type;

constexpr core::SessionStatus kStatuses[] = {
    core::SessionStatus::Queued,    core::SessionStatus::Running, core::SessionStatus::WaitingApproval,
    core::SessionStatus::Paused,    core::SessionStatus::Succeeded, core::SessionStatus::Failed,
    core::SessionStatus::Cancelled,
};

constexpr const char *kReviewKinds[] = {review::kind::BulkChange, review::kind::TierEscalation,
                                        review::kind::BudgetExtension, review::kind::EgressException,
                                        review::kind::SecretAccess};

int64_t integerOf(const store::SqlValue &value)
{
    if (const auto *i = std::get_if<int64_t>(&value))
        return *i;
    if (const auto *d = std::get_if<double>(&value))
        return static_cast<int64_t>(*d);
    if (const auto *s = std::get_if<std::string>(&value))
        return std::strtoll(s->c_str(), nullptr, 10);   // a backend that answers numbers as text
    return 0;
}

std::string textOf(const store::SqlValue &value)
{
    const auto *s = std::get_if<std::string>(&value);
    return s ? *s : std::string();
}

// Sessions by status: every status written, 0 when none has it, so a series never vanishes.
bool writeSessions(Exposition &out, store::EventStore &store)
{
    auto rows = store.query({"SELECT status, COUNT(*) FROM sessions GROUP BY status", {}});
    if (!rows) {
        spdlog::warn("metrics: cannot count the sessions by status: {}", rows.error().message);
        return false;
    }
    std::map<std::string, int64_t> counts;
    for (const auto &status : kStatuses)
        counts[core::statusName(status)] = 0;
    for (const auto &row : *rows)
        if (row.size() >= 2)
            counts[textOf(row[0])] += integerOf(row[1]);
    out.family("paddock_sessions", "Sessions by status (the store's session table)", Type::Gauge);
    for (const auto &[status, count] : counts)
        out.sample({{"status", status}}, static_cast<double>(count));
    return true;
}

// Pending review items and the age of the oldest, by kind.
bool writeReviewQueue(Exposition &out, store::EventStore &store)
{
    auto rows = store.query({"SELECT kind, COUNT(*), MIN(created_unix_ms) FROM review_items WHERE state = 'pending' "
                             "GROUP BY kind",
                             {}});
    if (!rows) {
        spdlog::warn("metrics: cannot read the review queue: {}", rows.error().message);
        return false;
    }
    struct Queue {
        int64_t depth = 0;
        int64_t oldestUnixMs = 0;
    };
    std::map<std::string, Queue> byKind;
    for (const char *kind : kReviewKinds)
        byKind[kind];
    for (const auto &row : *rows)
        if (row.size() >= 3)
            byKind[textOf(row[0])] = {integerOf(row[1]), integerOf(row[2])};
    const int64_t now = nowUnixMs();
    out.family("paddock_review_queue_depth", "Review items waiting for a decision, by kind", Type::Gauge);
    for (const auto &[kind, queue] : byKind)
        out.sample({{"kind", kind}}, static_cast<double>(queue.depth));
    out.family("paddock_review_queue_oldest_age_seconds",
               "Age of the oldest review item waiting for a decision, by kind (0 when none waits)", Type::Gauge);
    for (const auto &[kind, queue] : byKind)
        out.sample({{"kind", kind}},
                   queue.depth > 0 ? static_cast<double>(std::max<int64_t>(now - queue.oldestUnixMs, 0)) / 1000.0 : 0.0);
    return true;
}

void writePools(Exposition &out, const placement::PoolSet &pools)
{
    out.family("paddock_pool_up", "1 when the pool's last health check succeeded, by configured pool", Type::Gauge);
    const auto &entries = pools.entries();
    for (size_t i = 0; i < entries.size(); ++i)
        out.sample({{"pool", entries[i].client->name()}}, pools.health(i).healthy ? 1.0 : 0.0);
    out.family("paddock_pool_lost", "1 when the pool has been unhealthy long enough that its sessions move elsewhere",
               Type::Gauge);
    for (size_t i = 0; i < entries.size(); ++i)
        out.sample({{"pool", entries[i].client->name()}}, pools.health(i).lost ? 1.0 : 0.0);
}

// The answer to a scrape's bearer token: "" lets it in, otherwise why not (never the token).
std::string checkScrapeToken(server::Access &access, std::string_view token)
{
    bool persist = false;
    const int64_t now = nowUnixMs();
    auto info = access.tokens().verify(token, now, &persist);
    if (!info)
        return info.error().message;
    if (auto identity = access.principals().byName(info->principal); !identity)
        return "token " + info->id + " names principal '" + info->principal
            + "', which the broker's config no longer lists: " + identity.error().message;
    if (persist) {
        store::AppendRequest touch;   // last_used is a hint: the scrape does not wait for it
        touch.writes.push_back(store::tokenTouch(info->id, now));
        (void)access.store().append(std::move(touch));
    }
    return {};
}

} // namespace

void writeBrokerState(Exposition &out, store::EventStore &store, const placement::PoolSet &pools)
{
    const bool sessions = writeSessions(out, store);
    const bool reviews = writeReviewQueue(out, store);
    out.family("paddock_store_up", "1 when this scrape could read the store (sessions and review queue)", Type::Gauge);
    out.sample(sessions && reviews ? 1.0 : 0.0);
    writePools(out, pools);
}

Result<std::unique_ptr<BrokerMetricsEndpoint>> BrokerMetricsEndpoint::start(const broker_config::MetricsConfig &config,
                                                                            store::EventStore &store,
                                                                            const placement::PoolSet &pools,
                                                                            server::Access &access)
{
    broker_metrics::brokerMetrics();   // every instrument on the first page, at 0
    std::unique_ptr<BrokerMetricsEndpoint> endpoint(new BrokerMetricsEndpoint());
    metrics::MetricsServerOptions options;
    options.listen = config.listen;
    options.setting = "[metrics] listen" + (config.where.empty() ? std::string() : " in " + config.where);
    options.tlsCert = config.tlsCert;
    options.tlsKey = config.tlsKey;
    if (config.tls()) {
        options.checkToken = [&access](std::string_view token) { return checkScrapeToken(access, token); };
        options.onRefusal = [&access](std::string_view why, std::string_view token) {
            access.recordUnauthenticated("GET /metrics", token.empty() ? std::string() : auth::tokenIdOf(token),
                                         std::string(why));
        };
        options.tokenHint = "give Prometheus a token from `paddockctl tokens create` (authorization.credentials_file "
                            "in its scrape config)";
    }
    auto server = metrics::MetricsServer::start(std::move(options));
    if (!server)
        return std::unexpected(server.error());
    endpoint->m_server = std::move(*server);
    endpoint->m_collector = metrics::registry().addCollector(
        [&store, &pools](Exposition &out) { writeBrokerState(out, store, pools); });
    return endpoint;
}

BrokerMetricsEndpoint::~BrokerMetricsEndpoint()
{
    stop();
}

void BrokerMetricsEndpoint::stop()
{
    if (m_server)
        m_server->stop();
    if (m_collector) {
        metrics::registry().removeCollector(m_collector);
        m_collector = 0;
    }
}

std::string BrokerMetricsEndpoint::url() const
{
    return m_server ? m_server->url() : std::string();
}

} // namespace paddock::daemon
