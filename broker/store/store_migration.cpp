// `paddockd migrate`: a SQLite store into PostgreSQL (store_migration.h). The steps, in
// migrateToPostgres: open both stores as a broker would (locks, schema checks, the target's schema
// created), then on one read transaction of the source and one transaction of the target: lock the
// target's tables, refuse rows already there (unless merging), COPY each table, give every session
// its lease row, move the identity sequences past the copied rows, compare the counts, commit.
//
// Threads: the caller's thread only.

#include "broker/store/store_migration.h"

#include "broker/store/postgres_event_store.h"
#include "broker/store/sqlite_event_store.h"
#include "broker/store/store_migration_internal.h"
#include "broker/store/store_url.h"

#include <algorithm>
#include <chrono>

namespace paddock::store {

using namespace migration;

namespace {

struct CopiedTable {
    const char *name;
    const char *order;      // the primary key: rows are copied in its order
    const char *identity;   // an INTEGER PRIMARY KEY (PostgreSQL: an identity column), or nullptr
};

// Every table of the SQLite schema (migrations 1 to 6). Sessions first: the events' progress is
// counted against them. A test holds this list to the schema, so a table added later cannot be
// left behind.
constexpr CopiedTable kTables[] = {
    {"sessions", "ord", "ord"},
    {"events", "session_id, seq", nullptr},
    {"cost_entries", "session_id, seq", nullptr},
    {"review_items", "ord", "ord"},
    {"review_fetches", "review_id, principal", nullptr},
    {"decisions", "ord", "ord"},
    {"agents", "name", nullptr},
    {"agent_records", "agent, key", nullptr},
    {"tokens", "id", nullptr},
    {"audit", "id", "id"},
    {"submit_requests", "principal, request_id", nullptr},
    {"otlp_export", "session_id", nullptr},
};

constexpr size_t kMaxMismatchesListed = 10;

// ---- the steps ----------------------------------------------------------------------------------

// Opens each store as a broker would, then closes it: the source is checked (and its schema
// brought to this build's), the target's schema made. The source's lock is held by the returned
// store until the copy is over.
Result<std::unique_ptr<EventStore>> prepareStores(const MigrationOptions &options)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(options.from, ec))
        return fail(ErrorCode::FailedPrecondition,
                    "the source " + options.from.string()
                        + " is not a file: pass --from the broker's database, <data_dir>/broker.db (data_dir in "
                          "broker.toml, $XDG_DATA_HOME/paddock by default)");
    auto source = openSqliteEventStore(options.from);
    if (!source)
        return std::unexpected(source.error());
    auto opened = openPostgresEventStore(options.toConninfo);
    if (!opened)
        return std::unexpected(opened.error());
    (*opened)->close();
    return std::move(*source);
}

// Refuses a target that holds rows, unless merging: what it holds, and the two ways on.
Status checkEmpty(const std::vector<TableCount> &counts, const std::string &target)
{
    std::string held;
    for (const auto &count : counts) {
        if (count.targetBefore > 0)
            held += (held.empty() ? "" : ", ") + std::to_string(count.targetBefore) + " in " + count.table;
    }
    if (held.empty())
        return {};
    return fail(ErrorCode::FailedPrecondition,
                "the target " + target + " already holds rows (" + held
                    + "): migrate copies into an empty database. Give it a new database (createdb), or pass --merge "
                      "to add this store's sessions to the ones there");
}

std::vector<std::string> compareSessions(const SessionFigureMap &source, const SessionFigureMap &target)
{
    std::vector<std::string> out;
    size_t found = 0;
    for (const auto &[session, figures] : source) {
        const auto copied = target.find(session);
        if (copied != target.end() && copied->second == figures)
            continue;
        if (++found > kMaxMismatchesListed)
            continue;
        out.push_back("events of session " + session + ": the source has " + describe(figures) + "; the target "
                      + (copied == target.end() ? std::string("has none") : "has " + describe(copied->second)));
    }
    if (found > kMaxMismatchesListed)
        out.push_back("events: " + std::to_string(found - kMaxMismatchesListed) + " more sessions differ");
    return out;
}

} // namespace

