#pragma once
// The standard and heavy tiers' runtime: gVisor. Every sandbox is a foreground
//   runsc --root <state>/runtime/<id>/state --network=none --host-uds=create --ignore-cgroups
//         run --bundle <state>/runtime/<id>/bundle <id>
// of an OCI bundle (oci_bundle.h): the init runs as PID 1 on gVisor's user-space kernel, with
// no network device but loopback.
//
// How the pool reaches the init: this runsc (a 2022 build) has no way to hand a listening socket
// into the container (`runsc run` takes no fds; only stdio is passed), and `runsc exec` costs
// ~36 ms, so the init creates its socket itself in /run/paddock/ctl, a bind of the sandbox's
// host control directory, and --host-uds=create lets the gofer create it as a real host socket
// that the pool connects to. The init signals readiness on its stdout (a pipe to the pool). The
// pool then holds an O_PATH descriptor of that socket and connects through /proc/self/fd/N, so
// an agent that unlinks the name and listens in its place reaches nobody.
//
// Identity: the bundle's uidMappings give the sandbox its block of host ids; gVisor's own
// /proc/self/uid_map shows its emulated "0 0 4294967295", but what its gofer writes to
// /workspace belongs to the block's first uid on the host, and runsc's sandbox and gofer need the
// bundle reachable by that uid (the pool makes the path to it traversable: sandbox_pool.cpp).
//
// Threads: as OciRuntime.

#include "pool/runtimes/oci_runtime.h"

namespace paddock::pool {

class RunscRuntime : public OciRuntime {
public:
    // FailedPrecondition when no runsc executable is on PATH.
    static Result<std::unique_ptr<RunscRuntime>> create();

    std::string name() const override { return "runsc"; }

protected:
    std::vector<std::string> runCommand(const std::filesystem::path &bundleDir, const std::filesystem::path &stateDir,
                                        const std::string &id, int preservedFds, bool egress) const override;

private:
    explicit RunscRuntime(std::string binary) : OciRuntime(std::move(binary), SocketMode::BoundDirectory) {}
};

} // namespace paddock::pool
