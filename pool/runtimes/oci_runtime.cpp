#include "pool/runtimes/oci_runtime.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace paddock::pool {
namespace {

namespace fs = std::filesystem;

// runsc takes 150-300 ms to start here, much more on a loaded host.
constexpr int kStartTimeoutMs = 30000;

// Where the runtime keeps a sandbox's bundle and its own state.
struct RuntimeDirs {
    fs::path runtime;
    fs::path bundle;
    fs::path state;
};

RuntimeDirs runtimeDirsOf(const SandboxSpec &spec)
{
    const fs::path runtimeDir = spec.runtimeDir.empty() ? spec.controlDir.parent_path() / "runtime" : spec.runtimeDir;
    return {runtimeDir, runtimeDir / "bundle", runtimeDir / "state"};
}

// What every bundle of spec's sandbox holds, whatever it runs.
OciBundleOptions baseBundle(const SandboxSpec &spec, const fs::path &bundleDir)
{
    OciBundleOptions bundle;
    bundle.bundleDir = bundleDir;
    bundle.workspaceDir = spec.workspaceDir;
    bundle.initPath = spec.initPath;
    bundle.identity = spec.identity;
    bundle.etcDir = spec.etcDir;
    return bundle;
}

// Waits for the sandbox's init to say it listens (closing readFd). holdSocket: then open the
// init's socket by a descriptor, since the sandbox can write the directory its name is in.
Status awaitInit(SandboxProcess &sandbox, const SandboxSpec &spec, const std::string &runtimeName, int readFd,
                 const fs::path &socketPath, bool holdSocket)
{
    const InitReady started = waitForInit(readFd, kStartTimeoutMs);
    if (started != InitReady::Ready) {
        sandbox.kill();
        if (started == InitReady::TimedOut)
            return fail(ErrorCode::DeadlineExceeded, "sandbox " + spec.id + " (" + runtimeName + ") did not start within " +
                                                         std::to_string(kStartTimeoutMs) + " ms; the host may be overloaded");
        return fail(ErrorCode::Internal, "sandbox " + spec.id + " failed to start (" + sandbox.exitReason().value_or("unknown") +
                                             "); " + runtimeName + "'s own message is in paddock-pool's log (stderr)");
    }
    if (holdSocket) {
        // The socket's file lives in a directory the sandbox can write: uid 0 inside could
        // unlink it and listen in its place. The pool connects through this descriptor of the
        // init's own socket instead, whatever the name comes to point at later.
        int pathFd = ::open(socketPath.c_str(), O_PATH | O_CLOEXEC);
        if (pathFd < 0) {
            const int err = errno;
            sandbox.kill();
            return fail(ErrorCode::Internal, "sandbox " + spec.id + " started, but its init's socket " + socketPath.string() +
                                                 " cannot be opened: " + std::strerror(err));
        }
        pathFd = highFd(pathFd);
        sandbox.useSocketDescriptor(pathFd);
    }
    return {};
}

} // namespace

OciRuntime::OciRuntime(std::string binary, SocketMode mode) : m_binary(std::move(binary)), m_mode(mode) {}

OciRuntime::~OciRuntime() = default;

Spawned OciRuntime::spawn(const std::vector<std::string> &argv, const std::vector<int> &cgroupFds,
                          const std::vector<std::pair<int, int>> &fdMap)
{
    SpawnSpec spec;
    spec.argv = argv;
    spec.cgroupProcsFds = cgroupFds;
    spec.fdMap = fdMap;
    // A session of its own: no controlling terminal, so nothing inside can open the pool's
    // terminal (/dev/tty) or TIOCSTI into it; and the runtime dies with the pool.
    spec.newSession = true;
    spec.dieWithPool = true;
    spec.detachMount = m_detachMount.string();
    return spawnSandboxProcess(m_spawner, spec);
}

