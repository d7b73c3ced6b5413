#pragma once
// SqliteEventStore, the SQLite EventStore behind openSqliteEventStore (sqlite_event_store.h), and
// what its pieces share. Private to broker/store. The pieces:
//   sqlite_event_store.cpp          opening (lock file, connections, PRAGMAs, checkpointer) and close
//   sqlite_event_store_schema.cpp   the numbered migrations and migrate()
//   sqlite_event_store_commit.cpp   one group commit: BEGIN, each request in a savepoint, projection, COMMIT
//   sqlite_event_store_reads.cpp    the read connections and every read (events, sessions, queries)
//
// What both backends do alike is shared: the queue, the writer thread and the commit listeners
// are an AppendQueue (append_queue.h) whose GroupCommitter this store is; a group's bookkeeping is
// group_progress.h, the read connections a ReaderPool (reader_pool.h), the request checks
// append_checks.h.
//
// Threads: every public method may be called from any thread. The writer thread owns m_writeDb,
// m_w, m_indexes, m_live, m_writeStatements and m_stats (open() and close() use them before it
// starts and after it is joined); the checkpointer thread owns m_checkpointDb. Each of the other
// members names the mutex that guards it.

#include "broker/store/append_queue.h"
#include "broker/store/event_index.h"
#include "broker/store/group_progress.h"
#include "broker/store/lease_table.h"
#include "broker/store/reader_pool.h"
#include "broker/store/sqlite_event_store.h"
#include "broker/store/sqlite_handle.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

namespace paddock::store {

// The schema version this build writes (PRAGMA user_version); one migration per version
// (sqlite_event_store_schema.cpp).
inline constexpr int kSchemaVersion = 6;
// "PDDK": marks the file as Paddock's, so another application's SQLite file is refused.
inline constexpr int64_t kApplicationId = 0x5044444B;
inline constexpr int kBusyTimeoutMs = 5000;

// Binds ?1, ?2, ... of stmt to params (sqlite_event_store_reads.cpp).
void bindValues(sqlite::Statement &stmt, const std::vector<SqlValue> &params);

// The statements of one read connection, prepared when the connection opens.
struct ReadConnection {
    sqlite::Database db;
    sqlite::Statement readEvents;
    sqlite::Statement getState;
    sqlite::Statement sessionExists;
};

class SqliteEventStore final : public EventStore, private GroupCommitter {
public:
    SqliteEventStore(std::filesystem::path path, const SqliteOptions &options)
        : m_path(std::move(path))
        , m_readers([this] { return openReader(); }, closingMessage())
        , m_appends(options.maxBatchEvents, options.maxBatchDelayUs, closingMessage())
    {
    }

    ~SqliteEventStore() override { close(); }

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

    std::optional<Lease> acquireLease(const std::string &workerId, int64_t leaseMs, int64_t waitMs) override
    {
        return m_leases.acquire(workerId, leaseMs, waitMs);
    }
    bool renewLease(const Lease &lease, int64_t leaseMs) override { return m_leases.renew(lease, leaseMs); }
    void releaseLease(const Lease &lease, int64_t retryAfterMs) override { m_leases.release(lease, retryAfterMs); }

    int addCommitListener(std::function<void(const CommitNotice &)> listener) override
    {
        return m_appends.addCommitListener(std::move(listener));
    }
    void removeCommitListener(int id) override { m_appends.removeCommitListener(id); }

    void close() override;

private:
    Status openWriter();
    Status startCheckpointer();
    void checkpointerLoop();
    static int walHook(void *self, sqlite3 *db, const char *dbName, int pages);
    Status migrate();
    Status prepareWriterStatements();
    Status loadLiveSessions();
    Result<std::unique_ptr<ReadConnection>> openReader();

