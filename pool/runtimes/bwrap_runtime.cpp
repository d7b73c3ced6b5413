#include "pool/runtimes/bwrap_runtime.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace paddock::pool {
namespace {

namespace fs = std::filesystem;

constexpr int kStartTimeoutMs = 10000;
constexpr int kListenFdInside = 3;
constexpr int kReadyFdInside = 4;
constexpr int kListenBacklog = 128;

std::string describeStatus(int status)
{
    if (WIFEXITED(status))
        return "bwrap exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return std::string("bwrap was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
               strsignal(WTERMSIG(status)) + ")";
    return "bwrap ended";
}

// A descriptor at 10 or above, close-on-exec, so that posix_spawn's dup2 onto 3 and 4 never
// collides with its source and no other thread's spawn inherits it.
int highFd(int fd)
{
    int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
    ::close(fd);
    return high;
}

class BwrapSandbox : public RunningSandbox {
public:
    BwrapSandbox(pid_t pid, int pidfd, fs::path socket) : m_pid(pid), m_pidfd(pidfd), m_socket(std::move(socket)) {}
    ~BwrapSandbox() override
    {
        kill();
        if (m_pidfd >= 0)
            ::close(m_pidfd);
    }

    fs::path controlSocket() const override { return m_socket; }
    int exitFd() const override { return m_pidfd; }

    std::optional<std::string> exitReason() override
    {
        std::lock_guard lock(m_mutex);
        reapLocked(WNOHANG);
        return m_reason;
    }

    void kill() override
    {
        std::lock_guard lock(m_mutex);
        if (m_reason)
            return;
        // bwrap --die-with-parent makes the init (PID 1 inside) die with bwrap, and the kernel
        // kills the rest of the PID namespace with its init.
        ::kill(m_pid, SIGKILL);
        reapLocked(0);
    }

private:
    void reapLocked(int flags)
    {
        if (m_reason)
            return;
        int status = 0;
        pid_t r;
        do {
            r = ::waitpid(m_pid, &status, flags);
        } while (r < 0 && errno == EINTR);
        if (r == m_pid)
            m_reason = describeStatus(status);
        else if (r < 0)
            m_reason = std::string("bwrap is gone: ") + std::strerror(errno);
    }

    std::mutex m_mutex;
    const pid_t m_pid;
    const int m_pidfd;
    const fs::path m_socket;
    std::optional<std::string> m_reason;   // guarded by m_mutex
};

std::string findOnPath(const std::string &name)
{
    const char *path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
        size_t end = dirs.find(':', start);
        if (end == std::string::npos)
            end = dirs.size();
        std::string candidate = dirs.substr(start, end - start) + "/" + name;
        if (::access(candidate.c_str(), X_OK) == 0)
            return candidate;
        start = end + 1;
    }
    return {};
}

} // namespace

BwrapRuntime::BwrapRuntime(std::string bwrap) : m_bwrap(std::move(bwrap))
{
    m_spawner = std::thread([this] { spawnerLoop(); });
}

BwrapRuntime::~BwrapRuntime()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_cv.notify_all();
    m_spawner.join();
}

void BwrapRuntime::spawnerLoop()
{
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_cv.wait(lock, [&] { return m_stopping || !m_queue.empty(); });
        if (m_queue.empty())
            return;
        auto fn = std::move(m_queue.front());
        m_queue.pop_front();
        lock.unlock();
        fn();
        lock.lock();
    }
}

void BwrapRuntime::onSpawnerThread(const std::function<void()> &fn)
{
    std::mutex doneMutex;
    std::condition_variable doneCv;
    bool done = false;
    {
        std::lock_guard lock(m_mutex);
        m_queue.push_back([&] {
            fn();
            std::lock_guard doneLock(doneMutex);
            done = true;
            doneCv.notify_all();
        });
    }
    m_cv.notify_all();
    std::unique_lock lock(doneMutex);
    doneCv.wait(lock, [&] { return done; });
}

