// paddock-sandbox-init: the first process inside every sandbox (PID 1 under bwrap --as-pid-1).
//
// It takes requests from the pool on a unix socket, one request per connection (protocol in
// init_protocol.h and docs/pool.md), and answers each in a handler process (forked ahead and
// reused for request after request), so a slow command never blocks another request and a
// crashing handler never takes PID 1 down. PID 1 itself only forks handlers and reaps: as the
// namespace's init it inherits every orphan.
//
// Known limits: a command that daemonizes into its own session (setsid) survives the end of its
// exec until the sandbox is released; output beyond max_output_bytes is dropped (reported as
// truncated).

#include "pool/init/capabilities.h"
#include "pool/init/egress_forwarder.h"
#include "pool/init/seccomp_policy.h"
#include "pool/init/init_protocol.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <linux/openat2.h>
#include <map>
#include <set>
#include <poll.h>
#include <sched.h>
#include <string>
#include <new>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>
#include <vector>

namespace {

namespace proto = paddock::pool::init;
using nlohmann::json;

constexpr int64_t kDefaultMaxOutputBytes = 16ll << 20;
constexpr int64_t kDefaultMaxReadBytes = 1ll << 20;
constexpr int kDrainAfterExitMs = 200;   // output still in flight after the command's group died
constexpr size_t kReadChunkBytes = 64 * 1024;
constexpr size_t kSpareHandlers = 2;     // idle handlers PID 1 keeps ready
constexpr size_t kMaxIdleHandlers = 4;   // beyond this a handler exits when done
constexpr size_t kMaxHandlers = 4096;    // concurrent requests; more wait in the accept backlog

std::string g_workspace = "/workspace";
std::string g_egressSocket;   // set: commands get the proxy variables; a forwarder relays to it
// A handler's SIGCHLD signalfd: how it hears of its command's exit where pidfd_open is missing
// (gVisor's runsc has none); -1 where pidfds work.
int g_childSignalFd = -1;
sigset_t g_ignoredSignals;   // SIG_IGN in this process (SIGPIPE, and whatever was inherited)

int64_t monoUs()
{
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::string dumpJson(const json &j)
{
    // Names and arguments may hold bytes that are not UTF-8; replace rather than throw.
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void sendError(int conn, const char *code, const std::string &message)
{
    proto::writeFrame(conn, proto::kError, dumpJson({{"code", code}, {"message", message}}));
}

std::string errnoText(int err) { return std::strerror(err); }

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Sandbox paths: absolute as given, relative ones under the workspace.
std::string sandboxPath(const std::string &path)
{
    if (path.empty())
        return g_workspace;
    if (path.front() == '/')
        return path;
    return g_workspace + "/" + path;
}

// ---- exec ---------------------------------------------------------------------------------------

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

// The fair scheduler's slice asked for by the init and its handlers (Linux 6.12+ lets a
// SCHED_OTHER task ask for a slice between 0.1 and 100 ms; EEVDF gives a shorter slice an earlier
// deadline, so a woken handler runs sooner on a busy host instead of waiting out another task's
// slice). Commands get the default back before their exec: they run as in a cold start. On older
// kernels and under gVisor the call fails and nothing changes.
constexpr uint64_t kHandlerSliceNs = 100000;

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

    // The environment is built from nothing: no variable of the host or of the pool leaks in.
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

    std::string cwd = sandboxPath(header.value("cwd", std::string{}));
    struct stat st {};
    if (::stat(cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        sendError(conn, "invalid_argument",
                  "working directory '" + cwd + "' does not exist in the sandbox; use a directory under " + g_workspace);
        return;
    }

    const std::string program = findProgram(argv[0], env["PATH"]);
    if (program.empty()) {
        std::string msg = "paddock-sandbox-init: " + argv[0] + ": command not found\n";
        proto::writeFrame(conn, proto::kStderr, msg);
        proto::writeFrame(conn, proto::kExit,
                          dumpJson({{"exit_code", 127}, {"signal", 0}, {"duration_ms", 0.0}, {"timed_out", false},
                                    {"truncated", false}}));
        return;
    }

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

    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
        sendError(conn, "internal", "cannot create pipes: " + errnoText(errno));
        return;
    }

    const int64_t startUs = monoUs();
    // The command gets its own process group, so a timeout kills it and everything it started.
    SpawnArgs sa {program.c_str(), args.data(), envp.data(), cwd.c_str(), in[0], out[1], err[1], 0};
    pid_t pid = -1;
    int spawnErr = spawnCommand(sa, pid);
    if (spawnErr != 0) {
        std::string msg = "paddock-sandbox-init: cannot run " + program + ": " + errnoText(spawnErr) + "\n";
        if (spawnErr == EAGAIN)
            msg += "the sandbox may be out of processes\n";
        proto::writeFrame(conn, proto::kStderr, msg);
        proto::writeFrame(conn, proto::kExit,
                          dumpJson({{"exit_code", spawnErr == ENOENT ? 127 : 126}, {"signal", 0}, {"duration_ms", 0.0},
                                    {"timed_out", false}, {"truncated", false}}));
        return;
    }
    ::setpgid(pid, pid);   // also from the parent: no window where a kill(-pid) misses it
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    bool pidfdOwned = pidfd >= 0;
    if (pidfd < 0 && g_childSignalFd >= 0)
        pidfd = g_childSignalFd;   // readable at SIGCHLD; the reap below uses WNOHANG then

    int stdinFd = in[1];
    setNonBlocking(stdinFd);
    setNonBlocking(out[0]);
    setNonBlocking(err[0]);
    size_t stdinOff = 0;
    const std::string &stdinData = stdinFrame->payload;
    if (stdinData.empty()) {
        ::close(stdinFd);
        stdinFd = -1;
    }

    int outFd = out[0], errFd = err[0];
    bool exited = false, timedOut = false, peerGone = false, truncated = false;
    int status = 0;
    int64_t endUs = 0, sent = 0;
    const int64_t deadlineUs = timeoutMs > 0 ? startUs + timeoutMs * 1000 : INT64_MAX;
    std::vector<char> buf(kReadChunkBytes);

    auto reap = [&](int flags) {
        if (exited)
            return;
        pid_t r = ::waitpid(pid, &status, flags);
        if (r == pid) {
            exited = true;
            endUs = monoUs();
            // Whatever the command left running in its group goes with it.
            ::kill(-pid, SIGKILL);
        }
    };

    while (!exited || outFd >= 0 || errFd >= 0) {
        pollfd fds[5];
        int n = 0;
        int iOut = -1, iErr = -1, iIn = -1, iConn = -1, iPid = -1;
        if (outFd >= 0) { iOut = n; fds[n++] = {outFd, POLLIN, 0}; }
        if (errFd >= 0) { iErr = n; fds[n++] = {errFd, POLLIN, 0}; }
        if (stdinFd >= 0) { iIn = n; fds[n++] = {stdinFd, POLLOUT, 0}; }
        if (!peerGone) { iConn = n; fds[n++] = {conn, POLLRDHUP, 0}; }
        if (!exited && pidfd >= 0) { iPid = n; fds[n++] = {pidfd, POLLIN, 0}; }

        const int64_t now = monoUs();
        int64_t waitMs = -1;
        if (exited)
            waitMs = std::max<int64_t>(0, (endUs + kDrainAfterExitMs * 1000 - now) / 1000);
        else if (deadlineUs != INT64_MAX && !timedOut)
            waitMs = std::max<int64_t>(0, (deadlineUs - now + 999) / 1000);
        else if (pidfd < 0)
            waitMs = 10;   // no pidfd (old kernel): poll for the exit
        int ready = ::poll(fds, static_cast<nfds_t>(n), static_cast<int>(std::min<int64_t>(waitMs, INT_MAX)));
        if (ready < 0 && errno != EINTR)
            break;

        if (ready == 0 && exited)
            break;   // drain window over; something outside the group still holds the pipes
        if (!exited && !timedOut && monoUs() >= deadlineUs) {
            timedOut = true;
            ::kill(-pid, SIGKILL);
        }
        if (ready <= 0) {
            if (pidfd < 0)
                reap(WNOHANG);
            continue;
        }

        auto pump = [&](int idx, int &fd, char type) {
            if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR)))
                return;
            ssize_t got = ::read(fd, buf.data(), buf.size());
            if (got > 0) {
                if (sent + got > maxOutput) {
                    truncated = true;
                    got = std::max<int64_t>(0, maxOutput - sent);
                }
                if (got > 0 && !peerGone) {
                    if (!proto::writeFrame(conn, type, std::string_view(buf.data(), static_cast<size_t>(got))))
                        peerGone = true;
                    sent += got;
                }
            } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
                ::close(fd);
                fd = -1;
            }
        };
        pump(iOut, outFd, proto::kStdout);
        pump(iErr, errFd, proto::kStderr);

        if (iIn >= 0 && (fds[iIn].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = ::write(stdinFd, stdinData.data() + stdinOff, stdinData.size() - stdinOff);
            if (w > 0)
                stdinOff += static_cast<size_t>(w);
            if ((w < 0 && errno != EAGAIN && errno != EINTR) || stdinOff >= stdinData.size()) {
                ::close(stdinFd);
                stdinFd = -1;
            }
        }
        if (iConn >= 0 && (fds[iConn].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
            // The pool gave up on this exec (deadline, shutdown): nobody reads the result.
            peerGone = true;
            ::kill(-pid, SIGKILL);
        }
        if (iPid >= 0 && (fds[iPid].revents & POLLIN)) {
            if (pidfdOwned) {
                reap(0);
            } else {
                signalfd_siginfo si {};
                while (::read(pidfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
                }
                reap(WNOHANG);
            }
        }
    }
    if (stdinFd >= 0)
        ::close(stdinFd);
    if (outFd >= 0)
        ::close(outFd);
    if (errFd >= 0)
        ::close(errFd);
    if (!exited) {
        ::kill(-pid, SIGKILL);
        reap(0);
    }
    if (pidfdOwned)
        ::close(pidfd);
    if (peerGone)
        return;

    int exitCode = -1, signal = 0;
    if (WIFEXITED(status))
        exitCode = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        signal = WTERMSIG(status);
    proto::writeFrame(conn, proto::kExit,
                      dumpJson({{"exit_code", exitCode},
                                {"signal", signal},
                                {"duration_ms", static_cast<double>(endUs - startUs) / 1000.0},
                                {"timed_out", timedOut},
                                {"truncated", truncated}}));
}

// ---- files --------------------------------------------------------------------------------------

const char *codeForErrno(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        return "not_found";
    case EACCES:
    case EPERM:
    case EROFS:
    case EXDEV:
    case ELOOP:
        return "permission_denied";
    case EISDIR:
    case EINVAL:
        return "invalid_argument";
    case ENOSPC:
    case EDQUOT:
        return "resource_exhausted";
    default:
        return "internal";
    }
}

