#pragma once
// The broker's policy file (paddockd config key `policy_file`; docs/governance.md). Parsed once at
// start into a toml::table that each section's owner reads: [[tier_rule]] (tier_rules.h), [review]
// and the cost tables (broker/review, broker/cost). No file: every section takes its built-in
// defaults. Thread-agnostic.

#include "common/config_problems.h"
#include "common/result.h"

#include <toml++/toml.h>

#include <filesystem>
#include <string>
#include <vector>

namespace paddock::policy {

struct PolicyFile {
    std::filesystem::path path;   // empty: the built-in defaults
    toml::table table;
};

// Parses the file. A TOML error names file:line and the fix; a missing file names the key to fix
// (`keyWhere`, the file:line of policy_file in the broker's config, when known); a top-level table
// other than [review], [[tier_rule]] and [decisions] is refused with its file:line.
Result<PolicyFile> loadPolicyFile(const std::filesystem::path &path, const std::string &keyWhere = {});

// The tables of the policy file this library reads: the top level, [[tier_rule]] and [decisions]
// ([review] is broker/review's: reviewPolicySections()). docs/configuration.md documents each key.
const std::vector<ConfigSection> &policySections();

// "file:line" of a node, for errors about one key.
std::string where(const PolicyFile &policy, const toml::node &node);

} // namespace paddock::policy
