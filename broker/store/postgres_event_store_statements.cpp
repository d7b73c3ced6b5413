// PostgresEventStore's statements, as the writer sends them (postgres_event_store_commit.cpp decides
// what goes into a group): a group's events in one INSERT of unnested arrays, the projection rows
// in one upsert, the statements beside the log prepared once per connection and, on the fast path,
// pipelined (libpq's pipeline mode: one round trip per chunk instead of one per statement), and the
// fencing check of a request's lease.
//
// Threads: the writer thread only.

#include "broker/store/postgres_event_store_internal.h"

#include "broker/store/state_json.h"

namespace paddock::store {

namespace {

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

constexpr const char *kInsertEvents =
    "INSERT INTO events(session_id, seq, time_unix_ms, kind, payload, cost_micros) "
    "SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::bigint[])";

constexpr const char *kUpsertSessions =
    "INSERT INTO sessions(id, agent, goal, playbook, status, needs_work, created_unix_ms, updated_unix_ms, last_seq, "
    "state) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], "
    "$7::bigint[], $8::bigint[], $9::bigint[], $10::text[]) "
    "ON CONFLICT (id) DO UPDATE SET status = excluded.status, needs_work = excluded.needs_work, "
    "updated_unix_ms = excluded.updated_unix_ms, last_seq = excluded.last_seq, state = excluded.state";

} // namespace

Result<bool> PostgresEventStore::leaseHeld(const std::string &sessionId, uint64_t token)
{
    // FOR SHARE: while this transaction lasts, a grant of this session (FOR UPDATE SKIP LOCKED) skips
    // it, so the next holder is granted after the commit and reads the log with this append in it.
    const std::string sql = std::string("SELECT token = $2 AND expires_us > ") + kPgNowUs
        + " FROM leases WHERE session_id = $1 FOR SHARE";
    pg::Params params;
    params.add(sessionId);
    params.add(static_cast<int64_t>(token));
    auto name = preparedName(sql, params);
    if (!name)
        return std::unexpected(name.error());
    pg::ResultPtr result(PQexecPrepared(m_writeDb.get(), name->c_str(), params.count(), params.values(), nullptr, nullptr, 0));
    if (!pg::ok(result.get()))
        return std::unexpected(m_writeDb.error(result.get(), "checking the lease of session " + sessionId));
    return PQntuples(result.get()) == 1 && pg::cellText(result.get(), 0, 0) == "t";
}

Status PostgresEventStore::insertEvents(const std::vector<core::Event> &events)
{
    if (events.empty())
        return {};
    ArrayLiteral ids, seqs, times, kinds, payloads, costs;
    for (const auto &event : events) {
        ids.add(event.sessionId);
        seqs.add(event.seq);
        times.add(event.timeUnixMs);
        kinds.add(event.kind);
        payloads.add(event.payload);
        costs.add(event.costMicros);
    }
    pg::Params params;
    for (auto *array : {&ids, &seqs, &times, &kinds, &payloads, &costs})
        params.add(array->finish());
    return runPrepared(kInsertEvents, params, "appending " + std::to_string(events.size()) + " events");
}

Result<std::string> PostgresEventStore::preparedName(const std::string &sql, const pg::Params &params)
{
    if (auto it = m_prepared.find(sql); it != m_prepared.end())
        return it->second;
    std::string name = "w" + std::to_string(m_prepared.size() + 1);
    const std::string text = pg::translate(sql);
    pg::ResultPtr result(PQprepare(m_writeDb.get(), name.c_str(), text.c_str(), params.count(), params.types()));
    if (!pg::ok(result.get())) {
        const std::string what = sql.substr(0, std::min<size_t>(sql.find('('), 60));
        Error error = m_writeDb.error(result.get(), "preparing \"" + what + "\"");
        if (error.code != ErrorCode::Unavailable)
            error = {ErrorCode::Internal, error.message + "; nothing of this call was recorded"};
        return std::unexpected(std::move(error));
    }
    m_prepared.emplace(sql, name);
    return name;
}

Status PostgresEventStore::runPrepared(const std::string &sql, const pg::Params &params, const std::string &what)
{
    auto name = preparedName(sql, params);
    if (!name)
        return std::unexpected(name.error());
    pg::ResultPtr result(
        PQexecPrepared(m_writeDb.get(), name->c_str(), params.count(), params.values(), nullptr, nullptr, 0));
    if (pg::ok(result.get()))
        return {};
    return std::unexpected(m_writeDb.error(result.get(), what));
}

Status PostgresEventStore::runStatements(const std::vector<SqlStatement> &statements)
{
    for (const auto &statement : statements) {
        const pg::Params params(statement.params);
        auto name = preparedName(statement.sql, params);
        if (!name)
            return std::unexpected(name.error());
        pg::ResultPtr result(PQexecPrepared(m_writeDb.get(), name->c_str(), params.count(), params.values(), nullptr,
                                            nullptr, 0));
        if (!pg::ok(result.get())) {
            // The first words of the statement name the table; the server's message names the cause.
            const std::string what = statement.sql.substr(0, std::min<size_t>(statement.sql.find('('), 60));
            Error error = m_writeDb.error(result.get(), "\"" + what + "\"");
            if (error.code != ErrorCode::Unavailable)
                error = {ErrorCode::Internal, error.message + "; nothing of this call was recorded"};
            return std::unexpected(std::move(error));
        }
    }
    return {};
}

Status PostgresEventStore::runPipelined(const std::vector<SqlStatement> &statements)
{
    PGconn *conn = m_writeDb.get();
    if (statements.size() < 2)
        return runStatements(statements);
    // Chunks bound what waits unread on either side of the socket: both sides only block on a
    // full socket buffer, and a chunk's answers are a few dozen bytes each.
    constexpr size_t kChunk = 512;
    for (size_t first = 0; first < statements.size(); first += kChunk) {
        const size_t last = std::min(statements.size(), first + kChunk);
        // Prepared first, outside the pipeline: a statement's first use costs one round trip more.
        std::vector<std::string> names;
        names.reserve(last - first);
        std::vector<pg::Params> params;
        params.reserve(last - first);
        for (size_t i = first; i < last; ++i) {
            params.emplace_back(statements[i].params);
            auto name = preparedName(statements[i].sql, params.back());
            if (!name)
                return std::unexpected(name.error());
            names.push_back(std::move(*name));
        }
        if (PQenterPipelineMode(conn) != 1)
            return runStatements(statements);
        bool sent = true;
        for (size_t i = 0; i < names.size() && sent; ++i) {
            const auto &p = params[i];
            sent = PQsendQueryPrepared(conn, names[i].c_str(), p.count(), p.values(), nullptr, nullptr, 0) == 1;
        }
        if (!sent || PQpipelineSync(conn) != 1) {
            Error error = m_writeDb.error(nullptr, "sending statements");
            return std::unexpected(std::move(error));
        }
        std::optional<Error> failed;
        for (size_t i = first; i < first + names.size(); ++i) {
            pg::ResultPtr result(PQgetResult(conn));
            if (!result) {
                failed = m_writeDb.error(nullptr, "reading the answers of statements");
                break;
            }
            const auto status = PQresultStatus(result.get());
            if (status != PGRES_PIPELINE_ABORTED && !pg::ok(result.get()) && !failed) {
                const std::string &sql = statements[i].sql;
                const std::string what = sql.substr(0, std::min<size_t>(sql.find('('), 60));
                failed = m_writeDb.error(result.get(), "\"" + what + "\"");
                if (failed->code != ErrorCode::Unavailable)
                    failed = Error{ErrorCode::Internal, failed->message + "; nothing of this call was recorded"};
            }
            pg::ResultPtr end(PQgetResult(conn));   // NULL: the end of this statement's results
        }
        if (m_writeDb.alive()) {
            pg::ResultPtr sync(PQgetResult(conn));   // PGRES_PIPELINE_SYNC
            PQexitPipelineMode(conn);
        }
        if (failed)
            return std::unexpected(std::move(*failed));
    }
    return {};
}

Status PostgresEventStore::writeProjections(const GroupProgress &progress)
{
    if (progress.touchOrder.empty())
        return {};
    ArrayLiteral ids, agents, goals, playbooks, statuses, needsWork, created, updated, lastSeqs, states, newIds;
    for (const auto &sessionId : progress.touchOrder) {
        const auto &entry = progress.touched.at(sessionId);
        const auto &state = entry.state;
        ids.add(state.id);
        agents.add(state.agent);
        goals.add(state.goal);
        playbooks.add(state.playbook);
        statuses.add(std::string_view(core::statusName(state.status)));
        needsWork.add(int64_t{state.needsWork() ? 1 : 0});
        created.add(state.createdUnixMs);
        updated.add(state.updatedUnixMs);
        lastSeqs.add(state.lastSeq);
        states.add(sessionStateToJson(state));
        if (entry.created)
            newIds.add(state.id);
    }
    pg::Params params;
    for (auto *array : {&ids, &agents, &goals, &playbooks, &statuses, &needsWork, &created, &updated, &lastSeqs, &states})
        params.add(array->finish());
    if (auto status = runPrepared(kUpsertSessions, params,
                                  "writing the projection of " + std::to_string(progress.touchOrder.size()) + " sessions");
        !status)
        return status;
    // A new session gets its lease row in the same transaction (postgres_leases.cpp).
    std::string newSessions = newIds.finish();
    if (newSessions == "{}")
        return {};
    pg::Params leaseParams;
    leaseParams.add(std::move(newSessions));
    return m_writeDb.run("INSERT INTO leases(session_id) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING", leaseParams,
                         "adding lease rows");
}

} // namespace paddock::store
