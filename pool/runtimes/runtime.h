#pragma once
// A sandbox runtime starts isolated environments whose first process is paddock-sandbox-init:
// bubblewrap (bwrap_runtime.h, the lite tier), gVisor's runsc (runsc_runtime.h) and crun
// (crun_runtime.h), the last two through OCI bundles (oci_runtime.h).
//
// Threads: a Runtime is shared by the pool's threads; start() may run concurrently. A
// RunningSandbox is owned by one pool entry; its methods are internally locked and may be called
// from any thread.

#include "common/result.h"
#include "pool/runtimes/sandbox_identity.h"

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
    // Host directory for the runtime's own per-sandbox files (OCI bundle, runtime state); not
    // mounted inside. Empty: controlDir's parent / "runtime".
    std::filesystem::path runtimeDir;
    // The tier's limits, for runtimes that describe them to the sandbox (OCI linux.resources).
    // The cgroup joined through cgroupProcsFds is what enforces them.
    double cpu = 0;
    int64_t memoryBytes = 0;
    int64_t pids = 0;
    // The cgroup.procs files (opened for writing) of the sandbox's cgroup: the runtime's first
    // process joins each before it runs anything. Empty: no cgroup (limits not enforced).
    std::vector<int> cgroupProcsFds;
    // Egress (allowlist tiers; empty for network = "none"): the host path of a unix socket on
    // which the pool's egress proxy listens for this sandbox. Every runtime makes it appear
    // inside at kEgressSocketInside (a read-only bind of the socket file: connect() works, the
    // sandbox cannot replace it) and starts the init with `--egress-socket kEgressSocketInside`,
    // which runs the in-sandbox forwarder on 127.0.0.1:3128 and sets HTTP(S)_PROXY for commands.
    // The sandbox keeps no other network: an empty network namespace (bwrap), --network=none
    // (runsc), no network in the OCI spec (crun).
    std::filesystem::path egressSocket;
    // Who the sandbox is on the host (sandbox_identity.h). Mapped: sandbox root is
    // identity.hostId, the workspace belongs to it, and the runtime puts every process of the
    // sandbox in a user namespace with that mapping. Unmapped: the pool's own user.
    SandboxIdentity identity;
    // The minimal /etc (minimal_etc.h), bound read-only at /etc. Empty: /etc is empty.
    std::filesystem::path etcDir;
    // The init loads the seccomp filter (seccomp_policy.h): on the host's kernel under bwrap and
    // crun, on gVisor's (which implements seccomp) under runsc, beside runsc's own host filter.
    bool seccomp = false;
};

// What the kernel's /proc tells of the host beyond a sandbox's own processes: masked (an empty
// file or directory) in every runtime's /proc. /proc/sys, sysrq-trigger, irq and bus are
// read-only on top (bwrap does that itself; the OCI spec says readonlyPaths).
inline constexpr const char *kMaskedProcPaths[] = {
    "/proc/kcore",       "/proc/keys",       "/proc/key-users", "/proc/sysrq-trigger", "/proc/timer_list",
    "/proc/sched_debug", "/proc/latency_stats", "/proc/kallsyms", "/proc/kmsg",        "/proc/acpi",
    "/proc/asound",      "/proc/scsi"};

// Where the egress socket appears inside a sandbox (SandboxSpec::egressSocket).
inline constexpr const char *kEgressSocketInside = "/run/paddock/egress.sock";

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

// The runtime named in a tier's config: "bwrap", "runsc" or "crun". An unknown name is
// InvalidArgument; a runtime whose binary is missing (or cannot work on this host) is
// FailedPrecondition, with what to install or change.
Result<std::unique_ptr<Runtime>> makeRuntime(const std::string &name);

} // namespace paddock::pool
