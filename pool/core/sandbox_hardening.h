#pragma once
// What keeps a pool's sandboxes off their host, prepared once at pool start: the block of host ids
// each sandbox gets (sandbox_identity.h, root pools), the minimal /etc every sandbox binds
// (minimal_etc.h) and whether the init loads the seccomp filter (pool/init/seccomp_policy.h). The
// pool's state directory is made traversable, not listable, for the sandboxes' ids, which must
// reach their workspace and bundle through it; what is private to the pool stays 0700 below it.
// docs/security.md is the threat model these implement.
//
// Threads: prepared on the thread that creates the pool; afterwards SandboxHardening is read-only
// but for its IdentityAllocator, which is internally locked.

#include "common/result.h"
#include "pool/core/pool_config.h"
#include "pool/runtimes/sandbox_identity.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace paddock::pool {

// What one tier promises, in words, for `paddockctl pools` and the console's Pools view.
struct TierIsolation {
    std::string identity;   // "own host uids (1000000000-..., 65536 per sandbox)" or "the pool's user (uid 1000), capabilities dropped"
    std::string seccomp;    // "on (EPERM for 9 groups and 3 argument rules)" or "off"
    std::string etc;        // "minimal (17 entries)" or "empty"
};

struct SandboxHardening {
    std::unique_ptr<IdentityAllocator> identities;   // null: sandboxes are the pool's own user
    std::filesystem::path etcDir;                    // minimal_etc.h's trees; empty: hardening off
    size_t etcExtraCount = 0;
    bool seccomp = false;

    TierIsolation describe(const TierConfig &tier) const;
};

// Checks the identity range (root pools), builds the minimal /etc under <state_dir>/etc and sets
// the state directory's mode. FailedPrecondition with the key and the fix for a range that
// overlaps this host's users or is too small for the tiers' max_count, an etc_extra path that is
// missing, or a state directory the sandboxes' ids cannot reach.
Result<SandboxHardening> prepareSandboxHardening(const PoolConfig &config);

// Problems a start would refuse for (the identity range and etc_extra), without building anything,
// for --check-config; warnings (an etc_extra file that is not world-readable) go to `warnings`.
std::vector<std::string> checkSandboxHardening(const PoolConfig &config, std::vector<std::string> &warnings);

// Gives `path` to the sandbox's root (chown to identity.hostId) with `mode`; a no-op for an
// unmapped identity.
Status giveToSandbox(const std::filesystem::path &path, const SandboxIdentity &identity, unsigned mode);

// The mode for directories on the way from the state directory to a sandbox's files: 0711 when
// sandboxes get ids of their own (which must pass through), 0700 otherwise.
unsigned passThroughMode(const PoolConfig &config);

} // namespace paddock::pool
