#pragma once
// OCI bundles for the runsc and crun tiers: a config.json and a rootfs skeleton (empty mount
// points and the host's /bin, /lib... symlinks), written per sandbox into a directory only the
// pool sees. The sandbox gets the same filesystem as the bubblewrap tier: read-only /usr, the
// pool's minimal /etc (minimal_etc.h), private /proc (host details masked), /dev and /tmp, a
// writable /workspace, the init at /run/paddock/paddock-sandbox-init, no capabilities, an
// environment of PATH, HOME and LANG only, and new pid, network, ipc, uts and mount namespaces
// (no network), plus a user namespace mapping the sandbox's own host ids (sandbox_identity.h).
//
// Threads: plain functions.

#include "common/result.h"
#include "pool/runtimes/sandbox_identity.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace paddock::pool {

struct OciBundleOptions {
    std::filesystem::path bundleDir;       // created; holds config.json and rootfs/
    std::filesystem::path workspaceDir;    // host directory bound read-write at /workspace
    std::filesystem::path initPath;        // host path of paddock-sandbox-init
    std::vector<std::string> args;         // the container's process (argv)
    // A host directory bound read-write at /run/paddock/ctl (runsc: the init creates its socket
    // there, through the gofer). Empty: none (crun hands the init its socket as fd 3).
    std::filesystem::path controlDir;
    // The pool's egress proxy socket for this sandbox (allowlist tiers), bound read-only at
    // kEgressSocketInside (runtime.h). Empty: none.
    std::filesystem::path egressSocket;
    // Limits written into linux.resources (informational for runsc --ignore-cgroups and crun
    // --cgroup-manager=disabled: the pool's own cgroup enforces them). 0: none.
    double cpu = 0;
    int64_t memoryBytes = 0;
    int64_t pids = 0;
    // Mapped: a user namespace with uidMappings and gidMappings of the sandbox's block.
    // Unmapped: none when the pool is root (host root, used only by benchmarks), else the pool's
    // own uid alone.
    SandboxIdentity identity;
    std::filesystem::path etcDir;          // bound read-only at /etc; empty: /etc is empty
};

inline constexpr const char *kOciInitInsidePath = "/run/paddock/paddock-sandbox-init";
inline constexpr const char *kOciControlInsideDir = "/run/paddock/ctl";

// The config.json text (OCI runtime spec 1.0).
std::string ociConfigJson(const OciBundleOptions &options);
// Writes bundleDir/config.json and bundleDir/rootfs/.
Status writeOciBundle(const OciBundleOptions &options);

} // namespace paddock::pool
