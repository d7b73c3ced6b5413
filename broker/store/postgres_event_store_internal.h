#pragma once
// PostgresEventStore, the PostgreSQL EventStore behind openPostgresEventStore
// (postgres_event_store.h), and what its pieces share. Private to broker/store. The pieces:
//   postgres_event_store.cpp          opening (connections, migrations, live sessions), reconnecting, close
//   postgres_event_store_schema.cpp   the numbered migrations
//   postgres_event_store_commit.cpp   one group commit: decide each request, one transaction, publish
//   postgres_event_store_statements.cpp  what a group sends: events, projection, side statements, lease checks
//   postgres_event_store_reads.cpp    the read connections and every read (events, sessions, queries)
//   postgres_leases.cpp               leases in the database
//
// What both backends do alike is shared: the queue, the writer thread and the commit listeners
// are an AppendQueue (append_queue.h) whose GroupCommitter this store is; a group's bookkeeping is
// group_progress.h, the read connections a ReaderPool (reader_pool.h), the request checks
// append_checks.h.
//
// Threads: every public method may be called from any thread. The writer thread owns m_writeDb,
// m_indexes, m_live and m_stats (open() and close() use them before it starts and after it is
// joined). Each of the other members names the mutex that guards it.

#include "broker/store/append_queue.h"
#include "broker/store/event_index.h"
#include "broker/store/group_progress.h"
#include "broker/store/pg_handle.h"
#include "broker/store/postgres_event_store.h"
#include "broker/store/reader_pool.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

namespace paddock::store {

// The schema version this build writes (paddock_schema.version); one migration per version
// (postgres_event_store_schema.cpp).
inline constexpr int kPostgresSchemaVersion = 5;
// The server's clock in microseconds: lease expiries are compared on one clock, whichever broker asks.
inline constexpr const char *kPgNowUs = "(extract(epoch from clock_timestamp()) * 1000000)::bigint";

// Runs the migrations the database lacks, each in its own transaction with the version bump;
// refuses a schema from a newer Paddock. On the writer's connection, before the writer starts.
Status migratePostgres(pg::Connection &db);

class PostgresEventStore final : public EventStore, private GroupCommitter {
public:
    PostgresEventStore(std::string conninfo, const PostgresOptions &options)
        : m_conninfo(std::move(conninfo))
        , m_target(pg::describeTarget(m_conninfo))
        , m_reconnectDelayMs(std::max(options.reconnectDelayMs, 1))
        , m_readers([this] { return pg::Connection::open(m_conninfo); }, closingMessage())
        , m_appends(options.maxBatchEvents, options.maxBatchDelayUs, closingMessage())
    {
    }

    ~PostgresEventStore() override { close(); }

    Status open();

    // The writer side is the AppendQueue's; this store commits what it hands over (commitGroup).
    std::future<Result<AppendResult>> append(AppendRequest request) override
    {
        return m_appends.append(std::move(request));
    }
    void appendThen(AppendRequest request, AppendCallback done) override
    {
        m_appends.appendThen(std::move(request), std::move(done));
    }
    Result<std::vector<AppendResult>> appendAll(std::vector<AppendRequest> requests) override
    {
        return m_appends.appendAll(std::move(requests));
    }
    Result<std::vector<core::Event>> readEvents(const std::string &sessionId, int64_t fromSeq, int limit) override;
    Result<core::SessionState> getSession(const std::string &sessionId) override;
    Result<SessionPage> listSessions(const SessionQuery &query) override;
    Result<std::vector<SqlRow>> query(const SqlStatement &statement) override;

    std::optional<Lease> acquireLease(const std::string &workerId, int64_t leaseMs, int64_t waitMs) override;
    bool renewLease(const Lease &lease, int64_t leaseMs) override;
    void releaseLease(const Lease &lease, int64_t retryAfterMs) override;

    int addCommitListener(std::function<void(const CommitNotice &)> listener) override
    {
        return m_appends.addCommitListener(std::move(listener));
    }
    void removeCommitListener(int id) override { m_appends.removeCommitListener(id); }

    void close() override;

private:
    // What a group sends in one go when no request fails (the fast path): every event in one
    // INSERT, then each request's index rows and statements beside the log, in request order.
    struct Batch {
        std::vector<core::Event> events;
        std::vector<SqlStatement> statements;
    };

