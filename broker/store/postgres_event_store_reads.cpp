// PostgresEventStore's reads: the connections of its ReaderPool, and every read on them: a session's
// events, its projection, a page of sessions, and the read-only statements on the tables beside
// the log (the portable SQL of SqlStatement, translated by pg::translate).
//
// A connection that sat idle while the server restarted is found broken at its next use: the read
// runs once more on a new connection, so a restart costs the caller nothing (withReader).
//
// Threads: any thread. A connection is borrowed for one call (reader_pool.h), so reads run in
// parallel with each other and with the writer.

#include "broker/store/postgres_event_store_internal.h"

#include "broker/store/append_checks.h"
#include "broker/store/state_json.h"

namespace paddock::store {

Result<std::vector<core::Event>> PostgresEventStore::readEvents(const std::string &sessionId, int64_t fromSeq, int limit)
{
    if (limit <= 0)
        return fail(ErrorCode::InvalidArgument, "readEvents: limit must be at least 1, not " + std::to_string(limit));
    return withReader<std::vector<core::Event>>([&](pg::Connection &db) -> Result<std::vector<core::Event>> {
        pg::Params params;
        params.add(sessionId);
        params.add(std::max<int64_t>(fromSeq, 1));
        params.add(int64_t{limit});
        auto result = db.exec("SELECT seq, time_unix_ms, kind, payload, cost_micros FROM events "
                              "WHERE session_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3",
                              params);
        if (!pg::ok(result.get()))
            return std::unexpected(db.error(result.get(), "reading events of session " + sessionId));
        std::vector<core::Event> events;
        const int rows = PQntuples(result.get());
        events.reserve(static_cast<size_t>(rows));
        for (int row = 0; row < rows; ++row) {
            const PGresult *r = result.get();
            events.push_back(core::Event{sessionId, pg::cellInt(r, row, 0), pg::cellInt(r, row, 1),
                                         pg::cellText(r, row, 2), pg::cellText(r, row, 3), pg::cellInt(r, row, 4)});
        }
        if (!events.empty())
            return events;
        pg::Params one;
        one.add(sessionId);
        auto exists = db.exec("SELECT 1 FROM sessions WHERE id = $1", one);
        if (!pg::ok(exists.get()))
            return std::unexpected(db.error(exists.get(), "looking up session " + sessionId));
        if (PQntuples(exists.get()) == 0)
            return std::unexpected(noSuchSession(sessionId));
        return events;
    });
}

Result<core::SessionState> PostgresEventStore::getSession(const std::string &sessionId)
{
    return withReader<core::SessionState>([&](pg::Connection &db) -> Result<core::SessionState> {
        pg::Params params;
        params.add(sessionId);
        auto result = db.exec("SELECT state FROM sessions WHERE id = $1", params);
        if (!pg::ok(result.get()))
            return std::unexpected(db.error(result.get(), "reading session " + sessionId));
        if (PQntuples(result.get()) == 0)
            return std::unexpected(noSuchSession(sessionId));
        auto state = sessionStateFromJson(pg::cellText(result.get(), 0, 0));
        if (!state)
            return fail(ErrorCode::Internal, "the projection of session " + sessionId + " is not JSON; the database is damaged");
        return std::move(*state);
    });
}

Result<SessionPage> PostgresEventStore::listSessions(const SessionQuery &query)
{
    auto paging = sessionPaging(query);
    if (!paging)
        return std::unexpected(paging.error());
    const int pageSize = paging->pageSize;
    const std::optional<int64_t> before = paging->before;
    // The same query as the SQLite store's; strpos is PostgreSQL's instr.
    std::string sql = "SELECT ord, state FROM sessions WHERE TRUE";
    pg::Params params;
    if (!query.statuses.empty()) {
        sql += " AND status IN (";
        for (size_t i = 0; i < query.statuses.size(); ++i) {
            params.add(std::string(core::statusName(query.statuses[i])));
            sql += (i ? ", $" : "$") + std::to_string(params.count());
        }
        sql += ")";
    }
    if (!query.agent.empty()) {
        params.add(query.agent);
        sql += " AND agent = $" + std::to_string(params.count());
    }
    if (!query.text.empty()) {
        params.add(query.text);
        const std::string p = "$" + std::to_string(params.count()) + "::text";
        sql += " AND (strpos(id, " + p + ") > 0 OR strpos(goal, " + p + ") > 0 OR strpos(playbook, " + p + ") > 0)";
    }
    if (before) {
        params.add(*before);
        sql += " AND ord < $" + std::to_string(params.count());
    }
    params.add(int64_t{pageSize} + 1);   // one extra row says whether there is a next page
    sql += " ORDER BY ord DESC LIMIT $" + std::to_string(params.count());

    return withReader<SessionPage>([&](pg::Connection &db) -> Result<SessionPage> {
        auto result = db.exec(sql, params);
        if (!pg::ok(result.get()))
            return std::unexpected(db.error(result.get(), "listing sessions"));
        SessionPage page;
        int64_t lastOrd = 0;
        for (int row = 0; row < PQntuples(result.get()); ++row) {
            if (static_cast<int>(page.sessions.size()) == pageSize) {
                page.nextPageToken = encodeSessionPageToken(lastOrd);
                break;
            }
            lastOrd = pg::cellInt(result.get(), row, 0);
            auto state = sessionStateFromJson(pg::cellText(result.get(), row, 1));
            if (!state)
                return fail(ErrorCode::Internal, "a session projection row in " + m_target + " is not JSON");
            page.sessions.push_back(std::move(*state));
        }
        return page;
    });
}

Result<std::vector<SqlRow>> PostgresEventStore::query(const SqlStatement &statement)
{
    const std::string sql = pg::translate(statement.sql);
    const pg::Params params(statement.params);
    return withReader<std::vector<SqlRow>>([&](pg::Connection &db) -> Result<std::vector<SqlRow>> {
        auto result = db.exec(sql, params);
        if (!pg::ok(result.get()))
            return std::unexpected(db.error(result.get(), "reading"));
        std::vector<SqlRow> rows;
        const int columns = PQnfields(result.get());
        for (int row = 0; row < PQntuples(result.get()); ++row) {
            SqlRow out;
            out.reserve(static_cast<size_t>(columns));
            for (int c = 0; c < columns; ++c)
                out.push_back(pg::cell(result.get(), row, c));
            rows.push_back(std::move(out));
        }
        return rows;
    });
}

} // namespace paddock::store
