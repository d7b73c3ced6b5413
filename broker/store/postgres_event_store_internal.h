#pragma once
// PostgresEventStore, the PostgreSQL EventStore behind openPostgresEventStore
// (postgres_event_store.h), and what its pieces share. Private to broker/store. The pieces:
//   postgres_event_store.cpp          opening (connections, migrations, live sessions), reconnecting, close
//   postgres_event_store_schema.cpp   the numbered migrations
//   postgres_event_store_commit.cpp   one group commit: decide each request, one transaction, publish
//   postgres_event_store_statements.cpp  what a group sends: events, projection, side statements, lease checks
//   postgres_event_store_reads.cpp    the read connections and every read (events, sessions, queries)
//   postgres_leases.cpp               leases in the database
//   postgres_commit_feed.cpp          what other brokers commit: NOTIFY after each commit, a
//                                     LISTEN thread that hears theirs
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
#include <atomic>
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
inline constexpr int kPostgresSchemaVersion = 8;
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
        , m_instanceId(newInstanceId())
        , m_applicationName(options.applicationName)
        , m_readers([this] { return pg::Connection::open(m_conninfo, m_applicationName); }, closingMessage())
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

    // One statement of a pipeline (runPipeline): portable or PostgreSQL SQL with its parameters,
    // prepared once per connection unless it is transaction control (BEGIN, COMMIT).
    struct Piped {
        std::string sql;
        pg::Params params;
        std::string what;   // what it does, for its error
        bool prepare = true;
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
    // The fast path's writes go to writes (sent later with the COMMIT).
    std::optional<Error> applyGroup(std::vector<PendingAppend> &group, GroupProgress &progress, bool savepoints,
                                    std::vector<Piped> &writes);
    // The statement that locks the sessions rows the group appends to (FOR UPDATE, in id order);
    // nullopt when it appends to none that exists. staleTails reads its answer: each tail kept here
    // that is not the database's (another broker appended) is forgotten.
    std::optional<Piped> lockStatement(const std::vector<PendingAppend> &group);
    // The ids of the group's sessions whose request is wanted, sorted, once each, as an array
    // literal; nullopt when there are none.
    static std::optional<std::string> sessionsOf(const std::vector<PendingAppend> &group,
                                                 bool (*wanted)(const AppendRequest &));
    void forgetStaleTails(const PGresult *locked);
    std::optional<Error> applyOne(AppendRequest &request, int64_t nowMs, GroupProgress &progress,
                                  RequestOutcome &outcome, Batch *batch);
    Result<const core::SessionState *> sessionForWrite(const std::string &sessionId, const GroupProgress &progress,
                                                       std::optional<core::SessionState> &loaded);
    Status insertEvents(const std::vector<core::Event> &events);
    Piped insertEventsStatement(const std::vector<core::Event> &events);
    // The statement that reads (FOR SHARE, until the transaction ends) the lease rows of the
    // group's requests that carry a lease token; nullopt when none does. readLeaseTokens keeps its
    // answer for leaseHeld: whether token is the session's current grant (not released, not
    // granted again since).
    std::optional<Piped> leaseStatement(const std::vector<PendingAppend> &group);
    void readLeaseTokens(const PGresult *leases);
    bool leaseHeld(const std::string &sessionId, uint64_t token) const;
    Status runStatements(const std::vector<SqlStatement> &statements);
    // Sends the statements together and then reads every answer (libpq's pipeline mode): one round
    // trip per chunk of them, however many. results, when given, gets each statement's result in
    // order. The first error fails the call; the server skipped the statements after it.
    Status runPipeline(std::vector<Piped> &statements, std::vector<pg::ResultPtr> *results = nullptr);
    // The name of sql (portable) prepared on the writer's connection, preparing it the first time
    // (with the parameter types of this first call): the server parses and plans each statement once.
    Result<std::string> preparedName(const std::string &sql, const pg::Params &params);
    Status runPrepared(const std::string &sql, const pg::Params &params, const std::string &what);
    // The projection rows of the sessions the group changed, and the lease rows of new ones.
    void projectionStatements(const GroupProgress &progress, std::vector<Piped> &out);
    void publishCommit(std::vector<PendingAppend> &group, GroupProgress &progress);
    void wakeLeaseWaiters();

    // The commit feed (postgres_commit_feed.cpp). Inside the group's transaction: NOTIFY of the
    // sessions it changed, delivered to every broker's feed when it commits.
    void notifyStatements(const GroupProgress &progress, std::vector<Piped> &out);
    // The feed thread: LISTENs on its own connection; what other brokers committed makes the
    // tails kept here stale, wakes lease waiters and reaches the commit listeners as the sessions'
    // new states. A connection lost and made again reads the sessions table for what it missed.
    void feedLoop();
    void heardCommits(const std::map<std::string, int64_t> &sessions);
    // On the writer thread, before a group: forgets the tails other brokers have moved.
    void dropStaleTails();
    static std::string newInstanceId();

    std::string closingMessage() const
    {
        return "the store is closing (PostgreSQL at " + m_target
            + "); the broker is shutting down, retry against the new one";
    }

    const std::string m_conninfo;
    const std::string m_target;   // user@host:port/db, for messages: never the password
    const int m_reconnectDelayMs;
    const std::string m_instanceId;   // this store's name in NOTIFY payloads: its own are ignored
    const std::string m_applicationName;   // of every connection (PostgresOptions)

    // Owned by the writer thread once it starts.
    pg::Connection m_writeDb;
    std::chrono::steady_clock::time_point m_lastConnectAttempt;
    std::vector<std::unique_ptr<EventIndex>> m_indexes;
    std::unordered_map<std::string, std::string> m_prepared;   // portable SQL -> name, on m_writeDb
    LiveSessions m_live;   // fold state of unfinished sessions
    std::unordered_map<std::string, uint64_t> m_leaseTokens;   // the current group's leases, by session

    ReaderPool<pg::Connection> m_readers;

    // Lease waiters sleep on m_leaseCv; a commit that leaves a session needing work, or a release,
    // bumps m_workVersion. m_held: the grants of this store not yet released (close gives them back).
    std::mutex m_leaseMutex;
    std::condition_variable m_leaseCv;
    uint64_t m_workVersion = 0;
    bool m_leasesClosed = false;
    std::map<std::string, uint64_t> m_held;
    std::atomic<bool> m_leasesUnavailable{false};   // a grant failed: said once until one works again

    // The feed thread, and the sessions it heard of that the writer has not yet forgotten.
    std::thread m_feed;
    std::atomic<bool> m_feedStop{false};
    std::mutex m_staleMutex;
    std::vector<std::string> m_staleSessions;
    std::atomic<bool> m_anyStale{false};
    // Set once the feed first listens: open() waits for it, so every commit of another broker
    // after open() returns is heard.
    std::mutex m_feedReadyMutex;
    std::condition_variable m_feedReadyCv;
    bool m_feedReady = false;

    // Writer-thread figures, logged at close (the queue counts the groups and their events).
    struct WriterStats {
        int64_t slowGroups = 0, reconnects = 0, staleTails = 0;
        int64_t beginUs = 0, decideUs = 0, writeUs = 0;   // BEGIN and locks; deciding; the writes and COMMIT
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
