// StepEngine's claim: a sandbox of the session's tier from a pool with room, the workspace of its
// last checkpoint restored into it (after a failover, an idle give-back or a failure), and, when
// the session's next step is a model call, that call made while the pool claims: the sandbox is
// ready by the time the model asks for a command, and the claim and the model's answer are
// recorded together.
//
// Threads: the step workers run these for the session they hold the lease on; the claim (and the
// model call beside it) parks the step, and claimEffect()/claimedWithTurn() run on a worker once every
// call has answered.

#include "broker/engine/step_engine_internal.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace paddock::engine {

namespace {

using nlohmann::json;

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

// Why the sandbox before this claim went: "idle", "failed", "tier_move"... for sandbox.restored.
std::string whySandboxWent(std::span<const core::Event> log)
{
    for (auto it = log.rbegin(); it != log.rend(); ++it) {
        if (it->kind == core::kind::SandboxFailed)
            return "failed";
        if (it->kind == core::kind::SandboxReleased) {
            auto payload = json::parse(it->payload, nullptr, false);
            return payload.is_object() ? payload.value("reason", std::string("released")) : "released";
        }
    }
    return "released";
}

// A pool snapshot an earlier broker recorded instead of a checkpoint (before docs/checkpoints.md):
// the snapshot_ref of the last checkpoint or idle give-back that names no manifest, when no
// manifest came after it. "" when there is none.
std::string legacySnapshotRef(std::span<const core::Event> log)
{
    for (auto it = log.rbegin(); it != log.rend(); ++it) {
        if (it->kind != core::kind::Checkpoint && it->kind != core::kind::SandboxReleased)
            continue;
        const json payload = json::parse(it->payload, nullptr, false);
        if (!payload.is_object())
            continue;
        if (payload.contains("manifest"))
            return {};
        if (payload.contains("snapshot_ref") && payload["snapshot_ref"].is_string())
            return payload["snapshot_ref"];
    }
    return {};
}

json restoreFields(const checkpoints::RestoreResult &restored)
{
    return {{"manifest", restored.manifestId}, {"restored_files", restored.files},
            {"restored_bytes", restored.bytes}, {"restore_ms", restored.durationMs}};
}

// Whether a claim that failed with `code` is tried again (the session waits) rather than ending
// the session: the pool was unreachable, slow, full, refused our credentials for now, or we are
// stopping.
bool claimWorthRetrying(ErrorCode code)
{
    return code == ErrorCode::Unavailable || code == ErrorCode::ResourceExhausted || code == ErrorCode::DeadlineExceeded
        || code == ErrorCode::Cancelled || code == ErrorCode::PermissionDenied;
}

} // namespace

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
StepOutcome StepEngine::waitForPool(const Action &action, const Error &error, const json &line)
{
    if (action.state.lastEventKind == kSandboxWaiting)
        return {action.kind, false, m_options.retryAfterUnavailableMs, error.message};
    json payload{{"tier", action.tier}, {"code", errorCodeName(error.code)}, {"reason", error.message}};
    if (!line.is_null())
        payload.update(line);
    auto outcome = appendResult(action, {event(kSandboxWaiting, payload)});
    outcome.retryAfterMs = m_options.retryAfterUnavailableMs;
    return outcome;
}

std::optional<StepOutcome> StepEngine::waitInLine(const Action &action, const Error *poolsFull)
{
    const placement::PoolSet::TierRoom room = m_pools.room(action.tier);
    const ClaimQueue::Place place =
        m_claimQueue.ask(action.tier, action.state.id, action.state.agent, room.free, nowUnixMs());
    if (place.mayClaim && !poolsFull)
        return std::nullopt;
    const std::string reason = "waiting for a " + action.tier + " sandbox: " + std::to_string(room.inUse) + " of "
        + std::to_string(room.max) + " in use on " + (room.pools == 1 ? "the pool" : "every pool") + "; "
        + std::to_string(place.ahead) + (place.ahead == 1 ? " session" : " sessions")
        + " ahead of this one (free sandboxes go to the waiting agents in turn); "
        + (poolsFull ? poolsFull->message : "add a pool or raise the tier's max_count to wait less");
    return waitForPool(action, Error{ErrorCode::ResourceExhausted, reason},
                       {{"in_use", room.inUse}, {"max", room.max}, {"ahead", place.ahead}, {"waiting", place.waiting}});
}

