// paddock-sandbox-init's exec request: the command runs in its own process group with an
// environment built from nothing, its output relayed as frames as it comes (up to
// max_output_bytes), its stdin fed from the request, and its exit answered last. A timeout, or the
// pool hanging up, kills the whole group.
//
// Threads: none; runs in a handler process (sandbox_init_handler.cpp), one command at a time.

#include "pool/init/sandbox_init_internal.h"
#include "pool/init/egress_forwarder.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace paddock::pool::sandbox_init {

void setSchedulerSlice(uint64_t ns)
{
    // struct sched_attr, first version (48 bytes); its uapi header clashes with glibc's <sched.h>.
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } attr {};
    static_assert(sizeof attr == 48);
    attr.size = sizeof attr;
    attr.policy = SCHED_OTHER;
    attr.nice = ::getpriority(PRIO_PROCESS, 0);
    attr.runtime = ns;   // 0: the default slice
    (void)::syscall(SYS_sched_setattr, 0, &attr, 0);
}

namespace {

constexpr int64_t kDefaultMaxOutputBytes = 16ll << 20;
constexpr int kDrainAfterExitMs = 200;   // output still in flight after the command's group died
constexpr size_t kReadChunkBytes = 64 * 1024;

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

std::string findProgram(const std::string &name, const std::string &pathVar)
{
    if (name.find('/') != std::string::npos)
        return name;
    size_t start = 0;
    while (start <= pathVar.size()) {
        size_t end = pathVar.find(':', start);
        if (end == std::string::npos)
            end = pathVar.size();
        std::string dir = pathVar.substr(start, end - start);
        if (dir.empty())
            dir = ".";
        std::string candidate = dir + "/" + name;
        struct stat st {};
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
            return candidate;
        start = end + 1;
    }
    return {};
}

struct SpawnArgs {
    const char *path;
    char *const *argv;
    char *const *envp;
    const char *cwd;
    int in, out, err;
    int error;   // written by the child (it shares our memory until it execs)
};

int spawnChild(void *p)
{
    // Runs on its own stack in our memory (CLONE_VM | CLONE_VFORK), with us suspended: only
    // async-signal-safe calls. The handler installs no signal handlers, so none can run here.
    auto *a = static_cast<SpawnArgs *>(p);
    ::setpgid(0, 0);
    setSchedulerSlice(0);
    // Only ignored signals survive an exec (caught ones are reset by it, and we catch none).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig)
        if (sigismember(&g_ignoredSignals, sig) == 1)
            ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::dup2(a->in, 0) < 0 || ::dup2(a->out, 1) < 0 || ::dup2(a->err, 2) < 0 || ::chdir(a->cwd) != 0) {
        a->error = errno;
        _exit(127);
    }
    ::execve(a->path, a->argv, a->envp);
    a->error = errno;
    _exit(127);
}

