#pragma once
// The lite tier's runtime: bubblewrap (Linux namespaces). Every sandbox is
//   bwrap --unshare-all --new-session --die-with-parent --as-pid-1 --clearenv ... <init>
// with read-only system directories, a private /proc, /dev and /tmp, a writable /workspace and no
// network (an empty network namespace). The init's listening socket is created by the pool on the
// host and handed to the init as fd 3, so nothing inside the sandbox can replace it.
//
// Threads: start() may be called from several threads at once (the pool refills in parallel).

#include "pool/runtimes/runtime.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

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
    // Runs fn on m_spawner and waits for it. bwrap --die-with-parent uses PR_SET_PDEATHSIG,
    // which fires when the *thread* that spawned bwrap exits, so every bwrap is spawned from
    // this one thread, which lives as long as the runtime.
    void onSpawnerThread(const std::function<void()> &fn);
    void spawnerLoop();

    std::string m_bwrap;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<std::function<void()>> m_queue;   // guarded by m_mutex
    bool m_stopping = false;                     // guarded by m_mutex
    std::thread m_spawner;
};

} // namespace paddock::pool
