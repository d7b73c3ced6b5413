#pragma once
// SqliteEventStore, the SQLite EventStore behind openSqliteEventStore (sqlite_event_store.h), and
// what its pieces share. Private to broker/store. The pieces:
//   sqlite_event_store.cpp          opening (lock file, connections, PRAGMAs, checkpointer) and close
//   sqlite_event_store_schema.cpp   the numbered migrations and migrate()
//   sqlite_event_store_writer.cpp   append/appendAll's queue, the writer thread, commit listeners
//   sqlite_event_store_commit.cpp   one group commit: BEGIN, each request in a savepoint, projection, COMMIT
//   sqlite_event_store_reads.cpp    the read connections and every read (events, sessions, queries)
//
// Threads: every public method may be called from any thread. The writer thread owns m_writeDb,
// m_w, m_indexes, m_live, m_writeStatements and m_stats (open() and close() use them before it
// starts and after it is joined); the checkpointer thread owns m_checkpointDb. Each of the other
// members names the mutex that guards it.

#include "broker/store/event_index.h"
#include "broker/store/lease_table.h"
#include "broker/store/sqlite_event_store.h"
#include "broker/store/sqlite_handle.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

namespace paddock::store {

// The schema version this build writes (PRAGMA user_version); one migration per version
// (sqlite_event_store_schema.cpp).
inline constexpr int kSchemaVersion = 4;
// "PDDK": marks the file as Paddock's, so another application's SQLite file is refused.
inline constexpr int64_t kApplicationId = 0x5044444B;
inline constexpr int kBusyTimeoutMs = 5000;
// Appends block their caller (not the writer) once this many events wait: memory stays bounded
// when producers outrun the disk.
inline constexpr int64_t kMaxQueuedEventsFactor = 16;

// Binds ?1, ?2, ... of stmt to params (sqlite_event_store_reads.cpp).
void bindValues(sqlite::Statement &stmt, const std::vector<SqlValue> &params);

// The statements of one read connection, prepared when the connection opens.
struct ReadConnection {
    sqlite::Database db;
    sqlite::Statement readEvents;
    sqlite::Statement getState;
    sqlite::Statement sessionExists;
};

class SqliteEventStore final : public EventStore {
public:
    SqliteEventStore(std::filesystem::path path, const SqliteOptions &options)
        : m_path(std::move(path)), m_options(options)
    {
        m_options.maxBatchEvents = std::max(m_options.maxBatchEvents, 1);
        m_options.maxBatchDelayUs = std::max(m_options.maxBatchDelayUs, 0);
        m_maxQueuedEvents = int64_t{m_options.maxBatchEvents} * kMaxQueuedEventsFactor;
    }

    ~SqliteEventStore() override { close(); }

    Status open();

    std::future<Result<AppendResult>> append(AppendRequest request) override;
    void appendThen(AppendRequest request, AppendCallback done) override;
    Result<std::vector<AppendResult>> appendAll(std::vector<AppendRequest> requests) override;
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

    int addCommitListener(std::function<void(const CommitNotice &)> listener) override;
    void removeCommitListener(int id) override;

    void close() override;

private:
    struct Pending {
        AppendRequest request;
        std::promise<Result<AppendResult>> promise;   // append(), appendAll()
        AppendCallback done;                           // appendThen(): called instead
        std::chrono::steady_clock::time_point enqueuedAt;
        size_t batchSize = 0;   // > 0: the first of that many requests appended all or nothing (appendAll)
        bool answered = false;

        // The caller's answer, once: through its callback or its future.
        void answer(Result<AppendResult> result);
    };

    // Per session touched by a group: its state after the group's successful requests so far.
    struct Touched {
        core::SessionState state;
        bool created = false;
        bool indexedChanged = false;    // status or needs_work differ from the stored row
        std::vector<core::Event> events;   // for the commit notice
    };

    // A request's answer once its group reached it (a refusal of its own, or its result);
    // nullopt: the group failed before it.
    using RequestOutcome = std::optional<Result<AppendResult>>;

    // What one commitGroup did so far: each request's answer, the sessions it changed in order.
    struct GroupProgress {
        std::vector<RequestOutcome> outcomes;   // one per request of the group
        std::unordered_map<std::string, Touched> touched;
        std::vector<std::string> touchOrder;
    };

    Status openWriter();
    Status startCheckpointer();
    void checkpointerLoop();
    static int walHook(void *self, sqlite3 *db, const char *dbName, int pages);
    Status migrate();
    Status prepareWriterStatements();
    Status loadLiveSessions();
    Result<std::unique_ptr<ReadConnection>> openReader();
    Result<std::unique_ptr<ReadConnection>> borrowReader();
    void returnReader(std::unique_ptr<ReadConnection> reader);