void handleReadFile(int conn, const json &header)
{
    const std::string path = sandboxPath(header.value("path", std::string{}));
    int64_t maxBytes = header.value("max_bytes", int64_t{0});
    if (maxBytes <= 0)
        maxBytes = kDefaultMaxReadBytes;
    maxBytes = std::min<int64_t>(maxBytes, proto::kMaxFrameBytes);

    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        const int e = errno;
        sendError(conn, codeForErrno(e), "cannot read '" + path + "' in the sandbox: " + errnoText(e));
        return;
    }
    struct stat st {};
    ::fstat(fd, &st);
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        sendError(conn, "invalid_argument", "'" + path + "' is a directory; use list_dir for directories");
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        sendError(conn, "invalid_argument", "'" + path + "' is not a regular file; read_file reads regular files only");
        return;
    }
    std::string content;
    content.resize(static_cast<size_t>(maxBytes) + 1);
    size_t got = 0;
    while (got < content.size()) {
        ssize_t n = ::read(fd, content.data() + got, content.size() - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += static_cast<size_t>(n);
    }
    ::close(fd);
    const bool truncated = got > static_cast<size_t>(maxBytes);
    content.resize(std::min(got, static_cast<size_t>(maxBytes)));
    proto::writeFrame(conn, proto::kOk,
                      dumpJson({{"size", std::max<int64_t>(st.st_size, static_cast<int64_t>(got))}, {"truncated", truncated}}));
    proto::writeFrame(conn, proto::kData, content);
}