StepOutcome StepEngine::claimSandbox(const StepRun &run, const Action &action, std::span<const core::Event> log,
                                     std::optional<llm::ModelContext> context)
{
    // While sessions wait for this tier, a newcomer takes its place in the line (claim_queue.h).
    if (m_claimQueue.waiting(action.tier, nowUnixMs()) > 0)
        if (auto wait = waitInLine(action, nullptr))
            return *wait;
    auto pool = m_pools.choose(action.tier);
    if (!pool) {
        if (pool.error().code == ErrorCode::ResourceExhausted)
            return *waitInLine(action, &pool.error());
        return waitForPool(action, pool.error());
    }
    ClaimHistory history{lastLossSinceClaim(log), whySandboxWent(log), {}};
    if (action.state.checkpoint.empty())
        history.legacySnapshot = legacySnapshotRef(log);
    pool_client::PoolClient *client = *pool;
    auto claim = [client, action](std::function<void(Claimed)> done) {
        client->claimAsync(action.tier, action.state.id, action.idempotencyKey, std::move(done));
    };
    llm::ModelAdapter *adapter = action.withModelCall && context ? adapterFor(action) : nullptr;
    if (!adapter) {
        // No model call beside it (or no such model: the step after the claim says so). A session
        // that held a sandbox before (given back idle, lost with its pool, failed) goes on with the
        // workspace of its last checkpoint, restored from the checkpoint store.
        return awaitCall<Claimed>(run, claim, [this, run, client, action, history](Claimed answer) {
            return restoreInto(run, action.state.checkpoint, *client, std::move(answer),
                               [this, client, action, history](Claimed claimed, Restored restored) {
                                   return record(action, claimEffect(action, *client, history, std::move(claimed),
                                                                     std::move(restored)),
                                                 history);
                               });
        });
    }
    auto ask = askModel(action, adapter, std::move(*context));
    return awaitCall<std::pair<Claimed, AskedTurn>>(
        run, bothCalls<Claimed, AskedTurn>(claim, ask),
        [this, run, client, action, history](std::pair<Claimed, AskedTurn> answers) {
            Action after = action;
            after.state.lastSeq = answers.second.second;   // after the answer's model.delta events
            return restoreInto(run, after.state.checkpoint, *client, std::move(answers.first),
                               [this, client, after, history, turn = std::move(answers.second.first)](Claimed claimed,
                                                                                                       Restored restored) {
                                   return claimedWithTurn(after, *client, history, std::move(claimed),
                                                          std::move(restored), turn);
                               });
        });
}

StepOutcome StepEngine::restoreInto(const StepRun &run, const std::string &manifest, pool_client::PoolClient &pool,
                                    Claimed claimed, std::function<StepOutcome(Claimed, Restored)> then)
{
    if (!claimed || manifest.empty() || !m_options.checkpointer) {
        // Nothing to restore (an empty workspace is right), or nowhere to restore it from (said then).
        Restored restored = claimed ? restoreWorkspace(pool, claimed->sandboxId, manifest) : Restored{};
        return then(std::move(claimed), std::move(restored));
    }
    const std::string sandboxId = claimed->sandboxId;
    return awaitCall<Restored>(
        run,
        [this, run, &pool, sandboxId, manifest](std::function<void(Restored)> done) {
            m_options.checkpointer->restoreAsync(pool, sandboxId, manifest, storeWork(run), std::move(done));
        },
        [claimed = std::move(claimed), then = std::move(then)](Restored restored) {
            return then(claimed, std::move(restored));
        });
}

StepOutcome StepEngine::claimedWithTurn(const Action &action, pool_client::PoolClient &pool, const ClaimHistory &history,
                                        Claimed claimed, Restored restored, Result<llm::ModelTurn> turn)
{
    const bool gotOne = claimed.has_value();
    if (!gotOne && !claimWorthRetrying(claimed.error().code))   // so does the session
        return record(action, claimEffect(action, pool, history, std::move(claimed), std::move(restored)));
    Effect claim = claimEffect(action, pool, history, std::move(claimed), std::move(restored));
    if (claim.instead) {
        if (claim.instead->appended)
            return *claim.instead;   // the session paused (its workspace cannot be restored): the turn waits
        // No sandbox now (the pools are full or did not answer): the model's answer is recorded on
        // its own, and the next step claims again.
        StepOutcome outcome = record(action, modelEffect(action, std::move(turn)));
        outcome.retryAfterMs = std::max(outcome.retryAfterMs, claim.instead->retryAfterMs);
        return outcome;
    }
    // The claim's events and the model's. A cancelled model call (the broker is stopping) leaves
    // the claim recorded alone, so the sandbox is not lost. Without a sandbox, the note that the
    // session waits goes last: the next claim's retry then sees it and does not say it again.
    Effect model = modelEffect(action, std::move(turn));
    if (!gotOne)
        std::swap(claim.events, model.events);
    for (auto &e : model.events)
        claim.events.push_back(std::move(e));
    claim.retryAfterMs = std::max(claim.retryAfterMs, model.retryAfterMs);
    if (!gotOne)
        return record(action, std::move(claim));
    return record(action, std::move(claim), history);
}

StepOutcome StepEngine::record(const Action &action, Effect effect, const ClaimHistory &history)
{
    StepOutcome outcome = record(action, std::move(effect));
    if (outcome.appended && !history.lost.is_null())
        m_pools.noteMovedAway(history.lost.value("pool", std::string()), action.state.id);   // the Pools view lists it
    return outcome;
}

