// PostgreSQL EventStore. docs/store.md describes the schema, leases and how a lost server is handled.
//
// This file opens and closes the store: the writer's connection, the migrations, the live sessions,
// and the reconnection of a writer whose server went away. The rest of PostgresEventStore is in
// postgres_event_store_{schema,commit,statements,reads}.cpp and postgres_leases.cpp
// (postgres_event_store_internal.h).
//
// Threads: open() runs before the writer thread starts; close() may be called from any thread
// (m_closeMutex), joins the writer and then closes the connections.

#include "broker/store/postgres_event_store.h"
#include "broker/store/postgres_event_store_internal.h"

#include "broker/store/state_json.h"

#include <spdlog/spdlog.h>

namespace paddock::store {

Status PostgresEventStore::connectWriter()
{
    m_lastConnectAttempt = std::chrono::steady_clock::now();
    auto db = pg::Connection::open(m_conninfo, m_applicationName);
    if (!db)
        return std::unexpected(db.error());
    m_writeDb = std::move(*db);
    m_prepared.clear();   // a new connection has none of them
    // Every commit waits for its WAL flush (the server's default, asked for in case a role or
    // database lowered it): an acknowledged append survives the server being killed. fullSync
    // therefore needs nothing more here.
    return m_writeDb.run("SET synchronous_commit = on", "setting synchronous_commit");
}

Status PostgresEventStore::open()
{
    if (auto status = connectWriter(); !status)
        return status;
    if (auto status = migratePostgres(m_writeDb); !status)
        return status;
    m_indexes = makeEventIndexes();
    if (auto status = loadLiveSessions(); !status)
        return status;
    // One reader now, so a server that refuses a second connection shows at open.
    if (auto status = m_readers.probe(); !status)
        return status;

    m_appends.start(*this);
    m_feed = std::thread([this] { feedLoop(); });
    // Listening before open() returns: another broker's commit made after it is heard. A server
    // that refuses the feed's connection now (a connection limit, say) does not stop the store:
    // the feed connects later and reads the table for what it missed.
    std::unique_lock lock(m_feedReadyMutex);
    if (!m_feedReadyCv.wait_for(lock, std::chrono::seconds(10), [&] { return m_feedReady; }))
        spdlog::warn("store: not yet listening for other brokers' commits at {}; going on without", m_target);
    return {};
}

Status PostgresEventStore::loadLiveSessions()
{
    m_live.clear();
    auto result = m_writeDb.exec("SELECT state FROM sessions WHERE status IN ('queued', 'running', "
                                 "'waiting_approval', 'paused') OR needs_work = 1");
    if (!pg::ok(result.get()))
        return std::unexpected(m_writeDb.error(result.get(), "loading live sessions"));
    int needWork = 0;
    for (int row = 0; row < PQntuples(result.get()); ++row) {
        auto state = sessionStateFromJson(pg::cellText(result.get(), row, 0));
        if (!state)
            return fail(ErrorCode::Internal, "the sessions table of " + m_target
                                                 + " holds a state that is not JSON; the database is damaged");
        needWork += state->needsWork() ? 1 : 0;
        m_live.emplace(state->id, std::move(*state));
    }
    spdlog::info("store: opened PostgreSQL at {} ({} live sessions, {} need work)", m_target, m_live.size(), needWork);
    wakeLeaseWaiters();
    return {};
}

Status PostgresEventStore::ensureWriter()
{
    if (m_writeDb.alive())
        return {};
    // Not more often than reconnectDelayMs: while the server is down, each group is answered
    // Unavailable at once instead of every one waiting for a connect timeout.
    const auto sinceLast = std::chrono::steady_clock::now() - m_lastConnectAttempt;
    if (sinceLast < std::chrono::milliseconds(m_reconnectDelayMs))
        return fail(ErrorCode::Unavailable, "PostgreSQL at " + m_target
                                                + " is not answering; the store reconnects on its own, retry");
    m_writeDb.closeNow();
    if (auto status = connectWriter(); !status) {
        return fail(ErrorCode::Unavailable, status.error().message);
    }
    ++m_stats.reconnects;
    spdlog::warn("store: reconnected to PostgreSQL at {}", m_target);
    // A commit whose answer was lost may or may not have happened: the tails come from the database.
    return loadLiveSessions();
}

void PostgresEventStore::close()
{
    std::lock_guard closeLock(m_closeMutex);
    if (m_closed)
        return;
    m_closed = true;
    m_appends.close();   // the writer commits everything queued before it returns
    m_feedStop = true;
    if (m_feed.joinable())
        m_feed.join();
    if (m_appends.started()) {
        const auto &queued = m_appends.stats();
        spdlog::info("store: writer committed {} events in {} groups ({} retried request by request, {} tails "
                     "moved by other brokers); ms beginning and locking {}, deciding {}, writing and committing {}; "
                     "{} reconnects to {}",
                     queued.events, queued.groups, m_stats.slowGroups, m_stats.staleTails, m_stats.beginUs / 1000,
                     m_stats.decideUs / 1000, m_stats.writeUs / 1000, m_stats.reconnects, m_target);
    }
    // A clean close gives back the leases this broker holds: its workers are gone, and the
    // sessions need not wait for the expiry. A crash leaves them to expire.
    std::map<std::string, uint64_t> held;
    {
        std::lock_guard lock(m_leaseMutex);
        m_leasesClosed = true;
        held.swap(m_held);
    }
    m_leaseCv.notify_all();
    for (const auto &[sessionId, token] : held) {
        Lease lease;
        lease.sessionId = sessionId;
        lease.token = token;
        releaseLease(lease, 0);
    }
    m_readers.close();
    m_writeDb.closeNow();
}

Result<std::unique_ptr<EventStore>> openPostgresEventStore(const std::string &conninfo, const PostgresOptions &options)
{
    auto store = std::make_unique<PostgresEventStore>(conninfo, options);
    if (auto status = store->open(); !status)
        return std::unexpected(status.error());
    return std::unique_ptr<EventStore>(std::move(store));
}

int postgresSchemaVersion() { return kPostgresSchemaVersion; }

} // namespace paddock::store