// Like posix_spawn (a vfork: no copy of the handler's page tables), without its per-signal loop:
// glibc's child makes two sigaction calls for each of the 64 signals, ~0.1 ms on a VM, on the
// latency path of every exec. Returns 0 or the errno of the failed step (the child is reaped).
int spawnCommand(SpawnArgs &a, pid_t &pid)
{
    alignas(64) static char stack[64 * 1024];   // one spawn at a time: the handler is single-threaded
    a.error = 0;
    pid = ::clone(spawnChild, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
    if (pid < 0)
        return errno;
    if (a.error != 0) {
        ::waitpid(pid, nullptr, 0);
        pid = -1;
        return a.error;
    }
    return 0;
}

// The environment is built from nothing: no variable of the host or of the pool leaks in.
std::map<std::string, std::string> commandEnvironment(const json &header)
{
    std::map<std::string, std::string> env = {
        {"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", g_workspace}, {"LANG", "C.UTF-8"}};
    if (!g_egressSocket.empty()) {
        // Allowlist tier: ordinary tools find the forwarder on the sandbox's own loopback.
        const std::string proxy = "http://127.0.0.1:" + std::to_string(paddock::pool::init::kEgressProxyPort);
        for (const char *name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"})
            env[name] = proxy;
        env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1";
    }
    if (header.contains("env") && header["env"].is_object())
        for (auto &[k, v] : header["env"].items())
            if (v.is_string() && !k.empty() && k.find('=') == std::string::npos)
                env[k] = v.get<std::string>();
    return env;
}

// The answer for a command that never ran: why, on stderr, and the exit code a shell gives.
void sendNotRun(int conn, const std::string &message, int exitCode)
{
    proto::writeFrame(conn, proto::kStderr, message);
    proto::writeFrame(conn, proto::kExit,
                      dumpJson({{"exit_code", exitCode}, {"signal", 0}, {"duration_ms", 0.0}, {"timed_out", false},
                                {"truncated", false}}));
}

// One command from its spawn to its exit: its pipes, how its exit is heard, and what was sent.
struct RunningCommand {
    int conn = -1;
    pid_t pid = -1;
    int pidfd = -1;            // its pidfd, or g_childSignalFd (then not owned), or -1
    bool pidfdOwned = false;
    int stdinFd = -1, outFd = -1, errFd = -1;
    const std::string &stdinData;
    size_t stdinOff = 0;
    int64_t maxOutput = 0;
    int64_t startUs = 0, deadlineUs = INT64_MAX;
    int64_t startedUnixUs = 0;   // the host's clock (the sandbox shares it) at the spawn
    bool exited = false, timedOut = false, peerGone = false, truncated = false;
    int status = 0;
    int64_t endUs = 0, sent = 0;
    std::vector<char> buf = std::vector<char>(kReadChunkBytes);
};

void reap(RunningCommand &c, int flags)
{
    if (c.exited)
        return;
    pid_t r = ::waitpid(c.pid, &c.status, flags);
    if (r == c.pid) {
        c.exited = true;
        c.endUs = monoUs();
        // Whatever the command left running in its group goes with it.
        ::kill(-c.pid, SIGKILL);
    }
}

// Relays what is ready on one of the command's output pipes, up to max_output_bytes in all.
void pumpOutput(RunningCommand &c, const pollfd *fds, int idx, int &fd, char type)
{
    if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR)))
        return;
    ssize_t got = ::read(fd, c.buf.data(), c.buf.size());
    if (got > 0) {
        if (c.sent + got > c.maxOutput) {
            c.truncated = true;
            got = std::max<int64_t>(0, c.maxOutput - c.sent);
        }
        if (got > 0 && !c.peerGone) {
            if (!proto::writeFrame(c.conn, type, std::string_view(c.buf.data(), static_cast<size_t>(got))))
                c.peerGone = true;
            c.sent += got;
        }
    } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        ::close(fd);
        fd = -1;
    }
}

void feedStdin(RunningCommand &c)
{
    ssize_t w = ::write(c.stdinFd, c.stdinData.data() + c.stdinOff, c.stdinData.size() - c.stdinOff);
    if (w > 0)
        c.stdinOff += static_cast<size_t>(w);
    if ((w < 0 && errno != EAGAIN && errno != EINTR) || c.stdinOff >= c.stdinData.size()) {
        ::close(c.stdinFd);
        c.stdinFd = -1;
    }
}

