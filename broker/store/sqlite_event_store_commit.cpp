// SqliteEventStore's group commit, on the writer thread: one transaction per group (BEGIN
// IMMEDIATE, synchronous=FULL around it when a request asks for it), each request in a savepoint
// of its own so that one refused request leaves the rest of the group, the sessions' projection
// rows, COMMIT; every return code decides what the callers hear. An all-or-nothing group (appendAll)
// fails whole on one refusal. After the commit, memory (live sessions, leases) follows the database.
//
// Threads: the writer thread only.

#include "broker/store/sqlite_event_store_internal.h"

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

namespace {

// Whether the request's expectedLastSeq fits the session: 0 creates one that does not exist yet,
// kAnySeq appends to one that does, any other seq appends at that tail only. False, with the
// refusal in outcome, when it does not fit.
bool expectedTailHolds(const AppendRequest &request, const core::SessionState *current,
                       std::optional<Result<AppendResult>> &outcome)
{
    const std::string &sessionId = request.sessionId;
    if (!current) {
        if (request.expectedLastSeq != 0) {
            outcome = fail(ErrorCode::NotFound, "no session " + sessionId
                                                    + "; check the id (paddockctl ls lists sessions)");
            return false;
        }
    } else if (request.expectedLastSeq == 0) {
        outcome = fail(ErrorCode::AlreadyExists, "session " + sessionId + " already exists; pick another id");
        return false;
    } else if (request.expectedLastSeq != AppendRequest::kAnySeq && request.expectedLastSeq != current->lastSeq) {
        outcome = fail(ErrorCode::Aborted, "session " + sessionId + " ends at seq " + std::to_string(current->lastSeq)
                                               + ", not " + std::to_string(request.expectedLastSeq)
                                               + "; someone appended first: re-read the log and decide again");
        return false;
    }
    return true;
}

} // namespace

void SqliteEventStore::failGroup(std::vector<Pending> &group, std::vector<RequestOutcome> &outcomes, const Error &error)
{
    for (size_t i = 0; i < group.size(); ++i) {
        // A request refused on its own merits keeps its answer; the rest learn the group failed.
        if (!outcomes[i] || outcomes[i]->has_value())
            group[i].answer(std::unexpected(error));
        else
            group[i].answer(std::move(*outcomes[i]));
    }
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
    const core::SessionState *current = nullptr;
    if (auto it = progress.touched.find(sessionId); it != progress.touched.end()) {
        current = &it->second.state;
    } else if (auto live = m_live.find(sessionId); live != m_live.end()) {
        current = &live->second;
    } else {
        auto fromDisk = loadStateForWrite(sessionId);
        if (!fromDisk)
            return std::unexpected(fromDisk.error());
        loaded = std::move(*fromDisk);
        if (loaded)
            current = &*loaded;
    }
    return current;
}

