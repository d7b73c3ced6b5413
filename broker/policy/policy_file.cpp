#include "broker/policy/policy_file.h"

namespace paddock::policy {

Result<PolicyFile> loadPolicyFile(const std::filesystem::path &path)
{
    PolicyFile policy;
    policy.path = path;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
        return fail(ErrorCode::InvalidArgument, "policy file " + path.string() + " does not exist or is not a file: "
                        "fix `policy_file` in the broker config, or remove the key for the built-in defaults");
    try {
        policy.table = toml::parse_file(path.string());
    } catch (const toml::parse_error &e) {
        return fail(ErrorCode::InvalidArgument, path.string() + ":" + std::to_string(e.source().begin.line) + ": "
                        + std::string(e.description()) + ": fix the TOML syntax there");
    }
    return policy;
}

std::string where(const PolicyFile &policy, const toml::node &node)
{
    return (policy.path.empty() ? std::string("<policy>") : policy.path.string()) + ":"
        + std::to_string(node.source().begin.line);
}

} // namespace paddock::policy
