#include "broker/store/pg_handle.h"

#include <cstdio>
#include <cstdlib>

namespace paddock::store::pg {

namespace {

// Type OIDs from PostgreSQL's catalog (pg_type.dat); libpq does not export them.
constexpr Oid kBoolOid = 16;
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt2Oid = 21;
constexpr Oid kInt4Oid = 23;
constexpr Oid kOidOid = 26;
constexpr Oid kFloat4Oid = 700;
constexpr Oid kFloat8Oid = 701;
constexpr Oid kNumericOid = 1700;

std::string trimmed(std::string text)
{
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
        text.pop_back();
    return text;
}

bool isDigit(char c) { return c >= '0' && c <= '9'; }

} // namespace

std::string describeTarget(const std::string &conninfo)
{
    char *errmsg = nullptr;
    PQconninfoOption *options = PQconninfoParse(conninfo.c_str(), &errmsg);
    if (!options) {
        PQfreemem(errmsg);
        return "(a connection string libpq cannot parse)";
    }
    std::string user, host, port, db;
    for (auto *option = options; option->keyword; ++option) {
        if (!option->val)
            continue;
        const std::string_view key = option->keyword;
        if (key == "user")
            user = option->val;
        else if (key == "host" || (key == "hostaddr" && host.empty()))
            host = option->val;
        else if (key == "port")
            port = option->val;
        else if (key == "dbname")
            db = option->val;
    }
    PQconninfoFree(options);
    // libpq's defaults, as it would apply them.
    if (user.empty())
        user = std::getenv("PGUSER") ? std::getenv("PGUSER") : "(the OS user)";
    if (host.empty())
        host = std::getenv("PGHOST") ? std::getenv("PGHOST") : "the default socket";
    if (port.empty())
        port = std::getenv("PGPORT") ? std::getenv("PGPORT") : "5432";
    if (db.empty())
        db = std::getenv("PGDATABASE") ? std::getenv("PGDATABASE") : user;
    return user + "@" + host + ":" + port + "/" + db;
}

Params::Params(const std::vector<SqlValue> &values)
{
    for (const auto &value : values)
        add(value);
}

void Params::add(const SqlValue &value)
{
    if (const auto *number = std::get_if<int64_t>(&value)) {
        m_storage.push_back(std::make_unique<std::string>(std::to_string(*number)));
        m_types.push_back(kInt8Oid);
    } else if (const auto *text = std::get_if<std::string>(&value)) {
        m_storage.push_back(std::make_unique<std::string>(*text));
        m_types.push_back(0);
    } else if (const auto *real = std::get_if<double>(&value)) {
        char buffer[32];
        std::snprintf(buffer, sizeof buffer, "%.17g", *real);
        m_storage.push_back(std::make_unique<std::string>(buffer));
        m_types.push_back(kFloat8Oid);
    } else {
        m_values.push_back(nullptr);
        m_types.push_back(0);
        return;
    }
    m_values.push_back(m_storage.back()->c_str());
}

Result<Connection> Connection::open(const std::string &conninfo, const std::string &applicationName)
{
    Connection connection;
    connection.m_target = describeTarget(conninfo);
    if (applicationName.empty()) {
        connection.m_conn = PQconnectdb(conninfo.c_str());
    } else {
        // dbname expanded as the whole connection string (either form); the keyword after it wins.
        const char *keywords[] = {"dbname", "application_name", nullptr};
        const char *values[] = {conninfo.c_str(), applicationName.c_str(), nullptr};
        connection.m_conn = PQconnectdbParams(keywords, values, 1);
    }
    if (!connection.m_conn)
        return fail(ErrorCode::ResourceExhausted, "cannot connect to PostgreSQL: libpq is out of memory");
    if (PQstatus(connection.m_conn) == CONNECTION_OK) {
        // Every statement of the store names its schema's tables unqualified; keep the server's
        // messages in English so callers can read them.
        PQsetErrorVerbosity(connection.m_conn, PQERRORS_DEFAULT);
        return connection;
    }
    // libpq's message names the cause, e.g. 'password authentication failed for user "x"' or
    // 'connection to server on socket "..." failed: No such file or directory'. It never carries
    // the password.
    const std::string cause = trimmed(PQerrorMessage(connection.m_conn));
    const std::string where = "cannot connect to PostgreSQL at " + connection.m_target + ": " + cause;
    if (cause.find("authentication failed") != std::string::npos || cause.find("no password supplied") != std::string::npos
        || cause.find("pg_hba.conf") != std::string::npos)
        return fail(ErrorCode::PermissionDenied,
                    where + ". Check the user and its password: libpq reads it from PGPASSWORD or the file PGPASSFILE "
                            "names (~/.pgpass by default), never from broker.toml");
    if (cause.find("does not exist") != std::string::npos)
        return fail(ErrorCode::FailedPrecondition, where + ". Create the database (createdb), or fix the connection string");
    return fail(ErrorCode::Unavailable, where + ". Start the server, or fix the host and port in the connection "
                                                "string; the broker retries");
}

void Connection::closeNow()
{
    if (m_conn) {
        PQfinish(m_conn);
        m_conn = nullptr;
    }
}

Status Connection::run(const char *sql, const std::string &what)
{
    auto result = exec(sql);
    if (ok(result.get()))
        return {};
    return std::unexpected(error(result.get(), what));
}

Status Connection::run(const std::string &sql, const Params &params, const std::string &what)
{
    auto result = exec(sql, params);
    if (ok(result.get()))
        return {};
    return std::unexpected(error(result.get(), what));
}

Error Connection::error(const PGresult *result, const std::string &what)
{
    const std::string_view state = sqlState(result);
    std::string message = trimmed(result ? PQresultErrorMessage(result) : "");
    if (message.empty() && m_conn)
        message = trimmed(PQerrorMessage(m_conn));
    if (message.empty())
        message = "no answer from the server";
    // Every error the server sends has a SQLSTATE; one without was made by libpq itself ("server
    // closed the connection unexpectedly"), and libpq does not always mark the connection bad.
    const bool lost = !alive() || state.empty() || state.starts_with("08") || state == "57P01" || state == "57P02"
        || state == "57P03";
    if (lost)
        closeNow();
    if (lost)
        return {ErrorCode::Unavailable, what + " on PostgreSQL at " + m_target + ": the connection was lost (" + message
                                            + "); the store reconnects, retry"};
    ErrorCode code = ErrorCode::Internal;
    if (state == "23505")
        code = ErrorCode::AlreadyExists;
    else if (state == "40001" || state == "40P01")
        code = ErrorCode::Aborted;
    return {code, what + " on PostgreSQL at " + m_target + ": " + message};
}

bool ok(const PGresult *result)
{
    const auto status = PQresultStatus(result);
    return result && (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK);
}

std::string_view sqlState(const PGresult *result)
{
    const char *state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
    return state ? std::string_view(state) : std::string_view();
}

SqlValue cell(const PGresult *result, int row, int column)
{
    if (PQgetisnull(result, row, column))
        return std::monostate{};
    const char *text = PQgetvalue(result, row, column);
    switch (PQftype(result, column)) {
    case kInt2Oid:
    case kInt4Oid:
    case kInt8Oid:
    case kOidOid:
        return static_cast<int64_t>(std::strtoll(text, nullptr, 10));
    case kBoolOid:   // SQLite answers comparisons with integers
        return int64_t{text[0] == 't' ? 1 : 0};
    case kFloat4Oid:
    case kFloat8Oid:
        return std::strtod(text, nullptr);
    case kNumericOid: {
        // sum() of bigints is numeric in PostgreSQL, an integer in SQLite: whole numbers read as integers.
        char *end = nullptr;
        const long long whole = std::strtoll(text, &end, 10);
        if (end && *end == '\0')
            return static_cast<int64_t>(whole);
        return std::strtod(text, nullptr);
    }
    default:
        return std::string(text, static_cast<size_t>(PQgetlength(result, row, column)));
    }
}

int64_t cellInt(const PGresult *result, int row, int column)
{
    return PQgetisnull(result, row, column) ? 0 : std::strtoll(PQgetvalue(result, row, column), nullptr, 10);
}

std::string cellText(const PGresult *result, int row, int column)
{
    return std::string(PQgetvalue(result, row, column), static_cast<size_t>(PQgetlength(result, row, column)));
}

std::string translate(std::string_view portable)
{
    std::string out;
    out.reserve(portable.size() + 8);
    int highest = 0;
    char quote = 0;   // inside '...' or "..."
    for (size_t i = 0; i < portable.size(); ++i) {
        const char c = portable[i];
        if (quote) {
            out.push_back(c);
            if (c == quote)
                quote = 0;   // a doubled quote closes and reopens: the same text comes out
            continue;
        }
        if (c == '\'' || c == '"') {
            quote = c;
            out.push_back(c);
            continue;
        }
        if (c != '?') {
            out.push_back(c);
            continue;
        }
        size_t j = i + 1;
        int number = 0;
        while (j < portable.size() && isDigit(portable[j]))
            number = number * 10 + (portable[j++] - '0');
        if (j == i + 1)
            number = highest + 1;   // a bare ?: the next number
        highest = std::max(highest, number);
        out += "$" + std::to_string(number);
        i = j - 1;
    }
    return out;
}

namespace {

// Replaces whole words (SQL identifiers' characters around them are not part of the match).
std::string replaceWord(std::string text, std::string_view word, std::string_view with)
{
    auto isWordChar = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || isDigit(c) || c == '_'; };
    size_t at = 0;
    while ((at = text.find(word, at)) != std::string::npos) {
        const bool startOk = at == 0 || !isWordChar(text[at - 1]);
        const bool endOk = at + word.size() >= text.size() || !isWordChar(text[at + word.size()]);
        if (startOk && endOk) {
            text.replace(at, word.size(), with);
            at += with.size();
        } else {
            at += word.size();
        }
    }
    return text;
}

} // namespace

std::string translateDdl(std::string_view sqlite)
{
    std::string out(sqlite);
    out = replaceWord(out, "INTEGER PRIMARY KEY", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY");
    out = replaceWord(out, "INTEGER", "BIGINT");
    out = replaceWord(out, "REAL", "DOUBLE PRECISION");
    return out;
}

} // namespace paddock::store::pg
