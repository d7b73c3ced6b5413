// PostgresEventStore's statements, as the writer sends them (postgres_event_store_commit.cpp decides
// what goes into a group): a group's events in one INSERT of unnested arrays, the projection rows
// in one upsert, the statements beside the log prepared once per connection, pipelines of them
// (libpq's pipeline mode: one round trip per chunk instead of one per statement), and the fencing
// check of the requests' leases (read with the group's locks).
//
// Threads: the writer thread only.

#include "broker/store/postgres_event_store_internal.h"

#include "broker/store/state_json.h"

namespace paddock::store {

namespace {

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

std::optional<PostgresEventStore::Piped> PostgresEventStore::leaseStatement(const std::vector<PendingAppend> &group)
{
    auto array = sessionsOf(group, [](const AppendRequest &request) { return request.leaseToken != 0; });
    if (!array)
        return std::nullopt;
    // FOR SHARE: while this transaction lasts, a grant of these sessions (FOR UPDATE SKIP LOCKED)
    // skips them, so the next holder is granted after the commit and reads the log with this
    // group's appends in it.
    Piped leases{"SELECT session_id, token FROM leases WHERE session_id = ANY($1::text[]) ORDER BY session_id FOR SHARE",
                 {}, "checking the leases of a group"};
    leases.params.add(std::move(*array));
    return leases;
}

void PostgresEventStore::readLeaseTokens(const PGresult *leases)
{
    for (int row = 0; row < PQntuples(leases); ++row)
        m_leaseTokens[pg::cellText(leases, row, 0)] = static_cast<uint64_t>(pg::cellInt(leases, row, 1));
}

bool PostgresEventStore::leaseHeld(const std::string &sessionId, uint64_t token) const
{
    // Expired but not granted again still holds: nobody else may have written since.
    auto it = m_leaseTokens.find(sessionId);
    return it != m_leaseTokens.end() && it->second == token;
}

PostgresEventStore::Piped PostgresEventStore::insertEventsStatement(const std::vector<core::Event> &events)
{
    pg::ArrayLiteral ids, seqs, times, kinds, payloads, costs;
    for (const auto &event : events) {
        ids.add(event.sessionId);
        seqs.add(event.seq);
        times.add(event.timeUnixMs);
        kinds.add(event.kind);
        payloads.add(event.payload);
        costs.add(event.costMicros);
    }
    Piped insert{kInsertEvents, {}, "appending " + std::to_string(events.size()) + " events"};
    for (auto *array : {&ids, &seqs, &times, &kinds, &payloads, &costs})
        insert.params.add(array->finish());
    return insert;
}

Status PostgresEventStore::insertEvents(const std::vector<core::Event> &events)
{
    if (events.empty())
        return {};
    Piped insert = insertEventsStatement(events);
    return runPrepared(insert.sql, insert.params, insert.what);
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

Status PostgresEventStore::runPipeline(std::vector<Piped> &statements, std::vector<pg::ResultPtr> *results)
{
    PGconn *conn = m_writeDb.get();
    // Chunks bound what waits unread on either side of the socket: both sides only block on a
    // full socket buffer, and a chunk's answers are a few dozen bytes each (a lock's, a few per
    // session).
    constexpr size_t kChunk = 512;
    for (size_t first = 0; first < statements.size(); first += kChunk) {
        const size_t last = std::min(statements.size(), first + kChunk);
        // Prepared first, outside the pipeline: a statement's first use costs one round trip more.
        std::vector<std::string> names(last - first);
        for (size_t i = first; i < last; ++i) {
            if (!statements[i].prepare)
                continue;
            auto name = preparedName(statements[i].sql, statements[i].params);
            if (!name)
                return std::unexpected(name.error());
            names[i - first] = std::move(*name);
        }
        if (PQenterPipelineMode(conn) != 1)
            return std::unexpected(m_writeDb.error(nullptr, "starting a pipeline"));
        bool sent = true;
        for (size_t i = first; i < last && sent; ++i) {
            const auto &p = statements[i].params;
            sent = statements[i].prepare
                ? PQsendQueryPrepared(conn, names[i - first].c_str(), p.count(), p.values(), nullptr, nullptr, 0) == 1
                : PQsendQueryParams(conn, statements[i].sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
        }
        if (!sent || PQpipelineSync(conn) != 1) {
            Error error = m_writeDb.error(nullptr, "sending statements");
            return std::unexpected(std::move(error));
        }
        std::optional<Error> failed;
        for (size_t i = first; i < last; ++i) {
            pg::ResultPtr result(PQgetResult(conn));
            if (!result) {
                failed = m_writeDb.error(nullptr, "reading the answers of statements");
                break;
            }
            const auto status = PQresultStatus(result.get());
            if (status != PGRES_PIPELINE_ABORTED && !pg::ok(result.get()) && !failed) {
                failed = m_writeDb.error(result.get(), statements[i].what);
                if (failed->code != ErrorCode::Unavailable && failed->code != ErrorCode::AlreadyExists)
                    failed = Error{ErrorCode::Internal, failed->message + "; nothing of this call was recorded"};
            }
            pg::ResultPtr end(PQgetResult(conn));   // NULL: the end of this statement's results
            if (results)
                results->push_back(std::move(result));
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

void PostgresEventStore::projectionStatements(const GroupProgress &progress, std::vector<Piped> &out)
{
    if (progress.touchOrder.empty())
        return;
    pg::ArrayLiteral ids, agents, goals, playbooks, statuses, needsWork, created, updated, lastSeqs, states, newIds;
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
    Piped upsert{kUpsertSessions, {},
                 "writing the projection of " + std::to_string(progress.touchOrder.size()) + " sessions"};
    for (auto *array : {&ids, &agents, &goals, &playbooks, &statuses, &needsWork, &created, &updated, &lastSeqs, &states})
        upsert.params.add(array->finish());
    out.push_back(std::move(upsert));
    // A new session gets its lease row in the same transaction (postgres_leases.cpp).
    std::string newSessions = newIds.finish();
    if (newSessions == "{}")
        return;
    Piped leases{"INSERT INTO leases(session_id) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING", {}, "adding lease rows"};
    leases.params.add(std::move(newSessions));
    out.push_back(std::move(leases));
}

} // namespace paddock::store
