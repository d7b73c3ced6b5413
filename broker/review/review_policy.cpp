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

const std::vector<ConfigSection> &reviewPolicySections()
{
    static const std::vector<ConfigSection> sections = {
        {"policy.toml", "[review]",
         {"bulk_target_limit", "record_write_limit", "high_risk_targets", "expiry_seconds", "budget_extension_percent",
          "risk"}},
        {"policy.toml", "[review.risk]", kKinds},
    };
    return sections;
}

ReviewPolicy parseReviewPolicy(const policy::PolicyFile &file, ConfigProblems &problems)
{
    const auto &keys = reviewPolicySections()[0];
    ReviewPolicy policy;
    const auto *reviewNode = file.table.get("review");
    if (!reviewNode)
        return policy;
    const auto *review = reviewNode->as_table();
    if (!review) {
        problems.add(ErrorCode::InvalidArgument, policy::where(file, *reviewNode) + ": review must be a table: [review]");
        return policy;
    }
    auto integer = [&](const toml::node &node, const std::string &key, int64_t min, int64_t &into) {
        auto value = node.value_exact<int64_t>();
        if (!value || *value < min) {
            problems.add(ErrorCode::InvalidArgument, policy::where(file, node) + ": review." + key
                             + " must be an integer >= " + std::to_string(min));
            return false;
        }
        into = *value;
        return true;
    };
    for (const auto &[key, node] : *review) {
        const std::string name(key.str());
        if (!keys.accepts(name)) {
            problems.add(ErrorCode::InvalidArgument, policy::where(file, node) + ": unknown key '" + name
                             + "' in [review]; docs/configuration.md lists " + keys.keyList());
            continue;
        }
        if (name == "risk") {
            const auto *risks = node.as_table();
            if (!risks) {
                problems.add(ErrorCode::InvalidArgument, policy::where(file, node)
                                 + ": review.risk must be a table of kind = \"low\" | \"medium\" | \"high\"");
                continue;
            }
            for (const auto &[kindKey, riskNode] : *risks) {
                const std::string k(kindKey.str());
                auto level = riskNode.value<std::string>();
                if (!isReviewKind(k))
                    problems.add(ErrorCode::InvalidArgument, policy::where(file, riskNode) + ": unknown review kind '" + k
                                     + "'; the kinds are " + reviewPolicySections()[1].keyList());
                else if (!level || (*level != "low" && *level != "medium" && *level != "high"))
                    problems.add(ErrorCode::InvalidArgument, policy::where(file, riskNode) + ": review.risk." + k
                                     + " must be \"low\", \"medium\" or \"high\"");
                else
                    policy.risk[k] = *level;
            }
            continue;
        }
        const bool zeroAllowed = name == "bulk_target_limit" || name == "record_write_limit" || name == "high_risk_targets";
        int64_t value = 0;
        if (!integer(node, name, zeroAllowed ? 0 : 1, value))
            continue;
        if (name == "bulk_target_limit")
            policy.bulkTargetLimit = static_cast<int>(value);
        else if (name == "record_write_limit")
            policy.recordWriteLimit = static_cast<int>(value);
        else if (name == "high_risk_targets")
            policy.highRiskTargets = static_cast<int>(value);
        else if (name == "expiry_seconds")
            policy.expiryMs = value * 1000;
        else
            policy.budgetExtensionPercent = static_cast<int>(value);
    }
    return policy;
}

Result<ReviewPolicy> parseReviewPolicy(const policy::PolicyFile &file)
{
    ConfigProblems problems;
    auto parsed = parseReviewPolicy(file, problems);
    if (!problems.empty())
        return std::unexpected(problems.joined());
    return parsed;
}

} // namespace paddock::review
