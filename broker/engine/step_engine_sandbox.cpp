// StepEngine's sandbox steps besides the claim (step_engine_claims.cpp): checkpoints after a step
// and restores into a new sandbox, what a pool's failure means for the step, giving the sandbox
// back at the end and when it sat idle.
//
// Threads: the step workers run these for the session they hold the lease on. releaseIdle runs on
// the idle releaser's thread, without a lease (compare-and-append decides).

#include "broker/engine/step_engine_internal.h"

#include <spdlog/spdlog.h>

#include <climits>

namespace paddock::engine {

namespace {

using nlohmann::json;

} // namespace

namespace {

// What a checkpoint taken for giving a sandbox back adds to sandbox.released.
checkpoints::Outcome<json> workspaceFields(checkpoints::Outcome<checkpoints::TakeResult> taken)
{
    if (!taken)
        return std::unexpected(taken.error());
    json fields{{"manifest", taken->manifestId}, {"checkpoint", taken->unchanged ? "current" : "new"}};
    if (!taken->unchanged) {
        fields["files"] = taken->files;
        fields["size_bytes"] = taken->fileBytes;
        fields["sent_bytes"] = taken->bytesSent;
        fields["checkpoint_ms"] = taken->durationMs;
    }
    return fields;
}

std::unexpected<checkpoints::Failure> noCheckpoints()
{
    return std::unexpected(checkpoints::Failure{checkpoints::FailedAt::Store,
                                                {ErrorCode::Unimplemented, "this broker keeps no checkpoints"}});
}

} // namespace

checkpoints::Executor StepEngine::storeWork(const StepRun &run)
{
    if (!run.park) {
        // Handed back to the thread waiting for the call.
        WaitingThread *here = WaitingThread::current();
        return [here](std::function<void()> work) {
            if (here)
                here->post(std::move(work));
            else
                work();
        };
    }
    // Queued like a parked step's continuation; it stays parked (the work ends in the next pool
    // call or in the checkpoint's completion, which resumes the step).
    return [this, lease = run.lease](std::function<void()> work) {
        resume(lease, [work = std::move(work)] {
            work();
            StepOutcome parked;
            parked.parked = true;
            return parked;
        });
    };
}

checkpoints::Outcome<json> StepEngine::checkpointWorkspace(pool_client::PoolClient &pool, const core::SessionState &state)
{
    if (!m_options.checkpointer)
        return noCheckpoints();
    return workspaceFields(m_options.checkpointer->take(pool, state.sandboxId, state.checkpoint));
}

StepOutcome StepEngine::checkpointWorkspaceThen(const StepRun &run, pool_client::PoolClient &pool,
                                                const core::SessionState &state,
                                                std::function<StepOutcome(Workspace)> then)
{
    if (!m_options.checkpointer)
        return then(noCheckpoints());
    return takeCheckpoint(run, pool, state,
                          [then = std::move(then)](Taken taken) { return then(workspaceFields(std::move(taken))); });
}

StepOutcome StepEngine::takeCheckpoint(const StepRun &run, pool_client::PoolClient &pool,
                                       const core::SessionState &state, std::function<StepOutcome(Taken)> then)
{
    return awaitCall<Taken>(
        run,
        [this, run, &pool, sandboxId = state.sandboxId, base = state.checkpoint](std::function<void(Taken)> done) {
            m_options.checkpointer->takeAsync(pool, sandboxId, base, storeWork(run), std::move(done));
        },
        std::move(then));
}

checkpoints::Outcome<checkpoints::RestoreResult> StepEngine::restoreWorkspace(pool_client::PoolClient &pool,
                                                                              const std::string &sandboxId,
                                                                              const std::string &manifest)
{
    if (manifest.empty())
        return checkpoints::RestoreResult{};   // nothing was ever checkpointed: an empty workspace is right
    if (!m_options.checkpointer)
        return std::unexpected(checkpoints::Failure{
            checkpoints::FailedAt::Store,
            {ErrorCode::NotFound, "this broker keeps no checkpoints, so checkpoint " + manifest + " cannot be restored"}});
    return m_options.checkpointer->restore(pool, sandboxId, manifest);
}

StepOutcome StepEngine::waitForStore(const Action &action, json what, const Error &error)
{
    // Said once in the log (checkpoint.waiting), not once per retry, like sandbox.waiting.
    if (action.state.lastEventKind == core::kind::CheckpointWaiting)
        return {action.kind, false, m_options.retryAfterUnavailableMs, "checkpoint store: " + error.message};
    what["store"] = m_options.checkpointer->store().kind();
    what["code"] = errorCodeName(error.code);
    what["reason"] = error.message;
    auto outcome = appendResult(action, {event(core::kind::CheckpointWaiting, what)});
    outcome.retryAfterMs = m_options.retryAfterUnavailableMs;
    return outcome;
}

StepOutcome StepEngine::restoreFailed(const Action &action, pool_client::PoolClient &pool, const std::string &manifest,
                                      const checkpoints::Failure &failure)
{
    const Error &error = failure.error;
    spdlog::warn("session {}: checkpoint {} not restored on pool '{}': {}", action.state.id, manifest, pool.name(),
                 error.message);
    // A checkpoint the store holds damaged or not at all will not heal by retrying: the session
    // pauses with the reason, and nothing of its log changes. Anything else (the store or the
    // pool did not answer, or the pool failed) is retried.
    const bool lostForGood = failure.at == checkpoints::FailedAt::Store
        && (error.code == ErrorCode::DataLoss || error.code == ErrorCode::NotFound);
    if (!lostForGood) {
        if (failure.at == checkpoints::FailedAt::Pool && error.code == ErrorCode::Unavailable)
            m_pools.reportUnavailable(pool.name(), error.message);
        const bool storeAway = failure.at == checkpoints::FailedAt::Store
            && (error.code == ErrorCode::Unavailable || error.code == ErrorCode::DeadlineExceeded);
        if (storeAway)
            return waitForStore(action, {{"restore", manifest}}, error);
        return {action.kind, false, m_options.retryAfterUnavailableMs,
                "restore of checkpoint " + manifest + " failed: " + error.message};
    }
    return appendResult(action, {event(core::kind::StateChanged,
                                       {{"status", "paused"},
                                        {"reason", "the workspace cannot be restored: " + error.message
                                                       + "; repair the checkpoint store and resume the session, "
                                                         "or cancel it"}})});
}

StepOutcome StepEngine::checkpointFailed(const Action &action, pool_client::PoolClient &pool,
                                         const checkpoints::Failure &failure)
{
    const Error &error = failure.error;
    if (failure.at == checkpoints::FailedAt::Pool)
        if (auto outcome = poolTrouble(action, pool, error))
            return *outcome;
    if (failure.at == checkpoints::FailedAt::Store
        && (error.code == ErrorCode::Unavailable || error.code == ErrorCode::DeadlineExceeded)) {
        // Retried, the step is the same run: the pool answers it from its record under the call's key.
        return waitForStore(action, {{"after_call", action.call.id}}, error);
    }
    // Recorded without its checkpoint, the step's result would outlive the only copy of what it
    // did. The session pauses instead; resumed, the step's result comes from the exec's
    // idempotency record and is recorded with its checkpoint.
    spdlog::warn("session {}: no checkpoint after call {}: {}", action.state.id, action.call.id, error.message);
    return appendResult(action, {event(core::kind::StateChanged,
                                       {{"status", "paused"},
                                        {"reason", "the checkpoint after call " + action.call.id + " could not be kept: "
                                                       + error.message + "; resume the session once that is fixed"}})});
}

checkpoints::Outcome<void> StepEngine::addCheckpoint(const Action &action, pool_client::PoolClient &pool, Taken taken,
                                                     std::vector<core::NewEvent> &events)
{
    if (!taken) {
        if (taken.error().error.code != ErrorCode::Unimplemented)
            return std::unexpected(taken.error());
        spdlog::warn("session {}: pool '{}' takes no checkpoints ({}); upgrade paddock-pool", action.state.id,
                     pool.name(), taken.error().error.message);
        return {};
    }
    if (taken->unchanged || taken->manifestId.empty())
        return {};   // the checkpoint before still describes the workspace
    events.push_back(event(core::kind::Checkpoint, {{"manifest", taken->manifestId},
                                                    {"store", m_options.checkpointer->store().kind()},
                                                    {"base", taken->base},
                                                    {"pool", pool.name()},
                                                    {"sandbox_id", action.state.sandboxId},
                                                    {"after_call", action.call.id},
                                                    {"files", taken->files},
                                                    {"size_bytes", taken->fileBytes},
                                                    {"changed", taken->changed},
                                                    {"removed", taken->removed},
                                                    {"new_chunks", taken->chunksNew},
                                                    {"sent_bytes", taken->bytesSent},
                                                    {"stored_bytes", taken->bytesStored},
                                                    {"scan_ms", taken->scanMs},
                                                    {"duration_ms", taken->durationMs}}));
    return {};
}

StepOutcome StepEngine::releaseSandbox(const StepRun &run, const Action &action, std::span<const core::Event> log)
{
    json payload{{"sandbox_id", action.state.sandboxId}, {"pool", action.state.pool}};
    pool_client::PoolClient *pool = m_pools.find(action.state.pool);
    if (!pool) {
        payload["note"] = "pool '" + action.state.pool + "' is no longer configured";
        return appendResult(action, {event(core::kind::SandboxReleased, payload)});
    }
    // The tier decision's outcome first, while the pool still has the sandbox's samples.
    return tierOutcomeThen(run, pool, action.state, log, [this, run, action, pool, payload](std::optional<core::NewEvent> outcome) {
        std::vector<core::NewEvent> events;
        if (outcome)
            events.push_back(std::move(*outcome));
        return releaseThenAppend(run, action, *pool, payload, std::move(events));
    });
}

StepOutcome StepEngine::releaseThenAppend(const StepRun &run, const Action &action, pool_client::PoolClient &pool,
                                          json payload, std::vector<core::NewEvent> events)
{
    return awaitCall<Status>(
        run,
        [&pool, sandboxId = action.state.sandboxId](std::function<void(Status)> done) {
            pool.releaseAsync(sandboxId, std::move(done));
        },
        [this, action, pool = &pool, payload, events](Status released) mutable {
            if (!released) {
                const bool unavailable = released.error().code == ErrorCode::Unavailable;
                if (unavailable)
                    m_pools.reportUnavailable(pool->name(), released.error().message);
                if (unavailable && m_pools.isLost(pool->name())) {
                    // Nothing to give back: the sandbox went down with its pool.
                    payload["note"] = "pool '" + pool->name() + "' is lost; the sandbox went with it";
                } else if (unavailable || released.error().code == ErrorCode::Cancelled) {
                    return StepOutcome{action.kind, false, m_options.retryAfterUnavailableMs, released.error().message};
                } else {
                    // NotFound: it is gone already, which is what releasing wants.
                    payload["note"] = released.error().message;
                }
            }
            events.push_back(event(core::kind::SandboxReleased, payload));
            return appendResult(action, std::move(events));
        });
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
    // A command that was running when the broker stopped (and the session was paused): its result
    // comes from the pool's record of the run and is recorded, with its checkpoint, before the
    // sandbox goes back; the next pass gives the sandbox back. A command that never started stays
    // for the resumed session to run, once.
    if (auto open = openCommandOf(*log)) {
        const StepOutcome recovered = runTool(StepRun{}, *open);   // waits on this thread
        if (recovered.appended || recovered.note != kNothingRan) {
            spdlog::info("session {}: call {} that ran before the pause: {}", sessionId, open->call.id,
                         recovered.appended ? "result recorded" : recovered.note);
            return;
        }
    }
    auto snapshot = checkpointWorkspace(*pool, state);
    if (!snapshot) {
        // Without a checkpoint the workspace would be lost: keep the sandbox and try again later.
        spdlog::warn("session {}: sandbox {} kept although idle: no checkpoint ({})", sessionId, state.sandboxId,
                     snapshot.error().error.message);
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
    spdlog::info("session {}: idle sandbox {} given back, workspace in checkpoint {}", sessionId, state.sandboxId,
                 payload["manifest"].get<std::string>());
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
