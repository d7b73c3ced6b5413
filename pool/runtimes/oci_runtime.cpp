#include "pool/runtimes/oci_runtime.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace paddock::pool {
namespace {

namespace fs = std::filesystem;

// runsc takes 150-300 ms to start here, much more on a loaded host.
constexpr int kStartTimeoutMs = 30000;
constexpr int kListenBacklog = 128;

int highFd(int fd)
{
    int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
    ::close(fd);
    return high;
}

std::string describeStatus(const std::string &name, int status)
{
    if (WIFEXITED(status))
        return name + " exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return name + " was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    return name + " ended";
}

// The direct children of pid (every thread's), from /proc.
std::vector<pid_t> childrenOf(pid_t pid)
{
    std::vector<pid_t> out;
    const std::string taskDir = "/proc/" + std::to_string(pid) + "/task";
    DIR *dir = ::opendir(taskDir.c_str());
    if (!dir)
        return out;
    while (dirent *e = ::readdir(dir)) {
        if (e->d_name[0] == '.')
            continue;
        std::ifstream in(taskDir + "/" + e->d_name + "/children");
        pid_t child;
        while (in >> child)
            out.push_back(child);
    }
    ::closedir(dir);
    return out;
}

fs::path runtimeDirOf(const SandboxSpec &spec)
{
    return spec.runtimeDir.empty() ? spec.controlDir.parent_path() / "runtime" : spec.runtimeDir;
}

class OciSandbox : public RunningSandbox {
public:
    OciSandbox(std::string name, pid_t pid, int pidfd, fs::path socket, int socketPathFd)
        : m_name(std::move(name)), m_pid(pid), m_pidfd(pidfd), m_socket(std::move(socket)), m_socketPathFd(socketPathFd)
    {
    }
    ~OciSandbox() override
    {
        kill();
        if (m_pidfd >= 0)
            ::close(m_pidfd);
        if (m_socketPathFd >= 0)
            ::close(m_socketPathFd);
    }

    // Before the sandbox is handed out: connect through this descriptor of the socket instead.
    void useSocketDescriptor(int pathFd)
    {
        m_socketPathFd = pathFd;
        m_socket = "/proc/self/fd/" + std::to_string(pathFd);
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
        // The runtime's children first (they cannot be reaped, so their pids cannot be reused,
        // while it lives; pidfds make the signal race-free anyway): runsc's gofer and sandbox
        // (the sandbox is the whole user-space kernel), crun's container PID 1 (the kernel
        // then kills its PID namespace).
        for (pid_t child : childrenOf(m_pid)) {
            int fd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
            if (fd >= 0) {
                ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
                ::close(fd);
            }
        }
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
            m_reason = describeStatus(m_name, status);
        else if (r < 0)
            m_reason = m_name + " is gone: " + std::strerror(errno);
    }

    std::mutex m_mutex;
    const std::string m_name;
    const pid_t m_pid;
    const int m_pidfd;
    fs::path m_socket;                      // set before the sandbox is shared
    int m_socketPathFd;                     // O_PATH of the init's socket (runsc), or -1
    std::optional<std::string> m_reason;    // guarded by m_mutex
};

} // namespace

std::string findExecutable(const std::string &name)
{
    const char *path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
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

OciRuntime::OciRuntime(std::string binary, SocketMode mode) : m_binary(std::move(binary)), m_mode(mode)
{
    m_spawner = std::thread([this] { spawnerLoop(); });
}

OciRuntime::~OciRuntime()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_cv.notify_all();
    m_spawner.join();
}

void OciRuntime::spawnerLoop()
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

void OciRuntime::onSpawnerThread(const std::function<void()> &fn)
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

