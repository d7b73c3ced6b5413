#include "broker/engine/environment_decider.h"

namespace paddock::engine {

EnvironmentDecider::EnvironmentDecider(store::AgentStore *agents, const placement::PoolSet &pools,
                                       policy::TierPolicy policy, std::string brokerDefaultTier)
    : m_agents(agents), m_pools(pools), m_policy(std::move(policy)), m_defaultTier(std::move(brokerDefaultTier))
{
}

Result<agents::Agent> EnvironmentDecider::agent(const std::string &name) const
{
    if (name.empty() || name == agents::kDefaultAgentName)
        return agents::builtInDefaultAgent(m_defaultTier);
    if (!m_agents)
        return fail(ErrorCode::InvalidArgument, "unknown agent '" + name + "': this broker keeps no agents; submit "
                        "without --agent");
    auto found = m_agents->get(name);
    if (!found && found.error().code == ErrorCode::NotFound)
        return fail(ErrorCode::InvalidArgument, "unknown agent '" + name + "': create it first with `paddockctl agents "
                        "create " + name + "`, or submit without --agent (the built-in agent 'default')");
    return found;
}

std::vector<policy::TierInfo> EnvironmentDecider::tiers() const
{
    std::vector<policy::TierInfo> out;
    for (const auto &tier : m_pools.tierCatalogue())
        out.push_back({tier.name, tier.cpu, tier.memoryBytes, tier.pricePerHourUsd});
    return out;
}

policy::DecisionContext EnvironmentDecider::context(const agents::Agent &agent, policy::SessionFacts facts) const
{
    policy::DecisionContext context;
    context.agent = &agent;
    context.facts = std::move(facts);
    context.policy = &m_policy;
    context.tiers = tiers();
    context.brokerDefaultTier = m_defaultTier;
    return context;
}

std::string EnvironmentDecider::decisionId(const std::string &sessionId, int64_t seq)
{
    return "d-" + sessionId + "-" + std::to_string(seq);
}

} // namespace paddock::engine
