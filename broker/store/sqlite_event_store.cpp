// SQLite EventStore. docs/store.md describes the schema, durability and leases.
//
// Known limits:
// - One process owns the database (flock on "<db>.lock"); leases live in that process's memory.
// - The writer keeps the fold state of every session that is not finished in memory (about 1 KB
//   each); finished ones are read back from the projection when an event arrives for them.
// - A payload is checked only to look like a JSON object ("{...}"); parsing every payload on the
//   append path would cost more than the insert itself. The fold skips payloads it cannot read.
// - listSessions' text filter is a case-sensitive substring match and scans the candidate rows.
//
// This file opens and closes the store: the lock file, the writer's connection and its PRAGMAs,
// the checkpointer, the writer's statements and the live sessions. The rest of SqliteEventStore is
// in sqlite_event_store_{schema,writer,commit,reads}.cpp (sqlite_event_store_internal.h).
//
// Threads: open() runs before the writer and checkpointer threads start; close() may be called
// from any thread (m_closeMutex), joins both and then closes their connections.

#include "broker/store/sqlite_event_store.h"
#include "broker/store/sqlite_event_store_internal.h"

#include "broker/store/state_json.h"

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace paddock::store {

namespace {

// The WAL is checkpointed by its own thread once it holds this many pages (4 KiB each), so the
// writer never waits for a checkpoint's copying and fsyncs; past the hard limit the writer
// checkpoints itself, so the WAL stays bounded even if the checkpointer cannot keep up.
constexpr int kCheckpointPages = 1000;
constexpr int kForceCheckpointPages = 16000;

} // namespace

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
    // One reader now, so a broken file shows at open, not at the first read.
    if (auto status = m_readers.probe(); !status)
        return status;

    m_appends.start(*this);
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
    m_indexes = makeEventIndexes();
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

void SqliteEventStore::close()
{
    std::lock_guard closeLock(m_closeMutex);
    if (m_closed)
        return;
    m_closed = true;
    m_appends.close();   // the writer commits everything queued before it returns
    if (m_appends.started()) {
        const auto &queued = m_appends.stats();
        spdlog::info("store: writer committed {} events in {} groups; ms waiting {}, inserting {}, projection {}, "
                     "committing {}, notifying {}; {} checkpoints forced on the writer",
                     queued.events, queued.groups, queued.waitUs / 1000, m_stats.insertUs / 1000,
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
    m_readers.close();
    if (m_writeDb.get()) {
        m_w = WriterStatements{};
        m_writeStatements.clear();
    }
    // Only a store that opened owns a WAL worth checkpointing; a refused file is left as it was.
    if (m_writeDb.get() && m_appends.started()) {
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

Result<std::unique_ptr<EventStore>> openSqliteEventStore(const std::filesystem::path &path, const SqliteOptions &options)
{
    auto store = std::make_unique<SqliteEventStore>(path, options);
    if (auto status = store->open(); !status)
        return std::unexpected(status.error());
    return std::unique_ptr<EventStore>(std::move(store));
}

int sqliteSchemaVersion() { return kSchemaVersion; }

} // namespace paddock::store
