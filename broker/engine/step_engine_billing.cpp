// StepEngine's billing: the cost events for sandbox time and snapshot storage since they were last
// billed, and the budget events (warning, exceeded and a budget_extension review) a step's cost
// calls for. Model tokens are billed with the model's response (step_engine_model.cpp).
//
// Threads: the step workers and the idle releaser run addCosts through appendResult; the budget
// source is called from those threads.

#include "broker/engine/step_engine_internal.h"

#include "broker/review/open_review.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

namespace paddock::engine {

namespace {

using nlohmann::json;

// Sandbox time since it was last billed, at the price the pool reported for the tier at the claim.
void addSandboxCost(const Action &action, const std::string &tier, int64_t now, std::vector<core::NewEvent> &costs)
{
    const core::SessionState &state = action.state;
    const Billing &billing = action.billing;
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
}

// Snapshot storage is billed when a newer checkpoint replaces the latest one, and when the
// session ends (its sandbox is released); not after that (docs/governance.md).
void addStorageCost(const Action &action, const std::vector<core::NewEvent> &events, const std::string &tier,
                    const cost::PriceTable &prices, int64_t now, std::vector<core::NewEvent> &costs)
{
    const core::SessionState &state = action.state;
    const Billing &billing = action.billing;
    const bool newCheckpoint = std::any_of(events.begin(), events.end(),
                                           [](const core::NewEvent &e) { return e.kind == core::kind::Checkpoint; });
    const bool ending = action.kind == ActionKind::ReleaseSandbox && core::isTerminal(state.status);
    if (billing.checkpointBytes > 0 && (newCheckpoint || ending) && now > billing.storageBilledUntilUnixMs
        && prices.storagePerGibMonth > 0) {
        const int64_t ms = now - billing.storageBilledUntilUnixMs;
        core::NewEvent cost = event(core::kind::Cost, {{"kind", "storage"},
                                                        {"agent", state.agent},
                                                        {"tier", tier},
                                                        {"model", ""},
                                                        {"bytes", billing.checkpointBytes},
                                                        {"seconds", static_cast<double>(ms) / 1000.0},
                                                        {"per_gib_month", prices.storagePerGibMonth},
                                                        {"from_unix_ms", billing.storageBilledUntilUnixMs},
                                                        {"until_unix_ms", now}});
        cost.costMicros = cost::storageCostMicros(prices.storagePerGibMonth, billing.checkpointBytes, ms);
        costs.push_back(std::move(cost));
    }
}

// Budgets: checked after a step that cost something, unless the step ends the session or
// already stops it for a review (one pending review at a time). True: not checked.
bool stepEndsOrWaits(const core::SessionState &state, const std::vector<core::NewEvent> &events)
{
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
    return endsOrWaits;
}

// The budget_extension review a session opens when it reached its own or its agent's budget.
core::NewEvent budgetExtensionReview(const core::SessionState &state, const cost::BudgetCheck &check,
                                     const review::ReviewPolicy &policy, int64_t now)
{
    const int64_t extension = std::max<int64_t>(
        1, check.budgetMicros * policy.budgetExtensionPercent / 100);
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
        + std::to_string(policy.budgetExtensionPercent) + "% more";
    request.requester = state.submittedBy;
    request.agent = state.agent;
    request.costMicros = extension;
    request.payload = {{"scope", check.scope}, {"budget_micros", check.budgetMicros},
                       {"spent_micros", check.spentMicros}};
    return review::openReview(request, policy, now);
}

// The budget events of a step that added `added` micros: a warning near the budget; past it,
// budget.exceeded and a budget_extension review. None within budget.
std::vector<core::NewEvent> budgetEventsFor(const core::SessionState &state, int64_t added, const EngineOptions &options,
                                            int64_t now)
{
    std::vector<core::NewEvent> budgetEvents;
    cost::AgentBudget agentBudget;
    int64_t today = 0;
    if (options.budgets) {
        agentBudget = options.budgets->budgetOf(state.agent);
        if (agentBudget.perDayMicros > 0)
            today = options.budgets->spentTodayMicros(state.agent) + added;
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
        budgetEvents.push_back(budgetExtensionReview(state, check, options.reviewPolicy, now));
    }
    return budgetEvents;
}

} // namespace

void StepEngine::addCosts(const Action &action, std::vector<core::NewEvent> &events)
{
    const core::SessionState &state = action.state;
    const Billing &billing = action.billing;
    const int64_t now = nowUnixMs();
    std::vector<core::NewEvent> costs;
    const std::string tier = billing.tier.empty() ? state.tier : billing.tier;
    addSandboxCost(action, tier, now, costs);
    addStorageCost(action, events, tier, m_options.prices, now, costs);

    int64_t added = 0;
    for (const auto &e : costs)
        added += e.costMicros;
    for (const auto &e : events)
        added += e.costMicros;
    const bool endsOrWaits = stepEndsOrWaits(state, events);
    std::vector<core::NewEvent> budgetEvents;
    if (added > 0 && !endsOrWaits)
        budgetEvents = budgetEventsFor(state, added, m_options, now);
    if (costs.empty() && budgetEvents.empty())
        return;
    costs.insert(costs.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
    costs.insert(costs.end(), std::make_move_iterator(budgetEvents.begin()), std::make_move_iterator(budgetEvents.end()));
    events = std::move(costs);
}

} // namespace paddock::engine