std::vector<std::string> migratedTables()
{
    std::vector<std::string> out;
    for (const auto &table : kTables)
        out.emplace_back(table.name);
    return out;
}

namespace {

// The target's tables, locked for the copy: nothing else writes them while they fill (a broker
// still running on them is waited for, not long).
Status lockTarget(pg::Connection &target)
{
    std::string sql = "SET LOCAL lock_timeout = '10s'; LOCK TABLE leases";
    for (const auto &table : kTables)
        sql += std::string(", ") + quotedName(table.name);
    sql += " IN EXCLUSIVE MODE";
    return target.run(sql.c_str(), "locking the target's tables (stop the brokers that use it)");
}

// Every table's rows in the source, and in the target before the copy.
Status countTables(Source &source, pg::Connection &target, MigrationReport &report)
{
    for (const auto &table : kTables) {
        TableCount count{table.name};
        auto rows = source.count(table.name);
        if (!rows)
            return std::unexpected(rows.error());
        count.source = *rows;
        auto before = targetCount(target, table.name);
        if (!before)
            return std::unexpected(before.error());
        count.targetBefore = *before;
        report.tables.push_back(count);
    }
    return {};
}

int64_t sourceRows(const MigrationReport &report, std::string_view table)
{
    for (const auto &count : report.tables) {
        if (count.table == table)
            return count.source;
    }
    return 0;
}

// The columns of table to copy: the source's, each of which the target must have; merging, not
// the identity column (the target numbers the rows after its own, in the source's order).
Result<std::vector<std::string>> copiedColumns(Source &source, pg::Connection &target, const CopiedTable &table,
                                               bool merge, const std::string &targetName)
{
    auto columns = source.strings("SELECT name FROM pragma_table_info(?1) ORDER BY cid", table.name);
    if (!columns)
        return std::unexpected(columns.error());
    auto targetHas = targetColumns(target, table.name);
    if (!targetHas)
        return std::unexpected(targetHas.error());
    for (const auto &column : *columns) {
        if (!targetHas->contains(column))
            return fail(ErrorCode::FailedPrecondition, "table " + std::string(table.name) + " of the target "
                                                           + targetName + " has no column " + column);
    }
    if (merge && table.identity)
        columns->erase(std::remove(columns->begin(), columns->end(), table.identity), columns->end());
    return columns;
}

// COPY of every table, sessions first; progress after each session's events.
Status copyTables(Source &source, pg::Connection &target, const MigrationOptions &options,
                  const MigrationReport &report)
{
    MigrationProgress progress;
    progress.sessionsTotal = sourceRows(report, "sessions");
    progress.eventsTotal = sourceRows(report, "events");
    for (const auto &table : kTables) {
        auto columns = copiedColumns(source, target, table, options.merge, report.target);
        if (!columns)
            return std::unexpected(columns.error());
        std::function<void(sqlite3_stmt *)> onRow;
        std::string lastSession;
        if (std::string_view(table.name) == "events") {
            if (columns->empty() || columns->front() != "session_id")
                return fail(ErrorCode::Internal, "the events table does not start with session_id");
            onRow = [&](sqlite3_stmt *stmt) {   // rows come in session order
                const auto *id = reinterpret_cast<const char *>(sqlite3_column_text(stmt, 0));
                const std::string_view session = id ? id : "";
                if (session != lastSession) {
                    if (!lastSession.empty()) {
                        ++progress.sessionsCopied;
                        if (options.progress)
                            options.progress(progress);
                    }
                    lastSession = session;
                }
                ++progress.eventsCopied;
            };
        }
        if (auto status = copyTable(source, target, table.name, table.order, *columns, onRow); !status)
            return status;
    }
    progress.sessionsCopied = progress.sessionsTotal;
    if (options.progress)
        options.progress(progress);
    return {};
}

// What a broker on the target expects beside the rows: a lease row per session (version 5 of the
// PostgreSQL schema), and identity sequences past the copied ords and ids.
Status readyForBrokers(pg::Connection &target, bool merge)
{
    if (auto status = target.run("INSERT INTO leases(session_id) SELECT id FROM sessions ORDER BY ord "
                                 "ON CONFLICT DO NOTHING",
                                 "giving the sessions their lease rows");
        !status)
        return status;
    for (const auto &table : kTables) {
        if (!table.identity || merge)
            continue;   // merging, the target assigned them
        const std::string sql = std::string("SELECT setval(pg_get_serial_sequence('") + table.name + "', '"
            + table.identity + "'), max(" + quotedName(table.identity) + ")) FROM " + quotedName(table.name)
            + " HAVING max(" + quotedName(table.identity) + ") IS NOT NULL";
        if (auto status = target.run(sql.c_str(), "moving the identity of " + std::string(table.name)); !status)
            return status;
    }
    return {};
}

// The counts of every table and of each session's events, source against target; each difference
// goes to report.mismatches.
Status checkCopy(Source &source, pg::Connection &target, MigrationReport &report)
{
    for (auto &count : report.tables) {
        auto after = targetCount(target, count.table);
        if (!after)
            return std::unexpected(after.error());
        count.targetAfter = *after;
        if (count.targetAfter != count.targetBefore + count.source)
            report.mismatches.push_back("table " + count.table + ": " + std::to_string(count.source)
                                        + " rows in the source, " + std::to_string(count.targetAfter - count.targetBefore)
                                        + " copied into the target");
    }
    auto sourceFigures = source.sessionFigures();
    if (!sourceFigures)
        return std::unexpected(sourceFigures.error());
    auto targetFigures = targetSessionFigures(target);
    if (!targetFigures)
        return std::unexpected(targetFigures.error());
    report.sessionsChecked = static_cast<int64_t>(sourceFigures->size());
    for (auto &mismatch : compareSessions(*sourceFigures, *targetFigures))
        report.mismatches.push_back(std::move(mismatch));
    return {};
}

} // namespace

