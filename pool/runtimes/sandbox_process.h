#pragma once
// What every runtime's start() shares (bwrap_runtime.cpp, oci_runtime.cpp): the init's listening
// socket made on the host, the runtime process spawned by vfork into the sandbox's cgroups, the
// wait for the init's "ready" byte, and the RunningSandbox that owns the runtime process.
//
// Threads: SpawnerThread runs every spawn of one runtime on a single long-lived thread, because
// PR_SET_PDEATHSIG (bwrap --die-with-parent, and SpawnSpec::dieWithPool) fires when the
// *thread* that spawned the process exits. run() may be called from any thread. SandboxProcess's
// methods are internally locked.

#include "common/result.h"
#include "pool/runtimes/runtime.h"

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <sys/types.h>
#include <thread>
#include <utility>
#include <vector>

namespace paddock::pool {

// fd moved to a descriptor >= 10, close-on-exec, so the child's dup2 onto 3 and 4 never collides
// with its source and no other thread's spawn inherits it. Closes fd.
int highFd(int fd);

// The first executable called `name` on PATH; empty if none.
std::string findExecutable(const std::string &name);

class SpawnerThread {
public:
    SpawnerThread();
    ~SpawnerThread();
    SpawnerThread(const SpawnerThread &) = delete;
    SpawnerThread &operator=(const SpawnerThread &) = delete;

    // Runs fn on the spawner thread and waits for it.
    void run(const std::function<void()> &fn);

private:
    void loop();

    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<std::function<void()>> m_queue;   // guarded by m_mutex
    bool m_stopping = false;                     // guarded by m_mutex
    std::thread m_thread;
};

struct SpawnSpec {
    std::vector<std::string> argv;               // argv[0] is the executable's path
    std::vector<int> cgroupProcsFds;             // joined before exec (SandboxSpec::cgroupProcsFds)
    std::vector<std::pair<int, int>> fdMap;      // dup2(from, to) in the child; stdin/stdout are /dev/null first
    bool newSession = false;                     // setsid(); otherwise a process group of its own
    bool dieWithPool = false;                    // PR_SET_PDEATHSIG(SIGKILL)
    std::string detachMount;                     // a mount to detach in a private mount namespace; empty: none
    // A user namespace to join (SandboxIdentity::userNsFd) as its root before the exec, so the
    // runtime and all it starts are the sandbox's host uid; -1: stay the pool's user.
    int userNsFd = -1;
};

struct Spawned {
    pid_t pid = -1;
    int err = 0;        // errno of the spawn or of the child before its exec; 0: it runs
};

// vfork, then in the child: SCHED_OTHER, join the cgroups, default signal dispositions, new
// session or process group, the mount to detach, the user namespace to join, the fd map, exec
// with an empty environment. Failures before the exec
// come back in Spawned::err (the child is reaped).
Spawned spawnSandboxProcess(SpawnerThread &spawner, const SpawnSpec &spec);

// A listening unix socket at <controlDir>/init.sock (mode 0600), close-on-exec, as a high fd.
Result<int> listenForInit(const std::filesystem::path &controlDir);

// A close-on-exec pipe, both ends as high fds.
Result<std::pair<int, int>> readyPipe();

enum class InitReady { Ready, TimedOut, Died };
// Waits for the init's 'R' on readFd (EOF first: the runtime or the init died). Closes readFd.
InitReady waitForInit(int readFd, int timeoutMs);

// The runtime process of one sandbox. kill() kills the process's children first (runsc's gofer
// and sandbox, crun's or bwrap's container PID 1, which takes its PID namespace with it), then
// the process, and reaps it.
class SandboxProcess : public RunningSandbox {
public:
    // name: how exit reasons call the process ("bwrap", "runsc"). Takes the pidfd.
    SandboxProcess(std::string name, pid_t pid, int pidfd, std::filesystem::path socket);
    ~SandboxProcess() override;

    // Before the sandbox is shared: connect through this O_PATH descriptor of the socket instead
    // of its name (runsc: the name lives in a directory the sandbox can write). Takes pathFd.
    void useSocketDescriptor(int pathFd);

    std::filesystem::path controlSocket() const override { return m_socket; }
    int exitFd() const override { return m_pidfd; }
    std::optional<std::string> exitReason() override;
    void kill() override;

private:
    void reapLocked(int flags);

    std::mutex m_mutex;
    const std::string m_name;
    const pid_t m_pid;
    const int m_pidfd;
    std::filesystem::path m_socket;         // set before the sandbox is shared
    int m_socketPathFd = -1;
    std::optional<std::string> m_reason;    // guarded by m_mutex
};

} // namespace paddock::pool
