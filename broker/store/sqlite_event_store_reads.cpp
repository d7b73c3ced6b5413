// SqliteEventStore's reads: opening a read-only connection for its ReaderPool (statements prepared
// when one opens), and every read on them: a session's events, its projection, a page of sessions,
// and the read-only statements on the tables beside the log.
//
// Threads: any thread. A reader is borrowed for one call (reader_pool.h), so reads run in parallel
// with each other and with the writer (WAL).

#include "broker/store/sqlite_event_store_internal.h"

#include "broker/store/append_checks.h"
#include "broker/store/state_json.h"

namespace paddock::store {

void bindValues(sqlite::Statement &stmt, const std::vector<SqlValue> &params)
{
    for (size_t i = 0; i < params.size(); ++i) {
        const int index = static_cast<int>(i + 1);
        if (const auto *number = std::get_if<int64_t>(&params[i]))
            stmt.bind(index, *number);
        else if (const auto *text = std::get_if<std::string>(&params[i]))
            stmt.bind(index, std::string_view(*text));
        else if (const auto *real = std::get_if<double>(&params[i]))
            sqlite3_bind_double(stmt.get(), index, *real);
        else
            stmt.bindNull(index);
    }
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

Result<std::vector<core::Event>> SqliteEventStore::readEvents(const std::string &sessionId, int64_t fromSeq, int limit)
{
    if (limit <= 0)
        return fail(ErrorCode::InvalidArgument, "readEvents: limit must be at least 1, not " + std::to_string(limit));
    auto borrowed = m_readers.borrow();
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
            result = std::unexpected(noSuchSession(sessionId));
        else if (rc != SQLITE_ROW)
            result = fail(ErrorCode::Unavailable, reader->db.describe("looking up session " + sessionId, rc));
    }
    m_readers.giveBack(std::move(reader));
    if (!result)
        return result;
    return events;
}

Result<core::SessionState> SqliteEventStore::getSession(const std::string &sessionId)
{
    auto borrowed = m_readers.borrow();
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
            result = std::unexpected(noSuchSession(sessionId));
        } else {
            result = fail(ErrorCode::Unavailable, reader->db.describe("reading session " + sessionId, rc));
        }
    }
    m_readers.giveBack(std::move(reader));
    return result;
}

Result<SessionPage> SqliteEventStore::listSessions(const SessionQuery &query)
{
    auto paging = sessionPaging(query);
    if (!paging)
        return std::unexpected(paging.error());
    const int pageSize = paging->pageSize;
    const std::optional<int64_t> before = paging->before;

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

    auto borrowed = m_readers.borrow();
    if (!borrowed)
        return std::unexpected(borrowed.error());
    auto reader = std::move(*borrowed);
    Result<SessionPage> result = SessionPage{};
    {
        auto stmt = reader->db.prepare(sql, false);
        if (!stmt) {
            m_readers.giveBack(std::move(reader));
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
                result->nextPageToken = encodeSessionPageToken(lastOrd);
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
    m_readers.giveBack(std::move(reader));
    return result;
}

Result<std::vector<SqlRow>> SqliteEventStore::query(const SqlStatement &statement)
{
    auto borrowed = m_readers.borrow();
    if (!borrowed)
        return std::unexpected(borrowed.error());
    auto reader = std::move(*borrowed);
    Result<std::vector<SqlRow>> rows = std::vector<SqlRow>{};
    {
        auto stmt = reader->db.prepare(statement.sql, false);
        if (!stmt) {
            m_readers.giveBack(std::move(reader));
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
                case SQLITE_FLOAT: row.emplace_back(sqlite3_column_double(stmt->get(), c)); break;
                default: row.emplace_back(stmt->columnText(c)); break;
                }
            }
            rows->push_back(std::move(row));
        }
        if (rc != SQLITE_DONE)
            rows = fail(ErrorCode::Unavailable, reader->db.describe("reading " + m_path.string(), rc));
    }
    m_readers.giveBack(std::move(reader));
    return rows;
}

} // namespace paddock::store
