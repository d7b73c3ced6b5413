#pragma once
// The OCI tier through crun: `crun --root <state>/runtime/<id>/state --cgroup-manager=disabled run
// --preserve-fds 2 --bundle <state>/runtime/<id>/bundle <id>` of an OCI bundle (oci_bundle.h).
// Linux namespaces like bwrap, but no user namespace: uid 0 inside is host root with no
// capabilities, noNewPrivileges, and /proc/sys and friends read-only or masked.
//
// The init gets its listening socket as fd 3 and its ready pipe as fd 4, exactly as under bwrap
// (--preserve-fds 2). crun's own cgroup handling is disabled: the pool's cgroup, joined before
// crun starts, enforces the limits. crun 1.8 refuses hybrid hosts ("cgroups in hybrid mode not
// supported") even then, so on a hybrid host crun starts in a private mount namespace in which
// the cgroup2 mount is detached; v1 and v2 hosts need nothing.
//
// Threads: as OciRuntime.

#include "pool/runtimes/oci_runtime.h"

namespace paddock::pool {

class CrunRuntime : public OciRuntime {
public:
    // FailedPrecondition when no crun executable is on PATH.
    static Result<std::unique_ptr<CrunRuntime>> create();

    std::string name() const override { return "crun"; }

protected:
    std::vector<std::string> runCommand(const std::filesystem::path &bundleDir, const std::filesystem::path &stateDir,
                                        const std::string &id, int preservedFds, bool egress) const override;

private:
    CrunRuntime(std::string binary, std::filesystem::path detachMount);
};

} // namespace paddock::pool