// Where openat2 is missing (gVisor's runsc): one component at a time with O_NOFOLLOW, refusing
// every symlink on the way (ELOOP) and "..": stricter than RESOLVE_BENEATH, which follows links
// that stay inside the workspace. A link swapped in between the check and the open still fails
// (O_NOFOLLOW), it is never followed.
int openNoSymlinks(int dirfd, const std::string &rel, int flags, mode_t mode)
{
    std::vector<std::string> parts;
    for (const auto &part : std::filesystem::path(rel))
        if (!part.empty() && part != "." && part != "/")
            parts.push_back(part.string());
    if (parts.empty()) {
        errno = EINVAL;
        return -1;
    }
    int cur = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    for (size_t i = 0; cur >= 0 && i < parts.size(); ++i) {
        struct stat st {};
        int next = -1;
        if (parts[i] == "..")
            errno = EXDEV;
        else if (::fstatat(cur, parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            errno = ELOOP;
        else if (i + 1 < parts.size())
            next = ::openat(cur, parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        else
            next = ::openat(cur, parts[i].c_str(), flags | O_NOFOLLOW, mode);
        const int err = errno;
        ::close(cur);
        cur = next;
        errno = err;
    }
    return cur;
}

int openBeneath(int dirfd, const std::string &rel, uint64_t flags, uint64_t mode = 0)
{
    // RESOLVE_BENEATH: every step, symlinks included, must stay under the workspace. The
    // resolution happens inside the sandbox, so an agent's symlink is judged by what it means
    // there, and an absolute or ../ link out of the workspace fails with EXDEV.
    open_how how {};
    how.flags = flags;
    how.mode = mode;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    int fd;
    do {
        fd = static_cast<int>(::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof how));
    } while (fd < 0 && errno == EAGAIN);
    if (fd < 0 && errno == ENOSYS)
        return openNoSymlinks(dirfd, rel, static_cast<int>(flags), static_cast<mode_t>(mode));
    return fd;
}

void handleWriteFile(int conn, const json &header)
{
    const std::string given = header.value("path", std::string{});
    const auto mode = static_cast<mode_t>(header.value("mode", 0644u) & 07777);
    auto data = proto::readFrame(conn);
    if (!data || data->type != proto::kData) {
        sendError(conn, "invalid_argument", "write_file header must be followed by a data frame");
        return;
    }
    namespace fs = std::filesystem;
    fs::path norm = fs::path(sandboxPath(given)).lexically_normal();
    const fs::path ws = fs::path(g_workspace).lexically_normal();
    fs::path rel = norm.lexically_relative(ws);
    if (given.empty() || rel.empty() || rel == "." || *rel.begin() == "..") {
        sendError(conn, "permission_denied",
                  "'" + given + "' is not a file inside " + g_workspace + "; write_file only writes inside " + g_workspace);
        return;
    }
    const std::string escapeMsg = "'" + given + "' resolves outside " + g_workspace +
                                  " (through a symlink); write to a path inside " + g_workspace;

    int wsfd = ::open(g_workspace.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (wsfd < 0) {
        sendError(conn, "internal", "cannot open " + g_workspace + ": " + errnoText(errno));
        return;
    }
    // mkdir -p of the parents, one component at a time, each checked beneath the workspace.
    fs::path prefix;
    for (const auto &comp : rel.parent_path()) {
        fs::path next = prefix / comp;
        int d = openBeneath(wsfd, next.string(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (d < 0 && errno == ENOENT) {
            int parent = prefix.empty() ? ::dup(wsfd) : openBeneath(wsfd, prefix.string(), O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (parent >= 0) {
                ::mkdirat(parent, comp.c_str(), 0755);
                ::close(parent);
            }
            d = openBeneath(wsfd, next.string(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        }
        if (d < 0) {
            const int e = errno;
            ::close(wsfd);
            if (e == EXDEV || e == ELOOP)
                sendError(conn, "permission_denied", escapeMsg);
            else
                sendError(conn, codeForErrno(e), "cannot create directory '" + next.string() + "' in " + g_workspace + ": " + errnoText(e));
            return;
        }
        ::close(d);
        prefix = next;
    }
    int fd = openBeneath(wsfd, rel.string(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, mode);
    const int e = errno;
    ::close(wsfd);
    if (fd < 0) {
        if (e == EXDEV || e == ELOOP)
            sendError(conn, "permission_denied", escapeMsg);
        else
            sendError(conn, codeForErrno(e), "cannot write '" + given + "': " + errnoText(e));
        return;
    }
    ::fchmod(fd, mode & 0777);   // no setuid, setgid or sticky bits from a request
    const bool ok = proto::writeAll(fd, data->payload.data(), data->payload.size());
    const int we = errno;
    ::close(fd);
    if (!ok) {
        sendError(conn, codeForErrno(we), "cannot write '" + given + "': " + errnoText(we));
        return;
    }
    proto::writeFrame(conn, proto::kOk, dumpJson({{"size", data->payload.size()}}));
}

void handleListDir(int conn, const json &header)
{
    const std::string path = sandboxPath(header.value("path", std::string{}));
    DIR *dir = ::opendir(path.c_str());
    if (!dir) {
        const int e = errno;
        sendError(conn, codeForErrno(e), "cannot list '" + path + "' in the sandbox: " + errnoText(e));
        return;
    }
    json entries = json::array();
    std::vector<std::pair<std::string, json>> rows;
    while (dirent *de = ::readdir(dir)) {
        std::string name = de->d_name;
        if (name == "." || name == "..")
            continue;
        struct stat st {};
        if (::fstatat(::dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        rows.emplace_back(name, json{{"name", name},
                                     {"is_dir", S_ISDIR(st.st_mode)},
                                     {"size", static_cast<int64_t>(st.st_size)},
                                     {"mode", static_cast<uint32_t>(st.st_mode)},
                                     {"mtime_ms", static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000}});
    }
    ::closedir(dir);
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    for (auto &r : rows)
        entries.push_back(std::move(r.second));
    proto::writeFrame(conn, proto::kOk, dumpJson({{"entries", entries}}));
}

void handleConnection(int conn)
{
    auto frame = proto::readFrame(conn);
    if (!frame)
        return;
    json header = json::object();
    if (!frame->payload.empty()) {
        header = json::parse(frame->payload, nullptr, false);
        if (header.is_discarded() || !header.is_object()) {
            sendError(conn, "invalid_argument", "request header is not a JSON object");
            return;
        }
    }
    try {
        switch (frame->type) {
        case proto::kExec: handleExec(conn, header); break;
        case proto::kReadFile: handleReadFile(conn, header); break;
        case proto::kWriteFile: handleWriteFile(conn, header); break;
        case proto::kListDir: handleListDir(conn, header); break;
        case proto::kPing: proto::writeFrame(conn, proto::kOk, "{}"); break;
        default: sendError(conn, "invalid_argument", std::string("unknown request type '") + frame->type + "'");
        }
    } catch (const std::exception &e) {
        // Wrong JSON types in a header (e.g. argv not a list of strings).
        sendError(conn, "invalid_argument", std::string("malformed request: ") + e.what());
    }
}

// One handler's state, in pages shared by PID 1 and every handler.
struct HandlerSlot {
    static constexpr int kFree = 0, kIdle = 1, kBusy = 2;
    std::atomic<int> state{kFree};
};
struct HandlerTable {
    // Idle handlers, kept by the handlers themselves so they need not scan the slots. It may
    // run low (never high) when a handler is killed mid-change; PID 1 counts the slots.
    std::atomic<int> idle{0};
    // Set by PID 1 before it kills the idle handlers at SIGTERM: a busy one finishes its
    // request and exits instead of going back to accept() (it checks after marking itself idle,
    // so either PID 1 sees it idle and kills it, or it sees this flag).
    std::atomic<bool> stopping{false};
    HandlerSlot slots[kMaxHandlers];
};
static_assert(std::atomic<int>::is_always_lock_free);

// A handler: accepts a connection, answers it, and goes back to accept(). It exits when more
// than kMaxIdleHandlers are idle (after a burst of concurrent requests) or accept() fails.
// A fresh handler shares PID 1's pages copy-on-write, so its first request would take a page
// fault on every page it writes (heap, stack, data: ~0.1-0.2 ms on a VM). Take them now, before
// waiting for a request.
void prefaultWritablePages()
{
    FILE *maps = std::fopen("/proc/self/maps", "re");
    if (!maps)
        return;
    char line[512];
    while (std::fgets(line, sizeof line, maps)) {
        unsigned long start = 0, end = 0;
        char perms[5] = {};
        if (std::sscanf(line, "%lx-%lx %4s", &start, &end, perms) != 3)
            continue;
        if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p' || std::strstr(line, "[v"))
            continue;
        // Stacks are large and mostly untouched: only their top few pages.
        if (std::strstr(line, "[stack]") && end - start > 64 * 1024)
            start = end - 64 * 1024;
        if (end - start > 8ul << 20)
            continue;   // a large reservation, not memory in use
        ::madvise(reinterpret_cast<void *>(start), end - start, MADV_POPULATE_WRITE);
    }
    std::fclose(maps);
}

[[noreturn]] void handlerLoop(int listenFd, int notifyFd, HandlerTable *table, size_t mySlot)
{
    HandlerSlot &me = table->slots[mySlot];
    // Without pidfd_open (gVisor), a command's exit is heard through SIGCHLD on a signalfd. It
    // stays blocked in the handler only; a spawned command starts with an empty mask.
    if (const int probe = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)); probe >= 0) {
        ::close(probe);
    } else {
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        ::sigprocmask(SIG_BLOCK, &chld, nullptr);
        g_childSignalFd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    }
    prefaultWritablePages();
    for (;;) {
        int conn;
        do {
            conn = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
        } while (conn < 0 && (errno == EINTR || errno == ECONNABORTED));
        if (conn < 0)
            _exit(1);
        // Counter first, then the slot: a kill in between leaves the counter low, not high.
        const int idleLeft = table->idle.fetch_sub(1) - 1;
        me.state.store(HandlerSlot::kBusy);
        // Only when no idle handler is left does PID 1 need to fork one before the next request.
        if (idleLeft <= 0) {
            const char one = 1;
            (void)!::write(notifyFd, &one, 1);
        }
        handleConnection(conn);
        ::close(conn);
        if (table->idle.load() >= static_cast<int>(kMaxIdleHandlers))
            _exit(0);   // enough are idle; PID 1 reaps this one and frees the slot
        me.state.store(HandlerSlot::kIdle);
        table->idle.fetch_add(1);
        if (table->stopping.load())
            _exit(0);
    }
}

int usage(std::FILE *to = stderr)
{
    std::fprintf(to, "usage: paddock-sandbox-init (--listen-fd N | --socket PATH) [--ready-fd N] [--workspace DIR] [--egress-socket PATH]\n"
                     "                            [--seccomp]\n"
                     "Internal: the first process inside every sandbox, started by paddock-pool; not meant to be run by hand.\n"
                     "Options: --help, --version; the protocol is in docs/pool.md (\"The init protocol\").\n");
    return to == stderr ? 2 : 0;
}

} // namespace

int main(int argc, char **argv)
{
    int listenFd = -1, readyFd = -1;
    std::string socketPath;
    if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0))
        return usage(stdout);
    if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
        std::printf("paddock-sandbox-init %s\n", PADDOCK_VERSION);
        return 0;
    }
    bool seccomp = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--seccomp") {
            seccomp = true;
            continue;
        }
        if (i + 1 >= argc)
            return usage();
        if (a == "--listen-fd")
            listenFd = std::atoi(argv[++i]);
        else if (a == "--ready-fd")
            readyFd = std::atoi(argv[++i]);
        else if (a == "--socket")
            socketPath = argv[++i];
        else if (a == "--workspace")
            g_workspace = argv[++i];
        else if (a == "--egress-socket")
            g_egressSocket = argv[++i];
        else
            return usage();
    }
    if (!socketPath.empty()) {
        listenFd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr {};
        addr.sun_family = AF_UNIX;
        if (socketPath.size() >= sizeof addr.sun_path) {
            std::fprintf(stderr, "paddock-sandbox-init: socket path too long: %s\n", socketPath.c_str());
            return 1;
        }
        std::strcpy(addr.sun_path, socketPath.c_str());
        ::unlink(socketPath.c_str());
        if (::bind(listenFd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 || ::listen(listenFd, 128) != 0) {
            std::fprintf(stderr, "paddock-sandbox-init: cannot listen on %s: %s\n", socketPath.c_str(), std::strerror(errno));
            return 1;
        }
        ::chmod(socketPath.c_str(), 0600);
    }
    if (listenFd < 0)
        return usage();
    // Die with whatever started us. bwrap does this itself (--die-with-parent), but crun leaves
    // a container running when it is killed: with this, a pool killed with -9 (its runtime gets
    // PR_SET_PDEATHSIG) takes the whole sandbox with it. SIGKILL from the parent's namespace
    // reaches a namespace's init.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    setSchedulerSlice(kHandlerSliceNs);   // inherited by the handlers and the egress forwarder
    ::fcntl(listenFd, F_SETFD, FD_CLOEXEC);
    // Whatever else bwrap or the pool let through must not reach the agent's commands.
    for (int fd = 3; fd < 1024; ++fd)
        if (fd != listenFd && fd != readyFd)
            ::close(fd);
    // Before anything of the agent's can run: every handler, command and the forwarder inherit
    // no capabilities and the filter. Either failing is a sandbox that does not start (fail closed).
    if (const std::string err = paddock::pool::init::dropAllCapabilities(); !err.empty()) {
        std::fprintf(stderr, "paddock-sandbox-init: %s\n", err.c_str());
        return 1;
    }
    if (seccomp) {
        if (const std::string err = paddock::pool::init::loadSeccompFilter(); !err.empty()) {
            std::fprintf(stderr, "paddock-sandbox-init: cannot load the seccomp filter: %s\n", err.c_str());
            return 1;
        }
    }

    sigset_t mask;
    sigemptyset(&mask);
    for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP})
        sigaddset(&mask, s);
    ::sigprocmask(SIG_BLOCK, &mask, nullptr);
    int sigFd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    ::signal(SIGPIPE, SIG_IGN);
    sigemptyset(&g_ignoredSignals);
    for (int sig = 1; sig < NSIG; ++sig) {
        struct sigaction sa {};
        if (::sigaction(sig, nullptr, &sa) == 0 && sa.sa_handler == SIG_IGN)
            sigaddset(&g_ignoredSignals, sig);
    }

    // Handlers are forked ahead of time and kept: an idle one blocks in accept(), answers one
    // connection, then goes back to accept(). A request never waits for a fork, and in the
    // steady state an exec costs no fork or exit of a handler at all (on a 2-core host that work
    // competed with the command for the CPU). Each handler's state is in a shared page, so PID 1
    // knows how many are idle without hearing from them on every request: a handler wakes PID 1
    // only when it takes the last idle slot, and PID 1 forks more then (or when one exits).
    int notify[2];
    if (::pipe2(notify, O_CLOEXEC | O_NONBLOCK) != 0) {
        std::fprintf(stderr, "paddock-sandbox-init: cannot create a pipe: %s\n", std::strerror(errno));
        return 1;
    }
    void *shared = ::mmap(nullptr, sizeof(HandlerTable), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        std::fprintf(stderr, "paddock-sandbox-init: cannot map the handler table: %s\n", std::strerror(errno));
        return 1;
    }
    auto *table = new (shared) HandlerTable;
    HandlerSlot *slots = table->slots;
    std::map<pid_t, size_t> handlers;   // live handler -> its slot
    auto idleCount = [&] {
        size_t n = 0;
        for (const auto &[pid, slot] : handlers)
            n += slots[slot].state.load() == HandlerSlot::kIdle ? 1 : 0;
        return n;
    };
    auto topUp = [&] {
        size_t idleNow = idleCount();
        while (idleNow < kSpareHandlers && handlers.size() < kMaxHandlers) {
            size_t slot = 0;
            while (slots[slot].state.load() != HandlerSlot::kFree)
                ++slot;
            slots[slot].state.store(HandlerSlot::kIdle);
            table->idle.fetch_add(1);
            pid_t pid = ::fork();
            if (pid < 0) {
                slots[slot].state.store(HandlerSlot::kFree);
                table->idle.fetch_sub(1);
                return;   // out of processes: retried at the next event
            }
            if (pid == 0) {
                ::close(sigFd);
                ::close(notify[0]);
                ::sigprocmask(SIG_UNBLOCK, &mask, nullptr);
                handlerLoop(listenFd, notify[1], table, slot);
            }
            handlers.emplace(pid, slot);
            ++idleNow;
        }
    };
    // The egress forwarder (allowlist tiers): restarted when it dies (a command may kill it),
    // at most once a second.
    pid_t forwarder = 0;
    int64_t forwarderRestartUs = 0;
    auto startForwarder = [&] {
        if (g_egressSocket.empty() || forwarder > 0 || monoUs() < forwarderRestartUs)
            return;
        forwarderRestartUs = monoUs() + 1000000;
        pid_t pid = ::fork();
        if (pid == 0) {
            ::close(sigFd);
            ::close(notify[0]);
            ::close(notify[1]);
            ::close(listenFd);
            if (readyFd >= 0)
                ::close(readyFd);
            ::sigprocmask(SIG_UNBLOCK, &mask, nullptr);
            _exit(paddock::pool::init::runEgressForwarder(g_egressSocket.c_str(), paddock::pool::init::kEgressProxyPort));
        }
        if (pid > 0)
            forwarder = pid;
    };
    startForwarder();
    topUp();

    if (readyFd >= 0) {
        proto::writeAll(readyFd, "R", 1);
        ::close(readyFd);
    }

    for (;;) {
        pollfd fds[2] = {{notify[0], POLLIN, 0}, {sigFd, POLLIN, 0}};
        const bool retry = idleCount() < kSpareHandlers || (!g_egressSocket.empty() && forwarder <= 0);
        if (::poll(fds, 2, retry ? 100 : -1) < 0)
            continue;
        if (fds[0].revents & POLLIN) {
            char drain[64];
            while (::read(notify[0], drain, sizeof drain) > 0) {
            }
        }
        if (fds[1].revents & POLLIN) {
            signalfd_siginfo si {};
            bool stop = false;
            while (::read(sigFd, &si, sizeof si) == static_cast<ssize_t>(sizeof si))
                if (si.ssi_signo != SIGCHLD)
                    stop = true;
            // Reap every child and every orphan the namespace handed to us.
            pid_t dead;
            while ((dead = ::waitpid(-1, nullptr, WNOHANG)) > 0) {
                if (dead == forwarder)
                    forwarder = 0;
                if (auto it = handlers.find(dead); it != handlers.end()) {
                    if (slots[it->second].state.exchange(HandlerSlot::kFree) == HandlerSlot::kIdle)
                        table->idle.fetch_sub(1);   // killed while idle
                    handlers.erase(it);
                }
            }
            if (stop) {
                if (forwarder > 0)
                    ::kill(forwarder, SIGKILL);
                table->stopping.store(true);
                for (const auto &[pid, slot] : handlers)
                    if (slots[slot].state.load() == HandlerSlot::kIdle)
                        ::kill(pid, SIGKILL);
                return 0;
            }
        }
        startForwarder();
        topUp();
    }
}
