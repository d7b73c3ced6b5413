// The ends of `paddockd migrate` (store_migration_internal.h): the SQLite source read in one
// transaction, and the target's counts, columns and COPY. COPY's text format: a row a line, columns
// separated by tabs, \N for NULL, backslash, tab, newline and carriage return escaped in text.
//
// Threads: the migrating thread only.

#include "broker/store/store_migration_internal.h"

#include <cmath>
#include <cstdio>

namespace paddock::store::migration {

namespace {

constexpr size_t kCopyChunkBytes = 1 << 20;

constexpr const char *kSessionFiguresSql = "SELECT session_id, count(*), max(seq), min(time_unix_ms), "
                                           "max(time_unix_ms), sum(cost_micros) FROM events GROUP BY session_id";

std::string joined(const std::vector<std::string> &names)
{
    std::string out;
    for (const auto &name : names)
        out += (out.empty() ? "" : ", ") + quotedName(name);
    return out;
}

} // namespace

std::string quotedName(const std::string &name)
{
    return "\"" + name + "\"";
}

std::string describe(const SessionFigures &f)
{
    return std::to_string(f.events) + " events, last seq " + std::to_string(f.lastSeq) + ", times "
        + std::to_string(f.firstTime) + ".." + std::to_string(f.lastTime) + " ms, cost " + std::to_string(f.cost)
        + " micro-USD";
}

// ---- the source ---------------------------------------------------------------------------------

Result<Source> Source::open(const std::filesystem::path &path)
{
    auto db = sqlite::Database::open(path, /*readOnly=*/true);
    if (!db)
        return std::unexpected(db.error());
    Source source(std::move(*db));
    // Every read below sees one snapshot (the store opened before holds the file's lock, so no
    // broker writes meanwhile anyway).
    if (auto status = source.m_db.exec("BEGIN"); !status)
        return std::unexpected(status.error());
    return source;
}

Result<std::vector<std::string>> Source::strings(const std::string &sql, const std::string &param)
{
    auto stmt = m_db.prepare(sql, false);
    if (!stmt)
        return std::unexpected(stmt.error());
    if (!param.empty())
        stmt->bind(1, param);
    std::vector<std::string> out;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW)
        out.push_back(stmt->columnText(0));
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Internal, m_db.describe("reading " + m_db.path().string(), rc));
    return out;
}

Result<int64_t> Source::count(const std::string &table)
{
    return m_db.queryInt(("SELECT count(*) FROM " + quotedName(table)).c_str());
}

Result<SessionFigureMap> Source::sessionFigures()
{
    auto stmt = m_db.prepare(kSessionFiguresSql, false);
    if (!stmt)
        return std::unexpected(stmt.error());
    SessionFigureMap out;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW)
        out[stmt->columnText(0)] = {stmt->columnInt(1), stmt->columnInt(2), stmt->columnInt(3), stmt->columnInt(4),
                                    stmt->columnInt(5)};
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Internal, m_db.describe("counting the events of " + m_db.path().string(), rc));
    return out;
}

void Source::finish()
{
    (void)m_db.exec("COMMIT");
}

// ---- the target ---------------------------------------------------------------------------------

Result<int64_t> targetCount(pg::Connection &db, const std::string &table)
{
    auto result = db.exec(("SELECT count(*) FROM " + quotedName(table)).c_str());
    if (!pg::ok(result.get()))
        return std::unexpected(db.error(result.get(), "counting the rows of " + table));
    return pg::cellInt(result.get(), 0, 0);
}

Result<std::set<std::string>> targetColumns(pg::Connection &db, const std::string &table)
{
    pg::Params params;
    params.add(table);
    auto result = db.exec("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                          "AND table_name = $1",
                          params);
    if (!pg::ok(result.get()))
        return std::unexpected(db.error(result.get(), "reading the columns of " + table));
    std::set<std::string> out;
    for (int row = 0; row < PQntuples(result.get()); ++row)
        out.insert(pg::cellText(result.get(), row, 0));
    return out;
}

Result<SessionFigureMap> targetSessionFigures(pg::Connection &db)
{
    auto result = db.exec(kSessionFiguresSql);
    if (!pg::ok(result.get()))
        return std::unexpected(db.error(result.get(), "counting the events copied"));
    SessionFigureMap out;
    for (int row = 0; row < PQntuples(result.get()); ++row)
        out[pg::cellText(result.get(), row, 0)] = {pg::cellInt(result.get(), row, 1), pg::cellInt(result.get(), row, 2),
                                                   pg::cellInt(result.get(), row, 3), pg::cellInt(result.get(), row, 4),
                                                   pg::cellInt(result.get(), row, 5)};
    return out;
}