    Status connectWriter();
    // Before a group: a writer whose connection was lost connects again (at most every
    // reconnectDelayMs), then forgets the tails it kept: a commit whose answer was lost may or may
    // not have happened.
    Status ensureWriter();
    Status loadLiveSessions();
    // Runs fn on a read connection; once more on a fresh one when the borrowed one had gone stale
    // (the server restarted while it sat idle).
    template <typename T, typename Fn>
    Result<T> withReader(Fn &&fn);

    // GroupCommitter. One transaction for the group: the fast path first, request by request in
    // savepoints when a statement failed; then memory, listeners and callers follow.
    void commitGroup(std::vector<PendingAppend> &group, bool allOrNothing) override;
    void abandonGroup() override;
    // One pass over the group inside BEGIN: with savepoints, each request is written as it is
    // reached and a failing one is refused alone; without, the writes gather in batch. The error
    // fails the pass (the transaction must be rolled back).
    std::optional<Error> applyGroup(std::vector<PendingAppend> &group, GroupProgress &progress, bool savepoints);
    std::optional<Error> applyOne(AppendRequest &request, int64_t nowMs, GroupProgress &progress,
                                  RequestOutcome &outcome, Batch *batch);
    Result<const core::SessionState *> sessionForWrite(const std::string &sessionId, const GroupProgress &progress,
                                                       std::optional<core::SessionState> &loaded);
    Status insertEvents(const std::vector<core::Event> &events);
    // Whether token is the session's current, unexpired lease; the row stays locked (FOR SHARE)
    // until the group's transaction ends.
    Result<bool> leaseHeld(const std::string &sessionId, uint64_t token);
    Status runStatements(const std::vector<SqlStatement> &statements);
    // runStatements without waiting for each answer (libpq's pipeline mode): the fast path's
    // statements cost one round trip per chunk. The first error fails the pass.
    Status runPipelined(const std::vector<SqlStatement> &statements);
    // The name of sql (portable) prepared on the writer's connection, preparing it the first time
    // (with the parameter types of this first call): the server parses and plans each statement once.
    Result<std::string> preparedName(const std::string &sql, const pg::Params &params);
    Status runPrepared(const std::string &sql, const pg::Params &params, const std::string &what);
    Status writeProjections(const GroupProgress &progress);
    void publishCommit(std::vector<PendingAppend> &group, GroupProgress &progress);
    void wakeLeaseWaiters();

    std::string closingMessage() const
    {
        return "the store is closing (PostgreSQL at " + m_target
            + "); the broker is shutting down, retry against the new one";
    }

    const std::string m_conninfo;
    const std::string m_target;   // user@host:port/db, for messages: never the password
    const int m_reconnectDelayMs;

    // Owned by the writer thread once it starts.
    pg::Connection m_writeDb;
    std::chrono::steady_clock::time_point m_lastConnectAttempt;
    std::vector<std::unique_ptr<EventIndex>> m_indexes;
    std::unordered_map<std::string, std::string> m_prepared;   // portable SQL -> name, on m_writeDb
    LiveSessions m_live;   // fold state of unfinished sessions

    ReaderPool<pg::Connection> m_readers;

    // Lease waiters sleep on m_leaseCv; a commit that leaves a session needing work, or a release,
    // bumps m_workVersion. m_held: the grants of this store not yet released (close gives them back).
    std::mutex m_leaseMutex;
    std::condition_variable m_leaseCv;
    uint64_t m_workVersion = 0;
    bool m_leasesClosed = false;
    std::map<std::string, uint64_t> m_held;

    // Writer-thread figures, logged at close (the queue counts the groups and their events).
    struct WriterStats {
        int64_t slowGroups = 0, reconnects = 0;
        int64_t decideUs = 0, insertUs = 0, statementsUs = 0, projectionUs = 0, commitUs = 0;
    } m_stats;

    // The queue, the writer thread and the listeners. Declared after every member the writer uses:
    // destroyed first, it joins the writer before they go (close() has joined it already).
    AppendQueue m_appends;

    std::mutex m_closeMutex;
    bool m_closed = false;
};

template <typename T, typename Fn>
inline Result<T> PostgresEventStore::withReader(Fn &&fn)
{
    for (int attempt = 0;; ++attempt) {
        auto borrowed = m_readers.borrow();
        if (!borrowed)
            return std::unexpected(borrowed.error());
        pg::Connection reader = std::move(*borrowed);
        Result<T> result = fn(reader);
        const bool lost = !reader.alive();
        if (!lost)
            m_readers.giveBack(std::move(reader));
        if (result || !lost || attempt > 0)
            return result;
        // The server went away since: the idle connections are as dead as this one.
        m_readers.dropIdle();
    }
}

} // namespace paddock::store
