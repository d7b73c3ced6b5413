#pragma once
// Thin RAII wrappers over the SQLite C API, private to broker/store.
//
// Threads: a Database and its Statements belong to one thread at a time (connections are opened
// with SQLITE_OPEN_NOMUTEX); the owner hands them over explicitly (the read pool, the writer).

#include "common/result.h"

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace paddock::store::sqlite {

class Statement {
public:
    Statement() = default;
    Statement(sqlite3 *db, sqlite3_stmt *stmt) : m_db(db), m_stmt(stmt) {}
    ~Statement() { sqlite3_finalize(m_stmt); }
    Statement(Statement &&other) noexcept : m_db(other.m_db), m_stmt(other.m_stmt) { other.m_stmt = nullptr; }
    Statement &operator=(Statement &&other) noexcept
    {
        if (this != &other) {
            sqlite3_finalize(m_stmt);
            m_db = other.m_db;
            m_stmt = other.m_stmt;
            other.m_stmt = nullptr;
        }
        return *this;
    }
    Statement(const Statement &) = delete;
    Statement &operator=(const Statement &) = delete;

    // Binds borrow the text: it must live until the statement is stepped and reset (SQLITE_STATIC
    // saves a copy of every payload on the hot path).
    void bind(int index, int64_t value) { sqlite3_bind_int64(m_stmt, index, value); }
    void bind(int index, std::string_view text)
    {
        sqlite3_bind_text(m_stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
    }
    void bindNull(int index) { sqlite3_bind_null(m_stmt, index); }

    // SQLITE_ROW, SQLITE_DONE or an error code.
    int step() { return sqlite3_step(m_stmt); }
    void reset()
    {
        sqlite3_reset(m_stmt);
        sqlite3_clear_bindings(m_stmt);
    }

    int64_t columnInt(int column) const { return sqlite3_column_int64(m_stmt, column); }
    std::string columnText(int column) const
    {
        const auto *text = reinterpret_cast<const char *>(sqlite3_column_text(m_stmt, column));
        return text ? std::string(text, static_cast<size_t>(sqlite3_column_bytes(m_stmt, column))) : std::string();
    }

    sqlite3_stmt *get() const { return m_stmt; }
    explicit operator bool() const { return m_stmt != nullptr; }

private:
    sqlite3 *m_db = nullptr;
    sqlite3_stmt *m_stmt = nullptr;
};

// Resets a statement when the scope ends, whatever path leaves it; a statement left mid-step
// would keep a read transaction open and stop WAL checkpoints.
class ResetGuard {
public:
    explicit ResetGuard(Statement &stmt) : m_stmt(stmt) {}
    ~ResetGuard() { m_stmt.reset(); }
    ResetGuard(const ResetGuard &) = delete;
    ResetGuard &operator=(const ResetGuard &) = delete;

private:
    Statement &m_stmt;
};

class Database {
public:
    Database() = default;
    ~Database() { closeNow(); }
    Database(Database &&other) noexcept : m_db(other.m_db), m_path(std::move(other.m_path)) { other.m_db = nullptr; }
    Database &operator=(Database &&other) noexcept
    {
        if (this != &other) {
            closeNow();
            m_db = other.m_db;
            m_path = std::move(other.m_path);
            other.m_db = nullptr;
        }
        return *this;
    }
    Database(const Database &) = delete;
    Database &operator=(const Database &) = delete;

    static Result<Database> open(const std::filesystem::path &path, bool readOnly);

    // Runs one or more statements that return no rows we need.
    Status exec(const char *sql);
    // Prepares a statement meant to live as long as the connection.
    Result<Statement> prepare(std::string_view sql, bool persistent = true);
    // The first column of the first row, as an integer or text.
    Result<int64_t> queryInt(const char *sql);
    Result<std::string> queryText(const char *sql);

    // "what failed: SQLite's message (code)".
    std::string describe(std::string_view what, int rc) const;
    std::string errorMessage() const { return m_db ? sqlite3_errmsg(m_db) : "no connection"; }

    sqlite3 *get() const { return m_db; }
    const std::filesystem::path &path() const { return m_path; }
    void closeNow();

private:
    sqlite3 *m_db = nullptr;
    std::filesystem::path m_path;
};

} // namespace paddock::store::sqlite
