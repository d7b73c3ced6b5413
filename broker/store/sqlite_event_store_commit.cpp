// SqliteEventStore's group commit, on the writer thread: one transaction per group (BEGIN
// IMMEDIATE, synchronous=FULL around it when a request asks for it), each request in a savepoint
// of its own so that one refused request leaves the rest of the group, the sessions' projection
// rows, COMMIT; every return code decides what the callers hear. An all-or-nothing group (appendAll)
// fails whole on one refusal. After the commit, memory (live sessions, leases) follows the database.
// The queue that feeds the groups and answers the callers is AppendQueue (append_queue.h).
//
// Threads: the writer thread only.

#include "broker/store/sqlite_event_store_internal.h"

#include "broker/store/append_checks.h"
#include "broker/store/state_json.h"
#include "common/clock.h"

#include <spdlog/spdlog.h>

namespace paddock::store {

bool SqliteEventStore::stepDone(sqlite::Statement &stmt, int *rcOut)
{
    const int rc = stmt.step();
    stmt.reset();
    if (rcOut)
        *rcOut = rc;
    return rc == SQLITE_DONE || rc == SQLITE_ROW;
}

Result<std::optional<core::SessionState>> SqliteEventStore::loadStateForWrite(const std::string &sessionId)
{
    auto &stmt = m_w.loadState;
    sqlite::ResetGuard guard(stmt);
    stmt.bind(1, sessionId);
    const int rc = stmt.step();
    if (rc == SQLITE_DONE)
        return std::optional<core::SessionState>();
    if (rc != SQLITE_ROW)
        return fail(ErrorCode::Unavailable, m_writeDb.describe("reading session " + sessionId, rc));
    auto state = sessionStateFromJson(stmt.columnText(0));
    if (!state)
        return fail(ErrorCode::Internal, "the projection of session " + sessionId + " in " + m_path.string()
                                             + " is not JSON; the file is damaged");
    return state;
}

Status SqliteEventStore::runWrites(const std::vector<SqlStatement> &writes, int *rcOut)
{
    for (const auto &write : writes) {
        auto it = m_writeStatements.find(write.sql);
        if (it == m_writeStatements.end()) {
            auto prepared = m_writeDb.prepare(write.sql);
            if (!prepared)
                return fail(ErrorCode::Internal, prepared.error().message);
            it = m_writeStatements.emplace(write.sql, std::move(*prepared)).first;
        }
        bindValues(it->second, write.params);
        if (!stepDone(it->second, rcOut)) {
            // The first words of the statement name the table; SQLite's message names the cause
            // (a constraint, or a trigger's RAISE).
            const std::string what = write.sql.substr(0, std::min<size_t>(write.sql.find('('), 60));
            return fail(ErrorCode::Internal, m_writeDb.describe("\"" + what + "\" on " + m_path.string(), *rcOut)
                                                 + "; nothing of this call was recorded");
        }
    }
    return {};
}

Status SqliteEventStore::writeProjection(const core::SessionState &state, bool created, bool indexedChanged)
{
    const std::string json = sessionStateToJson(state);
    const std::string_view status = core::statusName(state.status);
    const int64_t needsWork = state.needsWork() ? 1 : 0;
    int rc;
    if (created) {
        auto &stmt = m_w.insertSession;
        stmt.bind(1, state.id);
        stmt.bind(2, state.agent);
        stmt.bind(3, state.goal);
        stmt.bind(4, state.playbook);
        stmt.bind(5, status);
        stmt.bind(6, needsWork);
        stmt.bind(7, state.createdUnixMs);
        stmt.bind(8, state.updatedUnixMs);
        stmt.bind(9, state.lastSeq);
        stmt.bind(10, json);
        if (stepDone(stmt, &rc))
            return {};
    } else {
        // Naming status in the SET rewrites its index entries even when the value stays; most
        // commits only move the tail.
        auto &stmt = indexedChanged ? m_w.updateSession : m_w.updateSessionTail;
        stmt.bind(1, state.id);
        if (indexedChanged) {
            stmt.bind(2, status);
            stmt.bind(3, needsWork);
        }
        stmt.bind(4, state.updatedUnixMs);
        stmt.bind(5, state.lastSeq);
        stmt.bind(6, json);
        if (stepDone(stmt, &rc))
            return {};
    }
    return fail(ErrorCode::Unavailable, m_writeDb.describe("writing the projection of session " + state.id, rc));
}

std::optional<Error> SqliteEventStore::applyWritesOnly(const AppendRequest &request, RequestOutcome &outcome)
{
    int rc = 0;
    // Statements beside the log only, in a savepoint of their own.
    if (!stepDone(m_w.savepoint, &rc))
        return Error{ErrorCode::Unavailable, m_writeDb.describe("savepoint on " + m_path.string(), rc)};
    if (auto written = runWrites(request.writes, &rc); !written) {
        if (sqlite3_get_autocommit(m_writeDb.get()))
            return Error{ErrorCode::Unavailable, written.error().message};
        stepDone(m_w.rollbackTo);
        stepDone(m_w.release);
        outcome = std::unexpected(written.error());
        return std::nullopt;
    }
    if (!stepDone(m_w.release, &rc))
        return Error{ErrorCode::Unavailable, m_writeDb.describe("releasing a savepoint on " + m_path.string(), rc)};
    outcome = AppendResult{};
    return std::nullopt;
}

Result<const core::SessionState *> SqliteEventStore::sessionForWrite(const std::string &sessionId,
                                                                     const GroupProgress &progress,
                                                                     std::optional<core::SessionState> &loaded)
{
    if (const core::SessionState *known = progress.known(sessionId, m_live))
        return known;
    auto fromDisk = loadStateForWrite(sessionId);
    if (!fromDisk)
        return std::unexpected(fromDisk.error());
    loaded = std::move(*fromDisk);
    return loaded ? &*loaded : nullptr;
}

Status SqliteEventStore::insertRequest(const AppendRequest &request, const std::vector<core::Event> &stored,
                                       const std::vector<SqlStatement> &indexRows)
{
    int rc = 0;
    for (const auto &event : stored) {
        auto &insert = m_w.insertEvent;
        insert.bind(1, event.sessionId);
        insert.bind(2, event.seq);
        insert.bind(3, event.timeUnixMs);
        insert.bind(4, event.kind);
        insert.bind(5, event.payload);
        insert.bind(6, event.costMicros);
        if (!stepDone(insert, &rc))
            return fail(ErrorCode::Internal, m_writeDb.describe("appending to session " + request.sessionId, rc));
    }
    if (!indexRows.empty()) {
        if (auto written = runWrites(indexRows, &rc); !written)
            return written;
    }
    if (!request.writes.empty()) {
        if (auto written = runWrites(request.writes, &rc); !written)
            return written;
    }
    return {};
}

std::optional<Error> SqliteEventStore::applySessionAppend(AppendRequest &request, int64_t nowMs,
                                                          GroupProgress &progress, RequestOutcome &outcome)
{
    const std::string &sessionId = request.sessionId;
    std::optional<core::SessionState> loaded;
    auto found = sessionForWrite(sessionId, progress, loaded);
    if (!found)
        return found.error();
    const core::SessionState *current = *found;
    if (auto refusal = expectedTailRefusal(request, current)) {
        outcome = std::unexpected(std::move(*refusal));
        return std::nullopt;
    }
    if (request.leaseToken != 0 && !m_leases.holds(sessionId, request.leaseToken)) {
        outcome = std::unexpected(leaseLostRefusal(request));
        return std::nullopt;
    }

    core::SessionState next = current ? *current : core::SessionState{};
    std::vector<SqlStatement> indexRows;
    std::vector<core::Event> stored = numberEvents(request, nowMs, next, m_indexes, indexRows);
    int rc = 0;
    if (!stepDone(m_w.savepoint, &rc))
        return Error{ErrorCode::Unavailable, m_writeDb.describe("savepoint on " + m_path.string(), rc)};
    if (auto inserted = insertRequest(request, stored, indexRows); !inserted) {
        Error error = inserted.error();
        if (sqlite3_get_autocommit(m_writeDb.get())) {
            // SQLite rolled the whole transaction back (disk full, I/O error): the group fails.
            return Error{ErrorCode::Unavailable, error.message};
        }
        stepDone(m_w.rollbackTo);
        stepDone(m_w.release);
        outcome = std::unexpected(std::move(error));
        return std::nullopt;
    }
    if (!stepDone(m_w.release, &rc))
        return Error{ErrorCode::Unavailable, m_writeDb.describe("releasing a savepoint on " + m_path.string(), rc)};

    progress.recordAppend(sessionId, current, std::move(next), std::move(stored), outcome);
    return std::nullopt;
}

std::optional<Error> SqliteEventStore::writeProjections(const GroupProgress &progress)
{
    for (const auto &sessionId : progress.touchOrder) {
        const auto &entry = progress.touched.at(sessionId);
        if (auto status = writeProjection(entry.state, entry.created, entry.indexedChanged); !status)
            return status.error();
    }
    return std::nullopt;
}

void SqliteEventStore::publishCommit(std::vector<PendingAppend> &group, GroupProgress &progress)
{
    // Committed: memory follows the database.
    CommitNotice notice;
    m_leases.update(settleCommitted(progress, m_live, m_appends.hasListeners() ? &notice : nullptr));
    m_appends.publish(group, progress.outcomes, notice);
}

void SqliteEventStore::abandonGroup()
{
    if (!sqlite3_get_autocommit(m_writeDb.get())) {
        m_w.rollback.step();
        m_w.rollback.reset();
    }
}

void SqliteEventStore::commitGroup(std::vector<PendingAppend> &group, bool allOrNothing)
{
    const bool fullSync =
        std::any_of(group.begin(), group.end(), [](const PendingAppend &p) { return p.request.fullSync; });
    GroupProgress progress(group.size());
    std::optional<Error> groupError;

    int rc = 0;
    if (fullSync && !stepDone(m_w.syncFull, &rc)) {
        AppendQueue::failGroup(
            group, progress.outcomes,
            Error{ErrorCode::Unavailable, m_writeDb.describe("setting synchronous=FULL on " + m_path.string(), rc)});
        return;
    }
    // Every return code of BEGIN and COMMIT decides what the callers hear.
    if (!stepDone(m_w.begin, &rc)) {
        AppendQueue::failGroup(
            group, progress.outcomes,
            Error{ErrorCode::Unavailable, m_writeDb.describe("starting a transaction on " + m_path.string(), rc)});
        if (fullSync)
            stepDone(m_w.syncNormal);
        return;
    }

    const int64_t nowMs = nowUnixMs();
    PhaseTimer phases;
    for (size_t i = 0; i < group.size() && !groupError; ++i) {
        AppendRequest &request = group[i].request;
        groupError = request.sessionId.empty() ? applyWritesOnly(request, progress.outcomes[i])
                                               : applySessionAppend(request, nowMs, progress, progress.outcomes[i]);
    }

    phases.lap(m_stats.insertUs);
    if (allOrNothing && !groupError)
        groupError = progress.firstRefusal();   // one refused request refuses the whole batch, with its reason
    if (!groupError)
        groupError = writeProjections(progress);
    phases.lap(m_stats.projectionUs);
    if (!groupError && !stepDone(m_w.commit, &rc))
        groupError = Error{ErrorCode::Unavailable, m_writeDb.describe("committing to " + m_path.string(), rc)};
    phases.lap(m_stats.commitUs);
    if (groupError) {
        if (!sqlite3_get_autocommit(m_writeDb.get()))
            stepDone(m_w.rollback);
        if (fullSync)
            stepDone(m_w.syncNormal);
        if (allOrNothing) {
            // The refusal of one request, said to every request of the batch.
            AppendQueue::failGroup(group, progress.outcomes, *groupError);
            return;
        }
        AppendQueue::failRolledBack(group, progress.outcomes, *groupError);
        return;
    }
    if (fullSync)
        stepDone(m_w.syncNormal);

    publishCommit(group, progress);
    phases.lap(m_stats.notifyUs);
}

} // namespace paddock::store