OciRuntime::Spawned OciRuntime::spawn(const std::vector<std::string> &argvStrings, const std::vector<int> &cgroupFds,
                                      const std::vector<std::pair<int, int>> &fdMap)
{
    std::vector<char *> argv;
    for (const auto &s : argvStrings)
        argv.push_back(const_cast<char *>(s.c_str()));
    argv.push_back(nullptr);
    // The runtimes need no environment; the container's is in config.json.
    char *emptyEnv[] = {nullptr};
    const std::string detach = m_detachMount.string();
    const char *detachPath = detach.empty() ? nullptr : detach.c_str();

    Spawned out;
    int errPipe[2];
    if (::pipe2(errPipe, O_CLOEXEC) != 0) {
        out.err = errno;
        return out;
    }
    errPipe[0] = highFd(errPipe[0]);
    errPipe[1] = highFd(errPipe[1]);
    const int errFd = errPipe[1];
    onSpawnerThread([&] {
        sigset_t all, old;
        sigfillset(&all);
        ::pthread_sigmask(SIG_SETMASK, &all, &old);
        // vfork, as for bwrap (bwrap_runtime.cpp says why): only async-signal-safe calls below.
        pid_t pid = ::vfork();
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
            // A session of its own: no controlling terminal, so nothing inside can open the
            // pool's terminal (/dev/tty) or TIOCSTI into it; a Ctrl-C reaches only the pool.
            if (::setsid() < 0)
                die(errno);
            if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
                die(errno);
            if (detachPath) {
                if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                    ::umount2(detachPath, MNT_DETACH) != 0)
                    die(errno);
            }
            int devNullIn = ::open("/dev/null", O_RDONLY);
            int devNullOut = ::open("/dev/null", O_WRONLY);
            if (devNullIn < 0 || devNullOut < 0 || ::dup2(devNullIn, 0) < 0 || ::dup2(devNullOut, 1) < 0)
                die(errno);
            for (const auto &[from, to] : fdMap)
                if (::dup2(from, to) < 0)
                    die(errno);
            sigset_t none;
            sigemptyset(&none);
            ::sigprocmask(SIG_SETMASK, &none, nullptr);
            ::execve(argv[0], argv.data(), emptyEnv);
            die(errno);
        }
        out.pid = pid;
        if (pid < 0)
            out.err = errno;
        ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    });
    ::close(errPipe[1]);
    if (out.err == 0) {
        int childErr = 0;
        ssize_t n;
        do {
            n = ::read(errPipe[0], &childErr, sizeof childErr);
        } while (n < 0 && errno == EINTR);
        if (n == static_cast<ssize_t>(sizeof childErr)) {
            out.err = childErr;
            int status;
            while (::waitpid(out.pid, &status, 0) < 0 && errno == EINTR) {
            }
            out.pid = -1;
        }
    }
    ::close(errPipe[0]);
    return out;
}

