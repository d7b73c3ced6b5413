#pragma once
// The lite tier's runtime: bubblewrap (Linux namespaces). Every sandbox is
//   bwrap --unshare-all --new-session --die-with-parent --as-pid-1 --clearenv ... <init>
// with read-only system directories, a private /proc, /dev and /tmp, a writable /workspace and no
// network (an empty network namespace). The init's listening socket is created by the pool on the
// host and handed to the init as fd 3, so nothing inside the sandbox can replace it.
//
// Threads: start() may be called from several threads at once (the pool refills in parallel).

#include "pool/runtimes/runtime.h"
#include "pool/runtimes/sandbox_process.h"

namespace paddock::pool {

class BwrapRuntime : public Runtime {
public:
    // Fails (NotFound) when no bwrap executable is on PATH.
    static Result<std::unique_ptr<BwrapRuntime>> create();

    std::string name() const override { return "bwrap"; }
    Result<std::unique_ptr<RunningSandbox>> start(const SandboxSpec &spec) override;

    const std::string &bwrapPath() const { return m_bwrap; }
    // The full command line of a sandbox running `command` (argv[0] is bwrap). The benchmark uses
    // it to time a cold start with exactly the pool's arguments.
    std::vector<std::string> commandLine(const SandboxSpec &spec, const std::vector<std::string> &command) const;

    // Where the init binary appears inside every sandbox.
    static constexpr const char *kInitInsidePath = "/run/paddock/paddock-sandbox-init";

    ~BwrapRuntime() override;

private:
    explicit BwrapRuntime(std::string bwrap);

    std::string m_bwrap;
    SpawnerThread m_spawner;   // bwrap --die-with-parent: every bwrap from one long-lived thread
};

} // namespace paddock::pool
