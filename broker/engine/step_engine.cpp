#include "broker/engine/step_engine.h"

#include "broker/review/open_review.h"
#include "common/address_policy.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <set>

namespace paddock::engine {

namespace {

using nlohmann::json;

// Program output is arbitrary bytes; recorded JSON must stay valid, so invalid UTF-8 is replaced.
std::string dumpJson(const json &j)
{
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

core::NewEvent event(const char *kind, const json &payload)
{
    return core::NewEvent{kind, dumpJson(payload), 0};
}

// Keeps the head and the tail of a long output, which is where compilers and test runners put what
// matters, and says how much was left out.
std::string clipOutput(const std::string &data, bool *clipped)
{
    *clipped = data.size() > kMaxRecordedOutputBytes;
    if (!*clipped)
        return data;
    const size_t head = kMaxRecordedOutputBytes / 8;
    const size_t tail = kMaxRecordedOutputBytes - head;
    return data.substr(0, head) + "\n[... " + std::to_string(data.size() - head - tail)
        + " bytes omitted ...]\n" + data.substr(data.size() - tail);
}

std::string stringArg(const model::ToolCall &call, const char *key)
{
    auto it = call.arguments.find(key);
    return it != call.arguments.end() && it->is_string() ? it->get<std::string>() : std::string();
}

json toolResultBase(const model::ToolCall &call)
{
    return json{{"call_id", call.id}, {"name", call.name}};
}

// Every command the broker runs for a session carries the hosts approved for it; the pool's proxy
// allows them while that command runs (docs/egress.md, "Approved hosts").
std::vector<pools::EgressGrant> egressGrants(const core::SessionState &state)
{
    std::vector<pools::EgressGrant> out;
    for (const auto &h : state.approvedHosts)
        out.push_back({h.host, h.reviewId});
    return out;
}

// Failover events (docs/events.md): the pool holding the session's sandbox was lost; the session
// then claims elsewhere and says so. sandbox.waiting: no pool can take the claim now.
constexpr const char *kSandboxLost = core::kind::SandboxLost;
constexpr const char *kSandboxMoved = core::kind::SandboxMoved;
constexpr const char *kSandboxWaiting = core::kind::SandboxWaiting;

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

// A snapshot of the sandbox's workspace for giving it back: the current checkpoint's when nothing
// changed since, otherwise a new one. {snapshot_ref, snapshot ("checkpoint" or "new")}.
Result<json> workspaceSnapshot(pools::PoolClient &pool, const std::string &sandboxId,
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

core::NewEvent sandboxClaimed(const std::string &pool, const pools::ClaimedSandbox &claimed, double pricePerHour)
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

int64_t nowUnixMs()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch()).count();
}

} // namespace

StepEngine::StepEngine(store::EventStore &store, const pools::PoolSet &pools, ModelLookup models,
                       EngineOptions options)
    : m_store(store), m_pools(pools), m_models(std::move(models)), m_options(std::move(options))
{
}

StepEngine::~StepEngine()
{
    stop();
}

void StepEngine::start()
{
    m_stopping = false;
    for (int i = 0; i < m_options.workers; ++i)
        m_workers.emplace_back([this, i] { workerLoop(i); });
    m_keeper = std::thread([this] { keeperLoop(); });
    if (m_options.sandboxIdleReleaseMs > 0)
        m_idleReleaser = std::thread([this] { idleLoop(); });
}

void StepEngine::stop()
{
    m_stopping = true;
    m_keeperWake.notify_all();
    bool drained = true;
    {
        std::unique_lock lock(m_leasesMutex);
        drained = m_idle.wait_for(lock, std::chrono::milliseconds(m_options.drainMs),
                                  [&] { return m_activeLeases.empty(); });
    }
    if (!drained) {
        spdlog::info("cancelling pool calls of steps still running after {} ms; they resume on restart",
                     m_options.drainMs);
        m_pools.cancelInFlight();
    }
    for (auto &worker : m_workers) {
        if (worker.joinable())
            worker.join();
    }
    m_workers.clear();
    if (m_keeper.joinable())
        m_keeper.join();
    if (m_idleReleaser.joinable())
        m_idleReleaser.join();
}

void StepEngine::workerLoop(int index)
{
    const std::string workerId = m_options.workerPrefix + "-" + std::to_string(index);
    while (!m_stopping) {
        auto lease = m_store.acquireLease(workerId, m_options.leaseMs, m_options.idleWaitMs);
        if (!lease)
            continue;
        {
            std::lock_guard lock(m_leasesMutex);
            m_activeLeases[index] = *lease;
        }
        StepOutcome outcome;
        try {
            outcome = runOneStep(*lease);
        } catch (const std::exception &e) {
            // A bug in one step must not take the broker down; the session is retried later.
            spdlog::error("step of session {} threw: {}", lease->sessionId, e.what());
            outcome.retryAfterMs = m_options.retryAfterUnavailableMs;
        }
        {
            std::lock_guard lock(m_leasesMutex);
            m_activeLeases.erase(index);
            if (m_activeLeases.empty())
                m_idle.notify_all();
        }
        if (!outcome.note.empty())
            spdlog::debug("session {}: {} ({})", lease->sessionId, actionName(outcome.action), outcome.note);
        m_store.releaseLease(*lease, outcome.retryAfterMs);
    }
}

void StepEngine::keeperLoop()
{
    std::unique_lock lock(m_leasesMutex);
    while (!m_stopping) {
        m_keeperWake.wait_for(lock, std::chrono::milliseconds(m_options.leaseMs / 3));
        for (auto &[index, lease] : m_activeLeases) {
            if (!m_store.renewLease(lease, m_options.leaseMs))
                spdlog::warn("lease on session {} expired during a step; its result will lose the race",
                             lease.sessionId);
        }
    }
}

StepOutcome StepEngine::runOneStep(const store::Lease &lease)
{
    auto events = m_store.readEvents(lease.sessionId, 1, INT_MAX);
    if (!events)
        return {ActionKind::None, false, m_options.retryAfterUnavailableMs, events.error().message};
    const Action action = decide(*events);

    switch (action.kind) {
    case ActionKind::None:
        return {};
    case ActionKind::ClaimSandbox:
        return claimSandbox(action, *events);
    case ActionKind::CallModel:
        return callModel(action, *events);
    case ActionKind::RunTool:
        if (action.call.name == model::tool::ProposeChange)
            return proposeChange(action);
        if (action.call.name == model::tool::ReadRecords || action.call.name == model::tool::RequestEnvironment)
            return runBrokerTool(action);
        return runTool(action);
    case ActionKind::Finish: {
        const std::string status = stringArg(action.call, "status") == "failed" ? "failed" : "succeeded";
        json result = toolResultBase(action.call);
        result["ok"] = true;
        return appendResult(action, {event(core::kind::ToolResult, result),
                                     event(core::kind::StateChanged,
                                           {{"status", status}, {"reason", stringArg(action.call, "summary")}})});
    }
    case ActionKind::FailSession:
        return appendResult(action, {event(core::kind::StateChanged, {{"status", "failed"}, {"reason", action.reason}})});
    case ActionKind::ReleaseSandbox:
        return releaseSandbox(action, *events);
    case ActionKind::MoveTier:
        return moveTier(action, *events);
    }
    return {};
}

void StepEngine::addCosts(const Action &action, std::vector<core::NewEvent> &events)
{
    const core::SessionState &state = action.state;
    const Billing &billing = action.billing;
    const int64_t now = nowUnixMs();
    std::vector<core::NewEvent> costs;
    const std::string tier = billing.tier.empty() ? state.tier : billing.tier;
    if (billing.held && billing.pricePerHour > 0 && now > billing.billedUntilUnixMs) {
        const int64_t ms = now - billing.billedUntilUnixMs;
        core::NewEvent cost = event(core::kind::Cost, {{"kind", "sandbox"},
                                                        {"agent", state.agent},
                                                        {"tier", tier},
                                                        {"model", ""},
                                                        {"pool", billing.pool},
                                                        {"sandbox_id", billing.sandboxId},
                                                        {"seconds", static_cast<double>(ms) / 1000.0},
                                                        {"price_per_hour", billing.pricePerHour},
                                                        {"from_unix_ms", billing.billedUntilUnixMs},
                                                        {"until_unix_ms", now}});
        cost.costMicros = cost::sandboxCostMicros(billing.pricePerHour, ms);
        costs.push_back(std::move(cost));
    }
    // Snapshot storage is billed when a newer checkpoint replaces the latest one, and when the
    // session ends (its sandbox is released); not after that (docs/governance.md).
    const bool newCheckpoint = std::any_of(events.begin(), events.end(),
                                           [](const core::NewEvent &e) { return e.kind == core::kind::Checkpoint; });
    const bool ending = action.kind == ActionKind::ReleaseSandbox && core::isTerminal(state.status);
    if (billing.checkpointBytes > 0 && (newCheckpoint || ending) && now > billing.storageBilledUntilUnixMs
        && m_options.prices.storagePerGibMonth > 0) {
        const int64_t ms = now - billing.storageBilledUntilUnixMs;
        core::NewEvent cost = event(core::kind::Cost, {{"kind", "storage"},
                                                        {"agent", state.agent},
                                                        {"tier", tier},
                                                        {"model", ""},
                                                        {"bytes", billing.checkpointBytes},
                                                        {"seconds", static_cast<double>(ms) / 1000.0},
                                                        {"per_gib_month", m_options.prices.storagePerGibMonth},
                                                        {"from_unix_ms", billing.storageBilledUntilUnixMs},
                                                        {"until_unix_ms", now}});
        cost.costMicros = cost::storageCostMicros(m_options.prices.storagePerGibMonth, billing.checkpointBytes, ms);
        costs.push_back(std::move(cost));
    }

    int64_t added = 0;
    for (const auto &e : costs)
        added += e.costMicros;
    for (const auto &e : events)
        added += e.costMicros;
    // Budgets: checked after a step that cost something, unless the step ends the session or
    // already stops it for a review (one pending review at a time).
    bool endsOrWaits = core::isTerminal(state.status) || !state.pendingReviewId.empty();
    for (const auto &e : events) {
        if (e.kind == core::kind::ApprovalRequested)
            endsOrWaits = true;
        if (e.kind == core::kind::StateChanged) {
            auto payload = json::parse(e.payload, nullptr, false);
            auto status = payload.is_object() ? core::statusFromName(payload.value("status", std::string())) : std::nullopt;
            if (status && core::isTerminal(*status))
                endsOrWaits = true;
        }
    }
    std::vector<core::NewEvent> budgetEvents;
    if (added > 0 && !endsOrWaits) {
        cost::AgentBudget agentBudget;
        int64_t today = 0;
        if (m_options.budgets) {
            agentBudget = m_options.budgets->budgetOf(state.agent);
            if (agentBudget.perDayMicros > 0)
                today = m_options.budgets->spentTodayMicros(state.agent) + added;
        }
        const cost::BudgetCheck check = cost::checkBudget(state, state.costMicros + added, today, agentBudget);
        const json figures{{"scope", check.scope}, {"budget_micros", check.budgetMicros},
                           {"spent_micros", check.spentMicros}, {"agent", state.agent}};
        if (check.warn) {
            json warning = figures;
            warning["percent"] = check.budgetMicros ? check.spentMicros * 100 / check.budgetMicros : 0;
            budgetEvents.push_back(event(core::kind::BudgetWarning, warning));
        } else if (check.exceeded) {
            budgetEvents.push_back(event(core::kind::BudgetExceeded, figures));
            const int64_t extension = std::max<int64_t>(
                1, check.budgetMicros * m_options.reviewPolicy.budgetExtensionPercent / 100);
            auto dollars = [](int64_t micros) { return fmt::format("${:.6f}", static_cast<double>(micros) / 1e6); };
            const std::string what = check.scope == "session" ? "session " + state.id + "'s budget"
                                                              : "agent " + state.agent + "'s daily budget";
            review::ReviewRequest request;
            request.kind = review::kind::BudgetExtension;
            request.summary = "extend " + what + " of " + dollars(check.budgetMicros) + " by " + dollars(extension);
            request.change = "budget " + check.scope + ": " + dollars(check.budgetMicros) + " -> "
                + dollars(check.budgetMicros + extension) + " (spent " + dollars(check.spentMicros) + ")";
            request.changeFormat = "text";
            request.impact = "+" + dollars(extension);
            request.justification = "the session reached " + what + " after " + std::to_string(state.steps)
                + " steps and needs more to go on";
            request.policyVerdict = "spent " + dollars(check.spentMicros) + " >= " + what + " "
                + dollars(check.budgetMicros) + "; an extension asks for "
                + std::to_string(m_options.reviewPolicy.budgetExtensionPercent) + "% more";
            request.requester = state.submittedBy;
            request.agent = state.agent;
            request.costMicros = extension;
            request.payload = {{"scope", check.scope}, {"budget_micros", check.budgetMicros},
                               {"spent_micros", check.spentMicros}};
            budgetEvents.push_back(review::openReview(request, m_options.reviewPolicy, now));
        }
    }
    if (costs.empty() && budgetEvents.empty())
        return;
    costs.insert(costs.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
    costs.insert(costs.end(), std::make_move_iterator(budgetEvents.begin()), std::make_move_iterator(budgetEvents.end()));
    events = std::move(costs);
}

StepOutcome StepEngine::appendResult(const Action &action, std::vector<core::NewEvent> events)
{
    addCosts(action, events);
    // Nothing the engine records may hold a secret's value, whoever put it there (a command's
    // output, a model's text, an error message): every payload is redacted on its way to the log.
    if (m_options.secrets) {
        const auto secrets = m_options.secrets->snapshot();
        for (auto &event : events)
            secrets->redactor.redactJsonText(event.payload);
    }
    store::AppendRequest request;
    request.sessionId = action.state.id;
    request.expectedLastSeq = action.state.lastSeq;
    request.events = std::move(events);
    auto appended = m_store.appendSync(std::move(request));
    if (!appended) {
        // Aborted: someone appended first (a cancel, or another worker after our lease expired).
        // The next step derives its action from the new tail.
        return {action.kind, false, 0, appended.error().message};
    }
    return {action.kind, true, 0, {}};
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

StepOutcome StepEngine::callModel(const Action &action, std::span<const core::Event> events)
{
    model::ModelAdapter *adapter = m_models(action.state.model);
    if (!adapter) {
        return appendResult(action, {event(core::kind::StateChanged,
                                           {{"status", "failed"},
                                            {"reason", "no model named '" + action.state.model
                                                 + "' is configured on this broker"}})});
    }
    const model::ModelContext context = buildModelContext(events);
    auto turn = adapter->next(context);
    if (!turn) {
        const auto &error = turn.error();
        if (error.code == ErrorCode::FailedPrecondition) {
            // Configuration problems do not heal by retrying.
            return appendResult(action, {event(core::kind::StateChanged,
                                               {{"status", "failed"}, {"reason", error.message}})});
        }
        auto outcome = appendResult(action, {event(core::kind::ModelError,
                                                   {{"error", error.message}, {"code", errorCodeName(error.code)}})});
        outcome.retryAfterMs = m_options.retryAfterUnavailableMs;
        return outcome;
    }

    json calls = json::array();
    std::vector<core::NewEvent> out;
    for (const auto &call : turn->toolCalls)
        calls.push_back({{"id", call.id}, {"name", call.name}, {"arguments", call.arguments}});
    json response{{"model", turn->model},
                  {"text", turn->text},
                  {"tool_calls", calls},
                  {"usage", {{"input_tokens", turn->usage.inputTokens},
                             {"output_tokens", turn->usage.outputTokens},
                             {"cached_tokens", turn->usage.cachedTokens}}},
                  {"latency_ms", turn->latencyMs},
                  {"attempts", turn->attempts}};
    out.push_back(event(core::kind::ModelResponse, response));
    {
        const std::string modelName = turn->model.empty() ? action.state.model : turn->model;
        const cost::ModelPrice &price = m_options.prices.modelPrice(modelName, action.state.model);
        core::NewEvent cost = event(core::kind::Cost, {{"kind", "model"},
                                                        {"model", modelName},
                                                        {"agent", action.state.agent},
                                                        {"tier", action.state.tier},
                                                        {"input_tokens", turn->usage.inputTokens},
                                                        {"output_tokens", turn->usage.outputTokens},
                                                        {"cached_tokens", turn->usage.cachedTokens},
                                                        {"input_per_million", price.inputPerMillion},
                                                        {"output_per_million", price.outputPerMillion},
                                                        {"cached_per_million", price.cachedPerMillion}});
        cost.costMicros = cost::modelCostMicros(price, turn->usage.inputTokens, turn->usage.outputTokens,
                                                turn->usage.cachedTokens);
        out.push_back(std::move(cost));
    }
    for (const auto &call : turn->toolCalls)
        out.push_back(event(core::kind::ToolCall, {{"call_id", call.id}, {"name", call.name}, {"arguments", call.arguments}}));
    if (turn->toolCalls.empty()) {
        // Without a tool call there is no next step to take: the model has said its last word.
        out.push_back(event(core::kind::StateChanged,
                            {{"status", "succeeded"}, {"reason", "the model answered without calling a tool"}}));
    }
    return appendResult(action, std::move(out));
}

Status StepEngine::addCheckpoint(const Action &action, pools::PoolClient &pool, std::vector<core::NewEvent> &events)
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

StepOutcome StepEngine::runTool(const Action &action)
{
    const model::ToolCall &call = action.call;
    pools::PoolClient *pool = m_pools.find(action.state.pool);
    if (!pool) {
        return appendResult(action, {event(core::kind::SandboxFailed,
                                           {{"sandbox_id", action.state.sandboxId},
                                            {"reason", "pool_lost"},
                                            {"error", "pool '" + action.state.pool + "' is no longer configured"}})});
    }

    json result = toolResultBase(call);
    Status done;
    std::vector<core::NewEvent> egressEvents;   // the command's attempts to reach out, before its result
    // One consistent set of secrets for the whole step: the values injected are the ones redacted.
    std::shared_ptr<const secrets::SecretsSnapshot> secrets;
    if (m_options.secrets)
        secrets = m_options.secrets->snapshot();
    // Output is redacted before it is clipped, so a value cut in two by the clip cannot slip through.
    auto redacted = [&](std::string text) {
        if (secrets)
            secrets->redactor.redactInPlace(text);
        return text;
    };
    if (call.name == model::tool::RunCommand) {
        pools::ExecSpec spec;
        // Granted secrets reach this command's environment only: never a sandbox at start, never the
        // log (the payload names no values, and the output is redacted below).
        std::vector<std::string> missing;
        for (const auto &name : action.state.secrets) {
            if (secrets && secrets->values.contains(name))
                spec.env[name] = secrets->values.at(name);
            else
                missing.push_back(name);
        }
        if (!missing.empty()) {
            std::string names;
            for (const auto &name : missing)
                names += (names.empty() ? "" : ", ") + name;
            result["command"] = stringArg(call, "command");
            result["error"] = "the command did not run: secret(s) " + names + " granted to this session no longer "
                "exist on the broker; set them again with `paddockctl secrets set NAME`, or submit without them";
            return appendResult(action, {event(core::kind::ToolResult, result)});
        }
        spec.sandboxId = action.state.sandboxId;
        spec.argv = {"/bin/sh", "-c", stringArg(call, "command")};
        spec.timeoutMs = call.arguments.value("timeout_ms", m_options.defaultCommandTimeoutMs);
        spec.idempotencyKey = action.idempotencyKey;
        spec.egressGrants = egressGrants(action.state);
        result["command"] = stringArg(call, "command");
        auto outcome = pool->exec(spec);
        if (outcome) {
            bool clippedOut = false;
            bool clippedErr = false;
            result["exit_code"] = outcome->exitCode;
            result["signal"] = outcome->signal;
            result["stdout"] = clipOutput(redacted(std::move(outcome->stdoutData)), &clippedOut);
            result["stderr"] = clipOutput(redacted(std::move(outcome->stderrData)), &clippedErr);
            result["stdout_clipped"] = clippedOut;
            result["stderr_clipped"] = clippedErr;
            result["duration_ms"] = outcome->durationMs;
            result["timed_out"] = outcome->timedOut;
            result["replayed"] = outcome->replayed;
            for (const auto &a : outcome->egress) {
                json e{{"call_id", call.id}, {"host", a.host}, {"port", a.port}, {"address", a.address},
                       {"method", a.method}, {"bytes_out", a.bytesOut}, {"bytes_in", a.bytesIn},
                       {"time_unix_ms", a.timeUnixMs}, {"duration_ms", a.durationMs}};
                if (!a.reason.empty())
                    e["reason"] = a.reason;
                if (!a.detail.empty())
                    e["detail"] = a.detail;
                if (!a.error.empty())
                    e["error"] = a.error;
                if (a.open)
                    e["open"] = true;
                if (a.allowed && !a.reviewId.empty()) {
                    e["review_id"] = a.reviewId;
                    e["detail"] = "approved in review " + a.reviewId;
                }
                egressEvents.push_back(event(a.allowed ? core::kind::EgressAllowed : core::kind::EgressRefused, e));
            }
            if (!outcome->reason.empty())
                result["reason"] = outcome->reason;   // the pool's name for an abnormal end
            // The pool kept a post-mortem of this failure: where an operator finds it.
            if (!outcome->reason.empty() || outcome->exitCode != 0 || outcome->signal != 0)
                result["post_mortem"] = {{"pool", pool->name()}, {"sandbox_id", action.state.sandboxId}};
        } else {
            done = std::unexpected(outcome.error());
        }
    } else if (call.name == model::tool::WriteFile) {
        const std::string content = stringArg(call, "content");
        done = pool->writeFile(action.state.sandboxId, stringArg(call, "path"), content);
        if (done) {
            result["path"] = stringArg(call, "path");
            result["bytes"] = content.size();
        }
    } else if (call.name == model::tool::ReadFile) {
        auto content = pool->readFile(action.state.sandboxId, stringArg(call, "path"));
        if (content) {
            bool clipped = false;
            result["path"] = stringArg(call, "path");
            result["content"] = clipOutput(redacted(std::move(*content)), &clipped);
            result["content_clipped"] = clipped;
        } else {
            done = std::unexpected(content.error());
        }
    } else {
        result["error"] = "unknown tool '" + call.name + "'; the tools are run_command, write_file, read_file, "
            "read_records, request_environment, propose_change and finish";
    }

    if (!done) {
        const auto &error = done.error();
        if (auto outcome = poolTrouble(action, *pool, error))
            return *outcome;
        // Anything else is the tool's own failure (a missing file, say): the model gets to see it.
        result["error"] = error.message;
        if (error.code == ErrorCode::FailedPrecondition && error.message.find("has died") != std::string::npos)
            result["post_mortem"] = {{"pool", pool->name()}, {"sandbox_id", action.state.sandboxId}};   // reason "crashed"
    }
    egressEvents.push_back(event(core::kind::ToolResult, result));
    // A snapshot after every step that can change the workspace, recorded with the step's result:
    // if the pool is lost later, the session resumes from here and repeats at most the one step in
    // flight (docs/deployment.md has the figures behind "every step").
    if (done && (call.name == model::tool::RunCommand || call.name == model::tool::WriteFile)) {
        // The pool ran the step but did not answer for its snapshot: recorded now, the step's
        // result would outlive the only copy of what it did to the workspace (a move restores the
        // snapshot before it and goes on after it). Not recorded, the step is retried: on this
        // pool its result comes from the exec's idempotency record; once the pool is lost it is
        // the one call repeated on another (tests/integration/multi_host_test.cpp). poolTrouble
        // decides which, as for the exec itself (addCheckpoint fails only with its codes).
        if (auto checkpointed = addCheckpoint(action, *pool, egressEvents); !checkpointed)
            if (auto outcome = poolTrouble(action, *pool, checkpointed.error()))
                return *outcome;
    }
    return appendResult(action, std::move(egressEvents));
}

StepOutcome StepEngine::releaseSandbox(const Action &action, std::span<const core::Event> log)
{
    json payload{{"sandbox_id", action.state.sandboxId}, {"pool", action.state.pool}};
    std::vector<core::NewEvent> events;
    if (pools::PoolClient *pool = m_pools.find(action.state.pool)) {
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

StepOutcome StepEngine::moveTier(const Action &action, std::span<const core::Event> log)
{
    const auto &state = action.state;
    pools::PoolClient *from = m_pools.find(state.pool);
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
    auto pool = m_pools.choose(action.tier);
    if (!pool)
        return waitForPool(action, pool.error());   // the session stays where it is
    auto snapshot = workspaceSnapshot(*from, state.sandboxId, log);
    if (!snapshot) {
        if (snapshot.error().code == ErrorCode::Unavailable)
            m_pools.reportUnavailable(from->name(), snapshot.error().message);
        return {action.kind, false, m_options.retryAfterUnavailableMs,
                "no snapshot to move with: " + snapshot.error().message};
    }
    const std::string ref = (*snapshot)["snapshot_ref"];
    // The outcome of the tier being left, while the pool still has its samples.
    auto leftTier = tierOutcome(from, state, log);
    auto claimed = (*pool)->claim(action.tier, state.id, action.idempotencyKey);
    if (!claimed)
        return {action.kind, false, m_options.retryAfterUnavailableMs, claimed.error().message};
    auto restored = (*pool)->restore(claimed->sandboxId, ref);
    if (!restored) {
        (void)(*pool)->release(claimed->sandboxId);
        return {action.kind, false, m_options.retryAfterUnavailableMs,
                "snapshot " + ref + " not restored: " + restored.error().message};
    }
    m_pools.noteClaimed((*pool)->name());
    json released{{"sandbox_id", state.sandboxId}, {"pool", state.pool}, {"reason", "tier_move"}};
    released.update(*snapshot);
    std::vector<core::NewEvent> events;
    if (leftTier)
        events.push_back(std::move(*leftTier));
    events.push_back(event(core::kind::SandboxReleased, released));
    events.push_back(sandboxClaimed((*pool)->name(), *claimed, m_pools.pricePerHour((*pool)->name(), claimed->tier)));
    events.push_back(event(kSandboxMoved, {{"reason", "tier_override"},
                                           {"from_tier", fromTier},
                                           {"from_pool", state.pool},
                                           {"from_sandbox_id", state.sandboxId},
                                           {"to_tier", claimed->tier},
                                           {"to_pool", (*pool)->name()},
                                           {"to_sandbox_id", claimed->sandboxId},
                                           {"snapshot_ref", ref},
                                           {"workspace", "restored"},
                                           {"restored_files", restored->fileCount},
                                           {"note", "moved from tier '" + fromTier + "' to tier '" + claimed->tier
                                                + "' with snapshot " + ref}}));
    auto outcome = appendResult(action, std::move(events));
    // Whoever recorded first owns the log: on a lost race the new sandbox goes back, the old stays.
    pools::PoolClient *giveBack = outcome.appended ? from : *pool;
    const std::string giveBackId = outcome.appended ? state.sandboxId : claimed->sandboxId;
    if (auto done = giveBack->release(giveBackId); !done)
        spdlog::warn("session {}: sandbox {} on pool '{}' not released after the move: {}", state.id, giveBackId,
                     giveBack->name(), done.error().message);
    return outcome;
}

void StepEngine::idleLoop()
{
    const auto period = std::chrono::milliseconds(std::clamp<int64_t>(m_options.sandboxIdleReleaseMs / 4, 10, 1000));
    std::unique_lock lock(m_leasesMutex);
    while (!m_stopping) {
        m_keeperWake.wait_for(lock, period);
        if (m_stopping)
            break;
        lock.unlock();
        store::SessionQuery query;
        query.statuses = {core::SessionStatus::Paused, core::SessionStatus::WaitingApproval};
        query.pageSize = 1000;
        for (;;) {
            auto page = m_store.listSessions(query);
            if (!page) {
                spdlog::warn("idle sandbox release: cannot list paused sessions: {}", page.error().message);
                break;
            }
            for (const auto &session : page->sessions) {
                if (!session.sandboxId.empty()
                    && nowUnixMs() - session.updatedUnixMs >= m_options.sandboxIdleReleaseMs && !m_stopping) {
                    try {
                        releaseIdle(session.id);
                    } catch (const std::exception &e) {
                        spdlog::error("idle release of session {} threw: {}", session.id, e.what());
                    }
                }
            }
            if (page->nextPageToken.empty())
                break;
            query.pageToken = page->nextPageToken;
        }
        lock.lock();
    }
}

void StepEngine::releaseIdle(const std::string &sessionId)
{
    auto log = m_store.readEvents(sessionId, 1, INT_MAX);
    if (!log)
        return;
    const core::SessionState state = core::foldEvents(*log);
    if ((state.status != core::SessionStatus::Paused && state.status != core::SessionStatus::WaitingApproval)
        || state.sandboxId.empty())
        return;
    pools::PoolClient *pool = m_pools.find(state.pool);
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

namespace {

// "+40 -3" of a unified diff.
std::string diffStat(const std::string &diff)
{
    int added = 0, removed = 0;
    size_t start = 0;
    while (start < diff.size()) {
        size_t end = diff.find('\n', start);
        if (end == std::string::npos)
            end = diff.size();
        const std::string_view line(diff.data() + start, end - start);
        if (line.starts_with("+") && !line.starts_with("+++"))
            ++added;
        else if (line.starts_with("-") && !line.starts_with("---"))
            ++removed;
        start = end + 1;
    }
    return "+" + std::to_string(added) + " -" + std::to_string(removed);
}

} // namespace

Status StepEngine::applyChange(const Action &action, pools::PoolClient *pool, const json &args, json &result)
{
    const std::string kind = args.value("kind", std::string(review::kind::BulkChange));
    const std::string change = args.value("change", std::string());
    const json targets = args.value("targets", json::array());
    if (kind == review::kind::EgressException) {
        // The approval.decided before this step put the host in the session's approved hosts: every
        // later command carries it. What is left is to say what that means on the session's tier.
        const std::string host = targets.empty() ? std::string() : targets.front().get<std::string>();
        const std::string reviewId = action.decision.value("review_id", std::string());
        result["host"] = host;
        const auto tiers = m_pools.tierCatalogue();
        std::vector<std::string> withNetwork;
        for (const auto &t : tiers)
            if (t.allowlistNetwork)
                withNetwork.push_back(t.name);
        const auto tier = std::find_if(tiers.begin(), tiers.end(), [&](const pools::TierStatus &t) {
            return t.name == action.state.tier;
        });
        if (tier != tiers.end() && !tier->allowlistNetwork) {
            result["reachable"] = false;
            result["tiers_with_network"] = withNetwork;
            std::string note = "approved, but tier '" + action.state.tier + "' has no network at all (network = \"none\"): "
                "no command reaches " + host + " while the session runs on it. ";
            if (withNetwork.empty()) {
                note += "No tier the pools offer has an allowlist; an operator can add one (network = \"allowlist\" in "
                        "pool.toml).";
            } else {
                std::string names;
                for (const auto &name : withNetwork)
                    names += (names.empty() ? "" : ", ") + name;
                note += "Tiers with an allowlist: " + names + "; an engineer can move the session with `paddockctl override "
                    + action.state.id + " " + withNetwork.front() + " --reason TEXT`, and the approval goes with it.";
            }
            result["note"] = note;
            return {};
        }
        result["reachable"] = true;
        result["note"] = "approved in review " + reviewId + ": this session's later commands reach " + host
            + " through the pool's egress proxy; metadata, loopback and private addresses stay refused unless the "
              "tier's own allowlist names that range";
        return {};
    }
    if (kind == review::kind::SecretAccess) {
        result["secret"] = targets.empty() ? json("") : targets.front();
        result["note"] = "granted: the secret is in the environment of this session's later commands";
        return {};
    }
    if (args.value("change_format", std::string()) == "records") {
        if (!m_options.writeRecords)
            return fail(ErrorCode::FailedPrecondition, "this broker keeps no agent records, so the records were not "
                                                       "written");
        const json records = json::parse(change, nullptr, false);
        if (auto done = m_options.writeRecords(action.state.agent, records); !done)
            return done;
        result["records_written"] = records.size();
        return {};
    }
    if (args.value("change_format", std::string()) == "text")
        return fail(ErrorCode::InvalidArgument, "a bulk_change needs change_format diff or records to be applied");
    if (!pool)
        return fail(ErrorCode::Unavailable, "pool '" + action.state.pool + "' is no longer configured");
    // The diff goes into the workspace and `patch` applies it there, inside the sandbox.
    const std::string file = ".paddock-change-" + action.call.id + ".diff";
    if (auto written = pool->writeFile(action.state.sandboxId, file, change); !written)
        return written;
    pools::ExecSpec spec;
    spec.sandboxId = action.state.sandboxId;
    spec.argv = {"/bin/sh", "-c", "patch -p1 --batch --forward -i '" + file + "'; status=$?; rm -f '" + file
                                      + "'; exit $status"};
    spec.timeoutMs = m_options.defaultCommandTimeoutMs;
    spec.idempotencyKey = action.idempotencyKey;
    spec.egressGrants = egressGrants(action.state);
    auto outcome = pool->exec(spec);
    if (!outcome)
        return std::unexpected(outcome.error());
    bool clipped = false;
    result["stdout"] = clipOutput(outcome->stdoutData, &clipped);
    if (outcome->exitCode != 0 || outcome->signal != 0)
        return fail(ErrorCode::FailedPrecondition, "the diff did not apply (patch exited "
                                                       + std::to_string(outcome->exitCode) + "): "
                                                       + clipOutput(outcome->stdoutData + outcome->stderrData, &clipped));
    result["applied"] = true;
    result["files"] = targets;
    return {};
}

std::optional<StepOutcome> StepEngine::poolTrouble(const Action &action, pools::PoolClient &pool, const Error &error)
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

StepOutcome StepEngine::proposeChange(const Action &action)
{
    const model::ToolCall &call = action.call;
    json result = toolResultBase(call);
    json args = call.arguments.is_object() ? call.arguments : json::object();
    const std::string kind = args.value("kind", std::string(review::kind::BulkChange));
    args["kind"] = kind;
    auto refuse = [&](const std::string &why) {
        result["error"] = "propose_change: " + why;
        return appendResult(action, {event(core::kind::ToolResult, result)});
    };
    if (kind != review::kind::BulkChange && kind != review::kind::EgressException && kind != review::kind::SecretAccess)
        return refuse("kind '" + kind + "' is not one of bulk_change, egress_exception, secret_access");
    const json targets = args.value("targets", json::array());
    if (!targets.is_array() || targets.empty()
        || !std::all_of(targets.begin(), targets.end(), [](const json &t) { return t.is_string() && !t.get<std::string>().empty(); }))
        return refuse("targets must be a non-empty list of names (files, record keys, a host or a secret)");
    const std::string change = args.value("change", std::string());
    std::string format = args.value("change_format", std::string());
    if (format.empty())
        format = kind != review::kind::BulkChange ? "targets" : !change.empty() && change.front() == '[' ? "records" : "diff";
    args["change_format"] = format;
    int recordCount = 0;
    if (format == "records") {
        const json records = json::parse(change, nullptr, false);
        if (!records.is_array() || !std::all_of(records.begin(), records.end(), [](const json &r) {
                return r.is_object() && r.contains("key") && r["key"].is_string() && r.contains("value");
            }))
            return refuse("a records change is a JSON array of {\"key\": \"...\", \"value\": ...} objects");
        recordCount = static_cast<int>(records.size());
    }
    if ((kind == review::kind::EgressException || kind == review::kind::SecretAccess) && targets.size() != 1)
        return refuse("name exactly one " + std::string(kind == review::kind::SecretAccess ? "secret" : "host")
                      + " in targets");
    if (kind == review::kind::EgressException) {
        const std::string host = targets.front();
        if (auto grant = pool::egress::Grant::parse(host, ""); !grant)
            return refuse(grant.error().message);
        const auto &approved = action.state.approvedHosts;
        const auto known = std::find_if(approved.begin(), approved.end(),
                                        [&](const core::ApprovedHost &h) { return h.host == host; });
        if (known != approved.end() && action.decision.is_null()) {
            result["host"] = host;
            result["note"] = "already approved for this session in review " + known->reviewId;
            return appendResult(action, {event(core::kind::ToolResult, result)});
        }
    }
    if (kind == review::kind::SecretAccess) {
        const std::string name = targets.front();
        const auto &granted = action.state.secrets;
        if (std::find(granted.begin(), granted.end(), name) != granted.end() && action.decision.is_null()) {
            result["secret"] = name;
            result["note"] = "already granted to this session";
            return appendResult(action, {event(core::kind::ToolResult, result)});
        }
        if (!m_options.secrets || !m_options.secrets->snapshot()->values.contains(name))
            return refuse("the broker holds no secret named '" + name + "'; ask an operator to set it "
                          "(`paddockctl secrets set " + name + "`)");
    }
    pools::PoolClient *pool = m_pools.find(action.state.pool);

    auto applyAndRecord = [&]() {
        auto applied = applyChange(action, pool, args, result);
        std::vector<core::NewEvent> out;
        if (!applied) {
            if (pool) {
                if (auto outcome = poolTrouble(action, *pool, applied.error()))
                    return *outcome;
            } else if (applied.error().code == ErrorCode::Unavailable) {   // its pool left the config
                return StepOutcome{action.kind, false, m_options.retryAfterUnavailableMs, applied.error().message};
            }
            result["error"] = applied.error().message;
        }
        out.push_back(event(core::kind::ToolResult, result));
        // Unlike a command, an applied change is recorded even when the pool did not answer for
        // its snapshot: applying it twice would fail where the first one succeeded.
        if (applied && result.value("applied", false) && pool)
            (void)addCheckpoint(action, *pool, out);
        return appendResult(action, std::move(out));
    };

    if (!action.decision.is_null()) {
        const json &decision = action.decision;
        const bool approved = decision.value("approved", false);
        result["review_id"] = decision.value("review_id", std::string());
        result["approved"] = approved;
        result["decider"] = decision.value("decider", std::string());
        result["decision_reason"] = decision.value("reason", std::string());
        if (!approved) {
            const std::string reason = decision.value("reason", std::string());
            const std::string decider = decision.value("decider", std::string());
            result["error"] = decider.empty() && reason == "expired"
                ? "the change was not applied: review " + result["review_id"].get<std::string>()
                      + " expired without a decision"
                : "the change was rejected by " + decider + ": " + reason;
            return appendResult(action, {event(core::kind::ToolResult, result)});
        }
        return applyAndRecord();
    }

    const auto &policy = m_options.reviewPolicy;
    const int targetCount = static_cast<int>(targets.size());
    std::string verdict;
    if (kind == review::kind::EgressException)
        verdict = "a host outside the tier's allowlist always needs review";
    else if (kind == review::kind::SecretAccess)
        verdict = "a secret not granted at submit always needs review";
    else if (format == "records" && recordCount > policy.recordWriteLimit)
        verdict = std::to_string(recordCount) + " record writes > record_write_limit "
            + std::to_string(policy.recordWriteLimit);
    else if (targetCount > policy.bulkTargetLimit)
        verdict = std::to_string(targetCount) + " targets > bulk_target_limit " + std::to_string(policy.bulkTargetLimit);
    if (verdict.empty()) {
        result["review"] = "not needed: " + std::to_string(targetCount) + " targets within policy";
        return applyAndRecord();
    }

    review::ReviewRequest request;
    request.kind = kind;
    request.change = change.empty() ? targets.dump() : change;
    request.changeFormat = format;
    request.targetCount = targetCount;
    request.justification = args.value("justification", std::string());
    request.policyVerdict = verdict;
    request.requester = action.state.submittedBy;
    request.agent = action.state.agent;
    request.toolCallId = call.id;
    const std::string first = targets.front();
    if (kind == review::kind::EgressException) {
        request.summary = "reach host " + first + " from session " + action.state.id;
        request.impact = "1 host";
        request.payload = {{"host", first}};
    } else if (kind == review::kind::SecretAccess) {
        request.summary = "use secret " + first + " in session " + action.state.id;
        request.impact = "1 secret";
        request.payload = {{"secret", first}};
    } else if (format == "records") {
        request.summary = "write " + std::to_string(recordCount) + " durable records of agent " + action.state.agent;
        request.impact = std::to_string(recordCount) + " records";
    } else {
        request.summary = "change " + std::to_string(targetCount) + " files (" + first
            + (targetCount > 1 ? ", ..." : "") + ")";
        request.impact = std::to_string(targetCount) + " files, " + diffStat(change);
    }
    request.payload["targets"] = targets;
    return appendResult(action, {review::openReview(request, policy, nowUnixMs())});
}

StepOutcome StepEngine::runBrokerTool(const Action &action)
{
    const model::ToolCall &call = action.call;
    const core::SessionState &state = action.state;
    json result = toolResultBase(call);
    std::vector<core::NewEvent> events;
    auto answer = [&]() {
        events.push_back(event(core::kind::ToolResult, result));
        return appendResult(action, std::move(events));
    };
    const EnvironmentDecider *decider = m_options.decider;
    if (!decider) {
        result["error"] = call.name + " is not available: this broker was started without agents and tier policy";
        return answer();
    }
    auto agent = decider->agent(state.agent);
    if (!agent) {
        if (agent.error().code == ErrorCode::Unavailable)
            return {action.kind, false, m_options.retryAfterUnavailableMs, agent.error().message};
        result["error"] = agent.error().message;
        return answer();
    }

    if (call.name == model::tool::ReadRecords) {
        std::vector<std::string> keys;
        if (auto it = call.arguments.find("keys"); it != call.arguments.end() && it->is_array()) {
            for (const auto &key : *it) {
                if (key.is_string())
                    keys.push_back(key.get<std::string>());
            }
        }
        const std::string prefix = stringArg(call, "prefix");
        std::map<std::string, std::string> found;
        if (store::AgentStore *agentStore = decider->agentStore(); agentStore && agent->name != agents::kDefaultAgentName) {
            auto records = agentStore->records(agent->name, keys, prefix);
            if (!records)
                return {action.kind, false, m_options.retryAfterUnavailableMs, records.error().message};
            found = std::move(*records);
        }
        json records = json::object();
        for (const auto &[key, text] : found) {
            auto value = json::parse(text, nullptr, false);
            records[key] = value.is_discarded() ? json(text) : value;
        }
        json missing = json::array();
        for (const auto &key : keys) {
            if (!found.contains(key))
                missing.push_back(key);
        }
        result["agent"] = agent->name;
        result["records"] = records;
        result["count"] = found.size();
        if (!missing.empty())
            result["missing"] = missing;
        return answer();
    }

    // request_environment {tier, reason}
    if (!action.review.is_null())
        return tierEscalationDecided(action, *decider, *agent);
    const std::string tier = stringArg(call, "tier");
    if (tier.empty()) {
        result["error"] = "request_environment needs a tier, e.g. {\"tier\": \"standard\", \"reason\": \"the build needs "
                          "4 GiB\"}";
        return answer();
    }
    const std::string reason = stringArg(call, "reason");
    const auto context = decider->context(*agent, {state.agent, state.tags, state.goal, state.playbook});
    policy::TierDecision decision = policy::decideRequest(context, state.tier, tier, reason);
    decision.id = EnvironmentDecider::decisionId(state.id, state.lastSeq + 1);
    events.push_back(event(core::kind::EnvDecision, decision.toJson()));
    result["decision_id"] = decision.id;
    result["requested_tier"] = tier;
    result["tier"] = decision.chosenTier;
    result["reason"] = decision.reason;
    switch (decision.verdict) {
    case policy::Verdict::Granted:
        result["granted"] = true;
        result["note"] = tier == state.tier ? "the session already runs on tier " + tier
                                            : "the session moves to tier " + tier + " before its next step; /workspace goes with it";
        break;
    case policy::Verdict::Refused:
        result["granted"] = false;
        result["error"] = "refused: " + decision.reason;
        break;
    case policy::Verdict::NeedsReview: {
        // Beyond the bound a human decides: the call waits for a tier_escalation review, and its
        // result is written once the review is decided (tierEscalationDecided).
        double fromPrice = 0, toPrice = 0;
        for (const auto &info : context.tiers) {
            if (info.name == state.tier)
                fromPrice = info.pricePerHourUsd;
            if (info.name == tier)
                toPrice = info.pricePerHourUsd;
        }
        review::ReviewRequest request;
        request.kind = review::kind::TierEscalation;
        request.summary = "move session " + state.id + " from tier " + state.tier + " to tier " + tier;
        request.change = "session " + state.id + ": tier " + state.tier + " -> " + tier;
        request.changeFormat = "text";
        request.impact = fmt::format("{}${:.4f}/h ({} ${:.4f}/h -> {} ${:.4f}/h)", toPrice >= fromPrice ? "+" : "-",
                                     std::abs(toPrice - fromPrice), state.tier, fromPrice, tier, toPrice);
        request.costMicros = std::llround((toPrice - fromPrice) * 1e6);   // per hour on the new tier
        request.justification = reason;
        request.policyVerdict = decision.reason;
        request.requester = state.submittedBy;
        request.agent = state.agent;
        request.toolCallId = call.id;
        request.targetCount = 1;
        request.payload = {{"tier", tier}, {"from_tier", state.tier}, {"decision_id", decision.id},
                           {"reason", reason}, {"max_tier_without_review", decision.maxTierWithoutReview}};
        events.push_back(review::openReview(request, m_options.reviewPolicy, nowUnixMs()));
        return appendResult(action, std::move(events));
    }
    }
    return answer();
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

std::optional<core::NewEvent> StepEngine::tierOutcome(pools::PoolClient *pool, const core::SessionState &state,
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
    if (auto samples = pool->samples(state.sandboxId, log[claimIndex].timeUnixMs - 1)) {
        for (const auto &sample : *samples)
            input.samples.push_back({sample.timeUnixMs, sample.cpuCores, sample.memoryBytes, sample.cpuPeriods,
                                     sample.cpuThrottledPeriods});
    } else {
        spdlog::debug("session {}: no samples of sandbox {} for the outcome of {}: {}", state.id, state.sandboxId,
                      decisionId, samples.error().message);
    }
    const policy::Outcome outcome = policy::classifyOutcome(input);
    json payload = policy::outcomeJson(decisionId, outcome);
    payload["tier"] = heldTier;
    payload["sandbox_id"] = state.sandboxId;
    return event(core::kind::EnvOutcome, payload);
}

} // namespace paddock::engine