namespace {

// A cell in COPY's text format: \N for NULL; text with backslash, tab, newline and carriage
// return escaped.
void appendCell(std::string &out, sqlite3_stmt *stmt, int column)
{
    switch (sqlite3_column_type(stmt, column)) {
    case SQLITE_NULL:
        out += "\\N";
        return;
    case SQLITE_INTEGER:
        out += std::to_string(sqlite3_column_int64(stmt, column));
        return;
    case SQLITE_FLOAT: {
        const double value = sqlite3_column_double(stmt, column);
        if (std::isinf(value)) {
            out += value > 0 ? "Infinity" : "-Infinity";
            return;
        }
        char buffer[32];
        std::snprintf(buffer, sizeof buffer, "%.17g", value);   // exact round trip
        out += buffer;
        return;
    }
    default: {
        const auto *text = reinterpret_cast<const char *>(sqlite3_column_text(stmt, column));
        const int size = sqlite3_column_bytes(stmt, column);
        for (int i = 0; i < size; ++i) {
            const char c = text[i];
            switch (c) {
            case '\\': out += "\\\\"; break;
            case '\t': out += "\\t"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            default: out.push_back(c);
            }
        }
    }
    }
}

// Ends a COPY: sent whole (error empty) or abandoned with error as the reason; then the server's
// answer.
Status endCopy(pg::Connection &target, const std::string &table, const std::string &error)
{
    PGconn *conn = target.get();
    if (PQputCopyEnd(conn, error.empty() ? nullptr : error.c_str()) != 1)
        return fail(ErrorCode::Unavailable, "copying table " + table + ": the connection to PostgreSQL broke ("
                                                + PQerrorMessage(conn) + ")");
    Status status;
    for (pg::ResultPtr result(PQgetResult(conn)); result; result.reset(PQgetResult(conn))) {
        if (status && !pg::ok(result.get()))
            status = std::unexpected(target.error(result.get(), "copying table " + table));
    }
    if (!error.empty())
        return fail(ErrorCode::Internal, error);
    return status;
}

} // namespace

Status copyTable(Source &source, pg::Connection &target, const std::string &table, const std::string &order,
                 const std::vector<std::string> &columns, const std::function<void(sqlite3_stmt *)> &onRow)
{
    auto select = source.db().prepare("SELECT " + joined(columns) + " FROM " + quotedName(table) + " ORDER BY "
                                          + order,
                                      false);
    if (!select)
        return std::unexpected(select.error());
    const std::string copySql = "COPY " + quotedName(table) + " (" + joined(columns) + ") FROM STDIN";
    pg::ResultPtr started(PQexec(target.get(), copySql.c_str()));
    if (PQresultStatus(started.get()) != PGRES_COPY_IN)
        return std::unexpected(target.error(started.get(), "starting to copy table " + table));

    std::string buffer;
    buffer.reserve(kCopyChunkBytes + 4096);
    auto flush = [&]() -> Status {
        if (!buffer.empty() && PQputCopyData(target.get(), buffer.data(), static_cast<int>(buffer.size())) != 1)
            return fail(ErrorCode::Unavailable, "copying table " + table + ": the connection to PostgreSQL broke ("
                                                    + PQerrorMessage(target.get()) + ")");
        buffer.clear();
        return {};
    };
    sqlite3_stmt *stmt = select->get();
    const int width = static_cast<int>(columns.size());
    int rc;
    while ((rc = select->step()) == SQLITE_ROW) {
        for (int column = 0; column < width; ++column) {
            if (sqlite3_column_type(stmt, column) == SQLITE_BLOB)
                return endCopy(target, table, "table " + table + " of " + source.db().path().string()
                                                  + " holds binary data in column " + columns[column]
                                                  + ", which Paddock never writes: the file is damaged");
            if (column > 0)
                buffer.push_back('\t');
            appendCell(buffer, stmt, column);
        }
        buffer.push_back('\n');
        if (onRow)
            onRow(stmt);
        if (buffer.size() >= kCopyChunkBytes) {
            if (auto sent = flush(); !sent)
                return sent;   // the connection is gone, and the transaction with it
        }
    }
    if (rc != SQLITE_DONE)
        return endCopy(target, table, source.db().describe("reading table " + table, rc));
    if (auto sent = flush(); !sent)
        return sent;
    return endCopy(target, table, {});
}

} // namespace paddock::store::migration
