#pragma once
// Budgets: per session (Session.budget_micros, from the submit or the agent's
// budget_per_session_micros) and per agent per UTC day (the agent's budget_per_day_micros).
// A budget.warning at 80% (once per budget), at 100% budget.exceeded and a budget_extension review
// that pauses the session (docs/governance.md, "Cost and budgets").
//
// Threads: checkBudget is pure. BudgetSource implementations are called from step workers and
// gRPC threads at once and must be thread-safe.

#include "broker/core/session_state.h"

#include <cstdint>
#include <string>

namespace paddock::cost {

struct AgentBudget {
    int64_t perSessionMicros = 0;   // 0: none
    int64_t perDayMicros = 0;       // 0: none
};

// Where budgets and today's spending come from: the agents (docs/governance.md) and the cost index.
class BudgetSource {
public:
    virtual ~BudgetSource() = default;
    virtual AgentBudget budgetOf(const std::string &agent) const = 0;
    // The cost of the agent's sessions since the start of the current UTC day.
    virtual int64_t spentTodayMicros(const std::string &agent) const = 0;
};

inline constexpr int kWarnPercent = 80;

struct BudgetCheck {
    bool warn = false;          // append budget.warning
    bool exceeded = false;      // append budget.exceeded and open a budget_extension review
    std::string scope;          // "session" or "agent_day"
    int64_t budgetMicros = 0;   // the budget in question
    int64_t spentMicros = 0;    // against it
};

// The budget events a step should append, given the session before the step (its budget and
// whether it was warned), its cost after the step, and the agent's spending today after the step.
// Exceeding wins over warning; the session's own budget is checked before the day's.
BudgetCheck checkBudget(const core::SessionState &before, int64_t sessionCostAfter, int64_t agentTodayAfter,
                        const AgentBudget &agent);

} // namespace paddock::cost
