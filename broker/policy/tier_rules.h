#pragma once
// The policy file's [[tier_rule]] tables: which tier the platform picks for a session, and the
// highest tier an agent in agent or hybrid mode may get without review. Rules are tried in file order; the
// first whose every given condition matches applies. Thread-agnostic.

#include "broker/policy/policy_file.h"

#include <optional>
#include <string>
#include <vector>

namespace paddock::policy {

// What a rule matches on.
struct SessionFacts {
    std::string agent;
    std::vector<std::string> tags;
    std::string goal;
    std::string playbook;
};

struct TierRule {
    std::string name;                        // "rule N" when the file gives none
    std::string agent;                       // empty: any
    std::vector<std::string> tags;           // any of them; empty: any
    std::vector<std::string> goalWords;      // any of them as a word of the goal, case-insensitive
    std::string playbook;                    // empty: any
    std::string tier;                        // the tier the rule picks
    std::string maxTierWithoutReview;        // empty: `tier`
    int line = 0;

    bool matches(const SessionFacts &facts) const;
    // "agent=build-bot, tags=[build]" (what matched), for the decision's reason.
    std::string describe() const;
};

struct TierPolicy {
    std::vector<TierRule> rules;
    // How long a session is expected to hold its tier, for the alternatives' estimated cost.
    int64_t expectedDurationMs = 15 * 60 * 1000;

    const TierRule *match(const SessionFacts &facts) const;
};

// Reads [[tier_rule]] and [decisions] from the policy. Errors name file:line, the key and the fix.
// The first form adds every problem to `problems` (a rule with problems is left out); the second
// joins them.
TierPolicy parseTierPolicy(const PolicyFile &policy, ConfigProblems &problems);
Result<TierPolicy> parseTierPolicy(const PolicyFile &policy);

} // namespace paddock::policy
