#pragma once
// The broker's BudgetSource: agents' budgets from a lookup (the agents' store), today's spending
// from the cost index (one SQL sum over today's cost entries, only for agents with a daily budget).
//
// Threads: thread-safe (CostQueries is; the lookup must be).

#include "broker/cost/budgets.h"
#include "broker/store/cost_index.h"

#include <functional>

namespace paddock::cost {

using AgentBudgetLookup = std::function<AgentBudget(const std::string &agent)>;

// Midnight UTC of the day `unixMs` falls in.
int64_t utcDayStartMs(int64_t unixMs);

class IndexedBudgets final : public BudgetSource {
public:
    // lookup may be empty: no agent has a budget.
    IndexedBudgets(store::CostQueries &costs, AgentBudgetLookup lookup) : m_costs(costs), m_lookup(std::move(lookup)) {}
    AgentBudget budgetOf(const std::string &agent) const override;
    int64_t spentTodayMicros(const std::string &agent) const override;

private:
    store::CostQueries &m_costs;
    AgentBudgetLookup m_lookup;
};

} // namespace paddock::cost
