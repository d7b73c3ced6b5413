#pragma once
// What the broker needs to decide a session's tier (docs/governance.md): the agent (stored, or the
// built-in "default"), the tier catalogue the pools offer, and the policy's tier rules. Shared by
// the submit and override paths (broker/server) and the step engine (request_environment, outcomes).
//
// Threads: every method may be called from any thread (the agent store and the pool set are
// thread-safe; the policy is read-only after construction).

#include "broker/agents/agent.h"
#include "broker/policy/environment.h"
#include "broker/policy/outcome.h"
#include "broker/placement/pool_set.h"
#include "broker/store/agent_store.h"

#include <string>
#include <vector>

namespace paddock::engine {

class EnvironmentDecider {
public:
    // agents may be nullptr (tests without a database): only the built-in agent exists then.
    EnvironmentDecider(store::AgentStore *agents, const placement::PoolSet &pools, policy::TierPolicy policy,
                       std::string brokerDefaultTier);

    // The agent named `name` ("" or "default": the built-in one). InvalidArgument naming
    // `paddockctl agents create` when it does not exist.
    Result<agents::Agent> agent(const std::string &name) const;
    std::vector<policy::TierInfo> tiers() const;
    policy::DecisionContext context(const agents::Agent &agent, policy::SessionFacts facts) const;
    // The decision id of the env.decision appended at `seq` of `sessionId`.
    static std::string decisionId(const std::string &sessionId, int64_t seq);

    store::AgentStore *agentStore() const { return m_agents; }
    const std::string &brokerDefaultTier() const { return m_defaultTier; }
    const policy::TierPolicy &policy() const { return m_policy; }

private:
    store::AgentStore *m_agents;
    const placement::PoolSet &m_pools;
    policy::TierPolicy m_policy;
    std::string m_defaultTier;
};

} // namespace paddock::engine
