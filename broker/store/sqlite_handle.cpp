#include "broker/store/sqlite_handle.h"

namespace paddock::store::sqlite {

Result<Database> Database::open(const std::filesystem::path &path, bool readOnly)
{
    Database db;
    db.m_path = path;
    const int flags = (readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE))
        | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_PRIVATECACHE;
    const int rc = sqlite3_open_v2(path.c_str(), &db.m_db, flags, nullptr);
    if (rc != SQLITE_OK) {
        std::string message = "cannot open the database " + path.string() + ": "
            + (db.m_db ? sqlite3_errmsg(db.m_db) : sqlite3_errstr(rc))
            + "; check that the directory exists and is writable, or point the broker at another --data-dir";
        return fail(ErrorCode::Unavailable, std::move(message));
    }
    sqlite3_extended_result_codes(db.m_db, 1);
    return db;
}

void Database::closeNow()
{
    if (m_db) {
        // v2 defers the close until statements still alive are finalized instead of failing.
        sqlite3_close_v2(m_db);
        m_db = nullptr;
    }
}

std::string Database::describe(std::string_view what, int rc) const
{
    std::string message(what);
    message += ": ";
    message += m_db ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc);
    message += " (SQLite code " + std::to_string(rc) + ")";
    return message;
}

Status Database::exec(const char *sql)
{
    char *error = nullptr;
    const int rc = sqlite3_exec(m_db, sql, nullptr, nullptr, &error);
    if (rc != SQLITE_OK) {
        std::string message = std::string("SQL failed on ") + m_path.string() + ": "
            + (error ? error : sqlite3_errstr(rc)) + " (SQLite code " + std::to_string(rc) + ")";
        sqlite3_free(error);
        return fail(ErrorCode::Internal, std::move(message));
    }
    return {};
}

Result<Statement> Database::prepare(std::string_view sql, bool persistent)
{
    sqlite3_stmt *stmt = nullptr;
    const int rc = sqlite3_prepare_v3(m_db, sql.data(), static_cast<int>(sql.size()),
                                      persistent ? SQLITE_PREPARE_PERSISTENT : 0, &stmt, nullptr);
    if (rc != SQLITE_OK)
        return fail(ErrorCode::Internal, describe("preparing \"" + std::string(sql) + "\"", rc));
    return Statement(m_db, stmt);
}

Result<int64_t> Database::queryInt(const char *sql)
{
    auto stmt = prepare(sql, false);
    if (!stmt)
        return std::unexpected(stmt.error());
    const int rc = stmt->step();
    if (rc == SQLITE_ROW)
        return stmt->columnInt(0);
    if (rc == SQLITE_DONE)
        return int64_t{0};
    return fail(ErrorCode::Internal, describe(sql, rc));
}

Result<std::string> Database::queryText(const char *sql)
{
    auto stmt = prepare(sql, false);
    if (!stmt)
        return std::unexpected(stmt.error());
    const int rc = stmt->step();
    if (rc == SQLITE_ROW)
        return stmt->columnText(0);
    if (rc == SQLITE_DONE)
        return std::string();
    return fail(ErrorCode::Internal, describe(sql, rc));
}

} // namespace paddock::store::sqlite
