#include "pool/runtimes/sandbox_process.h"

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

constexpr int kListenBacklog = 128;

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

// argv as execve wants it: pointers into args, then nullptr. Built before the vfork, since the
// child may not allocate.
std::vector<char *> execArgv(const std::vector<std::string> &args)
{
    std::vector<char *> argv;
    for (const auto &s : args)
        argv.push_back(const_cast<char *>(s.c_str()));
    argv.push_back(nullptr);
    return argv;
}

// In the parent, after the vfork: EOF on the error pipe means the exec happened; otherwise the
// pipe holds the child's errno before it exited, and the child is reaped. Closes errRead.
void awaitExec(Spawned &out, int errRead)
{
    if (out.err == 0) {
        int childErr = 0;
        ssize_t n;
        do {
            n = ::read(errRead, &childErr, sizeof childErr);
        } while (n < 0 && errno == EINTR);
        if (n == static_cast<ssize_t>(sizeof childErr)) {
            out.err = childErr;
            int status;
            while (::waitpid(out.pid, &status, 0) < 0 && errno == EINTR) {
            }
            out.pid = -1;
        }
    }
    ::close(errRead);
}

} // namespace

int highFd(int fd)
{
    if (fd < 0)
        return fd;
    int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
    ::close(fd);
    return high;
}

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

SpawnerThread::SpawnerThread() : m_thread([this] { loop(); }) {}

SpawnerThread::~SpawnerThread()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_cv.notify_all();
    m_thread.join();
}

void SpawnerThread::loop()
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

void SpawnerThread::run(const std::function<void()> &fn)
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

