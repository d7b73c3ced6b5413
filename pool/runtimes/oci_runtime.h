#pragma once
// What the two OCI runtimes (runsc_runtime.h, crun_runtime.h) share: a bundle per sandbox
// (oci_bundle.h) under SandboxSpec::runtimeDir, the runtime's state (--root) next to it, and one
// foreground `<runtime> run` process per sandbox, spawned like bwrap: vfork, join the sandbox's
// cgroups, new session (no controlling terminal: TIOCSTI cannot reach the pool's), then exec.
// The runtime's own cgroup handling is off (runsc --ignore-cgroups, crun --cgroup-manager=
// disabled): the runtime, its helpers and the whole sandbox run inside the pool's per-sandbox
// cgroup from their first instruction, on v1, v2 and hybrid hosts alike.
//
// Killing a sandbox kills the runtime's children (runsc: its gofer and sandbox processes; crun:
// the container's PID 1, and with it the PID namespace), then the runtime process; the pool
// then removes the cgroup (which kills any straggler) and the sandbox directory, runtime state
// included, so no container is left behind.
//
// Threads: start() may run on several threads at once; spawns happen on one long-lived thread
// (PR_SET_PDEATHSIG fires when the spawning *thread* exits).

#include "pool/runtimes/oci_bundle.h"
#include "pool/runtimes/runtime.h"
#include "pool/runtimes/sandbox_process.h"

namespace paddock::pool {

class OciRuntime : public Runtime {
public:
    ~OciRuntime() override;

    Result<std::unique_ptr<RunningSandbox>> start(const SandboxSpec &spec) override;
    // Runs `command` as the container's process in a fresh sandbox, exactly as start() would
    // run the init, and waits for it: the cold start the benchmark compares against. Returns
    // the runtime's exit status (as from waitpid).
    Result<int> runToCompletion(const SandboxSpec &spec, const std::vector<std::string> &command);

    const std::string &binary() const { return m_binary; }

protected:
    // How the pool reaches the init: an inherited listening socket (fd 3, like bwrap), or a
    // socket the init creates in a bound control directory (runsc: through its gofer).
    enum class SocketMode { InheritedFd, BoundDirectory };

    OciRuntime(std::string binary, SocketMode mode);
    // The full `<runtime> ... run ...` command line (argv[0] is the binary).
    // egress: the sandbox's init connects out to the pool's egress socket (allowlist tiers).
    virtual std::vector<std::string> runCommand(const std::filesystem::path &bundleDir,
                                                const std::filesystem::path &stateDir, const std::string &id,
                                                int preservedFds, bool egress) const = 0;
    // A cgroup2 mount to detach in a private mount namespace before the runtime starts (crun
    // refuses hybrid hosts outright); empty: none.
    std::filesystem::path m_detachMount;

private:
    Spawned spawn(const std::vector<std::string> &argv, const std::vector<int> &cgroupFds,
                  const std::vector<std::pair<int, int>> &fdMap);

    std::string m_binary;
    SocketMode m_mode;
    SpawnerThread m_spawner;
};

} // namespace paddock::pool
