#include "broker/policy/policy_file.h"

namespace paddock::policy {

const std::vector<ConfigSection> &policySections()
{
    static const std::vector<ConfigSection> sections = {
        {"policy.toml", "", {"review", "tier_rule", "decisions"}},
        {"policy.toml", "[[tier_rule]]", {"name", "agent", "tags", "goal_words", "playbook", "tier", "max_tier_without_review"}},
        {"policy.toml", "[decisions]", {"expected_duration_minutes"}},
    };
    return sections;
}

Result<PolicyFile> loadPolicyFile(const std::filesystem::path &path, const std::string &keyWhere)
{
    PolicyFile policy;
    policy.path = path;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        return fail(ErrorCode::InvalidArgument, (keyWhere.empty() ? std::string() : keyWhere + ": ") + "policy file "
                        + path.string() + " does not exist or is not a file: fix `policy_file` in the broker config, "
                        "or remove the key for the built-in defaults");
    try {
        policy.table = toml::parse_file(path.string());
    } catch (const toml::parse_error &e) {
        return fail(ErrorCode::InvalidArgument, path.string() + ":" + std::to_string(e.source().begin.line) + ": "
                        + std::string(e.description()) + ": fix the TOML syntax there");
    }
    const auto &top = policySections()[0];
    std::string unknown;
    for (const auto &[key, node] : policy.table) {
        if (!top.accepts(key.str()))
            unknown += (unknown.empty() ? "" : "\n") + paddock::policy::where(policy, node) + ": unknown table '"
                + std::string(key.str()) + "' in the policy file; it takes [review], [[tier_rule]] and [decisions] "
                "(docs/configuration.md)";
    }
    if (!unknown.empty())
        return fail(ErrorCode::InvalidArgument, unknown);
    return policy;
}

std::string where(const PolicyFile &policy, const toml::node &node)
{
    return (policy.path.empty() ? std::string("<policy>") : policy.path.string()) + ":"
        + std::to_string(node.source().begin.line);
}

} // namespace paddock::policy
