#pragma once
// A sandbox runtime starts isolated environments whose first process is paddock-sandbox-init.
// Only bubblewrap (bwrap_runtime.h) exists today; gVisor (runsc) and an OCI runtime (crun) are
// meant to implement the same two interfaces.
//
// Threads: a Runtime is shared by the pool's threads; start() may run concurrently. A
// RunningSandbox is owned by one pool entry; its methods are internally locked and may be called
// from any thread.

#include "common/result.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace paddock::pool {

struct SandboxSpec {
    std::string id;
    std::filesystem::path workspaceDir;   // host directory that becomes /workspace
    std::filesystem::path controlDir;     // host directory for the init's socket (not mounted inside)
    std::filesystem::path initPath;       // host path of paddock-sandbox-init
    // The cgroup.procs files (opened for writing) of the sandbox's cgroup: the runtime's first
    // process joins each before it runs anything. Empty: no cgroup (limits not enforced).
    std::vector<int> cgroupProcsFds;
};

class RunningSandbox {
public:
    virtual ~RunningSandbox() = default;
    // Host path of the unix socket the sandbox init accepts requests on.
    virtual std::filesystem::path controlSocket() const = 0;
    // Pollable descriptor that becomes readable when the sandbox ends (a pidfd); -1 if none.
    virtual int exitFd() const = 0;
    // nullopt while running; once ended, a description of how ("bwrap exited with status 1").
    virtual std::optional<std::string> exitReason() = 0;
    // Kills every process of the sandbox and waits for it. Idempotent.
    virtual void kill() = 0;
};

class Runtime {
public:
    virtual ~Runtime() = default;
    virtual std::string name() const = 0;
    // Starts a sandbox and returns once its init accepts requests.
    virtual Result<std::unique_ptr<RunningSandbox>> start(const SandboxSpec &spec) = 0;
};

// The runtime named in a tier's config. Unimplemented for runtimes a later issue adds.
Result<std::unique_ptr<Runtime>> makeRuntime(const std::string &name);

} // namespace paddock::pool
