#pragma once
// The broker's policy file (paddockd config key `policy_file`; docs/governance.md). Parsed once at
// start into a toml::table that each section's owner reads: [[tier_rule]] (tier_rules.h), [review]
// and the cost tables (broker/review, broker/cost). No file: every section takes its built-in
// defaults. Thread-agnostic.

#include "common/result.h"

#include <toml++/toml.h>

#include <filesystem>
#include <string>

namespace paddock::policy {

struct PolicyFile {
    std::filesystem::path path;   // empty: the built-in defaults
    toml::table table;
};

// Parses the file. A TOML error names file:line and the fix; a missing file names the key to fix.
Result<PolicyFile> loadPolicyFile(const std::filesystem::path &path);

// "file:line" of a node, for errors about one key.
std::string where(const PolicyFile &policy, const toml::node &node);

} // namespace paddock::policy
