// StepEngine's tier steps: moving a session's sandbox to the tier a decision granted (snapshot,
// claim, restore, release), the result of a request_environment once its tier_escalation review is
// decided, and the env.outcome of the decision that gave the held sandbox its tier.
//
// Threads: the step workers run these for the session they hold the lease on; tierOutcome also
// runs on the idle releaser's thread (releaseIdle).

#include "broker/engine/step_engine_internal.h"

#include <spdlog/spdlog.h>

#include <set>

namespace paddock::engine {

namespace {

using nlohmann::json;

} // namespace

StepOutcome StepEngine::moveTier(const StepRun &run, const Action &action, std::span<const core::Event> log)
{
    const auto &state = action.state;
    pool_client::PoolClient *from = m_pools.find(state.pool);
    if (!from) {
        return appendResult(action, {event(core::kind::SandboxFailed,
                                           {{"sandbox_id", state.sandboxId},
                                            {"reason", "pool_lost"},
                                            {"error", "pool '" + state.pool + "' is no longer configured"}})});
    }
    std::string fromTier;
    for (auto it = log.rbegin(); it != log.rend(); ++it) {
        if (it->kind == core::kind::SandboxClaimed) {
            fromTier = json::parse(it->payload, nullptr, false).value("tier", std::string());
            break;
        }
    }
    // Placement first (it reads cached statuses): while no pool can take the tier, retries must not
    // snapshot the workspace again and again.
    auto chosen = m_pools.choose(action.tier);
    if (!chosen)
        return waitForPool(action, chosen.error());   // the session stays where it is
    pool_client::PoolClient *to = *chosen;
    // Each parked while it runs: the outcome of the tier being left (while the pool still has its
    // samples), the checkpoint on the old pool, the claim on the new one, the restore there; then
    // the append, and the old sandbox given back.
    return tierOutcomeThen(run, from, state, log, [this, run, action, from, to, fromTier](std::optional<core::NewEvent> leftTier) {
        return moveWorkspace(run, action, *from, *to, fromTier, std::move(leftTier));
    });
}

StepOutcome StepEngine::moveWorkspace(const StepRun &run, const Action &action, pool_client::PoolClient &fromPool,
                                      pool_client::PoolClient &toPool, const std::string &fromTier,
                                      std::optional<core::NewEvent> leftTier)
{
    pool_client::PoolClient *from = &fromPool;
    pool_client::PoolClient *to = &toPool;
    return checkpointWorkspaceThen(run, fromPool, action.state, [this, run, action, from, to, fromTier, leftTier](Workspace snapshot) {
        if (!snapshot) {
            const Error &error = snapshot.error().error;
            if (snapshot.error().at == checkpoints::FailedAt::Pool && error.code == ErrorCode::Unavailable)
                m_pools.reportUnavailable(from->name(), error.message);
            return StepOutcome{action.kind, false, m_options.retryAfterUnavailableMs,
                               "no checkpoint to move with: " + error.message};
        }
        const std::string manifest = (*snapshot)["manifest"];
        return awaitCall<Claimed>(
            run,
            [to, action](std::function<void(Claimed)> done) {
                to->claimAsync(action.tier, action.state.id, action.idempotencyKey, std::move(done));
            },
            [this, run, action, from, to, fromTier, leftTier, snapshot = *snapshot, manifest](Claimed claimed) {
                return restoreInto(run, manifest, *to, std::move(claimed),
                                   [this, action, from, to, fromTier, leftTier, snapshot, manifest](Claimed claim,
                                                                                                    Restored restored) {
                                       return moved(action, *from, *to, fromTier, leftTier, snapshot, std::move(claim),
                                                    std::move(restored));
                                   });
            });
    });
}

StepOutcome StepEngine::moved(const Action &action, pool_client::PoolClient &from, pool_client::PoolClient &to,
                              const std::string &fromTier, const std::optional<core::NewEvent> &leftTier,
                              const json &snapshot, Claimed claimed, Restored restored)
{
    const auto &state = action.state;
    const std::string manifest = snapshot.value("manifest", std::string());
    if (!claimed)
        return {action.kind, false, m_options.retryAfterUnavailableMs, claimed.error().message};
    if (!restored) {
        to.releaseAsync(claimed->sandboxId, [](Status) {});
        return {action.kind, false, m_options.retryAfterUnavailableMs,
                "checkpoint " + manifest + " not restored: " + restored.error().error.message};
    }
    m_pools.noteClaimed(to.name());
    json released{{"sandbox_id", state.sandboxId}, {"pool", state.pool}, {"reason", "tier_move"}};
    released.update(snapshot);
    std::vector<core::NewEvent> events;
    if (leftTier)
        events.push_back(*leftTier);
    events.push_back(event(core::kind::SandboxReleased, released));
    events.push_back(sandboxClaimed(to.name(), *claimed, m_pools.pricePerHour(to.name(), claimed->tier)));
    events.push_back(event(kSandboxMoved, {{"reason", "tier_override"},
                                           {"from_tier", fromTier},
                                           {"from_pool", state.pool},
                                           {"from_sandbox_id", state.sandboxId},
                                           {"to_tier", claimed->tier},
                                           {"to_pool", to.name()},
                                           {"to_sandbox_id", claimed->sandboxId},
                                           {"manifest", manifest},
                                           {"workspace", manifest.empty() ? "empty" : "restored"},
                                           {"restored_files", restored->files},
                                           {"restored_bytes", restored->bytes},
                                           {"restore_ms", restored->durationMs},
                                           {"note", "moved from tier '" + fromTier + "' to tier '" + claimed->tier
                                                + (manifest.empty() ? "' with an empty workspace"
                                                                    : "' with checkpoint " + manifest.substr(0, 12))}}));
    auto outcome = appendResult(action, std::move(events));
    // Whoever recorded first owns the log: on a lost race the new sandbox goes back, the old stays.
    // Given back without waiting; a release that fails leaves the sandbox to its pool's reaper.
    pool_client::PoolClient &giveBack = outcome.appended ? from : to;
    const std::string giveBackId = outcome.appended ? state.sandboxId : claimed->sandboxId;
    giveBack.releaseAsync(giveBackId, [session = state.id, giveBackId, pool = giveBack.name()](Status done) {
        if (!done)
            spdlog::warn("session {}: sandbox {} on pool '{}' not released after the move: {}", session, giveBackId,
                         pool, done.error().message);
    });
    return outcome;
}

StepOutcome StepEngine::tierEscalationDecided(const Action &action, const EnvironmentDecider &decider,
                                              const agents::Agent &agent)
{
    const core::SessionState &state = action.state;
    const json requested = action.review.value("payload", json::object());
    const std::string reviewId = action.review.value("review_id", std::string());
    const std::string tier = requested.value("tier", stringArg(action.call, "tier"));
    if (action.decision.is_null())
        return {action.kind, false, 0, "review " + reviewId + " is not decided yet"};
    const bool approved = action.decision.value("approved", false);
    const std::string who = action.decision.value("decider", std::string());
    const std::string why = action.decision.value("reason", std::string());
    json result = toolResultBase(action.call);
    result["requested_tier"] = tier;
    result["review_id"] = reviewId;
    result["approved"] = approved;
    result["decider"] = who;
    result["decision_reason"] = why;
    std::vector<core::NewEvent> events;
    if (approved) {
        // The approver chose the tier: a human's decision, recorded like an override, which the
        // next step carries out like any granted request (snapshot, claim, restore).
        policy::TierDecision granted = policy::decideOverride(
            decider.context(agent, {state.agent, state.tags, state.goal, state.playbook}), state.tier, tier, why, who);
        granted.id = EnvironmentDecider::decisionId(state.id, state.lastSeq + 1);
        granted.trigger = "request_environment";
        granted.rule = "review " + reviewId;
        granted.reason = who + " approved review " + reviewId + ": the session moves from " + state.tier + " to "
            + tier + (why.empty() ? std::string() : " (" + why + ")");
        events.push_back(event(core::kind::EnvDecision, granted.toJson()));
        result["decision_id"] = granted.id;
        result["granted"] = true;
        result["granted_by"] = who;
        result["tier"] = tier;
        result["reason"] = granted.reason;
        result["note"] = "granted by " + who + " (review " + reviewId + "): the session moves to tier " + tier
            + " before its next step; /workspace goes with it";
    } else {
        result["decision_id"] = requested.value("decision_id", std::string());
        result["granted"] = false;
        result["tier"] = state.tier;
        result["error"] = (who.empty() && why == "expired"
                               ? "tier " + tier + " was not granted: review " + reviewId + " expired without a decision"
                               : "tier " + tier + " was rejected by " + who + ": " + why)
            + "; the session stays on tier " + state.tier;
    }
    events.push_back(event(core::kind::ToolResult, result));
    return appendResult(action, std::move(events));
}

std::optional<StepEngine::PendingOutcome> StepEngine::pendingOutcome(pool_client::PoolClient *pool,
                                                                    const core::SessionState &state,
                                                                    std::span<const core::Event> log) const
{
    if (!m_options.decider || !pool || state.sandboxId.empty())
        return std::nullopt;
    // The claim being given back.
    size_t claimIndex = log.size();
    for (size_t i = log.size(); i-- > 0;) {
        if (log[i].kind == core::kind::SandboxClaimed) {
            claimIndex = i;
            break;
        }
    }
    if (claimIndex == log.size())
        return std::nullopt;
    const json claim = json::parse(log[claimIndex].payload, nullptr, false);
    const std::string heldTier = claim.is_object() ? claim.value("tier", std::string()) : std::string();
    // The granted decision that chose the held tier and has no outcome yet.
    std::set<std::string> decided;
    std::string decisionId;
    for (auto it = log.rbegin(); it != log.rend() && decisionId.empty(); ++it) {
        if (it->kind != core::kind::EnvOutcome && it->kind != core::kind::EnvDecision)
            continue;
        const json payload = json::parse(it->payload, nullptr, false);
        if (!payload.is_object())
            continue;
        if (it->kind == core::kind::EnvOutcome) {
            decided.insert(payload.value("decision_id", std::string()));
            continue;
        }
        const std::string verdict = payload.value("verdict", std::string());
        const std::string id = payload.value("id", std::string());
        if ((verdict.empty() || verdict == "granted") && payload.value("chosen_tier", std::string()) == heldTier
            && !decided.contains(id))
            decisionId = id;
    }
    if (decisionId.empty())
        return std::nullopt;

    policy::OutcomeInput input;
    input.tier = heldTier;
    input.tiers = m_options.decider->tiers();
    for (const auto &tier : input.tiers) {
        if (tier.name == heldTier) {
            input.cpuLimit = tier.cpu;
            input.memoryLimitBytes = tier.memoryBytes;
        }
    }
    for (size_t i = claimIndex + 1; i < log.size(); ++i) {
        if (log[i].kind != core::kind::ToolResult)
            continue;
        const json result = json::parse(log[i].payload, nullptr, false);
        if (!result.is_object())
            continue;
        const std::string reason = result.value("reason", std::string());
        input.oomKilled = input.oomKilled || reason == "oom_killed";
        input.timedOut = input.timedOut || reason == "timeout" || result.value("timed_out", false);
    }
    return PendingOutcome{std::move(input), decisionId, heldTier, log[claimIndex].timeUnixMs};
}

core::NewEvent StepEngine::outcomeEvent(PendingOutcome pending, const core::SessionState &state,
                                        const Result<std::vector<pool_client::ResourcePoint>> &samples) const
{
    if (samples) {
        for (const auto &sample : *samples)
            pending.input.samples.push_back({sample.timeUnixMs, sample.cpuCores, sample.memoryBytes, sample.cpuPeriods,
                                             sample.cpuThrottledPeriods});
    } else {
        spdlog::debug("session {}: no samples of sandbox {} for the outcome of {}: {}", state.id, state.sandboxId,
                      pending.decisionId, samples.error().message);
    }
    const policy::Outcome outcome = policy::classifyOutcome(pending.input);
    json payload = policy::outcomeJson(pending.decisionId, outcome);
    payload["tier"] = pending.heldTier;
    payload["sandbox_id"] = state.sandboxId;
    return event(core::kind::EnvOutcome, payload);
}

std::optional<core::NewEvent> StepEngine::tierOutcome(pool_client::PoolClient *pool, const core::SessionState &state,
                                                      std::span<const core::Event> log) const
{
    auto pending = pendingOutcome(pool, state, log);
    if (!pending)
        return std::nullopt;
    const int64_t after = pending->claimUnixMs - 1;
    return outcomeEvent(std::move(*pending), state, pool->samples(state.sandboxId, after));
}

StepOutcome StepEngine::tierOutcomeThen(const StepRun &run, pool_client::PoolClient *pool,
                                        const core::SessionState &state, std::span<const core::Event> log,
                                        std::function<StepOutcome(std::optional<core::NewEvent>)> then)
{
    auto pending = pendingOutcome(pool, state, log);
    if (!pending)
        return then(std::nullopt);
    using Samples = Result<std::vector<pool_client::ResourcePoint>>;
    return awaitCall<Samples>(
        run,
        [pool, sandboxId = state.sandboxId, after = pending->claimUnixMs - 1](std::function<void(Samples)> done) {
            pool->samplesAsync(sandboxId, after, std::move(done));
        },
        [this, pending = std::move(*pending), state, then = std::move(then)](Samples samples) {
            return then(outcomeEvent(pending, state, samples));
        });
}

} // namespace paddock::engine