Result<std::unique_ptr<BwrapRuntime>> BwrapRuntime::create()
{
    std::string bwrap = findOnPath("bwrap");
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
    const fs::path socketPath = spec.controlDir / "init.sock";
    int listenFd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listenFd < 0)
        return fail(ErrorCode::ResourceExhausted, std::string("cannot create a socket: ") + std::strerror(errno));
    listenFd = highFd(listenFd);
    sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    // Bind through the directory's descriptor: deep state directories exceed sun_path.
    int dirFd = ::open(spec.controlDir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    const std::string bindPath = "/proc/self/fd/" + std::to_string(dirFd) + "/init.sock";
    std::strncpy(addr.sun_path, bindPath.c_str(), sizeof addr.sun_path - 1);
    ::unlinkat(dirFd, "init.sock", 0);
    const bool bound = dirFd >= 0 && ::bind(listenFd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0 &&
                       ::listen(listenFd, kListenBacklog) == 0;
    const int bindErr = errno;
    if (dirFd >= 0) {
        ::fchmodat(dirFd, "init.sock", 0600, 0);
        ::close(dirFd);
    }
    if (!bound) {
        ::close(listenFd);
        return fail(ErrorCode::Internal, "cannot create the sandbox's control socket in " + spec.controlDir.string() +
                                             ": " + std::strerror(bindErr) + "; check the pool's state directory");
    }

    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) {
        ::close(listenFd);
        return fail(ErrorCode::ResourceExhausted, std::string("cannot create a pipe: ") + std::strerror(errno));
    }
    ready[0] = highFd(ready[0]);
    ready[1] = highFd(ready[1]);

    std::vector<std::string> initArgs = {kInitInsidePath, "--listen-fd", std::to_string(kListenFdInside), "--ready-fd",
                                         std::to_string(kReadyFdInside)};
    if (!spec.egressSocket.empty())
        initArgs.insert(initArgs.end(), {"--egress-socket", kEgressSocketInside});
    const auto argvStrings = commandLine(spec, initArgs);
    std::vector<char *> argv;
    for (const auto &s : argvStrings)
        argv.push_back(const_cast<char *>(s.c_str()));
    argv.push_back(nullptr);

    // vfork + exec rather than posix_spawn: between the two the child joins the sandbox's cgroup
    // (writing "0" to each cgroup.procs moves the writer), so bwrap and everything it starts
    // run under the limits from their first instruction. vfork, not fork: fork copies the page
    // tables of this large multi-threaded process, CPU that refills took from the claims running
    // beside them (pool_exec_bench: claim -> first command 3.7 ms with fork, 3.4 ms with vfork).
    // The child shares our memory until it execs, so
    // it makes only async-signal-safe system calls and touches nothing but its own signal
    // dispositions (its own copy) and errno; an error before exec comes back through a
    // close-on-exec pipe.
    int errPipe[2];
    if (::pipe2(errPipe, O_CLOEXEC) != 0) {
        ::close(listenFd);
        ::close(ready[0]);
        ::close(ready[1]);
        return fail(ErrorCode::ResourceExhausted, std::string("cannot create a pipe: ") + std::strerror(errno));
    }
    errPipe[0] = highFd(errPipe[0]);
    errPipe[1] = highFd(errPipe[1]);
    const std::vector<int> cgroupFds = spec.cgroupProcsFds;
    const int listenSrc = listenFd, readySrc = ready[1], errFd = errPipe[1];
    // The sandbox gets an empty environment from bwrap --clearenv; bwrap itself needs none.
    char *emptyEnv[] = {nullptr};
    const char *bwrapPath = m_bwrap.c_str();
    pid_t pid = -1;
    int spawnErr = 0;
    onSpawnerThread([&] {
        // No handler of the pool may run in the child before it resets them.
        sigset_t all, old;
        sigfillset(&all);
        ::pthread_sigmask(SIG_SETMASK, &all, &old);
        pid = ::vfork();
        if (pid == 0) {
            auto die = [&](int err) {
                (void)!::write(errFd, &err, sizeof err);
                ::_exit(127);
            };
            // A pool run under chrt (as the benchmarks suggest) must not hand its real-time
            // priority to sandboxes, and v1's cpu controller refuses real-time tasks in a cgroup
            // without an rt_runtime budget (EINVAL): back to SCHED_OTHER before joining.
            const sched_param normal {};
            if (::sched_setscheduler(0, SCHED_OTHER, &normal) != 0)
                die(errno);
            for (int fd : cgroupFds)
                if (::write(fd, "0", 1) != 1)
                    die(errno);
            for (int sig = 1; sig < NSIG; ++sig)
                ::signal(sig, SIG_DFL);
            // Own process group: a Ctrl-C on the pool's terminal reaches the pool, which then
            // releases the sandboxes in order, instead of killing them under it.
            if (::setpgid(0, 0) != 0)
                die(errno);
            int devNullIn = ::open("/dev/null", O_RDONLY);
            int devNullOut = ::open("/dev/null", O_WRONLY);
            if (devNullIn < 0 || devNullOut < 0 || ::dup2(devNullIn, 0) < 0 || ::dup2(devNullOut, 1) < 0 ||
                ::dup2(listenSrc, kListenFdInside) < 0 || ::dup2(readySrc, kReadyFdInside) < 0)
                die(errno);
            sigset_t none;
            sigemptyset(&none);
            ::sigprocmask(SIG_SETMASK, &none, nullptr);
            ::execve(bwrapPath, argv.data(), emptyEnv);
            die(errno);
        }
        if (pid < 0)
            spawnErr = errno;
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    });
    ::close(errPipe[1]);
    ::close(listenFd);   // only the init holds it now: its death makes connect() fail at once
    ::close(ready[1]);
    if (spawnErr == 0) {
        // EOF: the exec happened. Otherwise the child's errno before it exited.
        int childErr = 0;
        ssize_t n;
        do {
            n = ::read(errPipe[0], &childErr, sizeof childErr);
        } while (n < 0 && errno == EINTR);
        if (n == static_cast<ssize_t>(sizeof childErr)) {
            spawnErr = childErr;
            int status;
            while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
        }
    }
    ::close(errPipe[0]);
    if (spawnErr != 0) {
        ::close(ready[0]);
        return fail(ErrorCode::Internal, "cannot start " + m_bwrap + (cgroupFds.empty() ? "" : " in its cgroup") + ": " +
                                             std::strerror(spawnErr));
    }
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    auto sandbox = std::make_unique<BwrapSandbox>(pid, pidfd, socketPath);

    // The init writes one byte once it is listening; EOF means bwrap or the init died first.
    pollfd pfd {ready[0], POLLIN, 0};
    int rc;
    do {
        rc = ::poll(&pfd, 1, kStartTimeoutMs);
    } while (rc < 0 && errno == EINTR);
    char byte = 0;
    const bool ok = rc > 0 && ::read(ready[0], &byte, 1) == 1 && byte == 'R';
    ::close(ready[0]);
    if (!ok) {
        if (rc == 0) {
            sandbox->kill();
            return fail(ErrorCode::DeadlineExceeded, "sandbox " + spec.id + " did not start within " +
                                                         std::to_string(kStartTimeoutMs) + " ms; the host may be overloaded");
        }
        sandbox->kill();
        return fail(ErrorCode::Internal, "sandbox " + spec.id + " failed to start (" +
                                             sandbox->exitReason().value_or("unknown") +
                                             "); bwrap's own message is in paddock-pool's log (stderr)");
    }
    return std::unique_ptr<RunningSandbox>(std::move(sandbox));
}

} // namespace paddock::pool
