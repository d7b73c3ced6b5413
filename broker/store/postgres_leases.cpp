// PostgresEventStore's leases, in the database (the leases table of schema version 5): a grant
// picks the oldest session that needs work and is neither leased nor backing off, FOR UPDATE SKIP
// LOCKED so that concurrent grants (threads here, or other brokers) never wait on each other or
// take the same session. Expiries are on the server's clock, so every broker compares them the
// same way. The fencing token of a grant comes from one sequence: it only grows, per session and
// overall, and renew/release of a grant that was replaced find nothing to change.
//
// Waiting: a worker with nothing to lease sleeps until a commit of this store leaves a session
// needing work, a release, the next expiry or backoff the database reports, or kPollMs (what
// another broker does is seen no later than that; LISTEN/NOTIFY will wake it sooner).
//
// Lease::expiresAtUs is on this process's monotonic clock, taken before the grant was asked for:
// never later than the server's expiry.
//
// Threads: any thread; each call borrows a read connection. m_leaseMutex guards the wait state
// and m_held.

#include "broker/store/postgres_event_store_internal.h"

#include "common/clock.h"

#include <spdlog/spdlog.h>

namespace paddock::store {

namespace {

constexpr int64_t kMinLeaseMs = 1;
constexpr int64_t kPollMs = 500;

std::string grantSql()
{
    return std::string("UPDATE leases SET token = nextval('lease_tokens'), worker_id = $1, expires_us = ") + kPgNowUs
        + " + $2 * 1000, retry_after_us = 0, grant_order = nextval('lease_order') WHERE session_id = ("
          "SELECT l.session_id FROM leases l JOIN sessions s ON s.id = l.session_id "
          "WHERE s.needs_work = 1 AND l.expires_us <= " + kPgNowUs + " AND l.retry_after_us <= " + kPgNowUs
        + " ORDER BY l.grant_order LIMIT 1 FOR UPDATE OF l SKIP LOCKED) RETURNING session_id, token";
}

// Microseconds until a lease or a backoff of a session that needs work ends; NULL when none will.
std::string nextChangeSql()
{
    return std::string("SELECT min(CASE WHEN l.expires_us > n.now THEN l.expires_us ELSE l.retry_after_us END) - "
                       "min(n.now) FROM leases l JOIN sessions s ON s.id = l.session_id, (SELECT ")
        + kPgNowUs + " AS now) n WHERE s.needs_work = 1 AND (l.expires_us > n.now OR l.retry_after_us > n.now)";
}

} // namespace

void PostgresEventStore::wakeLeaseWaiters()
{
    {
        std::lock_guard lock(m_leaseMutex);
        ++m_workVersion;
    }
    m_leaseCv.notify_all();
}

std::optional<Lease> PostgresEventStore::acquireLease(const std::string &workerId, int64_t leaseMs, int64_t waitMs)
{
    leaseMs = std::max(leaseMs, kMinLeaseMs);
    const int64_t deadlineUs = monotonicUs() + std::max<int64_t>(waitMs, 0) * 1000;
    const std::string grant = grantSql();
    for (;;) {
        uint64_t version;
        {
            std::lock_guard lock(m_leaseMutex);
            if (m_leasesClosed)
                return std::nullopt;
            version = m_workVersion;
        }
        const int64_t askedAtUs = monotonicUs();
        auto granted = withReader<std::optional<Lease>>([&](pg::Connection &db) -> Result<std::optional<Lease>> {
            pg::Params params;
            params.add(workerId);
            params.add(leaseMs);
            auto result = db.exec(grant, params);
            if (!pg::ok(result.get()))
                return std::unexpected(db.error(result.get(), "granting a lease"));
            if (PQntuples(result.get()) == 0)
                return std::optional<Lease>();
            return Lease{pg::cellText(result.get(), 0, 0), workerId,
                         static_cast<uint64_t>(pg::cellInt(result.get(), 0, 1)), askedAtUs + leaseMs * 1000};
        });
        // The database is away: wait and ask again, saying so once per outage.
        if (!granted && !m_leasesUnavailable.exchange(true))
            spdlog::warn("store: {}; sessions are not leased until it answers", granted.error().message);
        else if (granted && m_leasesUnavailable.exchange(false))
            spdlog::info("store: leasing sessions again");
        if (granted && *granted) {
            std::lock_guard lock(m_leaseMutex);
            m_held[(*granted)->sessionId] = (*granted)->token;
            return *granted;
        }

        const int64_t nowUs = monotonicUs();
        if (nowUs >= deadlineUs)
            return std::nullopt;
        int64_t wakeUs = std::min(deadlineUs, nowUs + kPollMs * 1000);
        if (granted) {
            auto next = withReader<int64_t>([&](pg::Connection &db) -> Result<int64_t> {
                auto result = db.exec(nextChangeSql().c_str());
                if (!pg::ok(result.get()))
                    return std::unexpected(db.error(result.get(), "looking for the next lease expiry"));
                return PQgetisnull(result.get(), 0, 0) ? int64_t{-1} : pg::cellInt(result.get(), 0, 0);
            });
            if (next && *next >= 0)
                wakeUs = std::min(wakeUs, nowUs + std::max<int64_t>(*next, 1));
        }
        std::unique_lock lock(m_leaseMutex);
        m_leaseCv.wait_for(lock, std::chrono::microseconds(std::max<int64_t>(wakeUs - nowUs, 1)),
                           [&] { return m_leasesClosed || m_workVersion != version; });
    }
}

bool PostgresEventStore::renewLease(const Lease &lease, int64_t leaseMs)
{
    leaseMs = std::max(leaseMs, kMinLeaseMs);
    const std::string sql = std::string("UPDATE leases SET expires_us = ") + kPgNowUs
        + " + $3 * 1000 WHERE session_id = $1 AND token = $2 AND expires_us > " + kPgNowUs;
    auto renewed = withReader<bool>([&](pg::Connection &db) -> Result<bool> {
        pg::Params params;
        params.add(lease.sessionId);
        params.add(static_cast<int64_t>(lease.token));
        params.add(leaseMs);
        auto result = db.exec(sql, params);
        if (!pg::ok(result.get()))
            return std::unexpected(db.error(result.get(), "renewing the lease of session " + lease.sessionId));
        return std::string_view(PQcmdTuples(result.get())) == "1";
    });
    if (!renewed) {
        // Unknown is not held: the worker stops, and the lease expires if it was still ours.
        spdlog::warn("store: {}", renewed.error().message);
        return false;
    }
    return *renewed;
}

void PostgresEventStore::releaseLease(const Lease &lease, int64_t retryAfterMs)
{
    // token = 0: a released grant fences its holder out as a new grant would.
    const std::string sql = std::string("UPDATE leases SET token = 0, expires_us = 0, worker_id = '', retry_after_us = "
                                        "CASE WHEN $3 > 0 THEN ")
        + kPgNowUs + " + $3 * 1000 ELSE 0 END WHERE session_id = $1 AND token = $2";
    auto released = withReader<bool>([&](pg::Connection &db) -> Result<bool> {
        pg::Params params;
        params.add(lease.sessionId);
        params.add(static_cast<int64_t>(lease.token));
        params.add(std::max<int64_t>(retryAfterMs, 0));
        auto result = db.exec(sql, params);
        if (!pg::ok(result.get()))
            return std::unexpected(db.error(result.get(), "releasing the lease of session " + lease.sessionId));
        return true;
    });
    if (!released)
        spdlog::warn("store: {}; the lease ends at its expiry instead", released.error().message);
    {
        std::lock_guard lock(m_leaseMutex);
        if (auto it = m_held.find(lease.sessionId); it != m_held.end() && it->second == lease.token)
            m_held.erase(it);
    }
    // Waiters also need waking for a backoff: they ask the database when to look again.
    wakeLeaseWaiters();
}

} // namespace paddock::store
