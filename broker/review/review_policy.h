#pragma once
// The [review] table of the policy file: when a change needs a human, how risky each kind is, and
// how long an item waits before it expires. docs/governance.md ("Review queue") explains them, docs/configuration.md lists them.
//
// Threads: a plain value, read-only once loaded.

#include "broker/policy/policy_file.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace paddock::review {

namespace kind {
inline constexpr const char *BulkChange = "bulk_change";
inline constexpr const char *TierEscalation = "tier_escalation";
inline constexpr const char *BudgetExtension = "budget_extension";
inline constexpr const char *EgressException = "egress_exception";
inline constexpr const char *SecretAccess = "secret_access";
} // namespace kind

bool isReviewKind(const std::string &name);

struct ReviewPolicy {
    int bulkTargetLimit = 5;            // a change to more targets (files) than this goes to review
    int recordWriteLimit = 3;           // a write of more durable records than this goes to review
    int highRiskTargets = 20;           // a bulk change to more targets than this is high risk
    int64_t expiryMs = 24 * 3600 * 1000LL;
    int budgetExtensionPercent = 50;    // a budget extension asks for this share of the budget
    std::map<std::string, std::string> risk = {
        {kind::BulkChange, "medium"},       {kind::TierEscalation, "medium"}, {kind::BudgetExtension, "medium"},
        {kind::EgressException, "high"},    {kind::SecretAccess, "high"},
    };

    // The risk of an item of `kind` touching `targets` targets.
    std::string riskOf(const std::string &kind, int targets) const;
};

// Reads [review] (absent: the defaults above). Errors name file:line, the key and the fix. The
// first form adds every problem to `problems`; the second joins them.
ReviewPolicy parseReviewPolicy(const policy::PolicyFile &policy, ConfigProblems &problems);
Result<ReviewPolicy> parseReviewPolicy(const policy::PolicyFile &policy);

// The [review] keys the loader accepts (docs/configuration.md documents each).
const std::vector<ConfigSection> &reviewPolicySections();

} // namespace paddock::review
