#include "broker/review/review_policy.h"

#include <algorithm>
#include <vector>

namespace paddock::review {

namespace {

const std::vector<std::string> kKinds = {kind::BulkChange, kind::TierEscalation, kind::BudgetExtension,
                                         kind::EgressException, kind::SecretAccess};

} // namespace

bool isReviewKind(const std::string &name)
{
    return std::find(kKinds.begin(), kKinds.end(), name) != kKinds.end();
}

std::string ReviewPolicy::riskOf(const std::string &kind, int targets) const
{
    if (kind == kind::BulkChange && targets > highRiskTargets)
        return "high";
    auto it = risk.find(kind);
    return it != risk.end() ? it->second : "medium";
}

Result<ReviewPolicy> parseReviewPolicy(const policy::PolicyFile &file)
{
    ReviewPolicy policy;
    const auto *review = file.table.get_as<toml::table>("review");
    if (!review)
        return policy;
    auto positive = [&](const toml::node &node, const std::string &key, int64_t min) -> Result<int64_t> {
        auto value = node.value<int64_t>();
        if (!value || *value < min)
            return fail(ErrorCode::InvalidArgument, policy::where(file, node) + ": review." + key
                            + " must be an integer >= " + std::to_string(min));
        return *value;
    };
    for (const auto &[key, node] : *review) {
        const std::string name(key.str());
        if (name == "risk") {
            const auto *risks = node.as_table();
            if (!risks)
                return fail(ErrorCode::InvalidArgument, policy::where(file, node)
                                + ": review.risk must be a table of kind = \"low\" | \"medium\" | \"high\"");
            for (const auto &[kindKey, riskNode] : *risks) {
                const std::string k(kindKey.str());
                auto level = riskNode.value<std::string>();
                if (!isReviewKind(k))
                    return fail(ErrorCode::InvalidArgument, policy::where(file, riskNode) + ": unknown review kind '" + k
                                    + "'; the kinds are bulk_change, tier_escalation, budget_extension, "
                                      "egress_exception, secret_access");
                if (!level || (*level != "low" && *level != "medium" && *level != "high"))
                    return fail(ErrorCode::InvalidArgument, policy::where(file, riskNode) + ": review.risk." + k
                                    + " must be \"low\", \"medium\" or \"high\"");
                policy.risk[k] = *level;
            }
            continue;
        }
        Result<int64_t> value = 0;
        if (name == "bulk_target_limit" || name == "record_write_limit" || name == "high_risk_targets")
            value = positive(node, name, 0);
        else if (name == "expiry_seconds" || name == "budget_extension_percent")
            value = positive(node, name, 1);
        else
            return fail(ErrorCode::InvalidArgument, policy::where(file, node) + ": unknown key '" + name
                            + "' in [review]; docs/governance.md lists bulk_target_limit, record_write_limit, "
                              "high_risk_targets, expiry_seconds, budget_extension_percent and [review.risk]");
        if (!value)
            return std::unexpected(value.error());
        if (name == "bulk_target_limit")
            policy.bulkTargetLimit = static_cast<int>(*value);
        else if (name == "record_write_limit")
            policy.recordWriteLimit = static_cast<int>(*value);
        else if (name == "high_risk_targets")
            policy.highRiskTargets = static_cast<int>(*value);
        else if (name == "expiry_seconds")
            policy.expiryMs = *value * 1000;
        else
            policy.budgetExtensionPercent = static_cast<int>(*value);
    }
    return policy;
}

} // namespace paddock::review
