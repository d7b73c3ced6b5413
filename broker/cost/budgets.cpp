#include "broker/cost/budgets.h"

namespace paddock::cost {

BudgetCheck checkBudget(const core::SessionState &before, int64_t sessionCostAfter, int64_t agentTodayAfter,
                        const AgentBudget &agent)
{
    BudgetCheck check;
    auto against = [&](const char *scope, int64_t budget, int64_t spent) {
        if (budget <= 0)
            return false;
        if (spent >= budget) {
            check = {false, true, scope, budget, spent};
            return true;
        }
        if (!before.budgetWarned && spent * 100 >= budget * kWarnPercent && !check.warn)
            check = {true, false, scope, budget, spent};
        return false;
    };
    if (against("session", before.budgetMicros, sessionCostAfter))
        return check;
    against("agent_day", agent.perDayMicros + before.dayAllowanceMicros, agentTodayAfter);
    return check;
}

} // namespace paddock::cost