Result<std::unique_ptr<RunningSandbox>> OciRuntime::start(const SandboxSpec &spec)
{
    const fs::path runtimeDir = runtimeDirOf(spec);
    const fs::path bundleDir = runtimeDir / "bundle";
    const fs::path stateDir = runtimeDir / "state";
    std::error_code ec;
    fs::create_directories(stateDir, ec);
    fs::create_directories(bundleDir, ec);
    fs::permissions(runtimeDir, fs::perms::owner_all, ec);

    OciBundleOptions bundle;
    bundle.bundleDir = bundleDir;
    bundle.workspaceDir = spec.workspaceDir;
    bundle.initPath = spec.initPath;
    bundle.cpu = spec.cpu;
    bundle.memoryBytes = spec.memoryBytes;
    bundle.pids = spec.pids;
    bundle.egressSocket = spec.egressSocket;

    // The init says it listens by writing one byte: EOF first means the runtime or the init died.
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0)
        return fail(ErrorCode::ResourceExhausted, std::string("cannot create a pipe: ") + std::strerror(errno));
    ready[0] = highFd(ready[0]);
    ready[1] = highFd(ready[1]);

    const fs::path socketPath = spec.controlDir / "init.sock";
    std::vector<std::pair<int, int>> fdMap;
    int listenFd = -1;
    int preserved = 0;
    if (m_mode == SocketMode::InheritedFd) {
        listenFd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listenFd >= 0)
            listenFd = highFd(listenFd);
        sockaddr_un addr {};
        addr.sun_family = AF_UNIX;
        int dirFd = ::open(spec.controlDir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        const std::string bindPath = "/proc/self/fd/" + std::to_string(dirFd) + "/init.sock";
        std::strncpy(addr.sun_path, bindPath.c_str(), sizeof addr.sun_path - 1);
        if (dirFd >= 0)
            ::unlinkat(dirFd, "init.sock", 0);
        const bool bound = listenFd >= 0 && dirFd >= 0 &&
                           ::bind(listenFd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0 &&
                           ::listen(listenFd, kListenBacklog) == 0;
        const int bindErr = errno;
        if (dirFd >= 0) {
            ::fchmodat(dirFd, "init.sock", 0600, 0);
            ::close(dirFd);
        }
        if (!bound) {
            if (listenFd >= 0)
                ::close(listenFd);
            ::close(ready[0]);
            ::close(ready[1]);
            return fail(ErrorCode::Internal, "cannot create the sandbox's control socket in " + spec.controlDir.string() +
                                                 ": " + std::strerror(bindErr) + "; check the pool's state directory");
        }
        fdMap = {{listenFd, 3}, {ready[1], 4}};
        preserved = 2;
        bundle.args = {kOciInitInsidePath, "--listen-fd", "3", "--ready-fd", "4"};
    } else {
        bundle.controlDir = spec.controlDir;
        fdMap = {{ready[1], 1}};
        bundle.args = {kOciInitInsidePath, "--socket", std::string(kOciControlInsideDir) + "/init.sock", "--ready-fd", "1"};
    }
    if (!spec.egressSocket.empty())
        bundle.args.insert(bundle.args.end(), {"--egress-socket", kEgressSocketInside});
    if (auto written = writeOciBundle(bundle); !written) {
        if (listenFd >= 0)
            ::close(listenFd);
        ::close(ready[0]);
        ::close(ready[1]);
        return std::unexpected(written.error());
    }

    const auto argv = runCommand(bundleDir, stateDir, spec.id, preserved, !spec.egressSocket.empty());
    const Spawned spawned = spawn(argv, spec.cgroupProcsFds, fdMap);
    if (listenFd >= 0)
        ::close(listenFd);   // only the init holds it now: its death makes connect() fail at once
    ::close(ready[1]);
    if (spawned.err != 0) {
        ::close(ready[0]);
        return fail(ErrorCode::Internal, "cannot start " + m_binary + (spec.cgroupProcsFds.empty() ? "" : " in its cgroup") +
                                             ": " + std::strerror(spawned.err));
    }
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, spawned.pid, 0));
    auto sandbox = std::make_unique<OciSandbox>(name(), spawned.pid, pidfd, socketPath, -1);

    pollfd pfd {ready[0], POLLIN, 0};
    int rc;
    do {
        rc = ::poll(&pfd, 1, kStartTimeoutMs);
    } while (rc < 0 && errno == EINTR);
    char byte = 0;
    const bool ok = rc > 0 && ::read(ready[0], &byte, 1) == 1 && byte == 'R';
    ::close(ready[0]);
    if (!ok) {
        sandbox->kill();
        if (rc == 0)
            return fail(ErrorCode::DeadlineExceeded, "sandbox " + spec.id + " (" + name() + ") did not start within " +
                                                         std::to_string(kStartTimeoutMs) + " ms; the host may be overloaded");
        return fail(ErrorCode::Internal, "sandbox " + spec.id + " failed to start (" + sandbox->exitReason().value_or("unknown") +
                                             "); " + name() + "'s own message is in paddock-pool's log (stderr)");
    }
    if (m_mode == SocketMode::BoundDirectory) {
        // The socket's file lives in a directory the sandbox can write: uid 0 inside could
        // unlink it and listen in its place. The pool connects through this descriptor of the
        // init's own socket instead, whatever the name comes to point at later.
        int pathFd = ::open(socketPath.c_str(), O_PATH | O_CLOEXEC);
        if (pathFd < 0) {
            const int err = errno;
            sandbox->kill();
            return fail(ErrorCode::Internal, "sandbox " + spec.id + " started, but its init's socket " + socketPath.string() +
                                                 " cannot be opened: " + std::strerror(err));
        }
        pathFd = highFd(pathFd);
        sandbox->useSocketDescriptor(pathFd);
    }
    return std::unique_ptr<RunningSandbox>(std::move(sandbox));
}

Result<int> OciRuntime::runToCompletion(const SandboxSpec &spec, const std::vector<std::string> &command)
{
    const fs::path runtimeDir = runtimeDirOf(spec);
    const fs::path bundleDir = runtimeDir / "bundle";
    const fs::path stateDir = runtimeDir / "state";
    std::error_code ec;
    fs::create_directories(stateDir, ec);
    OciBundleOptions bundle;
    bundle.bundleDir = bundleDir;
    bundle.workspaceDir = spec.workspaceDir;
    bundle.initPath = spec.initPath;
    bundle.args = command;
    if (m_mode == SocketMode::BoundDirectory)
        bundle.controlDir = spec.controlDir;
    if (auto written = writeOciBundle(bundle); !written)
        return std::unexpected(written.error());
    const Spawned spawned = spawn(runCommand(bundleDir, stateDir, spec.id, 0, false), spec.cgroupProcsFds, {});
    if (spawned.err != 0)
        return fail(ErrorCode::Internal, "cannot start " + m_binary + ": " + std::strerror(spawned.err));
    int status = 0;
    while (::waitpid(spawned.pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

} // namespace paddock::pool
