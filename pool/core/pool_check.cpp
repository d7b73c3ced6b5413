#include "pool/core/pool_check.h"

#include "pool/core/sandbox_hardening.h"
#include "pool/runtimes/cgroup.h"
#include "pool/runtimes/runtime.h"

#include <set>
#include <unistd.h>

namespace paddock::pool {

std::string checkPoolConfig(const PoolConfig &config, ConfigProblems &problems)
{
    std::set<std::string> runtimes;
    for (const auto &tier : config.tiers) {
        if (!runtimes.insert(tier.runtime).second)
            continue;
        if (auto runtime = makeRuntime(tier.runtime); !runtime)
            problems.add(runtime.error().code, "tier '" + tier.name + "': " + runtime.error().message);
    }
    if (::access(config.initPath.c_str(), X_OK) != 0)
        problems.add(ErrorCode::FailedPrecondition,
                     "the sandbox init is not at " + config.initPath.string()
                         + ": install paddock-sandbox-init there (the packages put it in <prefix>/libexec/paddock), "
                           "or set init_path in pool.toml (or pass --init-path)");
    checkCreatableDirectory("state_dir", config.stateDir,
                            "set state_dir (or pass --state-dir) to a directory this user may write", problems);
    checkCreatableDirectory("snapshot_dir", config.snapshotDir,
                            "set snapshot_dir to a directory this user may write", problems);

    std::vector<std::string> warnings;
    for (const auto &problem : checkSandboxHardening(config, warnings))
        problems.add(ErrorCode::FailedPrecondition, problem);

    std::string summary = "pool '" + config.poolId + "' on " + config.listen + "; "
        + std::to_string(config.tiers.size()) + (config.tiers.size() == 1 ? " tier: " : " tiers: ");
    for (size_t i = 0; i < config.tiers.size(); ++i) {
        const auto &tier = config.tiers[i];
        summary += (i ? ", " : "") + tier.name + " (" + tier.runtime + ", warm " + std::to_string(tier.warmCount)
            + ", max " + std::to_string(tier.maxCount) + ", network " + tier.network + ")";
    }
    const CgroupLayout layout = detectCgroupLayout();
    summary += "; state dir " + config.stateDir.string() + "; init " + config.initPath.string() + "; cgroups "
        + layout.statusText();
    // Not a problem (the pool starts, and says so at error level), but what it means is said here.
    if (const std::string why = cgroupAccessProblem(layout, config.poolId); !why.empty())
        summary += " (limits NOT enforced: " + why + "; run paddock-pool as root, or under systemd with Delegate=yes)";
    if (canMapIdentities())
        summary += "; sandbox identity: " + IdentityAllocator(config.identity).describe();
    else
        summary += "; sandbox identity: this user (uid " + std::to_string(::geteuid()) + ", not root), capabilities dropped";
    for (const auto &warning : warnings)
        summary += "\nwarning: " + warning;
    return summary;
}

} // namespace paddock::pool
