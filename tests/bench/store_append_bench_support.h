#pragma once
// store_append_bench's helpers: the rows it appends, the raw mechanisms the store is measured
// against, and the PostgreSQL server it measures.
//
// The raw mechanisms insert the same rows (session id, seq, time, kind, ~150-byte JSON payload, cost)
// in batches into a plain table of the events table's columns, by one thread on one connection,
// nothing else. No primary key, as in a log file: the raw figure is the engine at its simplest, and
// the store's index, its projection and everything else it keeps are part of what the ratio measures.
// - SQLite: the store's pragmas (WAL, synchronous=NORMAL), one prepared single-row INSERT stepped
//   rawBatch times per transaction (with SQLite that is the fast way: no round trips to save).
// - PostgreSQL: one prepared multi-row INSERT ... VALUES of rawBatch rows, each executed on its own
//   (so one transaction and one round trip per rawBatch rows), synchronous_commit on like the
//   store's writer. Chosen over INSERT ... SELECT FROM unnest(arrays), the statement the store
//   itself sends, because on this bench's rows it was as fast or faster (up to 2x, measured
//   alternating on the development VM): no array literals to escape and build on the client, none
//   to parse on the server, so the raw figure is the higher of the two and the ratio the stricter.
//   COPY is left out: it is a bulk load, not the batched INSERT the budget names.
//
// BenchPostgres is the server the PostgreSQL figures come from: --postgres's, or a throwaway one of
// the bench's own (tests/support/started_postgres.h), whose CPU time it reads from /proc.
//
// Threads: each function runs on the caller's thread and returns when done; BenchPostgres belongs to
// the main thread (the server dies with the thread that started it).

#include "tests/support/started_postgres.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace paddock::bench {

using Clock = std::chrono::steady_clock;

inline const char *const kKinds[] = {"model.response", "tool.call", "tool.result", "cost"};

inline std::string payloadFor(uint64_t n)
{
    std::string payload = R"({"tool":"run_command","args":{"cmd":"make -j2 test"},"exit_code":0,"n":)"
        + std::to_string(n) + R"(,"note":")";
    while (payload.size() < 146)
        payload.push_back('x');
    payload += "\"}";
    return payload;   // about 150 bytes
}

// The raw rows: runs of `batch` events per session, sessions in turn, as the store's producers make them.
class RawRows {
public:
    RawRows(int sessions, int batch) : m_batch(static_cast<uint64_t>(batch)), m_seqs(static_cast<size_t>(sessions), 1)
    {
        for (int s = 0; s < sessions; ++s)
            m_ids.push_back("bench-" + std::to_string(s));
    }
    // Moves to the next row: its session id, seq, time, kind, payload and cost.
    void next()
    {
        m_row = m_next++;
        if (m_row % m_batch == 0)
            m_session = (m_session + 1) % m_ids.size();
        seq = m_seqs[m_session]++;
        payload = payloadFor(m_row);
    }
    const std::string &sessionId() const { return m_ids[m_session]; }
    int64_t timeUnixMs() const { return 1'700'000'000'000 + static_cast<int64_t>(m_row); }
    const char *kind() const { return kKinds[m_row % 4]; }
    int64_t costMicros() const { return static_cast<int64_t>(m_row % 3); }

    int64_t seq = 0;
    std::string payload;

private:
    uint64_t m_batch;
    uint64_t m_next = 0;
    uint64_t m_row = 0;
    size_t m_session = 0;
    std::vector<std::string> m_ids;
    std::vector<int64_t> m_seqs;
};

