#include "broker/cost/budget_source.h"

#include "common/clock.h"

namespace paddock::cost {

int64_t utcDayStartMs(int64_t unixMs)
{
    constexpr int64_t kDayMs = 86'400'000;
    return unixMs - unixMs % kDayMs;
}

AgentBudget IndexedBudgets::budgetOf(const std::string &agent) const
{
    return m_lookup ? m_lookup(agent) : AgentBudget{};
}

int64_t IndexedBudgets::spentTodayMicros(const std::string &agent) const
{
    auto spent = m_costs.spentByAgentSince(utcDayStartMs(nowUnixMs()));
    if (!spent)
        return 0;
    auto it = spent->find(agent);
    return it != spent->end() ? it->second : 0;
}

} // namespace paddock::cost