Spawned spawnSandboxProcess(SpawnerThread &spawner, const SpawnSpec &spec)
{
    std::vector<char *> argv = execArgv(spec.argv);
    // The runtimes need no environment: each builds the sandbox's own (bwrap --clearenv,
    // config.json for the OCI runtimes).
    char *emptyEnv[] = {nullptr};
    const char *detachPath = spec.detachMount.empty() ? nullptr : spec.detachMount.c_str();
    const int userNsFd = spec.userNsFd;

    Spawned out;
    int errPipe[2];
    if (::pipe2(errPipe, O_CLOEXEC) != 0) {
        out.err = errno;
        return out;
    }
    errPipe[0] = highFd(errPipe[0]);
    errPipe[1] = highFd(errPipe[1]);
    const int errFd = errPipe[1];

    // vfork + exec rather than posix_spawn: between the two the child joins the sandbox's cgroup
    // (writing "0" to each cgroup.procs moves the writer), so the runtime and everything it starts
    // run under the limits from their first instruction. vfork, not fork: fork copies the page
    // tables of this large multi-threaded process, CPU that refills took from the claims running
    // beside them (pool_exec_bench: claim -> first command 3.7 ms with fork, 3.4 ms with vfork).
    // The child shares our memory until it execs, so it makes only async-signal-safe system
    // calls and touches nothing but its own signal dispositions (its own copy) and errno; an
    // error before exec comes back through a close-on-exec pipe.
    spawner.run([&] {
        // No handler of the pool may run in the child before it resets them.
        sigset_t all, old;
        sigfillset(&all);
        ::pthread_sigmask(SIG_SETMASK, &all, &old);
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
            for (int fd : spec.cgroupProcsFds)
                if (::write(fd, "0", 1) != 1)
                    die(errno);
            for (int sig = 1; sig < NSIG; ++sig)
                ::signal(sig, SIG_DFL);
            // A session of its own (no controlling terminal: nothing inside can open the pool's
            // terminal or TIOCSTI into it), or at least a process group: a Ctrl-C on the pool's
            // terminal reaches the pool, which then releases the sandboxes in order.
            if (spec.newSession ? ::setsid() < 0 : ::setpgid(0, 0) != 0)
                die(errno);
            if (detachPath) {
                if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                    ::umount2(detachPath, MNT_DETACH) != 0)
                    die(errno);
            }
            // Become the sandbox's root: host uid identity.hostId, every capability inside its
            // namespace, none outside it. Raw system calls: glibc's setresuid would try to
            // change the credentials of every thread of the pool, whose memory we share.
            if (userNsFd >= 0) {
                if (::setns(userNsFd, CLONE_NEWUSER) != 0 || ::syscall(SYS_setgroups, 0, nullptr) != 0 ||
                    ::syscall(SYS_setresgid, 0, 0, 0) != 0 || ::syscall(SYS_setresuid, 0, 0, 0) != 0)
                    die(errno);
            }
            // After the credentials change, which clears it.
            if (spec.dieWithPool && ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
                die(errno);
            int devNullIn = ::open("/dev/null", O_RDONLY);
            int devNullOut = ::open("/dev/null", O_WRONLY);
            if (devNullIn < 0 || devNullOut < 0 || ::dup2(devNullIn, 0) < 0 || ::dup2(devNullOut, 1) < 0)
                die(errno);
            for (const auto &[from, to] : spec.fdMap)
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
    awaitExec(out, errPipe[0]);
    return out;
}

Result<int> listenForInit(const fs::path &controlDir)
{
    int listenFd = highFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (listenFd < 0)
        return fail(ErrorCode::ResourceExhausted, std::string("cannot create a socket: ") + std::strerror(errno));
    sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    // Bind through the directory's descriptor: deep state directories exceed sun_path.
    int dirFd = ::open(controlDir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    const std::string bindPath = "/proc/self/fd/" + std::to_string(dirFd) + "/init.sock";
    std::strncpy(addr.sun_path, bindPath.c_str(), sizeof addr.sun_path - 1);
    if (dirFd >= 0)
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
        return fail(ErrorCode::Internal, "cannot create the sandbox's control socket in " + controlDir.string() + ": " +
                                             std::strerror(bindErr) + "; check the pool's state directory");
    }
    return listenFd;
}

Result<std::pair<int, int>> readyPipe()
{
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        return fail(ErrorCode::ResourceExhausted, std::string("cannot create a pipe: ") + std::strerror(errno));
    return std::pair{highFd(fds[0]), highFd(fds[1])};
}

InitReady waitForInit(int readFd, int timeoutMs)
{
    pollfd pfd {readFd, POLLIN, 0};
    int rc;
    do {
        rc = ::poll(&pfd, 1, timeoutMs);
    } while (rc < 0 && errno == EINTR);
    char byte = 0;
    const bool ok = rc > 0 && ::read(readFd, &byte, 1) == 1 && byte == 'R';
    ::close(readFd);
    if (ok)
        return InitReady::Ready;
    return rc == 0 ? InitReady::TimedOut : InitReady::Died;
}

SandboxProcess::SandboxProcess(std::string name, pid_t pid, int pidfd, fs::path socket)
    : m_name(std::move(name)), m_pid(pid), m_pidfd(pidfd), m_socket(std::move(socket))
{
}

SandboxProcess::~SandboxProcess()
{
    kill();
    if (m_pidfd >= 0)
        ::close(m_pidfd);
    if (m_socketPathFd >= 0)
        ::close(m_socketPathFd);
}

void SandboxProcess::useSocketDescriptor(int pathFd)
{
    m_socketPathFd = pathFd;
    m_socket = "/proc/self/fd/" + std::to_string(pathFd);
}

std::optional<std::string> SandboxProcess::exitReason()
{
    std::lock_guard lock(m_mutex);
    reapLocked(WNOHANG);
    return m_reason;
}

void SandboxProcess::kill()
{
    std::lock_guard lock(m_mutex);
    if (m_reason)
        return;
    // The runtime's children first (they cannot be reaped, so their pids cannot be reused, while
    // it lives; pidfds make the signal race-free anyway).
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

void SandboxProcess::reapLocked(int flags)
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

} // namespace paddock::pool
