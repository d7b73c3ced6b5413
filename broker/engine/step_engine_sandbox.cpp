// StepEngine's sandbox steps: claiming one (and restoring the workspace after a failover or an idle
// release), checkpoints after a step, what a pool's failure means for the step, giving the sandbox
// back at the end and when it sat idle.
//
// Threads: the step workers run these for the session they hold the lease on; releaseIdle runs on
// the idle releaser's thread, without a lease (compare-and-append decides).

#include "broker/engine/step_engine_internal.h"

#include <spdlog/spdlog.h>

#include <climits>

namespace paddock::engine {

namespace {

using nlohmann::json;

// The latest workspace snapshot the log records (a checkpoint event), or null.
json lastCheckpoint(std::span<const core::Event> log)
{
    for (auto it = log.rbegin(); it != log.rend(); ++it) {
        if (it->kind != core::kind::Checkpoint)
            continue;
        auto payload = json::parse(it->payload, nullptr, false);
        if (payload.is_object() && payload.contains("snapshot_ref") && payload["snapshot_ref"].is_string())
            return payload;
    }
    return nullptr;
}

// The payload of the last sandbox.lost after the last sandbox.claimed, or null.
json lastLossSinceClaim(std::span<const core::Event> log)
{
    for (auto it = log.rbegin(); it != log.rend(); ++it) {
        if (it->kind == core::kind::SandboxClaimed)
            return nullptr;
        if (it->kind == kSandboxLost) {
            auto payload = json::parse(it->payload, nullptr, false);
            return payload.is_object() ? payload : json::object();
        }
    }
    return nullptr;
}

// The payload of a sandbox.released given back idle with a snapshot, after the last claim, or null:
// the next claim restores that snapshot.
json idleReleaseSinceClaim(std::span<const core::Event> log)
{
    for (auto it = log.rbegin(); it != log.rend(); ++it) {
        if (it->kind == core::kind::SandboxClaimed)
            return nullptr;
        if (it->kind == core::kind::SandboxReleased) {
            auto payload = json::parse(it->payload, nullptr, false);
            if (payload.is_object() && payload.value("reason", std::string()) == "idle"
                && payload.contains("snapshot_ref") && payload["snapshot_ref"].is_string())
                return payload;
            return nullptr;
        }
    }
    return nullptr;
}

// The latest checkpoint when nothing has run in the sandbox since it was taken, or null.
json currentCheckpoint(std::span<const core::Event> log)
{
    for (auto it = log.rbegin(); it != log.rend(); ++it) {
        if (it->kind == core::kind::ToolResult || it->kind == core::kind::SandboxClaimed)
            return nullptr;
        if (it->kind == core::kind::Checkpoint) {
            auto payload = json::parse(it->payload, nullptr, false);
            if (payload.is_object() && payload.contains("snapshot_ref") && payload["snapshot_ref"].is_string())
                return payload;
            return nullptr;
        }
    }
    return nullptr;
}

} // namespace

Result<json> workspaceSnapshot(pool_client::PoolClient &pool, const std::string &sandboxId,
                               std::span<const core::Event> log)
{
    const json checkpoint = currentCheckpoint(log);
    if (!checkpoint.is_null())
        return json{{"snapshot_ref", checkpoint["snapshot_ref"]}, {"snapshot", "checkpoint"}};
    auto taken = pool.snapshot(sandboxId);
    if (!taken)
        return std::unexpected(taken.error());
    return json{{"snapshot_ref", taken->ref}, {"snapshot", "new"}, {"files", taken->fileCount},
                {"size_bytes", taken->sizeBytes}, {"snapshot_ms", taken->durationMs}};
}

core::NewEvent sandboxClaimed(const std::string &pool, const pool_client::ClaimedSandbox &claimed, double pricePerHour)
{
    return event(core::kind::SandboxClaimed, {{"pool", pool},
                                              {"price_per_hour", pricePerHour},
                                              {"sandbox_id", claimed.sandboxId},
                                              {"tier", claimed.tier},
                                              {"runtime", claimed.runtime},
                                              {"host", claimed.host},
                                              {"warm", claimed.warm},
                                              {"claim_ms", claimed.claimMs}});
}

// Every pool offering the tier is full or unreachable: the session waits, and its log says why
// once (not once per retry) so nobody has to guess at a hang.
StepOutcome StepEngine::waitForPool(const Action &action, const Error &error)
{
    if (action.state.lastEventKind == kSandboxWaiting)
        return {action.kind, false, m_options.retryAfterUnavailableMs, error.message};
    auto outcome = appendResult(action, {event(kSandboxWaiting, {{"tier", action.tier},
                                                                 {"code", errorCodeName(error.code)},
                                                                 {"reason", error.message}})});
    outcome.retryAfterMs = m_options.retryAfterUnavailableMs;
    return outcome;
}

StepOutcome StepEngine::claimSandbox(const Action &action, std::span<const core::Event> log)
{
    auto pool = m_pools.choose(action.tier);
    if (!pool)
        return waitForPool(action, pool.error());
    auto claimed = (*pool)->claim(action.tier, action.state.id, action.idempotencyKey);
    if (!claimed) {
        const auto code = claimed.error().code;
        if (code == ErrorCode::Unavailable)
            m_pools.reportUnavailable((*pool)->name(), claimed.error().message);
        if (code == ErrorCode::Unavailable || code == ErrorCode::ResourceExhausted
            || code == ErrorCode::DeadlineExceeded || code == ErrorCode::Cancelled
            || code == ErrorCode::PermissionDenied)
            return {action.kind, false, m_options.retryAfterUnavailableMs, claimed.error().message};
        return appendResult(action, {event(core::kind::StateChanged,
                                           {{"status", "failed"},
                                            {"reason", "could not claim a sandbox: " + claimed.error().message}})});
    }
    std::vector<core::NewEvent> events;
    if (action.state.status == core::SessionStatus::Queued)
        events.push_back(event(core::kind::StateChanged, {{"status", "running"}}));
    events.push_back(sandboxClaimed((*pool)->name(), *claimed, m_pools.pricePerHour((*pool)->name(), claimed->tier)));
    m_pools.noteClaimed((*pool)->name());
    // A claim after the session's pool was lost is a move: say from where to where, and with
    // which workspace.
    const json lost = lastLossSinceClaim(log);
    if (!lost.is_null()) {
        json moved{{"from_pool", lost.value("pool", std::string())},
                   {"from_sandbox_id", lost.value("sandbox_id", std::string())},
                   {"to_pool", (*pool)->name()},
                   {"to_sandbox_id", claimed->sandboxId},
                   {"snapshot_ref", nullptr},
                   {"workspace", "empty"},
                   {"note", "no snapshot of this session's workspace exists, so it continues in an empty "
                            "workspace on pool '" + (*pool)->name() + "'"}};
        const json checkpoint = lastCheckpoint(log);
        if (!checkpoint.is_null()) {
            const std::string ref = checkpoint["snapshot_ref"];
            auto restored = (*pool)->restore(claimed->sandboxId, ref);
            if (restored) {
                moved["snapshot_ref"] = ref;
                moved["workspace"] = "restored";
                moved["restored_files"] = restored->fileCount;
                moved["note"] = "restored snapshot " + ref + " (taken after call "
                    + checkpoint.value("after_call", std::string("?")) + ") into a new sandbox on pool '"
                    + (*pool)->name() + "'";
            } else {
                moved["snapshot_ref"] = ref;
                moved["note"] = "snapshot " + ref + " could not be restored on pool '" + (*pool)->name() + "' ("
                    + restored.error().message + "), so the session continues in an empty workspace; pools "
                    "restore each other's snapshots only when they share snapshot_dir";
            }
        }
        if (lost.contains("interrupted_call"))
            moved["repeats_call"] = lost["interrupted_call"];
        events.push_back(event(kSandboxMoved, moved));
        spdlog::info("session {} moved from pool '{}' to pool '{}' ({})", action.state.id,
                     lost.value("pool", std::string()), (*pool)->name(), moved["note"].get<std::string>());
    }
    // A claim after the sandbox was given back idle: the workspace comes back from its snapshot.
    const json given = lost.is_null() ? idleReleaseSinceClaim(log) : json();
    if (!given.is_null()) {
        const std::string ref = given["snapshot_ref"];
        json restoredEvent{{"snapshot_ref", ref}, {"pool", (*pool)->name()}, {"sandbox_id", claimed->sandboxId},
                           {"tier", claimed->tier}};
        auto restored = (*pool)->restore(claimed->sandboxId, ref);
        if (!restored) {
            // The session must not go on in an empty workspace without saying so; the claim is
            // given back and retried (a transient pool error heals; the log keeps the reason).
            spdlog::warn("session {}: snapshot {} not restored on pool '{}': {}", action.state.id, ref,
                         (*pool)->name(), restored.error().message);
            (void)(*pool)->release(claimed->sandboxId);
            return {action.kind, false, m_options.retryAfterUnavailableMs,
                    "restore of " + ref + " failed: " + restored.error().message};
        }
        restoredEvent["restored_files"] = restored->fileCount;
        restoredEvent["restore_ms"] = restored->durationMs;
        events.push_back(event(core::kind::SandboxRestored, restoredEvent));
    }
    return appendResult(action, std::move(events));
}

Status StepEngine::addCheckpoint(const Action &action, pool_client::PoolClient &pool, std::vector<core::NewEvent> &events)
{
    auto snapshot = pool.snapshot(action.state.sandboxId);
    if (snapshot) {
        events.push_back(event(core::kind::Checkpoint, {{"snapshot_ref", snapshot->ref},
                                                        {"pool", pool.name()},
                                                        {"sandbox_id", action.state.sandboxId},
                                                        {"after_call", action.call.id},
                                                        {"size_bytes", snapshot->sizeBytes},
                                                        {"files", snapshot->fileCount},
                                                        {"duration_ms", snapshot->durationMs}}));
        return {};
    }
    const ErrorCode code = snapshot.error().code;
    if (code == ErrorCode::Unavailable || code == ErrorCode::DeadlineExceeded || code == ErrorCode::Cancelled)
        return std::unexpected(snapshot.error());
    if (code != ErrorCode::Unimplemented)
        spdlog::warn("session {}: no snapshot after call {} on pool '{}': {}", action.state.id, action.call.id,
                     pool.name(), snapshot.error().message);
    return {};
}

StepOutcome StepEngine::releaseSandbox(const Action &action, std::span<const core::Event> log)
{
    json payload{{"sandbox_id", action.state.sandboxId}, {"pool", action.state.pool}};
    std::vector<core::NewEvent> events;
    if (pool_client::PoolClient *pool = m_pools.find(action.state.pool)) {
        if (auto outcome = tierOutcome(pool, action.state, log))
            events.push_back(std::move(*outcome));
        auto released = pool->release(action.state.sandboxId);
        if (!released) {
            const bool unavailable = released.error().code == ErrorCode::Unavailable;
            if (unavailable)
                m_pools.reportUnavailable(pool->name(), released.error().message);
            if (unavailable && m_pools.isLost(pool->name())) {
                // Nothing to give back: the sandbox went down with its pool.
                payload["note"] = "pool '" + pool->name() + "' is lost; the sandbox went with it";
                events.push_back(event(core::kind::SandboxReleased, payload));
                return appendResult(action, std::move(events));
            }
            if (unavailable || released.error().code == ErrorCode::Cancelled)
                return {action.kind, false, m_options.retryAfterUnavailableMs, released.error().message};
            // NotFound: it is gone already, which is what releasing wants.
            payload["note"] = released.error().message;
        }
    } else {
        payload["note"] = "pool '" + action.state.pool + "' is no longer configured";
    }
    events.push_back(event(core::kind::SandboxReleased, payload));
    return appendResult(action, std::move(events));
}

void StepEngine::releaseIdle(const std::string &sessionId)
{
    // A step still running in the session (a command that was running when it was paused) keeps
    // its sandbox: its result is recorded first (appendResult), and the next pass gives the
    // sandbox back with that result in its snapshot.
    if (hasActiveStep(sessionId))
        return;
    auto log = m_store.readEvents(sessionId, 1, INT_MAX);
    if (!log)
        return;
    const core::SessionState state = core::foldEvents(*log);
    if ((state.status != core::SessionStatus::Paused && state.status != core::SessionStatus::WaitingApproval)
        || state.sandboxId.empty())
        return;
    pool_client::PoolClient *pool = m_pools.find(state.pool);
    if (!pool)
        return;   // the pool is gone from the config; the resume's first step says so
    auto snapshot = workspaceSnapshot(*pool, state.sandboxId, *log);
    if (!snapshot) {
        // Without a snapshot the workspace would be lost: keep the sandbox and try again later.
        spdlog::warn("session {}: sandbox {} kept although idle: no snapshot ({})", sessionId, state.sandboxId,
                     snapshot.error().message);
        return;
    }
    json payload{{"sandbox_id", state.sandboxId}, {"pool", state.pool}, {"reason", "idle"},
                 {"idle_limit_ms", m_options.sandboxIdleReleaseMs}};
    payload.update(*snapshot);
    Action action;
    action.kind = ActionKind::ReleaseSandbox;
    action.state = state;
    action.billing = billingOf(*log);
    std::vector<core::NewEvent> events;
    if (auto tierOutcomeEvent = tierOutcome(pool, state, *log))
        events.push_back(std::move(*tierOutcomeEvent));
    events.push_back(event(core::kind::SandboxReleased, payload));
    auto outcome = appendResult(action, std::move(events));
    if (!outcome.appended)
        return;   // resumed or cancelled meanwhile: the log decides, the sandbox stays held
    if (auto done = pool->release(state.sandboxId); !done)
        spdlog::warn("session {}: idle sandbox {} not released on pool '{}': {}", sessionId, state.sandboxId,
                     pool->name(), done.error().message);
    spdlog::info("session {}: idle sandbox {} given back, workspace in snapshot {}", sessionId, state.sandboxId,
                 payload["snapshot_ref"].get<std::string>());
}

std::optional<StepOutcome> StepEngine::poolTrouble(const Action &action, pool_client::PoolClient &pool, const Error &error)
{
    if (error.code == ErrorCode::Unavailable)
        m_pools.reportUnavailable(pool.name(), error.message);
    if ((error.code == ErrorCode::Unavailable || error.code == ErrorCode::DeadlineExceeded)
        && m_pools.isLost(pool.name())) {
        // The pool has not answered for its whole lost_after window: the sandbox is gone with
        // it. The next step claims a sandbox on another pool and repeats this one call there.
        return appendResult(action, {event(kSandboxLost, {{"sandbox_id", action.state.sandboxId},
                                                           {"pool", pool.name()},
                                                           {"reason", "pool_lost"},
                                                           {"interrupted_call", action.call.id},
                                                           {"error", error.message}})});
    }
    if (error.code == ErrorCode::Unavailable || error.code == ErrorCode::DeadlineExceeded
        || error.code == ErrorCode::Cancelled)
        return StepOutcome{action.kind, false, m_options.retryAfterUnavailableMs, error.message};
    if (error.code == ErrorCode::NotFound && error.message.find("sandbox") != std::string::npos) {
        // The sandbox is gone (pool restarted, sandbox reaped): the next step claims a new one.
        return appendResult(action, {event(core::kind::SandboxFailed,
                                           {{"sandbox_id", action.state.sandboxId},
                                            {"reason", "crashed"},
                                            {"error", error.message}})});
    }
    return std::nullopt;
}

} // namespace paddock::engine