StepOutcome StepEngine::record(const Action &action, Effect effect)
{
    if (effect.instead)
        return *effect.instead;
    StepOutcome outcome = appendResult(action, std::move(effect.events));
    outcome.retryAfterMs = std::max(outcome.retryAfterMs, effect.retryAfterMs);
    return outcome;
}

StepEngine::Effect StepEngine::claimEffect(const Action &action, pool_client::PoolClient &pool,
                                           const ClaimHistory &history, Claimed claimed, Restored restored)
{
    Effect effect;
    if (!claimed) {
        const auto code = claimed.error().code;
        if (code == ErrorCode::Unavailable)
            m_pools.reportUnavailable(pool.name(), claimed.error().message);
        if (code == ErrorCode::ResourceExhausted)   // filled up since its last Status: in line with the rest
            (void)m_claimQueue.ask(action.tier, action.state.id, action.state.agent, 0, nowUnixMs());
        const std::string &message = claimed.error().message;
        if (!claimWorthRetrying(code)) {
            effect.events.push_back(event(core::kind::StateChanged,
                                          {{"status", "failed"}, {"reason", "could not claim a sandbox: " + message}}));
        } else if (code == ErrorCode::Cancelled || action.state.lastEventKind == kSandboxWaiting) {
            effect.instead = StepOutcome{action.kind, false, m_options.retryAfterUnavailableMs, message};
        } else {
            // Said once, like every wait for a sandbox: which pool, and what it answered.
            effect.events.push_back(event(kSandboxWaiting, {{"tier", action.tier},
                                                            {"code", errorCodeName(code)},
                                                            {"pool", pool.name()},
                                                            {"reason", "pool '" + pool.name() + "' gave no sandbox: "
                                                                           + message + "; the session tries again"}}));
            effect.retryAfterMs = m_options.retryAfterUnavailableMs;
        }
        return effect;
    }
    m_claimQueue.claimed(action.tier, action.state.id, action.state.agent, nowUnixMs());
    std::vector<core::NewEvent> &events = effect.events;
    if (action.state.status == core::SessionStatus::Queued)
        events.push_back(event(core::kind::StateChanged, {{"status", "running"}}));
    events.push_back(sandboxClaimed(pool.name(), *claimed, m_pools.pricePerHour(pool.name(), claimed->tier)));
    const std::string &manifest = action.state.checkpoint;
    if (!restored) {
        // The sandbox goes back (without waiting: a release that fails leaves it to the pool's reaper).
        pool.releaseAsync(claimed->sandboxId, [](Status) {});
        effect.instead = restoreFailed(action, pool, manifest, restored.error());
        return effect;
    }
    if (const std::string &legacy = history.legacySnapshot; !legacy.empty()) {
        // Recorded by an earlier broker: that pool's own snapshot, restorable where it is.
        auto fromPool = pool.restore(claimed->sandboxId, legacy);
        if (!fromPool)
            spdlog::warn("session {}: snapshot {} of an earlier broker not restored on pool '{}': {}", action.state.id,
                         legacy, pool.name(), fromPool.error().message);
        else
            restored->files = fromPool->fileCount;
    }
    m_pools.noteClaimed(pool.name());
    const json &lost = history.lost;
    if (!lost.is_null()) {
        // A claim after the session's pool was lost is a move: say from where to where, and with
        // which workspace.
        json moved{{"from_pool", lost.value("pool", std::string())},
                   {"from_sandbox_id", lost.value("sandbox_id", std::string())},
                   {"to_pool", pool.name()},
                   {"to_sandbox_id", claimed->sandboxId},
                   {"workspace", manifest.empty() ? "empty" : "restored"}};
        moved.update(restoreFields(*restored));
        moved["note"] = manifest.empty()
            ? "no checkpoint of this session's workspace exists yet, so it continues in an empty workspace on pool '"
                + pool.name() + "'"
            : "restored checkpoint " + manifest.substr(0, 12) + " from " + m_options.checkpointer->store().describe()
                + " into a new sandbox on pool '" + pool.name() + "'";
        if (lost.contains("interrupted_call"))
            moved["repeats_call"] = lost["interrupted_call"];
        events.push_back(event(kSandboxMoved, moved));
        spdlog::info("session {} moved from pool '{}' to pool '{}' ({})", action.state.id,
                     lost.value("pool", std::string()), pool.name(), moved["note"].get<std::string>());
    } else if (!manifest.empty()) {
        json restoredEvent{{"pool", pool.name()}, {"sandbox_id", claimed->sandboxId}, {"tier", claimed->tier},
                           {"after", history.after}};
        restoredEvent.update(restoreFields(*restored));
        events.push_back(event(core::kind::SandboxRestored, restoredEvent));
    }
    return effect;
}

} // namespace paddock::engine