    // GroupCommitter. One transaction for the group: BEGIN, each request in a savepoint of its own,
    // the projection rows of the sessions it changed, COMMIT; then memory, listeners and callers follow.
    void commitGroup(std::vector<PendingAppend> &group, bool allOrNothing) override;
    void abandonGroup() override;
    // The requests a group carries, one function each. A request refused on its own merits gets
    // its answer in outcome and leaves the group going; the returned error fails the whole group
    // (SQLite rolled the transaction back, or a savepoint could not be taken or released).
    // Statements beside the log only (an empty sessionId):
    std::optional<Error> applyWritesOnly(const AppendRequest &request, RequestOutcome &outcome);
    // Events creating a session (expectedLastSeq 0) or appended to one, then the request's statements:
    std::optional<Error> applySessionAppend(AppendRequest &request, int64_t nowMs, GroupProgress &progress,
                                            RequestOutcome &outcome);
    // The session as this group sees it: changed earlier in the group, live in memory, or finished
    // and read back from the projection (into loaded). nullptr: there is no such session.
    Result<const core::SessionState *> sessionForWrite(const std::string &sessionId, const GroupProgress &progress,
                                                       std::optional<core::SessionState> &loaded);
    // Inserts the request's numbered events (numberEvents) and their index rows, then runs the
    // request's statements beside the log.
    Status insertRequest(const AppendRequest &request, const std::vector<core::Event> &stored,
                         const std::vector<SqlStatement> &indexRows);
    // The projection row of every session the group changed.
    std::optional<Error> writeProjections(const GroupProgress &progress);
    // After the commit: memory follows the database, the listeners hear of it, every caller gets
    // its answer.
    void publishCommit(std::vector<PendingAppend> &group, GroupProgress &progress);
    bool stepDone(sqlite::Statement &stmt, int *rcOut = nullptr);
    Result<std::optional<core::SessionState>> loadStateForWrite(const std::string &sessionId);
    Status writeProjection(const core::SessionState &state, bool created, bool indexedChanged);
    // Runs a request's statements beside the log inside its savepoint; the failing one's error.
    Status runWrites(const std::vector<SqlStatement> &writes, int *rcOut);

    std::string closingMessage() const
    {
        return "the store is closing (" + m_path.string() + "); the broker is shutting down, retry against the new one";
    }

    const std::filesystem::path m_path;
    int m_lockFd = -1;

    // Owned by the writer thread once it starts (by open() and close() before and after it).
    sqlite::Database m_writeDb;
    struct WriterStatements {
        sqlite::Statement begin, commit, rollback, savepoint, release, rollbackTo;
        sqlite::Statement syncFull, syncNormal;
        sqlite::Statement insertEvent, insertSession, updateSession, updateSessionTail, loadState;
    } m_w;
    std::vector<std::unique_ptr<EventIndex>> m_indexes;   // written with their events (event_index.h)
    LiveSessions m_live;   // fold state of unfinished sessions
    std::unordered_map<std::string, sqlite::Statement> m_writeStatements;   // AppendRequest::writes, prepared once

    // The checkpointer thread owns m_checkpointDb; the writer only signals it.
    sqlite::Database m_checkpointDb;
    std::thread m_checkpointer;
    std::mutex m_checkpointMutex;
    std::condition_variable m_checkpointCv;
    bool m_checkpointWanted = false;
    bool m_checkpointStop = false;

    ReaderPool<std::unique_ptr<ReadConnection>> m_readers;

    LeaseTable m_leases;

    // Writer-thread figures, logged at close: where a commit's time goes (the queue counts the
    // groups, their events and the writer's waits).
    struct WriterStats {
        int64_t insertUs = 0, projectionUs = 0, commitUs = 0, notifyUs = 0;
        int64_t forcedCheckpoints = 0;
    } m_stats;

    // The queue, the writer thread and the listeners. Declared after every member the writer uses:
    // destroyed first, it joins the writer before they go (close() has joined it already).
    AppendQueue m_appends;

    std::mutex m_closeMutex;
    bool m_closed = false;
};

} // namespace paddock::store
