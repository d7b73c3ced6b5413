#pragma once
// Environment decisions (docs/governance.md, "Agents and environment decisions"): which tier a
// session gets at its start, when its agent calls request_environment, and when a human overrides.
// Pure functions of the agent, the session's facts, the tier rules and the tier catalogue; the
// broker records what they return as an env.decision event. Thread-agnostic.

#include "broker/agents/agent.h"
#include "broker/policy/tier_rules.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace paddock::policy {

// One tier as the pools offer it (the first pool that offers a name describes it).
struct TierInfo {
    std::string name;
    double cpu = 0;
    int64_t memoryBytes = 0;
    double pricePerHourUsd = 0;
};

// Tiers ordered from the smallest to the largest: by price, then memory, then cpu, then name.
std::vector<TierInfo> orderedTiers(std::vector<TierInfo> tiers);
// Position of `tier` in orderedTiers(...), or -1.
int tierRank(const std::vector<TierInfo> &ordered, const std::string &tier);

struct TierAlternative {
    std::string tier;
    int64_t estimatedCostMicros = 0;
    std::string note;
};

// What a decision grants.
enum class Verdict { Granted, Refused, NeedsReview };

struct TierDecision {
    std::string id;                  // set by the caller ("d-<session>-<seq>")
    std::string trigger;             // session_start, request_environment, override
    std::string requestedTier;
    std::string chosenTier;          // for Refused and NeedsReview: the tier the session keeps
    std::string chooser;             // default, agent, platform, human
    std::string rule;
    std::string reason;
    std::string who;
    std::string agent;
    std::vector<TierAlternative> alternatives;
    Verdict verdict = Verdict::Granted;
    std::string maxTierWithoutReview;   // the bound that applied (hybrid), if any

    // The env.decision payload (docs/events.md).
    nlohmann::json toJson() const;
};

struct DecisionContext {
    const agents::Agent *agent = nullptr;
    SessionFacts facts;
    const TierPolicy *policy = nullptr;
    std::vector<TierInfo> tiers;     // the catalogue; may be empty when no pool answers
    std::string brokerDefaultTier;
};

// Estimated cost of holding `tier` for the policy's expected duration, in micro-USD.
int64_t estimatedCostMicros(const TierInfo &tier, int64_t expectedDurationMs);

// How far request_environment goes without review in modes agent and hybrid (docs/governance.md):
// the first matching [[tier_rule]]'s max_tier_without_review; without one, hybrid is bound by the
// agent's default tier and agent mode by nothing but its allowed tiers (tier empty).
struct TierBound {
    std::string tier;                  // empty: no bound below the allowed tiers
    std::string rule;                  // the rule's name, "default tier bound" or "allowed tiers"
    const TierRule *matched = nullptr; // the tier rule that set it, if any
};
TierBound requestBound(const DecisionContext &context);

// The decision at session start. requestedTier: the submit's tier ("" when the submitter left it to
// the agent's selection mode).
TierDecision decideAtStart(const DecisionContext &context, const std::string &requestedTier);

// The agent asks for `tier` (request_environment) while holding `currentTier`.
TierDecision decideRequest(const DecisionContext &context, const std::string &currentTier, const std::string &tier,
                           const std::string &reason);

// A human moves the session to `tier`.
TierDecision decideOverride(const DecisionContext &context, const std::string &currentTier, const std::string &tier,
                            const std::string &reason, const std::string &who);

} // namespace paddock::policy
