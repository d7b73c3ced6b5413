// SQLite EventStore. docs/store.md describes the schema, durability and leases.
//
// Known limits:
// - One process owns the database (flock on "<db>.lock"); leases live in that process's memory.
// - The writer keeps the fold state of every session that is not finished in memory (about 1 KB
//   each); finished ones are read back from the projection when an event arrives for them.
// - A payload is checked only to look like a JSON object ("{...}"); parsing every payload on the
//   append path would cost more than the insert itself. The fold skips payloads it cannot read.
// - listSessions' text filter is a case-sensitive substring match and scans the candidate rows.

#include "broker/store/sqlite_event_store.h"

#include "broker/store/auth_tables.h"
#include "broker/store/decision_index.h"
#include "broker/store/event_index.h"
#include "broker/store/governance_schema.h"
#include "broker/store/lease_table.h"
#include "broker/store/sqlite_handle.h"
#include "broker/store/state_json.h"
#include "common/clock.h"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

namespace paddock::store {

namespace {

constexpr int kSchemaVersion = 4;
// "PDDK": marks the file as Paddock's, so another application's SQLite file is refused.
constexpr int64_t kApplicationId = 0x5044444B;
constexpr int kBusyTimeoutMs = 5000;
constexpr size_t kMaxIdleReaders = 8;
constexpr size_t kMaxSessionIdBytes = 256;
constexpr int kMaxPageSize = 1000;
// The WAL is checkpointed by its own thread once it holds this many pages (4 KiB each), so the
// writer never waits for a checkpoint's copying and fsyncs; past the hard limit the writer
// checkpoints itself, so the WAL stays bounded even if the checkpointer cannot keep up.
constexpr int kCheckpointPages = 1000;
constexpr int kForceCheckpointPages = 16000;
// Appends block their caller (not the writer) once this many events wait: memory stays bounded
// when producers outrun the disk.
constexpr int64_t kMaxQueuedEventsFactor = 16;

struct Migration {
    int version;
    const char *sql;
};

// Numbered migrations: each runs once, in its own transaction with the user_version bump. Never
// edit one that has shipped; add the next.
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE events(
    session_id   TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    time_unix_ms INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    cost_micros  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE sessions(
    ord             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    agent           TEXT    NOT NULL,
    goal            TEXT    NOT NULL,
    playbook        TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    needs_work      INTEGER NOT NULL,
    created_unix_ms INTEGER NOT NULL,
    updated_unix_ms INTEGER NOT NULL,
    last_seq        INTEGER NOT NULL,
    state           TEXT    NOT NULL
);
CREATE INDEX sessions_by_status ON sessions(status, ord);
CREATE INDEX sessions_by_agent ON sessions(agent, ord);
CREATE INDEX sessions_needing_work ON sessions(needs_work) WHERE needs_work = 1;
)sql"},
    {2, kAuthTablesSql},         // audit, tokens (auth_tables.h)
    {3, kGovernanceSchemaSql},   // cost_entries, review_items, review_fetches (governance_schema.h)
    {4, kDecisionsSchemaSql},    // agents, agent_records, decisions (decision_index.h)
};

static_assert(std::size(kMigrations) == kSchemaVersion, "one migration per schema version");
constexpr bool numberedInOrder()
{
    for (size_t i = 0; i < std::size(kMigrations); ++i) {
        if (kMigrations[i].version != static_cast<int>(i) + 1)
            return false;
    }
    return true;
}
static_assert(numberedInOrder(), "migration i has version i + 1: a database at version N runs exactly those after N");

std::string hexEncode(std::string_view bytes)
{
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out.push_back(kDigits[c >> 4]);
        out.push_back(kDigits[c & 15]);
    }
    return out;
}

std::optional<std::string> hexDecode(std::string_view hex)
{
    if (hex.size() % 2 != 0)
        return std::nullopt;
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'a' && c <= 'f')
            return c - 'a' + 10;
        return -1;
    };
    std::string out;
    for (size_t i = 0; i < hex.size(); i += 2) {
        const int hi = nibble(hex[i]);
        const int lo = nibble(hex[i + 1]);
        if (hi < 0 || lo < 0)
            return std::nullopt;
        out.push_back(static_cast<char>(hi * 16 + lo));
    }
    return out;
}

// Page tokens are opaque to clients; inside they carry the last row's creation order.
std::string encodePageToken(int64_t ord) { return hexEncode("v1:" + std::to_string(ord)); }

std::optional<int64_t> decodePageToken(std::string_view token)
{
    auto text = hexDecode(token);
    if (!text || !text->starts_with("v1:") || text->size() == 3 || text->size() > 23)
        return std::nullopt;
    int64_t ord = 0;
    for (char c : text->substr(3)) {
        if (c < '0' || c > '9')
            return std::nullopt;
        ord = ord * 10 + (c - '0');
    }
    return ord > 0 ? std::optional(ord) : std::nullopt;
}

bool looksLikeJsonObject(std::string_view text)
{
    auto isSpace = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
    while (!text.empty() && isSpace(text.front()))
        text.remove_prefix(1);
    while (!text.empty() && isSpace(text.back()))
        text.remove_suffix(1);
    return text.size() >= 2 && text.front() == '{' && text.back() == '}';
}

Status validate(const AppendRequest &request)
{
    if (request.sessionId.empty() && request.events.empty() && !request.writes.empty())
        return {};   // statements beside the log only
    if (request.sessionId.empty())
        return fail(ErrorCode::InvalidArgument, "append: the session id is empty; give the session's id");
    if (request.sessionId.size() > kMaxSessionIdBytes)
        return fail(ErrorCode::InvalidArgument, "append: the session id is longer than "
                                                    + std::to_string(kMaxSessionIdBytes) + " bytes");
    if (request.events.empty())
        return fail(ErrorCode::InvalidArgument,
                    "append to session " + request.sessionId + ": no events; send at least one");
    if (request.expectedLastSeq < AppendRequest::kAnySeq)
        return fail(ErrorCode::InvalidArgument,
                    "append to session " + request.sessionId + ": expectedLastSeq "
                        + std::to_string(request.expectedLastSeq) + " is negative; use 0 to create, "
                        + "the tail's seq to compare-and-append, or kAnySeq");
    for (size_t i = 0; i < request.events.size(); ++i) {
        const auto &event = request.events[i];
        const std::string where = "append to session " + request.sessionId + ", event " + std::to_string(i + 1);
        if (event.kind.empty())
            return fail(ErrorCode::InvalidArgument, where + ": the kind is empty");
        if (!looksLikeJsonObject(event.payload))
            return fail(ErrorCode::InvalidArgument, where + " (" + event.kind
                                                        + "): the payload is not a JSON object; send \"{}\" for none");
        const bool created = event.kind == core::kind::SessionCreated;
        const bool mustCreate = request.expectedLastSeq == 0 && i == 0;
        if (mustCreate && !created)
            return fail(ErrorCode::InvalidArgument,
                        where + ": a new session's first event must be session.created, not " + event.kind);
        if (created && !mustCreate)
            return fail(ErrorCode::InvalidArgument,
                        where + ": session.created may only open a new session (expectedLastSeq 0, first event)");
    }
    return {};
}