Result<std::unique_ptr<RunningSandbox>> OciRuntime::start(const SandboxSpec &spec)
{
    const RuntimeDirs dirs = runtimeDirsOf(spec);
    std::error_code ec;
    fs::create_directories(dirs.state, ec);
    fs::create_directories(dirs.bundle, ec);
    // Private to the pool; with a mapped identity the runtime's sandbox and gofer (runsc) run as
    // the sandbox's uid and must pass through to the bundle, not list it.
    fs::permissions(dirs.runtime, spec.identity.mapped() ? fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec
                                                         : fs::perms::owner_all, ec);

    OciBundleOptions bundle = baseBundle(spec, dirs.bundle);
    bundle.cpu = spec.cpu;
    bundle.memoryBytes = spec.memoryBytes;
    bundle.pids = spec.pids;
    bundle.egressSocket = spec.egressSocket;

    // The init says it listens by writing one byte: EOF first means the runtime or the init died.
    auto ready = readyPipe();
    if (!ready)
        return std::unexpected(ready.error());
    auto closeAll = [&](int listenFd) {
        if (listenFd >= 0)
            ::close(listenFd);
        ::close(ready->first);
        ::close(ready->second);
    };

    const fs::path socketPath = spec.controlDir / "init.sock";
    std::vector<std::pair<int, int>> fdMap;
    int listenFd = -1;
    int preserved = 0;
    if (m_mode == SocketMode::InheritedFd) {
        auto listening = listenForInit(spec.controlDir);
        if (!listening) {
            closeAll(-1);
            return std::unexpected(listening.error());
        }
        listenFd = *listening;
        fdMap = {{listenFd, 3}, {ready->second, 4}};
        preserved = 2;
        bundle.args = {kOciInitInsidePath, "--listen-fd", "3", "--ready-fd", "4"};
    } else {
        bundle.controlDir = spec.controlDir;
        // The init creates its socket there as the sandbox's root.
        if (spec.identity.mapped() && ::chown(spec.controlDir.c_str(), spec.identity.hostId, spec.identity.hostId) != 0) {
            closeAll(-1);
            return fail(ErrorCode::Internal, "cannot give " + spec.controlDir.string() + " to the sandbox's uid: " + std::strerror(errno));
        }
        fdMap = {{ready->second, 1}};
        bundle.args = {kOciInitInsidePath, "--socket", std::string(kOciControlInsideDir) + "/init.sock", "--ready-fd", "1"};
    }
    if (!spec.egressSocket.empty())
        bundle.args.insert(bundle.args.end(), {"--egress-socket", kEgressSocketInside});
    if (spec.seccomp)
        bundle.args.push_back("--seccomp");
    if (auto written = writeOciBundle(bundle); !written) {
        closeAll(listenFd);
        return std::unexpected(written.error());
    }

    const auto argv = runCommand(dirs.bundle, dirs.state, spec.id, preserved, !spec.egressSocket.empty());
    const Spawned spawned = spawn(argv, spec.cgroupProcsFds, fdMap);
    if (listenFd >= 0)
        ::close(listenFd);   // only the init holds it now: its death makes connect() fail at once
    ::close(ready->second);
    if (spawned.err != 0) {
        ::close(ready->first);
        return fail(ErrorCode::Internal, "cannot start " + m_binary + (spec.cgroupProcsFds.empty() ? "" : " in its cgroup") +
                                             ": " + std::strerror(spawned.err));
    }
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, spawned.pid, 0));
    auto sandbox = std::make_unique<SandboxProcess>(name(), spawned.pid, pidfd, socketPath);

    if (auto served = awaitInit(*sandbox, spec, name(), ready->first, socketPath, m_mode == SocketMode::BoundDirectory);
        !served)
        return std::unexpected(served.error());
    return std::unique_ptr<RunningSandbox>(std::move(sandbox));
}

Result<int> OciRuntime::runToCompletion(const SandboxSpec &spec, const std::vector<std::string> &command)
{
    const RuntimeDirs dirs = runtimeDirsOf(spec);
    std::error_code ec;
    fs::create_directories(dirs.state, ec);
    OciBundleOptions bundle = baseBundle(spec, dirs.bundle);
    bundle.args = command;
    if (m_mode == SocketMode::BoundDirectory)
        bundle.controlDir = spec.controlDir;
    if (auto written = writeOciBundle(bundle); !written)
        return std::unexpected(written.error());
    const Spawned spawned = spawn(runCommand(dirs.bundle, dirs.state, spec.id, 0, false), spec.cgroupProcsFds, {});
    if (spawned.err != 0)
        return fail(ErrorCode::Internal, "cannot start " + m_binary + ": " + std::strerror(spawned.err));
    int status = 0;
    while (::waitpid(spawned.pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

} // namespace paddock::pool
