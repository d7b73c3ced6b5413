#pragma once
// The two ends of `paddockd migrate` (store_migration.h), private to broker/store: the source, one
// read transaction on the SQLite file, and what is read and written on the target's PostgreSQL
// connection, COPY included. store_migration.cpp runs the steps over them;
// store_migration_copy.cpp implements them.
//
// Threads: the migrating thread only.

#include "broker/store/pg_handle.h"
#include "broker/store/sqlite_handle.h"

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace paddock::store::migration {

// "name", for identifiers in SQL both engines read.
std::string quotedName(const std::string &name);

// One session's events, as either side counts them.
struct SessionFigures {
    int64_t events = 0, lastSeq = 0, firstTime = 0, lastTime = 0, cost = 0;
    bool operator==(const SessionFigures &) const = default;
};
std::string describe(const SessionFigures &figures);
using SessionFigureMap = std::map<std::string, SessionFigures>;

// The SQLite file, read in one transaction: every read sees the same snapshot.
class Source {
public:
    static Result<Source> open(const std::filesystem::path &path);

    sqlite::Database &db() { return m_db; }
    // The first column of every row of sql, param bound to ?1 when not empty.
    Result<std::vector<std::string>> strings(const std::string &sql, const std::string &param = {});
    Result<int64_t> count(const std::string &table);
    Result<SessionFigureMap> sessionFigures();
    // Ends the read transaction.
    void finish();

private:
    explicit Source(sqlite::Database db) : m_db(std::move(db)) {}
    sqlite::Database m_db;
};

// On the target's connection (inside its transaction).
Result<int64_t> targetCount(pg::Connection &db, const std::string &table);
Result<std::set<std::string>> targetColumns(pg::Connection &db, const std::string &table);
Result<SessionFigureMap> targetSessionFigures(pg::Connection &db);

// Streams table's columns from the source into the target with COPY, in order's order. onRow runs
// on each row read (the events' progress).
Status copyTable(Source &source, pg::Connection &target, const std::string &table, const std::string &order,
                 const std::vector<std::string> &columns, const std::function<void(sqlite3_stmt *)> &onRow);

} // namespace paddock::store::migration