std::future<Result<AppendResult>> readyFuture(Error error)
{
    std::promise<Result<AppendResult>> promise;
    promise.set_value(std::unexpected(std::move(error)));
    return promise.get_future();
}

// The statements of one read connection, prepared when the connection opens.
void bindValues(sqlite::Statement &stmt, const std::vector<SqlValue> &params)
{
    for (size_t i = 0; i < params.size(); ++i) {
        const int index = static_cast<int>(i + 1);
        if (const auto *number = std::get_if<int64_t>(&params[i]))
            stmt.bind(index, *number);
        else if (const auto *text = std::get_if<std::string>(&params[i]))
            stmt.bind(index, std::string_view(*text));
        else
            stmt.bindNull(index);
    }
}

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
        std::promise<Result<AppendResult>> promise;
        std::chrono::steady_clock::time_point enqueuedAt;
        size_t batchSize = 0;   // > 0: the first of that many requests appended all or nothing (appendAll)
    };

    // Per session touched by a group: its state after the group's successful requests so far.
    struct Touched {
        core::SessionState state;
        bool created = false;
        bool indexedChanged = false;    // status or needs_work differ from the stored row
        std::vector<core::Event> events;   // for the commit notice
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

    void writerLoop();
    void commitGroup(std::vector<Pending> &group, bool allOrNothing);
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

Status SqliteEventStore::open()
{
    std::error_code ec;
    if (m_path.has_parent_path())
        std::filesystem::create_directories(m_path.parent_path(), ec);

    // flock, not SQLite's own locking: SQLite would let a second broker in as a second writer, whose
    // in-memory tails and leases would then be wrong. The kernel drops the lock when the process
    // dies, even by kill -9, so a restart never finds a stale lock.
    const std::string lockPath = m_path.string() + ".lock";
    m_lockFd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (m_lockFd < 0)
        return fail(ErrorCode::Unavailable, "cannot create the lock file " + lockPath + ": " + std::strerror(errno)
                                                 + "; check that the data directory is writable");
    if (::flock(m_lockFd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        ::close(m_lockFd);
        m_lockFd = -1;
        if (err == EWOULDBLOCK)
            return fail(ErrorCode::FailedPrecondition,
                        "the database " + m_path.string() + " is in use by another paddockd (it holds " + lockPath
                            + "); stop that broker, or point this one at another --data-dir");
        return fail(ErrorCode::Unavailable, "cannot lock " + lockPath + ": " + std::strerror(err));
    }

    if (auto status = openWriter(); !status)
        return status;
    if (auto status = migrate(); !status)
        return status;
    if (auto status = prepareWriterStatements(); !status)
        return status;
    if (auto status = loadLiveSessions(); !status)
        return status;
    if (auto status = startCheckpointer(); !status)
        return status;
    // Open one reader now so a broken file shows at open, not at the first read.
    auto reader = openReader();
    if (!reader)
        return std::unexpected(reader.error());
    returnReader(std::move(*reader));

    m_writerStarted = true;
    m_writer = std::thread([this] {
        m_writerId = std::this_thread::get_id();
        writerLoop();
    });
    return {};
}

Status SqliteEventStore::openWriter()
{
    auto db = sqlite::Database::open(m_path, /*readOnly=*/false);
    if (!db)
        return std::unexpected(db.error());
    m_writeDb = std::move(*db);
    sqlite3_busy_timeout(m_writeDb.get(), kBusyTimeoutMs);

    // The first read of the header tells a database from anything else.
    sqlite3_stmt *probe = nullptr;
    int rc = sqlite3_prepare_v2(m_writeDb.get(), "PRAGMA user_version", -1, &probe, nullptr);
    int64_t version = 0;
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(probe);
        if (rc == SQLITE_ROW) {
            version = sqlite3_column_int64(probe, 0);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(probe);
    if ((rc & 0xff) == SQLITE_NOTADB)
        return fail(ErrorCode::FailedPrecondition,
                    m_path.string() + " is not a SQLite database (SQLite: " + sqlite3_errstr(rc)
                        + "); move the file aside, or point the broker at another --data-dir");
    if (rc != SQLITE_OK)
        return fail(ErrorCode::Unavailable, m_writeDb.describe("reading the schema version of " + m_path.string(), rc));

    if (version > kSchemaVersion)
        return fail(ErrorCode::FailedPrecondition,
                    "the database " + m_path.string() + " has schema version " + std::to_string(version)
                        + ", written by a newer Paddock; this build reads up to version " + std::to_string(kSchemaVersion)
                        + ". Upgrade Paddock, or point the broker at another --data-dir");

    auto appId = m_writeDb.queryInt("PRAGMA application_id");
    if (!appId)
        return std::unexpected(appId.error());
    auto tables = m_writeDb.queryInt("SELECT count(*) FROM sqlite_master");
    if (!tables)
        return std::unexpected(tables.error());
    if ((*appId != 0 && *appId != kApplicationId) || (*appId == 0 && *tables > 0))
        return fail(ErrorCode::FailedPrecondition,
                    m_path.string() + " is a SQLite database of another application, not Paddock's; "
                                      "move it aside, or point the broker at another --data-dir");

    auto mode = m_writeDb.queryText("PRAGMA journal_mode=WAL");
    if (!mode)
        return std::unexpected(mode.error());
    if (*mode != "wal")
        return fail(ErrorCode::FailedPrecondition,
                    "cannot put " + m_path.string() + " in WAL mode (SQLite kept \"" + *mode
                        + "\"); put the data directory on a local file system");
    // NORMAL in WAL mode: a commit survives the process dying (the WAL is in the OS's hands) but
    // not necessarily the machine losing power; fullSync appends switch to FULL for their commit.
    // Checkpoints run on their own thread (startCheckpointer), not inside the writer's commits.
    return m_writeDb.exec("PRAGMA synchronous=NORMAL;"
                          "PRAGMA wal_autocheckpoint=0;"
                          "PRAGMA temp_store=MEMORY;"
                          "PRAGMA cache_size=-32768;"
                          "PRAGMA journal_size_limit=67108864;"
                          "PRAGMA foreign_keys=OFF;");
}

Status SqliteEventStore::startCheckpointer()
{
    auto db = sqlite::Database::open(m_path, /*readOnly=*/false);
    if (!db)
        return std::unexpected(db.error());
    m_checkpointDb = std::move(*db);
    sqlite3_busy_timeout(m_checkpointDb.get(), kBusyTimeoutMs);
    sqlite3_wal_hook(m_writeDb.get(), &SqliteEventStore::walHook, this);
    m_checkpointer = std::thread([this] { checkpointerLoop(); });
    return {};
}

int SqliteEventStore::walHook(void *self, sqlite3 *db, const char *dbName, int pages)
{
    auto *store = static_cast<SqliteEventStore *>(self);
    if (pages < kCheckpointPages)
        return SQLITE_OK;
    // A WAL only starts over when a write begins with every frame checkpointed, which a steady
    // stream of commits can keep the checkpointer from reaching. Past the hard limit the writer
    // copies what is left itself (one stall, measured by store_append_bench) and the next commit
    // restarts the WAL. Finishing every pass on the writer was tried: its fsyncs cost more p99
    // latency than these rare stalls.
    if (pages >= kForceCheckpointPages) {
        ++store->m_stats.forcedCheckpoints;
        sqlite3_wal_checkpoint_v2(db, dbName, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
        return SQLITE_OK;
    }
    {
        std::lock_guard lock(store->m_checkpointMutex);
        store->m_checkpointWanted = true;
    }
    store->m_checkpointCv.notify_one();
    return SQLITE_OK;
}

void SqliteEventStore::checkpointerLoop()
{
    for (;;) {
        {
            std::unique_lock lock(m_checkpointMutex);
            m_checkpointCv.wait(lock, [&] { return m_checkpointWanted || m_checkpointStop; });
            if (m_checkpointStop)
                return;
            m_checkpointWanted = false;
        }
        // PASSIVE copies what no reader still needs and never blocks the writer.
        const int rc = sqlite3_wal_checkpoint_v2(m_checkpointDb.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
        if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY)
            spdlog::warn("store: {}", m_checkpointDb.describe("checkpointing " + m_path.string(), rc));
    }
}

Status SqliteEventStore::migrate()
{
    auto version = m_writeDb.queryInt("PRAGMA user_version");
    if (!version)
        return std::unexpected(version.error());
    for (const auto &migration : kMigrations) {
        if (migration.version <= *version)
            continue;
        // Schema change and version bump commit together, so a crash leaves either both or neither.
        if (auto status = m_writeDb.exec("BEGIN IMMEDIATE"); !status)
            return status;
        Status status = m_writeDb.exec(migration.sql);
        if (status) {
            const std::string bump = "PRAGMA user_version=" + std::to_string(migration.version)
                + "; PRAGMA application_id=" + std::to_string(kApplicationId) + ";";
            status = m_writeDb.exec(bump.c_str());
        }
        if (status)
            status = m_writeDb.exec("COMMIT");
        if (!status) {
            (void)m_writeDb.exec("ROLLBACK");
            return fail(ErrorCode::Internal, "migrating " + m_path.string() + " to schema version "
                                                 + std::to_string(migration.version) + " failed: " + status.error().message);
        }
        spdlog::info("store: {} migrated to schema version {}", m_path.string(), migration.version);
    }
    return {};
}

Status SqliteEventStore::prepareWriterStatements()
{
    struct Item {
        sqlite::Statement *stmt;
        const char *sql;
    };
    const Item items[] = {
        {&m_w.begin, "BEGIN IMMEDIATE"},
        {&m_w.commit, "COMMIT"},
        {&m_w.rollback, "ROLLBACK"},
        {&m_w.savepoint, "SAVEPOINT request"},
        {&m_w.release, "RELEASE request"},
        {&m_w.rollbackTo, "ROLLBACK TO request"},
        {&m_w.syncFull, "PRAGMA synchronous=FULL"},
        {&m_w.syncNormal, "PRAGMA synchronous=NORMAL"},
        {&m_w.insertEvent, "INSERT INTO events(session_id, seq, time_unix_ms, kind, payload, cost_micros) "
                           "VALUES(?1, ?2, ?3, ?4, ?5, ?6)"},
        {&m_w.insertSession, "INSERT INTO sessions(id, agent, goal, playbook, status, needs_work, created_unix_ms, "
                             "updated_unix_ms, last_seq, state) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"},
        {&m_w.updateSession, "UPDATE sessions SET status = ?2, needs_work = ?3, updated_unix_ms = ?4, last_seq = ?5, "
                             "state = ?6 WHERE id = ?1"},
        {&m_w.updateSessionTail, "UPDATE sessions SET updated_unix_ms = ?4, last_seq = ?5, state = ?6 WHERE id = ?1"},
        {&m_w.loadState, "SELECT state FROM sessions WHERE id = ?1"},
    };
    for (const auto &item : items) {
        auto stmt = m_writeDb.prepare(item.sql);
        if (!stmt)
            return std::unexpected(stmt.error());
        *item.stmt = std::move(*stmt);
    }
    auto indexes = makeEventIndexes(m_writeDb);
    if (!indexes)
        return std::unexpected(indexes.error());
    m_indexes = std::move(*indexes);
    return {};
}

Status SqliteEventStore::loadLiveSessions()
{
    auto stmt = m_writeDb.prepare("SELECT state FROM sessions WHERE status IN ('queued', 'running', "
                                  "'waiting_approval', 'paused') OR needs_work = 1",
                                  false);
    if (!stmt)
        return std::unexpected(stmt.error());
    std::vector<std::pair<std::string, bool>> work;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
        auto state = sessionStateFromJson(stmt->columnText(0));
        if (!state)
            return fail(ErrorCode::Internal, "the sessions table of " + m_path.string()
                                                 + " holds a state that is not JSON; the file is damaged");
        work.emplace_back(state->id, state->needsWork());
        m_live.emplace(state->id, std::move(*state));
    }
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Internal, m_writeDb.describe("loading live sessions from " + m_path.string(), rc));
    m_leases.update(work);
    spdlog::info("store: opened {} ({} live sessions, {} need work)", m_path.string(), m_live.size(),
                 m_leases.needingWorkForTest());
    return {};
}

Result<std::unique_ptr<ReadConnection>> SqliteEventStore::openReader()
{
    auto db = sqlite::Database::open(m_path, /*readOnly=*/true);
    if (!db)
        return std::unexpected(db.error());
    auto reader = std::make_unique<ReadConnection>();
    reader->db = std::move(*db);
    sqlite3_busy_timeout(reader->db.get(), kBusyTimeoutMs);
    if (auto status = reader->db.exec("PRAGMA cache_size=-8192"); !status)
        return std::unexpected(status.error());
    auto prepare = [&](sqlite::Statement &stmt, const char *sql) -> Status {
        auto prepared = reader->db.prepare(sql);
        if (!prepared)
            return std::unexpected(prepared.error());
        stmt = std::move(*prepared);
        return {};
    };
    Status status = prepare(reader->readEvents,
                            "SELECT seq, time_unix_ms, kind, payload, cost_micros FROM events "
                            "WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3");
    if (status)
        status = prepare(reader->getState, "SELECT state FROM sessions WHERE id = ?1");
    if (status)
        status = prepare(reader->sessionExists, "SELECT 1 FROM sessions WHERE id = ?1");
    if (!status)
        return std::unexpected(status.error());
    return reader;
}

Result<std::unique_ptr<ReadConnection>> SqliteEventStore::borrowReader()
{
    {
        std::lock_guard lock(m_readMutex);
        if (m_readClosed)
            return fail(ErrorCode::Unavailable, closingMessage());
        if (!m_idleReaders.empty()) {
            auto reader = std::move(m_idleReaders.back());
            m_idleReaders.pop_back();
            return reader;
        }
    }
    // Opening outside the lock: it reads the schema from disk.
    return openReader();
}

void SqliteEventStore::returnReader(std::unique_ptr<ReadConnection> reader)
{
    std::lock_guard lock(m_readMutex);
    if (!m_readClosed && m_idleReaders.size() < kMaxIdleReaders)
        m_idleReaders.push_back(std::move(reader));
    // Otherwise it closes here.
}

std::future<Result<AppendResult>> SqliteEventStore::append(AppendRequest request)
{
    if (auto status = validate(request); !status)
        return readyFuture(std::move(status.error()));
    const auto count = static_cast<int64_t>(request.events.size());
    std::future<Result<AppendResult>> future;
    {
        std::unique_lock lock(m_queueMutex);
        // The writer thread never waits for room: a listener that appends would wait for itself.
        if (std::this_thread::get_id() != m_writerId) {
            m_spaceCv.wait(lock, [&] { return m_closing || m_queuedEvents < m_maxQueuedEvents || m_queue.empty(); });
        }
        if (m_closing)
            return readyFuture(Error{ErrorCode::Unavailable, closingMessage()});
        Pending pending{std::move(request), {}, std::chrono::steady_clock::now()};
        future = pending.promise.get_future();
        m_queue.push_back(std::move(pending));
        m_queuedEvents += count;
    }
    m_queueCv.notify_one();
    return future;
}

Result<std::vector<AppendResult>> SqliteEventStore::appendAll(std::vector<AppendRequest> requests)
{
    if (requests.empty())
        return fail(ErrorCode::InvalidArgument, "appendAll: no requests; send at least one");
    for (const auto &request : requests) {
        if (auto status = validate(request); !status)
            return std::unexpected(status.error());
    }
    std::vector<std::future<Result<AppendResult>>> futures;
    {
        std::unique_lock lock(m_queueMutex);
        if (std::this_thread::get_id() != m_writerId)
            m_spaceCv.wait(lock, [&] { return m_closing || m_queuedEvents < m_maxQueuedEvents || m_queue.empty(); });
        if (m_closing)
            return fail(ErrorCode::Unavailable, closingMessage());
        // Contiguous in the queue, so the writer takes them as one group of their own.
        const size_t count = requests.size();
        for (size_t i = 0; i < count; ++i) {
            m_queuedEvents += static_cast<int64_t>(requests[i].events.size());
            Pending pending{std::move(requests[i]), {}, std::chrono::steady_clock::now(), i == 0 ? count : 0};
            futures.push_back(pending.promise.get_future());
            m_queue.push_back(std::move(pending));
        }
    }
    m_queueCv.notify_one();
    std::vector<AppendResult> results;
    std::optional<Error> error;
    for (auto &future : futures) {
        auto result = future.get();
        if (!result && !error)
            error = result.error();
        else if (result)
            results.push_back(std::move(*result));
    }
    if (error)
        return std::unexpected(*error);
    return results;
}

void SqliteEventStore::writerLoop()
{
    std::vector<Pending> group;
    for (;;) {
        group.clear();
        size_t batch = 0;
        const int64_t waitStartUs = monotonicUs();
        {
            std::unique_lock lock(m_queueMutex);
            m_queueCv.wait(lock, [&] { return m_closing || !m_queue.empty(); });
            if (m_queue.empty())
                break;   // closing and drained
            // Wait a little for more company, measured from the oldest request's arrival: requests
            // that queued while the last commit ran go at once. The wait also ends once as many
            // requests wait as the last group held: the callers that group answered are back, and
            // waiting longer would only add latency.
            if (!m_closing && m_options.maxBatchDelayUs > 0 && m_queuedEvents < m_options.maxBatchEvents) {
                const auto deadline = m_queue.front().enqueuedAt + std::chrono::microseconds(m_options.maxBatchDelayUs);
                m_queueCv.wait_until(lock, deadline, [&] {
                    return m_closing || m_queuedEvents >= m_options.maxBatchEvents
                        || m_queue.size() >= m_lastGroupRequests;
                });
            }
            int64_t taken = 0;
            // An all-or-nothing batch is a group of its own: its requests alone share the transaction.
            batch = m_queue.front().batchSize;
            while (!m_queue.empty()) {
                const auto size = static_cast<int64_t>(m_queue.front().request.events.size());
                if (batch > 0 ? group.size() == batch
                              : !group.empty() && (m_queue.front().batchSize > 0 || taken + size > m_options.maxBatchEvents))
                    break;
                taken += size;
                group.push_back(std::move(m_queue.front()));
                m_queue.pop_front();
            }
            m_queuedEvents -= taken;
            m_lastGroupRequests = std::max<size_t>(group.size(), 2);
            m_stats.events += taken;
        }
        ++m_stats.groups;
        m_stats.waitUs += monotonicUs() - waitStartUs;
        m_spaceCv.notify_all();
        try {
            commitGroup(group, batch > 0);
        } catch (const std::exception &e) {
            // Nothing below throws by design; if something does, fail the group rather than the broker.
            spdlog::error("store: writer failed a group of {} appends: {}", group.size(), e.what());
            if (!sqlite3_get_autocommit(m_writeDb.get())) {
                m_w.rollback.step();
                m_w.rollback.reset();
            }
            for (auto &pending : group) {
                try {
                    pending.promise.set_value(fail(ErrorCode::Internal, std::string("the store failed: ") + e.what()));
                } catch (const std::future_error &) {
                    // already answered
                }
            }
        }
    }
}

bool SqliteEventStore::stepDone(sqlite::Statement &stmt, int *rcOut)
{
    const int rc = stmt.step();
    stmt.reset();
    if (rcOut)
        *rcOut = rc;
    return rc == SQLITE_DONE || rc == SQLITE_ROW;
}

Result<std::optional<core::SessionState>> SqliteEventStore::loadStateForWrite(const std::string &sessionId)
{
    auto &stmt = m_w.loadState;
    sqlite::ResetGuard guard(stmt);
    stmt.bind(1, sessionId);
    const int rc = stmt.step();
    if (rc == SQLITE_DONE)
        return std::optional<core::SessionState>();
    if (rc != SQLITE_ROW)
        return fail(ErrorCode::Unavailable, m_writeDb.describe("reading session " + sessionId, rc));
    auto state = sessionStateFromJson(stmt.columnText(0));
    if (!state)
        return fail(ErrorCode::Internal, "the projection of session " + sessionId + " in " + m_path.string()
                                             + " is not JSON; the file is damaged");
    return state;
}

Status SqliteEventStore::runWrites(const std::vector<SqlStatement> &writes, int *rcOut)
{
    for (const auto &write : writes) {
        auto it = m_writeStatements.find(write.sql);
        if (it == m_writeStatements.end()) {
            auto prepared = m_writeDb.prepare(write.sql);
            if (!prepared)
                return fail(ErrorCode::Internal, prepared.error().message);
            it = m_writeStatements.emplace(write.sql, std::move(*prepared)).first;
        }
        bindValues(it->second, write.params);
        if (!stepDone(it->second, rcOut)) {
            // The first words of the statement name the table; SQLite's message names the cause
            // (a constraint, or a trigger's RAISE).
            const std::string what = write.sql.substr(0, std::min<size_t>(write.sql.find('('), 60));
            return fail(ErrorCode::Internal, m_writeDb.describe("\"" + what + "\" on " + m_path.string(), *rcOut)
                                                 + "; nothing of this call was recorded");
        }
    }
    return {};
}

Status SqliteEventStore::writeProjection(const core::SessionState &state, bool created, bool indexedChanged)
{
    const std::string json = sessionStateToJson(state);
    const std::string_view status = core::statusName(state.status);
    const int64_t needsWork = state.needsWork() ? 1 : 0;
    int rc;
    if (created) {
        auto &stmt = m_w.insertSession;
        stmt.bind(1, state.id);
        stmt.bind(2, state.agent);
        stmt.bind(3, state.goal);
        stmt.bind(4, state.playbook);
        stmt.bind(5, status);
        stmt.bind(6, needsWork);
        stmt.bind(7, state.createdUnixMs);
        stmt.bind(8, state.updatedUnixMs);
        stmt.bind(9, state.lastSeq);
        stmt.bind(10, json);
        if (stepDone(stmt, &rc))
            return {};
    } else {
        // Naming status in the SET rewrites its index entries even when the value stays; most
        // commits only move the tail.
        auto &stmt = indexedChanged ? m_w.updateSession : m_w.updateSessionTail;
        stmt.bind(1, state.id);
        if (indexedChanged) {
            stmt.bind(2, status);
            stmt.bind(3, needsWork);
        }
        stmt.bind(4, state.updatedUnixMs);
        stmt.bind(5, state.lastSeq);
        stmt.bind(6, json);
        if (stepDone(stmt, &rc))
            return {};
    }
    return fail(ErrorCode::Unavailable, m_writeDb.describe("writing the projection of session " + state.id, rc));
}

void SqliteEventStore::commitGroup(std::vector<Pending> &group, bool allOrNothing)
{
    const bool fullSync = std::any_of(group.begin(), group.end(), [](const Pending &p) { return p.request.fullSync; });
    std::vector<std::optional<Result<AppendResult>>> outcomes(group.size());
    std::unordered_map<std::string, Touched> touched;
    std::vector<std::string> touchOrder;
    std::optional<Error> groupError;

    auto failGroup = [&](Error error) {
        for (size_t i = 0; i < group.size(); ++i) {
            // A request refused on its own merits keeps its answer; the rest learn the group failed.
            if (!outcomes[i] || outcomes[i]->has_value())
                group[i].promise.set_value(std::unexpected(error));
            else
                group[i].promise.set_value(std::move(*outcomes[i]));
        }
    };

    int rc = 0;
    if (fullSync && !stepDone(m_w.syncFull, &rc)) {
        failGroup(Error{ErrorCode::Unavailable, m_writeDb.describe("setting synchronous=FULL on " + m_path.string(), rc)});
        return;
    }
    // Every return code of BEGIN and COMMIT decides what the callers hear.
    if (!stepDone(m_w.begin, &rc)) {
        failGroup(Error{ErrorCode::Unavailable, m_writeDb.describe("starting a transaction on " + m_path.string(), rc)});
        if (fullSync)
            stepDone(m_w.syncNormal);
        return;
    }

    const int64_t nowMs = nowUnixMs();
    int64_t phaseUs = monotonicUs();
    auto phase = [&](int64_t &bucket) {
        const int64_t t = monotonicUs();
        bucket += t - phaseUs;
        phaseUs = t;
    };
    for (size_t i = 0; i < group.size() && !groupError; ++i) {
        AppendRequest &request = group[i].request;
        const std::string &sessionId = request.sessionId;
        if (sessionId.empty()) {
            // Statements beside the log only, in a savepoint of their own.
            if (!stepDone(m_w.savepoint, &rc)) {
                groupError = Error{ErrorCode::Unavailable, m_writeDb.describe("savepoint on " + m_path.string(), rc)};
                break;
            }
            if (auto written = runWrites(request.writes, &rc); !written) {
                if (sqlite3_get_autocommit(m_writeDb.get())) {
                    groupError = Error{ErrorCode::Unavailable, written.error().message};
                    break;
                }
                stepDone(m_w.rollbackTo);
                stepDone(m_w.release);
                outcomes[i] = std::unexpected(written.error());
                continue;
            }
            if (!stepDone(m_w.release, &rc)) {
                groupError = Error{ErrorCode::Unavailable, m_writeDb.describe("releasing a savepoint on " + m_path.string(), rc)};
                break;
            }
            outcomes[i] = AppendResult{};
            continue;
        }

        // The session as this group sees it: changed earlier in the group, live in memory, or
        // finished and read back from the projection.
        const core::SessionState *current = nullptr;
        std::optional<core::SessionState> loaded;
        if (auto it = touched.find(sessionId); it != touched.end()) {
            current = &it->second.state;
        } else if (auto live = m_live.find(sessionId); live != m_live.end()) {
            current = &live->second;
        } else {
            auto fromDisk = loadStateForWrite(sessionId);
            if (!fromDisk) {
                groupError = fromDisk.error();
                break;
            }
            loaded = std::move(*fromDisk);
            if (loaded)
                current = &*loaded;
        }

        if (!current) {
            if (request.expectedLastSeq != 0) {
                outcomes[i] = fail(ErrorCode::NotFound, "no session " + sessionId
                                                            + "; check the id (paddockctl ls lists sessions)");
                continue;
            }
        } else if (request.expectedLastSeq == 0) {
            outcomes[i] = fail(ErrorCode::AlreadyExists, "session " + sessionId + " already exists; pick another id");
            continue;
        } else if (request.expectedLastSeq != AppendRequest::kAnySeq && request.expectedLastSeq != current->lastSeq) {
            outcomes[i] = fail(ErrorCode::Aborted, "session " + sessionId + " ends at seq " + std::to_string(current->lastSeq)
                                                       + ", not " + std::to_string(request.expectedLastSeq)
                                                       + "; someone appended first: re-read the log and decide again");
            continue;
        }

        core::SessionState next = current ? *current : core::SessionState{};
        const bool created = !current;
        if (!stepDone(m_w.savepoint, &rc)) {
            groupError = Error{ErrorCode::Unavailable, m_writeDb.describe("savepoint on " + m_path.string(), rc)};
            break;
        }
        // Time never runs backwards within a session, whatever the wall clock does.
        const int64_t timeMs = std::max(nowMs, next.updatedUnixMs);
        std::vector<core::Event> stored;
        stored.reserve(request.events.size());
        bool ok = true;
        for (auto &newEvent : request.events) {
            core::Event event{sessionId, next.lastSeq + 1, timeMs, std::move(newEvent.kind),
                              std::move(newEvent.payload), newEvent.costMicros};
            auto &insert = m_w.insertEvent;
            insert.bind(1, event.sessionId);
            insert.bind(2, event.seq);
            insert.bind(3, event.timeUnixMs);
            insert.bind(4, event.kind);
            insert.bind(5, event.payload);
            insert.bind(6, event.costMicros);
            if (!stepDone(insert, &rc)) {
                ok = false;
                break;
            }
            for (auto &index : m_indexes) {
                if (index->indexes(event.kind) && (rc = index->write(event)) != SQLITE_DONE) {
                    ok = false;
                    break;
                }
            }
            if (!ok)
                break;
            core::applyEvent(next, event);
            stored.push_back(std::move(event));
        }
        std::optional<Error> writeError;
        if (ok && !request.writes.empty()) {
            if (auto written = runWrites(request.writes, &rc); !written) {
                ok = false;
                writeError = written.error();
            }
        }
        if (!ok) {
            Error error = writeError ? *writeError
                                     : Error{ErrorCode::Internal, m_writeDb.describe("appending to session " + sessionId, rc)};
            if (sqlite3_get_autocommit(m_writeDb.get())) {
                // SQLite rolled the whole transaction back (disk full, I/O error): the group fails.
                groupError = Error{ErrorCode::Unavailable, error.message};
                break;
            }
            stepDone(m_w.rollbackTo);
            stepDone(m_w.release);
            outcomes[i] = std::unexpected(std::move(error));
            continue;
        }
        if (!stepDone(m_w.release, &rc)) {
            groupError = Error{ErrorCode::Unavailable, m_writeDb.describe("releasing a savepoint on " + m_path.string(), rc)};
            break;
        }

        const bool indexedChanged = !current || current->status != next.status
            || current->needsWork() != next.needsWork();
        auto [slot, inserted] = touched.try_emplace(sessionId);
        if (inserted) {
            touchOrder.push_back(sessionId);
            slot->second.created = created;
        }
        slot->second.indexedChanged = slot->second.indexedChanged || indexedChanged;
        slot->second.state = next;
        slot->second.events.insert(slot->second.events.end(), stored.begin(), stored.end());
        outcomes[i] = AppendResult{std::move(stored), std::move(next)};
    }

    phase(m_stats.insertUs);
    if (allOrNothing && !groupError) {
        // One refused request refuses the whole batch, with its reason.
        for (auto &outcome : outcomes) {
            if (outcome && !outcome->has_value()) {
                groupError = outcome->error();
                break;
            }
        }
    }
    if (!groupError) {
        for (const auto &sessionId : touchOrder) {
            const auto &entry = touched.at(sessionId);
            if (auto status = writeProjection(entry.state, entry.created, entry.indexedChanged); !status) {
                groupError = status.error();
                break;
            }
        }
    }
    phase(m_stats.projectionUs);
    if (!groupError && !stepDone(m_w.commit, &rc))
        groupError = Error{ErrorCode::Unavailable, m_writeDb.describe("committing to " + m_path.string(), rc)};
    phase(m_stats.commitUs);
    if (groupError) {
        if (!sqlite3_get_autocommit(m_writeDb.get()))
            stepDone(m_w.rollback);
        if (fullSync)
            stepDone(m_w.syncNormal);
        if (allOrNothing) {
            failGroup(*groupError);   // the refusal of one request, said to every request of the batch
            return;
        }
        spdlog::error("store: a group of {} appends failed and was rolled back: {}", group.size(), groupError->message);
        failGroup(Error{groupError->code, groupError->message + "; nothing of this append was written, retry it"});
        return;
    }
    if (fullSync)
        stepDone(m_w.syncNormal);

    // Committed: memory follows the database.
    std::vector<std::pair<std::string, bool>> work;
    work.reserve(touchOrder.size());
    CommitNotice notice;
    bool wantNotice;
    {
        std::lock_guard lock(m_listenerMutex);
        wantNotice = !m_listeners.empty();
    }
    for (const auto &sessionId : touchOrder) {
        auto &entry = touched.at(sessionId);
        const bool needsWork = entry.state.needsWork();
        work.emplace_back(sessionId, needsWork);
        if (wantNotice) {
            notice.sessions.push_back(entry.state);
            std::move(entry.events.begin(), entry.events.end(), std::back_inserter(notice.events));
        }
        // Finished sessions leave memory; a late event reads them back from the projection.
        if (core::isTerminal(entry.state.status) && !needsWork)
            m_live.erase(sessionId);
        else
            m_live.insert_or_assign(sessionId, std::move(entry.state));
    }
    m_leases.update(work);
    if (wantNotice && !notice.events.empty())
        notifyListeners(notice);
    for (size_t i = 0; i < group.size(); ++i)
        group[i].promise.set_value(std::move(*outcomes[i]));
    phase(m_stats.notifyUs);
}

void SqliteEventStore::notifyListeners(const CommitNotice &notice)
{
    std::lock_guard lock(m_listenerMutex);
    for (auto &[id, listener] : m_listeners) {
        try {
            listener(notice);
        } catch (const std::exception &e) {
            spdlog::error("store: commit listener {} threw: {}", id, e.what());
        }
    }
    for (int id : m_removeAfterNotify)
        std::erase_if(m_listeners, [id](const auto &item) { return item.first == id; });
    m_removeAfterNotify.clear();
}

int SqliteEventStore::addCommitListener(std::function<void(const CommitNotice &)> listener)
{
    if (std::this_thread::get_id() == m_writerId) {
        // From inside a listener the mutex is already held by this thread.
        spdlog::error("store: addCommitListener called from a commit listener; ignored");
        return 0;
    }
    std::lock_guard lock(m_listenerMutex);
    const int id = m_nextListenerId++;
    m_listeners.emplace_back(id, std::move(listener));
    return id;
}

void SqliteEventStore::removeCommitListener(int id)
{
    if (std::this_thread::get_id() == m_writerId) {
        m_removeAfterNotify.push_back(id);   // guarded by the lock this thread holds in notifyListeners
        return;
    }
    std::lock_guard lock(m_listenerMutex);
    std::erase_if(m_listeners, [id](const auto &item) { return item.first == id; });
}

Result<std::vector<core::Event>> SqliteEventStore::readEvents(const std::string &sessionId, int64_t fromSeq, int limit)
{
    if (limit <= 0)
        return fail(ErrorCode::InvalidArgument, "readEvents: limit must be at least 1, not " + std::to_string(limit));
    auto borrowed = borrowReader();
    if (!borrowed)
        return std::unexpected(borrowed.error());
    auto reader = std::move(*borrowed);
    std::vector<core::Event> events;
    Result<std::vector<core::Event>> result;
    {
        auto &stmt = reader->readEvents;
        sqlite::ResetGuard guard(stmt);
        stmt.bind(1, sessionId);
        stmt.bind(2, std::max<int64_t>(fromSeq, 1));
        stmt.bind(3, int64_t{limit});
        int rc;
        while ((rc = stmt.step()) == SQLITE_ROW) {
            events.push_back(core::Event{sessionId, stmt.columnInt(0), stmt.columnInt(1), stmt.columnText(2),
                                         stmt.columnText(3), stmt.columnInt(4)});
        }
        if (rc != SQLITE_DONE)
            result = fail(ErrorCode::Unavailable, reader->db.describe("reading events of session " + sessionId, rc));
    }
    if (result && events.empty()) {
        auto &stmt = reader->sessionExists;
        sqlite::ResetGuard guard(stmt);
        stmt.bind(1, sessionId);
        const int rc = stmt.step();
        if (rc == SQLITE_DONE)
            result = fail(ErrorCode::NotFound, "no session " + sessionId + "; check the id (paddockctl ls lists sessions)");
        else if (rc != SQLITE_ROW)
            result = fail(ErrorCode::Unavailable, reader->db.describe("looking up session " + sessionId, rc));
    }
    returnReader(std::move(reader));
    if (!result)
        return result;
    return events;
}

Result<core::SessionState> SqliteEventStore::getSession(const std::string &sessionId)
{
    auto borrowed = borrowReader();
    if (!borrowed)
        return std::unexpected(borrowed.error());
    auto reader = std::move(*borrowed);
    Result<core::SessionState> result;
    {
        auto &stmt = reader->getState;
        sqlite::ResetGuard guard(stmt);
        stmt.bind(1, sessionId);
        const int rc = stmt.step();
        if (rc == SQLITE_ROW) {
            auto state = sessionStateFromJson(stmt.columnText(0));
            if (state)
                result = std::move(*state);
            else
                result = fail(ErrorCode::Internal, "the projection of session " + sessionId + " is not JSON; the file is damaged");
        } else if (rc == SQLITE_DONE) {
            result = fail(ErrorCode::NotFound, "no session " + sessionId + "; check the id (paddockctl ls lists sessions)");
        } else {
            result = fail(ErrorCode::Unavailable, reader->db.describe("reading session " + sessionId, rc));
        }
    }
    returnReader(std::move(reader));
    return result;
}

Result<SessionPage> SqliteEventStore::listSessions(const SessionQuery &query)
{
    const int pageSize = std::clamp(query.pageSize, 1, kMaxPageSize);
    std::optional<int64_t> before;
    if (!query.pageToken.empty()) {
        before = decodePageToken(query.pageToken);
        if (!before)
            return fail(ErrorCode::InvalidArgument,
                        "the page token is not one this broker issued; list again without a page token");
    }

    std::string sql = "SELECT ord, state FROM sessions WHERE 1";
    std::vector<std::string> texts;   // bound in order after the fixed parameters
    if (!query.statuses.empty()) {
        sql += " AND status IN (";
        for (size_t i = 0; i < query.statuses.size(); ++i) {
            sql += i ? ", ?" : "?";
            texts.emplace_back(core::statusName(query.statuses[i]));
        }
        sql += ")";
    }
    if (!query.agent.empty()) {
        sql += " AND agent = ?";
        texts.push_back(query.agent);
    }
    if (!query.text.empty()) {
        sql += " AND (instr(id, ?) > 0 OR instr(goal, ?) > 0 OR instr(playbook, ?) > 0)";
        texts.insert(texts.end(), 3, query.text);
    }
    if (before)
        sql += " AND ord < ?";
    sql += " ORDER BY ord DESC LIMIT ?";

    auto borrowed = borrowReader();
    if (!borrowed)
        return std::unexpected(borrowed.error());
    auto reader = std::move(*borrowed);
    Result<SessionPage> result = SessionPage{};
    {
        auto stmt = reader->db.prepare(sql, false);
        if (!stmt) {
            returnReader(std::move(reader));
            return std::unexpected(stmt.error());
        }
        int index = 1;
        for (const auto &text : texts)
            stmt->bind(index++, text);
        if (before)
            stmt->bind(index++, *before);
        stmt->bind(index++, int64_t{pageSize} + 1);   // one extra row says whether there is a next page
        int rc;
        int64_t lastOrd = 0;
        while ((rc = stmt->step()) == SQLITE_ROW) {
            if (static_cast<int>(result->sessions.size()) == pageSize) {
                result->nextPageToken = encodePageToken(lastOrd);
                break;
            }
            lastOrd = stmt->columnInt(0);
            auto state = sessionStateFromJson(stmt->columnText(1));
            if (!state) {
                result = fail(ErrorCode::Internal, "a session projection row in " + m_path.string() + " is not JSON");
                break;
            }
            result->sessions.push_back(std::move(*state));
        }
        if (result && rc != SQLITE_DONE && rc != SQLITE_ROW)
            result = fail(ErrorCode::Unavailable, reader->db.describe("listing sessions", rc));
    }
    returnReader(std::move(reader));
    return result;
}

Result<std::vector<SqlRow>> SqliteEventStore::query(const SqlStatement &statement)
{
    auto borrowed = borrowReader();
    if (!borrowed)
        return std::unexpected(borrowed.error());
    auto reader = std::move(*borrowed);
    Result<std::vector<SqlRow>> rows = std::vector<SqlRow>{};
    {
        auto stmt = reader->db.prepare(statement.sql, false);
        if (!stmt) {
            returnReader(std::move(reader));
            return std::unexpected(stmt.error());
        }
        bindValues(*stmt, statement.params);
        int rc;
        while ((rc = stmt->step()) == SQLITE_ROW) {
            const int columns = sqlite3_column_count(stmt->get());
            SqlRow row;
            row.reserve(static_cast<size_t>(columns));
            for (int c = 0; c < columns; ++c) {
                switch (sqlite3_column_type(stmt->get(), c)) {
                case SQLITE_NULL: row.emplace_back(std::monostate{}); break;
                case SQLITE_INTEGER: row.emplace_back(stmt->columnInt(c)); break;
                default: row.emplace_back(stmt->columnText(c)); break;
                }
            }
            rows->push_back(std::move(row));
        }
        if (rc != SQLITE_DONE)
            rows = fail(ErrorCode::Unavailable, reader->db.describe("reading " + m_path.string(), rc));
    }
    returnReader(std::move(reader));
    return rows;
}

void SqliteEventStore::close()
{
    std::lock_guard closeLock(m_closeMutex);
    if (m_closed)
        return;
    m_closed = true;
    {
        std::lock_guard lock(m_queueMutex);
        m_closing = true;
    }
    m_queueCv.notify_all();
    m_spaceCv.notify_all();
    if (m_writer.joinable()) {
        m_writer.join();   // it commits everything queued before it returns
        spdlog::info("store: writer committed {} events in {} groups; ms waiting {}, inserting {}, projection {}, "
                     "committing {}, notifying {}; {} checkpoints forced on the writer",
                     m_stats.events, m_stats.groups, m_stats.waitUs / 1000, m_stats.insertUs / 1000,
                     m_stats.projectionUs / 1000, m_stats.commitUs / 1000, m_stats.notifyUs / 1000,
                     m_stats.forcedCheckpoints);
    }
    if (m_checkpointer.joinable()) {
        {
            std::lock_guard lock(m_checkpointMutex);
            m_checkpointStop = true;
        }
        m_checkpointCv.notify_one();
        m_checkpointer.join();
    }
    m_checkpointDb.closeNow();
    m_leases.close();
    {
        std::lock_guard lock(m_readMutex);
        m_readClosed = true;
        m_idleReaders.clear();
    }
    if (m_writeDb.get()) {
        m_w = WriterStatements{};
        m_writeStatements.clear();
    }
    // Only a store that opened owns a WAL worth checkpointing; a refused file is left as it was.
    if (m_writeDb.get() && m_writerStarted) {
        // TRUNCATE leaves an empty WAL: the next open starts without replaying it.
        auto busy = m_writeDb.queryText("PRAGMA wal_checkpoint(TRUNCATE)");
        if (!busy)
            spdlog::warn("store: final checkpoint of {} failed: {}", m_path.string(), busy.error().message);
    }
    m_writeDb.closeNow();
    if (m_lockFd >= 0) {
        ::close(m_lockFd);
        m_lockFd = -1;
    }
}

} // namespace

Result<std::unique_ptr<EventStore>> openSqliteEventStore(const std::filesystem::path &path, const SqliteOptions &options)
{
    auto store = std::make_unique<SqliteEventStore>(path, options);
    if (auto status = store->open(); !status)
        return std::unexpected(status.error());
    return std::unique_ptr<EventStore>(std::move(store));
}

int sqliteSchemaVersion() { return kSchemaVersion; }

} // namespace paddock::store