// Relays output and stdin until the command has exited and its pipes are drained (or the drain
// window is over); kills its group at the deadline or when the pool hangs up.
void watchCommand(RunningCommand &c)
{
    while (!c.exited || c.outFd >= 0 || c.errFd >= 0) {
        pollfd fds[5];
        int n = 0;
        int iOut = -1, iErr = -1, iIn = -1, iConn = -1, iPid = -1;
        if (c.outFd >= 0) { iOut = n; fds[n++] = {c.outFd, POLLIN, 0}; }
        if (c.errFd >= 0) { iErr = n; fds[n++] = {c.errFd, POLLIN, 0}; }
        if (c.stdinFd >= 0) { iIn = n; fds[n++] = {c.stdinFd, POLLOUT, 0}; }
        if (!c.peerGone) { iConn = n; fds[n++] = {c.conn, POLLRDHUP, 0}; }
        if (!c.exited && c.pidfd >= 0) { iPid = n; fds[n++] = {c.pidfd, POLLIN, 0}; }

        const int64_t now = monoUs();
        int64_t waitMs = -1;
        if (c.exited)
            waitMs = std::max<int64_t>(0, (c.endUs + kDrainAfterExitMs * 1000 - now) / 1000);
        else if (c.deadlineUs != INT64_MAX && !c.timedOut)
            waitMs = std::max<int64_t>(0, (c.deadlineUs - now + 999) / 1000);
        else if (c.pidfd < 0)
            waitMs = 10;   // no pidfd (old kernel): poll for the exit
        int ready = ::poll(fds, static_cast<nfds_t>(n), static_cast<int>(std::min<int64_t>(waitMs, INT_MAX)));
        if (ready < 0 && errno != EINTR)
            break;

        if (ready == 0 && c.exited)
            break;   // drain window over; something outside the group still holds the pipes
        if (!c.exited && !c.timedOut && monoUs() >= c.deadlineUs) {
            c.timedOut = true;
            ::kill(-c.pid, SIGKILL);
        }
        if (ready <= 0) {
            if (c.pidfd < 0)
                reap(c, WNOHANG);
            continue;
        }

        pumpOutput(c, fds, iOut, c.outFd, proto::kStdout);
        pumpOutput(c, fds, iErr, c.errFd, proto::kStderr);

        if (iIn >= 0 && (fds[iIn].revents & (POLLOUT | POLLERR | POLLHUP)))
            feedStdin(c);
        if (iConn >= 0 && (fds[iConn].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
            // The pool gave up on this exec (deadline, shutdown): nobody reads the result.
            c.peerGone = true;
            ::kill(-c.pid, SIGKILL);
        }
        if (iPid >= 0 && (fds[iPid].revents & POLLIN)) {
            if (c.pidfdOwned) {
                reap(c, 0);
            } else {
                signalfd_siginfo si {};
                while (::read(c.pidfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
                }
                reap(c, WNOHANG);
            }
        }
    }
}

// Closes what is left of the command's pipes and makes sure it is gone and reaped.
void endCommand(RunningCommand &c)
{
    if (c.stdinFd >= 0)
        ::close(c.stdinFd);
    if (c.outFd >= 0)
        ::close(c.outFd);
    if (c.errFd >= 0)
        ::close(c.errFd);
    if (!c.exited) {
        ::kill(-c.pid, SIGKILL);
        reap(c, 0);
    }
    if (c.pidfdOwned)
        ::close(c.pidfd);
}

void sendExit(const RunningCommand &c)
{
    int exitCode = -1, signal = 0;
    if (WIFEXITED(c.status))
        exitCode = WEXITSTATUS(c.status);
    else if (WIFSIGNALED(c.status))
        signal = WTERMSIG(c.status);
    proto::writeFrame(c.conn, proto::kExit,
                      dumpJson({{"exit_code", exitCode},
                                {"signal", signal},
                                {"duration_ms", static_cast<double>(c.endUs - c.startUs) / 1000.0},
                                {"started_unix_us", c.startedUnixUs},
                                {"timed_out", c.timedOut},
                                {"truncated", c.truncated}}));
}

// Spawns the command with fresh pipes, relays until it is over, then answers with its exit.
void runCommand(int conn, const std::string &program, std::vector<std::string> &argv,
                const std::map<std::string, std::string> &env, const std::string &cwd, const std::string &stdinData,
                int64_t timeoutMs, int64_t maxOutput)
{
    std::vector<std::string> envStrings;
    for (auto &[k, v] : env)
        envStrings.push_back(k + "=" + v);
    std::vector<char *> envp, args;
    for (auto &s : envStrings)
        envp.push_back(s.data());
    envp.push_back(nullptr);
    for (auto &s : argv)
        args.push_back(s.data());
    args.push_back(nullptr);

    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    // Every end still open, closed when the command cannot run: the init lives as long as the
    // sandbox, and a command that fails to start must not cost it descriptors.
    auto closePipes = [&] {
        for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]})
            if (fd >= 0)
                ::close(fd);
    };
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
        const int error = errno;
        closePipes();
        sendError(conn, "internal", "cannot create pipes: " + errnoText(error));
        return;
    }

    const int64_t startUs = monoUs();
    const int64_t startedUnixUs = std::chrono::duration_cast<std::chrono::microseconds>(
                                      std::chrono::system_clock::now().time_since_epoch()).count();
    // The command gets its own process group, so a timeout kills it and everything it started.
    SpawnArgs sa {program.c_str(), args.data(), envp.data(), cwd.c_str(), in[0], out[1], err[1], 0};
    pid_t pid = -1;
    int spawnErr = spawnCommand(sa, pid);
    if (spawnErr != 0) {
        std::string msg = "paddock-sandbox-init: cannot run " + program + ": " + errnoText(spawnErr) + "\n";
        if (spawnErr == EAGAIN)
            msg += "the sandbox may be out of processes\n";
        closePipes();
        sendNotRun(conn, msg, spawnErr == ENOENT ? 127 : 126);
        return;
    }
    ::setpgid(pid, pid);   // also from the parent: no window where a kill(-pid) misses it
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    RunningCommand c{.conn = conn, .pid = pid, .stdinData = stdinData};
    c.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    c.pidfdOwned = c.pidfd >= 0;
    if (c.pidfd < 0 && g_childSignalFd >= 0)
        c.pidfd = g_childSignalFd;   // readable at SIGCHLD; the reap below uses WNOHANG then

    c.stdinFd = in[1];
    setNonBlocking(c.stdinFd);
    setNonBlocking(out[0]);
    setNonBlocking(err[0]);
    if (stdinData.empty()) {
        ::close(c.stdinFd);
        c.stdinFd = -1;
    }
    c.outFd = out[0];
    c.errFd = err[0];
    c.maxOutput = maxOutput;
    c.startUs = startUs;
    c.startedUnixUs = startedUnixUs;
    c.deadlineUs = timeoutMs > 0 ? startUs + timeoutMs * 1000 : INT64_MAX;

    watchCommand(c);
    endCommand(c);
    if (c.peerGone)
        return;
    sendExit(c);
}

} // namespace

