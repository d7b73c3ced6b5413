// PostgresEventStore's group commit, on the writer thread. A group is one transaction. The fast
// path decides every request in memory (compare-and-append against the tails the writer keeps),
// then sends every event of the group in one INSERT (arrays unnested server-side: one round trip
// whatever the group's size), each request's index rows and statements beside the log, the
// sessions' projection rows in one upsert, COMMIT. When a statement fails (a constraint of a
// request's own write, say), the transaction is rolled back and the group runs again request by
// request, each in a savepoint, so that the failing request is refused alone, as in the SQLite
// store. An all-or-nothing group (appendAll) fails whole instead. The queue that feeds the groups
// and answers the callers is AppendQueue (append_queue.h).
//
// Threads: the writer thread only.

#include "broker/store/postgres_event_store_internal.h"

#include "broker/store/append_checks.h"
#include "broker/store/state_json.h"
#include "common/clock.h"

#include <spdlog/spdlog.h>

namespace paddock::store {

Result<const core::SessionState *> PostgresEventStore::sessionForWrite(const std::string &sessionId,
                                                                       const GroupProgress &progress,
                                                                       std::optional<core::SessionState> &loaded)
{
    if (const core::SessionState *known = progress.known(sessionId, m_live))
        return known;
    pg::Params params;
    params.add(sessionId);
    auto result = m_writeDb.exec("SELECT state FROM sessions WHERE id = $1", params);
    if (!pg::ok(result.get()))
        return std::unexpected(m_writeDb.error(result.get(), "reading session " + sessionId));
    if (PQntuples(result.get()) == 0)
        return nullptr;
    loaded = sessionStateFromJson(pg::cellText(result.get(), 0, 0));
    if (!loaded)
        return fail(ErrorCode::Internal, "the projection of session " + sessionId + " in " + m_target
                                             + " is not JSON; the database is damaged");
    return &*loaded;
}

std::optional<Error> PostgresEventStore::applyOne(AppendRequest &request, int64_t nowMs, GroupProgress &progress,
                                                  RequestOutcome &outcome, Batch *batch)
{
    // With savepoints, a request is written at once and rolled back alone when it fails; the
    // connection going away fails the pass.
    auto inSavepoint = [&](auto &&write) -> std::optional<Error> {
        if (auto status = m_writeDb.run("SAVEPOINT request", "taking a savepoint"); !status)
            return status.error();
        if (auto written = write(); !written) {
            if (!m_writeDb.alive())
                return written.error();
            if (auto status = m_writeDb.run("ROLLBACK TO SAVEPOINT request", "rolling back a request"); !status)
                return status.error();
            outcome = std::unexpected(written.error());
        }
        if (auto status = m_writeDb.run("RELEASE SAVEPOINT request", "releasing a savepoint"); !status)
            return status.error();
        return std::nullopt;
    };

    if (request.sessionId.empty()) {   // statements beside the log only
        if (batch) {
            batch->statements.insert(batch->statements.end(), request.writes.begin(), request.writes.end());
        } else if (auto error = inSavepoint([&] { return runStatements(request.writes); })) {
            return error;
        }
        if (!outcome)
            outcome = AppendResult{};
        return std::nullopt;
    }

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
    if (request.leaseToken != 0) {
        auto held = leaseHeld(sessionId, request.leaseToken);
        if (!held)
            return held.error();
        if (!*held) {
            outcome = std::unexpected(leaseLostRefusal(request));
            return std::nullopt;
        }
    }

    core::SessionState next = current ? *current : core::SessionState{};
    std::vector<SqlStatement> statements;   // the index rows, then the request's own
    std::vector<core::Event> stored = numberEvents(request, nowMs, next, m_indexes, statements);
    statements.insert(statements.end(), request.writes.begin(), request.writes.end());

    if (batch) {
        batch->statements.insert(batch->statements.end(), std::make_move_iterator(statements.begin()),
                                 std::make_move_iterator(statements.end()));
    } else {
        auto error = inSavepoint([&]() -> Status {
            if (auto status = insertEvents(stored); !status) {
                // Another writer appended at this seq first (the events' primary key): its tail is
                // not the one kept here.
                if (status.error().code == ErrorCode::AlreadyExists) {
                    m_live.erase(sessionId);
                    return fail(ErrorCode::Aborted, "session " + sessionId + " was appended to by another writer; "
                                                    "re-read the log and decide again");
                }
                return status;
            }
            return runStatements(statements);
        });
        if (error)
            return error;
        if (outcome)
            return std::nullopt;   // refused alone: the group goes on
    }

    progress.recordAppend(sessionId, current, std::move(next), std::move(stored), outcome);
    return std::nullopt;
}

std::optional<Error> PostgresEventStore::applyGroup(std::vector<PendingAppend> &group, GroupProgress &progress, bool savepoints)
{
    const int64_t nowMs = nowUnixMs();
    PhaseTimer phases;
    Batch batch;
    for (size_t i = 0; i < group.size(); ++i) {
        if (auto error = applyOne(group[i].request, nowMs, progress, progress.outcomes[i], savepoints ? nullptr : &batch))
            return error;
    }
    phases.lap(m_stats.decideUs);
    if (savepoints)
        return std::nullopt;
    // Every event of the group in one statement, in group order, then the statements that
    // depend on nothing but their own request.
    std::vector<core::Event> events;
    for (const auto &outcome : progress.outcomes) {
        if (outcome && outcome->has_value() && !(*outcome)->events.empty())
            events.insert(events.end(), (*outcome)->events.begin(), (*outcome)->events.end());
    }
    if (auto status = insertEvents(events); !status)
        return status.error();
    phases.lap(m_stats.insertUs);
    if (auto status = runPipelined(batch.statements); !status)
        return status.error();
    phases.lap(m_stats.statementsUs);
    return std::nullopt;
}

void PostgresEventStore::publishCommit(std::vector<PendingAppend> &group, GroupProgress &progress)
{
    // Committed: memory follows the database; lease takers hear of sessions that need work.
    CommitNotice notice;
    const auto work = settleCommitted(progress, m_live, m_appends.hasListeners() ? &notice : nullptr);
    if (std::any_of(work.begin(), work.end(), [](const auto &session) { return session.second; }))
        wakeLeaseWaiters();
    m_appends.publish(group, progress.outcomes, notice);
}

void PostgresEventStore::abandonGroup()
{
    if (m_writeDb.get() && PQtransactionStatus(m_writeDb.get()) != PQTRANS_IDLE)
        (void)m_writeDb.exec("ROLLBACK");
}

void PostgresEventStore::commitGroup(std::vector<PendingAppend> &group, bool allOrNothing)
{
    GroupProgress progress(group.size());
    if (auto status = ensureWriter(); !status) {
        AppendQueue::failGroup(group, progress.outcomes, status.error());
        return;
    }
    for (int attempt = 0;; ++attempt) {
        const bool savepoints = attempt > 0;
        progress = GroupProgress(group.size());
        Status begun = m_writeDb.run("BEGIN", "starting a transaction");
        if (!begun && !m_writeDb.alive() && attempt == 0) {
            // The server went away while the writer sat idle and may be back: nothing was sent
            // yet, so connect again and go on.
            m_lastConnectAttempt = {};
            if (auto status = ensureWriter(); status)
                begun = m_writeDb.run("BEGIN", "starting a transaction");
        }
        if (!begun) {
            AppendQueue::failGroup(group, progress.outcomes, begun.error());
            return;
        }
        std::optional<Error> error = applyGroup(group, progress, savepoints);
        bool refused = false;
        if (!error && allOrNothing) {
            error = progress.firstRefusal();   // one refused request refuses the whole batch, with its reason
            refused = error.has_value();
        }
        PhaseTimer phases;
        if (!error) {
            if (auto status = writeProjections(progress); !status)
                error = status.error();
        }
        phases.lap(m_stats.projectionUs);
        bool committing = false;
        if (!error) {
            committing = true;
            if (auto status = m_writeDb.run("COMMIT", "committing"); !status)
                error = status.error();
        }
        phases.lap(m_stats.commitUs);
        if (!error) {
            publishCommit(group, progress);
            return;
        }
        if (m_writeDb.alive() && PQtransactionStatus(m_writeDb.get()) != PQTRANS_IDLE)
            (void)m_writeDb.exec("ROLLBACK");
        if (!m_writeDb.alive()) {
            // The tails kept in memory may be wrong now; ensureWriter reloads them on reconnecting.
            const std::string outcome = committing ? "the commit's outcome is unknown: re-read the session before retrying"
                                                   : "nothing of this append was written, retry it";
            AppendQueue::failGroup(group, progress.outcomes,
                                   Error{ErrorCode::Unavailable, error->message + "; " + outcome});
            return;
        }
        if (allOrNothing) {
            AppendQueue::failGroup(group, progress.outcomes, *error);
            return;
        }
        if (!savepoints && !refused) {
            ++m_stats.slowGroups;   // find the request that failed, and refuse it alone
            continue;
        }
        AppendQueue::failRolledBack(group, progress.outcomes, *error);
        return;
    }
}

} // namespace paddock::store
