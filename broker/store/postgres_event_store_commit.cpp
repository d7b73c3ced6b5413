// PostgresEventStore's group commit, on the writer thread. A group is one transaction. It first
// locks the rows of the sessions it appends to (in id order, FOR UPDATE): another broker's writer
// appending to one of them waits for this commit, and a tail kept here that another broker has
// moved is found and read again. The fast path then decides every request in memory
// (compare-and-append against the tails the writer keeps),
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
    // Other brokers append to the same sessions: the tail kept in memory may be behind. When it
    // refuses the request, or a row of ours collides with theirs, the session is read again from
    // the database and the request decided once more against what is really there.
    for (int attempt = 0;; ++attempt) {
        std::optional<core::SessionState> loaded;
        auto found = sessionForWrite(sessionId, progress, loaded);
        if (!found)
            return found.error();
        const core::SessionState *current = *found;
        const bool fromMemory = current && !loaded && !progress.touched.contains(sessionId);
        auto refusal = expectedTailRefusal(request, current);
        if (refusal && refusal->code == ErrorCode::Aborted && fromMemory) {
            m_live.erase(sessionId);
            continue;
        }
        if (refusal) {
            outcome = std::unexpected(std::move(*refusal));
            return std::nullopt;
        }
        if (request.leaseToken != 0 && !leaseHeld(sessionId, request.leaseToken)) {
            outcome = std::unexpected(leaseLostRefusal(request));
            return std::nullopt;
        }

        core::SessionState next = current ? *current : core::SessionState{};
        std::vector<SqlStatement> statements;   // the index rows, then the request's own
        // The request stays whole: a pass rolled back, or a collision, numbers it again.
        std::vector<core::Event> stored = numberEvents(request, nowMs, next, m_indexes, statements, true);
        statements.insert(statements.end(), request.writes.begin(), request.writes.end());

        if (batch) {
            batch->statements.insert(batch->statements.end(), std::make_move_iterator(statements.begin()),
                                     std::make_move_iterator(statements.end()));
        } else {
            bool collided = false;
            auto error = inSavepoint([&]() -> Status {
                if (auto status = insertEvents(stored); !status) {
                    // Another writer appended at this seq first (the events' primary key): its
                    // tail is not the one kept here.
                    if (status.error().code == ErrorCode::AlreadyExists) {
                        collided = true;
                        m_live.erase(sessionId);
                        return fail(ErrorCode::Aborted, "session " + sessionId + " was appended to by another "
                                                        "writer; re-read the log and decide again");
                    }
                    return status;
                }
                return runStatements(statements);
            });
            if (error)
                return error;
            const bool anyTail = request.expectedLastSeq == AppendRequest::kAnySeq;
            if (collided && (fromMemory || anyTail) && attempt < 2) {
                outcome.reset();
                continue;
            }
            if (outcome)
                return std::nullopt;   // refused alone: the group goes on
        }

        progress.recordAppend(sessionId, current, std::move(next), std::move(stored), outcome);
        return std::nullopt;
    }
}

std::optional<std::string> PostgresEventStore::sessionsOf(const std::vector<PendingAppend> &group,
                                                           bool (*wanted)(const AppendRequest &))
{
    std::vector<std::string> ids;
    for (const auto &pending : group) {
        if (wanted(pending.request))
            ids.push_back(pending.request.sessionId);
    }
    if (ids.empty())
        return std::nullopt;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    pg::ArrayLiteral array;
    for (const auto &id : ids)
        array.add(id);
    return array.finish();
}

std::optional<PostgresEventStore::Piped> PostgresEventStore::lockStatement(const std::vector<PendingAppend> &group)
{
    auto array = sessionsOf(group, [](const AppendRequest &request) {
        return !request.sessionId.empty() && request.expectedLastSeq != 0;
    });
    if (!array)
        return std::nullopt;
    // In id order: two brokers' groups lock their common sessions in the same order, so they wait
    // for each other instead of deadlocking.
    Piped lock{"SELECT id, last_seq FROM sessions WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE", {},
               "locking the sessions of a group"};
    lock.params.add(std::move(*array));
    return lock;
}