Status SqliteEventStore::insertRequest(AppendRequest &request, core::SessionState &next, int64_t nowMs,
                                       std::vector<core::Event> &stored)
{
    const std::string &sessionId = request.sessionId;
    // Time never runs backwards within a session, whatever the wall clock does.
    const int64_t timeMs = std::max(nowMs, next.updatedUnixMs);
    stored.reserve(request.events.size());
    int rc = 0;
    bool ok = true;
    for (auto &newEvent : request.events) {
        core::Event event{sessionId, next.lastSeq + 1, timeMs, std::move(newEvent.kind),
                          std::move(newEvent.payload), newEvent.costMicros};
        auto &insert = m_w.insertEvent;
        insert.bind(1, event.sessionId);
        insert.bind(2, event.seq);
        insert.bind(3, event.timeUnixMs);
        insert.bind(4, event.kind);
        insert.bind(5, event.payload);
        insert.bind(6, event.costMicros);
        if (!stepDone(insert, &rc)) {
            ok = false;
            break;
        }
        for (auto &index : m_indexes) {
            if (index->indexes(event.kind) && (rc = index->write(event)) != SQLITE_DONE) {
                ok = false;
                break;
            }
        }
        if (!ok)
            break;
        core::applyEvent(next, event);
        stored.push_back(std::move(event));
    }
    if (!ok)
        return fail(ErrorCode::Internal, m_writeDb.describe("appending to session " + sessionId, rc));
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
    if (!expectedTailHolds(request, current, outcome))
        return std::nullopt;

    core::SessionState next = current ? *current : core::SessionState{};
    const bool created = !current;
    int rc = 0;
    if (!stepDone(m_w.savepoint, &rc))
        return Error{ErrorCode::Unavailable, m_writeDb.describe("savepoint on " + m_path.string(), rc)};
    std::vector<core::Event> stored;
    if (auto inserted = insertRequest(request, next, nowMs, stored); !inserted) {
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

    const bool indexedChanged = !current || current->status != next.status
        || current->needsWork() != next.needsWork();
    auto [slot, inserted] = progress.touched.try_emplace(sessionId);
    if (inserted) {
        progress.touchOrder.push_back(sessionId);
        slot->second.created = created;
    }
    slot->second.indexedChanged = slot->second.indexedChanged || indexedChanged;
    slot->second.state = next;
    slot->second.events.insert(slot->second.events.end(), stored.begin(), stored.end());
    outcome = AppendResult{std::move(stored), std::move(next)};
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

void SqliteEventStore::publishCommit(std::vector<Pending> &group, GroupProgress &progress)
{
    // Committed: memory follows the database.
    std::vector<std::pair<std::string, bool>> work;
    work.reserve(progress.touchOrder.size());
    CommitNotice notice;
    bool wantNotice;
    {
        std::lock_guard lock(m_listenerMutex);
        wantNotice = !m_listeners.empty();
    }
    for (const auto &sessionId : progress.touchOrder) {
        auto &entry = progress.touched.at(sessionId);
        const bool needsWork = entry.state.needsWork();
        work.emplace_back(sessionId, needsWork);
        if (wantNotice) {
            notice.sessions.push_back(entry.state);
            std::move(entry.events.begin(), entry.events.end(), std::back_inserter(notice.events));
        }
        // Finished sessions leave memory; a late event reads them back from the projection.
        if (core::isTerminal(entry.state.status) && !needsWork)
            m_live.erase(sessionId);
        else
            m_live.insert_or_assign(sessionId, std::move(entry.state));
    }
    m_leases.update(work);
    if (wantNotice && !notice.events.empty())
        notifyListeners(notice);
    for (size_t i = 0; i < group.size(); ++i)
        group[i].answer(std::move(*progress.outcomes[i]));
}

void SqliteEventStore::commitGroup(std::vector<Pending> &group, bool allOrNothing)
{
    const bool fullSync = std::any_of(group.begin(), group.end(), [](const Pending &p) { return p.request.fullSync; });
    GroupProgress progress;
    progress.outcomes.resize(group.size());
    std::optional<Error> groupError;

    int rc = 0;
    if (fullSync && !stepDone(m_w.syncFull, &rc)) {
        failGroup(group, progress.outcomes,
                  Error{ErrorCode::Unavailable, m_writeDb.describe("setting synchronous=FULL on " + m_path.string(), rc)});
        return;
    }
    // Every return code of BEGIN and COMMIT decides what the callers hear.
    if (!stepDone(m_w.begin, &rc)) {
        failGroup(group, progress.outcomes,
                  Error{ErrorCode::Unavailable, m_writeDb.describe("starting a transaction on " + m_path.string(), rc)});
        if (fullSync)
            stepDone(m_w.syncNormal);
        return;
    }

    const int64_t nowMs = nowUnixMs();
    int64_t phaseUs = monotonicUs();
    auto phase = [&](int64_t &bucket) {
        const int64_t t = monotonicUs();
        bucket += t - phaseUs;
        phaseUs = t;
    };
    for (size_t i = 0; i < group.size() && !groupError; ++i) {
        AppendRequest &request = group[i].request;
        groupError = request.sessionId.empty() ? applyWritesOnly(request, progress.outcomes[i])
                                               : applySessionAppend(request, nowMs, progress, progress.outcomes[i]);
    }

    phase(m_stats.insertUs);
    if (allOrNothing && !groupError) {
        // One refused request refuses the whole batch, with its reason.
        for (auto &outcome : progress.outcomes) {
            if (outcome && !outcome->has_value()) {
                groupError = outcome->error();
                break;
            }
        }
    }
    if (!groupError)
        groupError = writeProjections(progress);
    phase(m_stats.projectionUs);
    if (!groupError && !stepDone(m_w.commit, &rc))
        groupError = Error{ErrorCode::Unavailable, m_writeDb.describe("committing to " + m_path.string(), rc)};
    phase(m_stats.commitUs);
    if (groupError) {
        if (!sqlite3_get_autocommit(m_writeDb.get()))
            stepDone(m_w.rollback);
        if (fullSync)
            stepDone(m_w.syncNormal);
        if (allOrNothing) {
            failGroup(group, progress.outcomes, *groupError);   // the refusal of one request, said to every request of the batch
            return;
        }
        spdlog::error("store: a group of {} appends failed and was rolled back: {}", group.size(), groupError->message);
        failGroup(group, progress.outcomes,
                  Error{groupError->code, groupError->message + "; nothing of this append was written, retry it"});
        return;
    }
    if (fullSync)
        stepDone(m_w.syncNormal);

    publishCommit(group, progress);
    phase(m_stats.notifyUs);
}

} // namespace paddock::store