Result<MigrationReport> migrateToPostgres(const MigrationOptions &options)
{
    const auto started = std::chrono::steady_clock::now();
    MigrationReport report;
    report.source = options.from.string();
    report.target = describePostgresUrl(options.toConninfo);
    report.merge = options.merge;

    auto sourceStore = prepareStores(options);
    if (!sourceStore)
        return std::unexpected(sourceStore.error());
    auto source = Source::open(options.from);
    if (!source)
        return std::unexpected(source.error());
    // The source's tables are this build's (the store just migrated it): each must be one we copy.
    auto sourceTables = source->strings("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                        "'sqlite\\_%' ESCAPE '\\' ORDER BY name");
    if (!sourceTables)
        return std::unexpected(sourceTables.error());
    const auto known = migratedTables();
    for (const auto &table : *sourceTables) {
        if (std::find(known.begin(), known.end(), table) == known.end())
            return fail(ErrorCode::Internal, "the source " + report.source + " has a table " + table
                                                 + " that migrate does not copy; this is a bug in paddockd: report it");
    }

    auto target = pg::Connection::open(options.toConninfo);
    if (!target)
        return std::unexpected(target.error());
    // One transaction: whatever fails below rolls all of it back.
    Status status = target->run("BEGIN", "starting the copy");
    if (status)
        status = lockTarget(*target);
    if (status)
        status = countTables(*source, *target, report);
    if (status && !options.merge)
        status = checkEmpty(report.tables, report.target);
    if (status)
        status = copyTables(*source, *target, options, report);
    if (status)
        status = readyForBrokers(*target, options.merge);
    if (status)
        status = checkCopy(*source, *target, report);
    if (!status) {
        (void)target->exec("ROLLBACK");
        return fail(status.error().code, status.error().message + "; nothing was written to " + report.target);
    }

    if (report.mismatches.empty()) {
        if (auto committed = target->run("COMMIT", "committing the copy"); !committed)
            return fail(committed.error().code,
                        committed.error().message + ". Whether the copy committed is unknown: if " + report.target
                            + " holds the sessions now (paddockd migrate run again says so), it did");
        report.committed = true;
    } else {
        (void)target->exec("ROLLBACK");
    }
    source->finish();
    (*sourceStore)->close();
    report.elapsedMs = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started)
                           .count();
    return report;
}

} // namespace paddock::store