void PostgresEventStore::forgetStaleTails(const PGresult *locked)
{
    for (int row = 0; row < PQntuples(locked); ++row) {
        auto live = m_live.find(pg::cellText(locked, row, 0));
        if (live != m_live.end() && live->second.lastSeq != pg::cellInt(locked, row, 1)) {
            ++m_stats.staleTails;
            m_live.erase(live);   // another broker appended: read again when reached
        }
    }
}

std::optional<Error> PostgresEventStore::applyGroup(std::vector<PendingAppend> &group, GroupProgress &progress,
                                                   bool savepoints, std::vector<Piped> &writes)
{
    const int64_t nowMs = nowUnixMs();
    Batch batch;
    for (size_t i = 0; i < group.size(); ++i) {
        if (auto error = applyOne(group[i].request, nowMs, progress, progress.outcomes[i], savepoints ? nullptr : &batch))
            return error;
    }
    if (savepoints)
        return std::nullopt;
    // The fast path writes nothing yet: every event of the group in one statement, in group order,
    // then the statements that depend on nothing but their own request, sent with the COMMIT.
    std::vector<core::Event> events;
    for (const auto &outcome : progress.outcomes) {
        if (outcome && outcome->has_value() && !(*outcome)->events.empty())
            events.insert(events.end(), (*outcome)->events.begin(), (*outcome)->events.end());
    }
    if (!events.empty())
        writes.push_back(insertEventsStatement(events));
    for (auto &statement : batch.statements) {
        // The first words of the statement name the table; the server's message names the cause.
        std::string what = "\"" + statement.sql.substr(0, std::min<size_t>(statement.sql.find('('), 60)) + "\"";
        writes.push_back({std::move(statement.sql), pg::Params(statement.params), std::move(what)});
    }
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
    dropStaleTails();
    for (int attempt = 0;; ++attempt) {
        const bool savepoints = attempt > 0;
        progress = GroupProgress(group.size());
        PhaseTimer phases;
        // BEGIN, the sessions' locks and the leases in one round trip.
        std::vector<pg::ResultPtr> opened;
        bool lock = false, leases = false;
        auto opening = [&]() {
            std::vector<Piped> statements;
            statements.push_back({"BEGIN", {}, "starting a transaction", false});
            if (auto locking = lockStatement(group); (lock = locking.has_value()))
                statements.push_back(std::move(*locking));
            if (auto reading = leaseStatement(group); (leases = reading.has_value()))
                statements.push_back(std::move(*reading));
            opened.clear();
            return runPipeline(statements, &opened);
        };
        Status begun = opening();
        if (!begun && !m_writeDb.alive() && attempt == 0) {
            // The server went away while the writer sat idle and may be back: nothing was sent
            // yet, so connect again and go on.
            m_lastConnectAttempt = {};
            if (auto status = ensureWriter(); status)
                begun = opening();
        }
        std::optional<Error> error;
        m_leaseTokens.clear();
        if (!begun) {
            if (!m_writeDb.alive()) {
                AppendQueue::failGroup(group, progress.outcomes, begun.error());
                return;
            }
            error = begun.error();   // a lock that failed: roll back, below
        } else {
            if (lock)
                forgetStaleTails(opened[1].get());
            if (leases)
                readLeaseTokens(opened[lock ? 2 : 1].get());
        }
        phases.lap(m_stats.beginUs);

        std::vector<Piped> writes;   // the fast path's, sent with the projection and COMMIT
        if (!error)
            error = applyGroup(group, progress, savepoints, writes);
        bool refused = false;
        if (!error && allOrNothing) {
            error = progress.firstRefusal();   // one refused request refuses the whole batch, with its reason
            refused = error.has_value();
        }
        phases.lap(m_stats.decideUs);
        // The writes, the projection, the notification and COMMIT in one round trip.
        bool committing = false;
        if (!error) {
            projectionStatements(progress, writes);
            notifyStatements(progress, writes);
            writes.push_back({"COMMIT", {}, "committing", false});
            committing = true;
            if (auto status = runPipeline(writes); !status)
                error = status.error();
        }
        phases.lap(m_stats.writeUs);
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