inline Clock::time_point deadlineAfter(double seconds)
{
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

[[noreturn]] inline void rawFailed(const char *engine, const char *what, const char *message)
{
    std::fprintf(stderr, "raw %s %s: %s\n", engine, what, message);
    std::exit(1);
}

// Rows per second into a new SQLite file at path.
inline double rawSqliteRowsPerSecond(const std::filesystem::path &path, int sessions, int batch, int rawBatch,
                                     double seconds)
{
    sqlite3 *db = nullptr;
    auto check = [&](int rc, const char *what) {
        if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
            rawFailed("SQLite", what, sqlite3_errmsg(db));
    };
    check(sqlite3_open(path.c_str(), &db), "open");
    check(sqlite3_exec(db,
                       "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY;"
                       "PRAGMA cache_size=-32768;"
                       "CREATE TABLE raw(session_id TEXT NOT NULL, seq INTEGER NOT NULL, time_unix_ms INTEGER NOT NULL,"
                       " kind TEXT NOT NULL, payload TEXT NOT NULL, cost_micros INTEGER NOT NULL)",
                       nullptr, nullptr, nullptr),
          "schema");
    sqlite3_stmt *insert = nullptr;
    check(sqlite3_prepare_v2(db, "INSERT INTO raw VALUES(?1, ?2, ?3, ?4, ?5, ?6)", -1, &insert, nullptr), "prepare");

    RawRows rows(sessions, batch);
    uint64_t inserted = 0;
    const auto start = Clock::now();
    const auto end = deadlineAfter(seconds);
    while (Clock::now() < end) {
        check(sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr), "begin");
        for (int i = 0; i < rawBatch; ++i) {
            rows.next();
            const std::string &id = rows.sessionId();
            sqlite3_bind_text(insert, 1, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
            sqlite3_bind_int64(insert, 2, rows.seq);
            sqlite3_bind_int64(insert, 3, rows.timeUnixMs());
            sqlite3_bind_text(insert, 4, rows.kind(), -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 5, rows.payload.data(), static_cast<int>(rows.payload.size()), SQLITE_STATIC);
            sqlite3_bind_int64(insert, 6, rows.costMicros());
            check(sqlite3_step(insert), "insert");
            sqlite3_reset(insert);
        }
        check(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), "commit");
        inserted += static_cast<uint64_t>(rawBatch);
    }
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    sqlite3_finalize(insert);
    sqlite3_close(db);
    return static_cast<double>(inserted) / wall;
}

// PostgreSQL caps a statement's parameters at 65535: six per row.
inline constexpr int kMaxRawPostgresBatch = 65535 / 6;

// Rows per second into a new table `table` of the database conninfo names (dropped at the end).
inline double rawPostgresRowsPerSecond(const std::string &conninfo, const std::string &table, int sessions, int batch,
                                       int rawBatch, double seconds)
{
    std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(conninfo.c_str()), &PQfinish);
    if (PQstatus(conn.get()) != CONNECTION_OK)
        rawFailed("PostgreSQL", "connect", PQerrorMessage(conn.get()));
    auto run = [&](PGresult *result, const char *what) {
        std::unique_ptr<PGresult, decltype(&PQclear)> owned(result, &PQclear);
        const auto status = PQresultStatus(result);
        if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
            rawFailed("PostgreSQL", what, PQerrorMessage(conn.get()));
    };
    run(PQexec(conn.get(), "SET synchronous_commit = on"), "synchronous_commit");
    run(PQexec(conn.get(), ("CREATE TABLE " + table + "(session_id text NOT NULL, seq bigint NOT NULL, "
                            "time_unix_ms bigint NOT NULL, kind text NOT NULL, payload text NOT NULL, "
                            "cost_micros bigint NOT NULL)")
                               .c_str()),
        "schema");
    std::string sql = "INSERT INTO " + table + " VALUES ";
    for (int row = 0; row < rawBatch; ++row) {
        const std::string first = std::to_string(row * 6 + 1);
        sql += (row ? ",($" : "($") + first;
        for (int column = 1; column < 6; ++column)
            sql += ",$" + std::to_string(row * 6 + 1 + column);
        sql += ")";
    }
    // Typed by the table's columns; every value travels as text, as the store's do.
    run(PQprepare(conn.get(), "raw_insert", sql.c_str(), 0, nullptr), "prepare");

    RawRows rows(sessions, batch);
    std::vector<std::string> texts(static_cast<size_t>(rawBatch) * 6);
    std::vector<const char *> values(texts.size());
    uint64_t inserted = 0;
    const auto start = Clock::now();
    const auto end = deadlineAfter(seconds);
    while (Clock::now() < end) {
        for (size_t row = 0; row < static_cast<size_t>(rawBatch); ++row) {
            rows.next();
            std::string *cell = &texts[row * 6];
            cell[0] = rows.sessionId();
            cell[1] = std::to_string(rows.seq);
            cell[2] = std::to_string(rows.timeUnixMs());
            cell[3] = rows.kind();
            cell[4] = rows.payload;
            cell[5] = std::to_string(rows.costMicros());
        }
        for (size_t i = 0; i < texts.size(); ++i)
            values[i] = texts[i].c_str();
        run(PQexecPrepared(conn.get(), "raw_insert", static_cast<int>(values.size()), values.data(), nullptr, nullptr,
                           0),
            "insert");
        inserted += static_cast<uint64_t>(rawBatch);
    }
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    run(PQexec(conn.get(), ("DROP TABLE " + table).c_str()), "drop");
    return static_cast<double>(inserted) / wall;
}