    // Checks a request and queues it (blocking while the queue is full); answers it at once when it
    // is refused or the store is closing.
    void enqueue(Pending pending);
    void writerLoop();
    // One transaction for the group: BEGIN, each request in a savepoint of its own, the projection
    // rows of the sessions it changed, COMMIT; then memory, listeners and callers follow.
    void commitGroup(std::vector<Pending> &group, bool allOrNothing);
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
    // Inserts the request's events (and their index rows) after next's tail, folding each into
    // next, then runs the request's statements beside the log.
    Status insertRequest(AppendRequest &request, core::SessionState &next, int64_t nowMs,
                         std::vector<core::Event> &stored);
    // The projection row of every session the group changed.
    std::optional<Error> writeProjections(const GroupProgress &progress);
    // After the commit: memory follows the database, the listeners hear of it, every caller gets
    // its answer.
    void publishCommit(std::vector<Pending> &group, GroupProgress &progress);
    // Answers a group that failed: a request refused on its own merits keeps its answer, the rest
    // learn the group failed.
    static void failGroup(std::vector<Pending> &group, std::vector<RequestOutcome> &outcomes, const Error &error);
    bool stepDone(sqlite::Statement &stmt, int *rcOut = nullptr);
    Result<std::optional<core::SessionState>> loadStateForWrite(const std::string &sessionId);
    Status writeProjection(const core::SessionState &state, bool created, bool indexedChanged);
    // Runs a request's statements beside the log inside its savepoint; the failing one's error.
    Status runWrites(const std::vector<SqlStatement> &writes, int *rcOut);
    void notifyListeners(const CommitNotice &notice);

    std::string closingMessage() const
    {
        return "the store is closing (" + m_path.string() + "); the broker is shutting down, retry against the new one";
    }

    const std::filesystem::path m_path;
    SqliteOptions m_options;
    int64_t m_maxQueuedEvents = 0;
    int m_lockFd = -1;

    // Owned by the writer thread once it starts (by open() and close() before and after it).
    sqlite::Database m_writeDb;
    struct WriterStatements {
        sqlite::Statement begin, commit, rollback, savepoint, release, rollbackTo;
        sqlite::Statement syncFull, syncNormal;
        sqlite::Statement insertEvent, insertSession, updateSession, updateSessionTail, loadState;
    } m_w;
    std::vector<std::unique_ptr<EventIndex>> m_indexes;   // written with their events (event_index.h)
    std::unordered_map<std::string, core::SessionState> m_live;   // fold state of unfinished sessions
    std::unordered_map<std::string, sqlite::Statement> m_writeStatements;   // AppendRequest::writes, prepared once
    std::thread m_writer;
    bool m_writerStarted = false;
    std::atomic<std::thread::id> m_writerId;

    // The checkpointer thread owns m_checkpointDb; the writer only signals it.
    sqlite::Database m_checkpointDb;
    std::thread m_checkpointer;
    std::mutex m_checkpointMutex;
    std::condition_variable m_checkpointCv;
    bool m_checkpointWanted = false;
    bool m_checkpointStop = false;

    std::mutex m_queueMutex;
    std::condition_variable m_queueCv;      // the writer waits for work
    std::condition_variable m_spaceCv;      // producers wait for room in the queue
    std::deque<Pending> m_queue;
    int64_t m_queuedEvents = 0;
    size_t m_lastGroupRequests = 2;   // at least 2: a lone caller still waits for company
    bool m_closing = false;

    std::mutex m_readMutex;
    std::vector<std::unique_ptr<ReadConnection>> m_idleReaders;
    bool m_readClosed = false;

    // Held while listeners run, so removeCommitListener returning means the listener is done.
    std::mutex m_listenerMutex;
    std::vector<std::pair<int, std::function<void(const CommitNotice &)>>> m_listeners;
    std::vector<int> m_removeAfterNotify;   // removals asked for from inside a listener
    int m_nextListenerId = 1;

    LeaseTable m_leases;

    // Writer-thread figures, logged at close: where a commit's time goes.
    struct WriterStats {
        int64_t groups = 0, events = 0, waitUs = 0, insertUs = 0, projectionUs = 0, commitUs = 0, notifyUs = 0;
        int64_t forcedCheckpoints = 0;
    } m_stats;

    std::mutex m_closeMutex;
    bool m_closed = false;
};

} // namespace paddock::store
