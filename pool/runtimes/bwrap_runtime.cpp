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
    std::vector<std::string> args = {
        m_bwrap, "--unshare-all", "--new-session", "--die-with-parent", "--as-pid-1",
        // Run as (host) root, bwrap gives the sandbox a user namespace mapping 0 -> 0 with every
        // capability in it, enough to `mount -o remount,rw /usr` and write to the host. No
        // capabilities at all: the bounding set is emptied too, so no exec gets them back.
        "--cap-drop", "ALL",
        "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/workspace",
        "--setenv", "LANG", "C.UTF-8",
        "--ro-bind", "/usr", "/usr"};
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
    args.insert(args.end(), {"--ro-bind", "/etc", "/etc"});
    // /etc is shared read-only, but uid 0 inside still owns its files: hide the host's secrets.
    for (const char *secret : {"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"}) {
        std::error_code ec;
        if (fs::exists(secret, ec))
            args.insert(args.end(), {"--ro-bind", "/dev/null", secret});
    }
    if (std::error_code ec; fs::is_directory("/etc/ssh", ec))
        args.insert(args.end(), {"--tmpfs", "/etc/ssh"});
    args.insert(args.end(), {
                             "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
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
    SpawnSpec spawn;
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