// CPU seconds of a postmaster and every process it started, the exited ones included (their time is
// added to the postmaster's cutime/cstime when it reaps them).
inline double serverCpuSeconds(pid_t postmaster)
{
    uint64_t ticks = 0;
    std::error_code ec;
    for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.empty() || !std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isdigit(c); }))
            continue;
        std::ifstream in(it->path() / "stat");
        std::string text;
        std::getline(in, text);
        const auto commEnd = text.rfind(')');   // the command name may hold spaces and parentheses
        if (commEnd == std::string::npos)
            continue;
        std::istringstream fields(text.substr(commEnd + 1));
        std::string state, skip;
        long ppid = 0;
        uint64_t utime = 0, stime = 0, cutime = 0, cstime = 0;
        fields >> state >> ppid;
        for (int i = 0; i < 9; ++i)   // pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
            fields >> skip;
        fields >> utime >> stime >> cutime >> cstime;
        if (std::stol(name) == postmaster)
            ticks += utime + stime + cutime + cstime;
        else if (ppid == postmaster)
            ticks += utime + stime;
    }
    return static_cast<double>(ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The PostgreSQL the bench measures: the one --postgres names, or a throwaway one of its own.
class BenchPostgres {
public:
    std::string start(const std::string &conninfo)
    {
        if (!conninfo.empty()) {
            m_conninfo = conninfo;
            return {};
        }
        m_server = std::make_unique<test::StartedPostgres>();
        if (auto failed = m_server->start(); !failed.empty())
            return failed;
        // The fixture trades durability for test speed; the bench measures what a team would run.
        for (const char *sql : {"ALTER SYSTEM SET fsync = on", "ALTER SYSTEM SET full_page_writes = on",
                                "ALTER SYSTEM SET shared_buffers = '128MB'"}) {
            if (auto failed = m_server->exec(sql); !failed.empty())
                return std::string(sql) + ": " + failed;
        }
        m_server->stop("fast");
        return m_server->start();
    }
    bool own() const { return m_server != nullptr; }

    // The connection string for one measurement: a fresh database on the bench's own server.
    std::string open(const std::string &prefix)
    {
        if (!own())
            return m_conninfo;
        std::string error;
        m_database = m_server->freshDatabase(prefix, &error);
        if (m_database.empty()) {
            std::fprintf(stderr, "%s\n", error.c_str());
            std::exit(1);
        }
        return m_server->connectionString(m_database);
    }
    void close()
    {
        if (own() && !m_database.empty())
            (void)m_server->exec("DROP DATABASE " + m_database + " WITH (FORCE)");
        m_database.clear();
    }
    // The server's CPU seconds so far; < 0 when it is not the bench's own.
    double cpuSeconds() const
    {
        if (!own())
            return -1;
        std::ifstream pidFile(m_server->socketDir() / "data" / "postmaster.pid");
        pid_t postmaster = 0;
        pidFile >> postmaster;
        return postmaster > 0 ? serverCpuSeconds(postmaster) : -1;
    }

private:
    std::unique_ptr<test::StartedPostgres> m_server;
    std::string m_conninfo;
    std::string m_database;
};

} // namespace paddock::bench
