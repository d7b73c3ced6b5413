#include "pool/runtimes/bwrap_runtime.h"

#include <cstring>
#include <sys/syscall.h>
#include <unistd.h>

namespace paddock::pool {
namespace {

namespace fs = std::filesystem;

constexpr int kStartTimeoutMs = 10000;
constexpr int kListenFdInside = 3;
constexpr int kReadyFdInside = 4;

} // namespace

BwrapRuntime::BwrapRuntime(std::string bwrap) : m_bwrap(std::move(bwrap)) {}

BwrapRuntime::~BwrapRuntime() = default;

Result<std::unique_ptr<BwrapRuntime>> BwrapRuntime::create()
{
    std::string bwrap = findExecutable("bwrap");
    if (bwrap.empty())
        return fail(ErrorCode::NotFound, "bwrap (bubblewrap) is not installed or not on PATH; install it "
                                         "(Debian/Ubuntu: apt-get install bubblewrap) and start paddock-pool again");
    return std::unique_ptr<BwrapRuntime>(new BwrapRuntime(std::move(bwrap)));
}

std::vector<std::string> BwrapRuntime::commandLine(const SandboxSpec &spec, const std::vector<std::string> &command) const
{
    std::vector<std::string> args = {m_bwrap};
    if (spec.identity.mapped()) {
        // bwrap starts inside the sandbox's user namespace, as its root (spawnSandboxProcess
        // joins it): every namespace but that one is new, and no further user namespace is made.
        args.insert(args.end(), {"--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"});
    } else {
        // bwrap makes the user namespace. Run by an ordinary user, it maps that user alone, as
        // sandbox root (uid 0 inside, no capabilities), as the OCI runtimes do.
        args.push_back("--unshare-all");
        if (::geteuid() != 0)
            args.insert(args.end(), {"--uid", "0", "--gid", "0"});
    }
    args.insert(args.end(), {
        "--new-session", "--die-with-parent", "--as-pid-1",
        // No capabilities, but CAP_SETPCAP for the init alone: bwrap empties the bounding set only
        // when it makes the user namespace, so the init empties it, then drops that one too
        // (pool/init/capabilities.h). No exec ever gets a capability back.
        "--cap-drop", "ALL", "--cap-add", "CAP_SETPCAP",
        "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/workspace",
        "--setenv", "LANG", "C.UTF-8",
        "--ro-bind", "/usr", "/usr"});
    // Mirror the host's top-level system directories: symlinks on a merged-/usr system, read-only
    // binds otherwise.
    for (const char *dir : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
        const fs::path host = fs::path("/") / dir;
        std::error_code ec;
        auto st = fs::symlink_status(host, ec);
        if (ec)
            continue;
        if (fs::is_symlink(st)) {
            args.insert(args.end(), {"--symlink", fs::read_symlink(host, ec).string(), host.string()});
        } else if (fs::is_directory(st)) {
            args.insert(args.end(), {"--ro-bind", host.string(), host.string()});
        }
    }
    // The pool's minimal /etc, never the host's.
    if (!spec.etcDir.empty())
        args.insert(args.end(), {"--ro-bind", spec.etcDir.string(), "/etc"});
    args.insert(args.end(), {"--proc", "/proc"});
    for (const char *path : kMaskedProcPaths) {
        std::error_code ec;
        const auto st = fs::status(path, ec);
        if (ec)
            continue;
        if (fs::is_directory(st))
            args.insert(args.end(), {"--tmpfs", path, "--remount-ro", path});
        else
            args.insert(args.end(), {"--ro-bind", "/dev/null", path});
    }
    args.insert(args.end(), {
                             "--dev", "/dev", "--tmpfs", "/tmp",
                             "--bind", spec.workspaceDir.string(), "/workspace",
                             "--ro-bind", spec.initPath.string(), kInitInsidePath});
    if (!spec.egressSocket.empty())
        args.insert(args.end(), {"--ro-bind", spec.egressSocket.string(), kEgressSocketInside});
    args.insert(args.end(), {
                             // bwrap's root is a writable tmpfs; only /workspace and /tmp stay writable.
                             "--remount-ro", "/",
                             "--chdir", "/workspace", "--"});
    args.insert(args.end(), command.begin(), command.end());
    return args;
}

Result<std::unique_ptr<RunningSandbox>> BwrapRuntime::start(const SandboxSpec &spec)
{
    auto listenFd = listenForInit(spec.controlDir);
    if (!listenFd)
        return std::unexpected(listenFd.error());
    auto ready = readyPipe();
    if (!ready) {
        ::close(*listenFd);
        return std::unexpected(ready.error());
    }

    std::vector<std::string> initArgs = {kInitInsidePath, "--listen-fd", std::to_string(kListenFdInside), "--ready-fd",
                                         std::to_string(kReadyFdInside)};
    if (!spec.egressSocket.empty())
        initArgs.insert(initArgs.end(), {"--egress-socket", kEgressSocketInside});
    if (spec.seccomp)
        initArgs.push_back("--seccomp");
    SpawnSpec spawn;
    spawn.userNsFd = spec.identity.userNsFd;
    spawn.argv = commandLine(spec, initArgs);
    spawn.cgroupProcsFds = spec.cgroupProcsFds;
    spawn.fdMap = {{*listenFd, kListenFdInside}, {ready->second, kReadyFdInside}};
    // bwrap --new-session makes the sandbox's own session; bwrap itself only needs a process group.
    spawn.newSession = false;
    const Spawned spawned = spawnSandboxProcess(m_spawner, spawn);
    ::close(*listenFd);   // only the init holds it now: its death makes connect() fail at once
    ::close(ready->second);
    if (spawned.err != 0) {
        ::close(ready->first);
        return fail(ErrorCode::Internal, "cannot start " + m_bwrap + (spec.cgroupProcsFds.empty() ? "" : " in its cgroup") +
                                             ": " + std::strerror(spawned.err));
    }
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, spawned.pid, 0));
    auto sandbox = std::make_unique<SandboxProcess>("bwrap", spawned.pid, pidfd, spec.controlDir / "init.sock");

    // The init writes one byte once it is listening; EOF means bwrap or the init died first.
    switch (waitForInit(ready->first, kStartTimeoutMs)) {
    case InitReady::Ready:
        return std::unique_ptr<RunningSandbox>(std::move(sandbox));
    case InitReady::TimedOut:
        sandbox->kill();
        return fail(ErrorCode::DeadlineExceeded, "sandbox " + spec.id + " did not start within " +
                                                     std::to_string(kStartTimeoutMs) + " ms; the host may be overloaded");
    case InitReady::Died:
        break;
    }
    sandbox->kill();
    return fail(ErrorCode::Internal, "sandbox " + spec.id + " failed to start (" + sandbox->exitReason().value_or("unknown") +
                                         "); bwrap's own message is in paddock-pool's log (stderr)");
}

} // namespace paddock::pool
