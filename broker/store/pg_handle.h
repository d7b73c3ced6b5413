#pragma once
// Thin RAII wrappers over libpq (PostgreSQL's C API), private to broker/store, and the translation
// of the store's portable SQL (?1-style parameters) to PostgreSQL's ($1).
//
// Why libpq and not Debian 12's libpqxx 6.4: libpqxx reports every error by throwing, and the store
// reports errors as values (common/result.h), so every call would sit in a try/catch turning
// exceptions back into codes; the store needs a connection, results, prepared statements and
// pipeline mode, which are a few libpq calls; and libpq is one dependency fewer (libpqxx is built on
// it anyway). docs/store.md says the same.
//
// Threads: a Connection belongs to one thread at a time; the owner hands it over explicitly (the
// read pool, the writer), like sqlite::Database.

#include "broker/store/event_store.h"
#include "common/result.h"

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::store::pg {

struct ResultDeleter {
    void operator()(PGresult *result) const { PQclear(result); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

// Where a connection string points, for messages: "user@host:port/db" (a socket directory as the
// host). Never the password.
std::string describeTarget(const std::string &conninfo);

// Parameters of one statement in text format, kept alive for the call. Integers are typed int8,
// floating-point numbers float8, texts left for the server to infer from their context (a text
// bound to a double precision column is parsed as one).
class Params {
public:
    Params() = default;
    explicit Params(const std::vector<SqlValue> &values);
    void add(const SqlValue &value);
    void add(int64_t value) { add(SqlValue{value}); }
    void add(std::string value) { add(SqlValue{std::move(value)}); }
    int count() const { return static_cast<int>(m_values.size()); }
    const char *const *values() const { return m_values.data(); }
    const Oid *types() const { return m_types.data(); }

private:
    std::vector<std::unique_ptr<std::string>> m_storage;   // stable addresses
    std::vector<const char *> m_values;
    std::vector<Oid> m_types;
};

class Connection {
public:
    Connection() = default;
    ~Connection() { closeNow(); }
    Connection(Connection &&other) noexcept : m_conn(other.m_conn), m_target(std::move(other.m_target))
    {
        other.m_conn = nullptr;
    }
    Connection &operator=(Connection &&other) noexcept
    {
        if (this != &other) {
            closeNow();
            m_conn = other.m_conn;
            m_target = std::move(other.m_target);
            other.m_conn = nullptr;
        }
        return *this;
    }
    Connection(const Connection &) = delete;
    Connection &operator=(const Connection &) = delete;

    // Connects: Unavailable naming the target when the server is not there, PermissionDenied when
    // it refuses the login (with the server's reason, e.g. "password authentication failed").
    // applicationName, when given, is the connection's application_name (pg_stat_activity shows it:
    // how brokers on one database see which of them are alive).
    static Result<Connection> open(const std::string &conninfo, const std::string &applicationName = {});

    PGconn *get() const { return m_conn; }
    const std::string &target() const { return m_target; }
    // False once the server has gone (the connection must be opened again).
    bool alive() const { return m_conn && PQstatus(m_conn) == CONNECTION_OK; }
    void closeNow();

    ResultPtr exec(const char *sql) { return ResultPtr(PQexec(m_conn, sql)); }
    ResultPtr exec(const std::string &sql, const Params &params)
    {
        return ResultPtr(PQexecParams(m_conn, sql.c_str(), params.count(), params.types(), params.values(), nullptr,
                                      nullptr, 0));
    }
    // exec() that only reports: the statement's error (see error()) when it did not complete.
    Status run(const char *sql, const std::string &what);
    Status run(const std::string &sql, const Params &params, const std::string &what);

    // The error of a statement that failed: its code from SQLSTATE (connection lost: Unavailable;
    // unique violation: AlreadyExists; serialization failure or deadlock: Aborted; else Internal),
    // the message naming what was being done and the target. A connection found lost is closed
    // here (alive() is false from then on), so its owner connects again instead of reusing it.
    Error error(const PGresult *result, const std::string &what);

private:
    PGconn *m_conn = nullptr;
    std::string m_target;
};

bool ok(const PGresult *result);
std::string_view sqlState(const PGresult *result);
// One cell: text, int64 or double by the column's type; NULL as monostate.
SqlValue cell(const PGresult *result, int row, int column);
int64_t cellInt(const PGresult *result, int row, int column);
std::string cellText(const PGresult *result, int row, int column);

// The store's portable SQL in PostgreSQL's dialect: ?N becomes $N and a bare ? the next number
// (as SQLite numbers them); quoted strings and identifiers are left alone.
std::string translate(std::string_view portable);

// SQLite DDL of the shared schema (the CREATE TABLEs of the side tables) in PostgreSQL's types:
// INTEGER PRIMARY KEY (a rowid: assigned in insertion order) becomes an identity column, INTEGER
// becomes BIGINT (SQLite's are 64-bit), REAL becomes DOUBLE PRECISION.
std::string translateDdl(std::string_view sqlite);

// A PostgreSQL array literal, its elements quoted with backslash and quote escaped.
class ArrayLiteral {
public:
    void add(std::string_view text)
    {
        m_text.push_back(m_text.empty() ? '{' : ',');
        m_text.push_back('"');
        for (char c : text) {
            if (c == '"' || c == '\\')
                m_text.push_back('\\');
            m_text.push_back(c);
        }
        m_text.push_back('"');
    }
    void add(int64_t value)
    {
        m_text.push_back(m_text.empty() ? '{' : ',');
        m_text += std::to_string(value);
    }
    std::string finish() { return m_text.empty() ? "{}" : std::move(m_text) + "}"; }

private:
    std::string m_text;
};

} // namespace paddock::store::pg