void handleExec(int conn, const json &header)
{
    std::vector<std::string> argv = header.value("argv", std::vector<std::string>{});
    if (argv.empty() || argv[0].empty()) {
        sendError(conn, "invalid_argument", "exec needs a non-empty argv; pass e.g. [\"/bin/sh\", \"-c\", \"...\"]");
        return;
    }
    auto stdinFrame = proto::readFrame(conn);
    if (!stdinFrame || stdinFrame->type != proto::kStdin) {
        sendError(conn, "invalid_argument", "exec header must be followed by a stdin frame");
        return;
    }
    const int64_t timeoutMs = header.value("timeout_ms", int64_t{0});
    const int64_t maxOutput = header.value("max_output_bytes", kDefaultMaxOutputBytes);
    std::map<std::string, std::string> env = commandEnvironment(header);

    std::string cwd = sandboxPath(header.value("cwd", std::string{}));
    struct stat st {};
    if (::stat(cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        sendError(conn, "invalid_argument",
                  "working directory '" + cwd + "' does not exist in the sandbox; use a directory under " + g_workspace);
        return;
    }

    const std::string program = findProgram(argv[0], env["PATH"]);
    if (program.empty()) {
        sendNotRun(conn, "paddock-sandbox-init: " + argv[0] + ": command not found\n", 127);
        return;
    }
    runCommand(conn, program, argv, env, cwd, stdinFrame->payload, timeoutMs, maxOutput);
}

} // namespace paddock::pool::sandbox_init
