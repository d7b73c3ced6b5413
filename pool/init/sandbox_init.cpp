// paddock-sandbox-init: the first process inside every sandbox (PID 1 under bwrap --as-pid-1).
//
// It takes requests from the pool on a unix socket, one request per connection (protocol in
// init_protocol.h and docs/pool.md), and answers each in a handler process (forked ahead and
// reused for request after request), so a slow command never blocks another request and a
// crashing handler never takes PID 1 down. PID 1 itself only forks handlers and reaps: as the
// namespace's init it inherits every orphan.
//
// This file is PID 1: its arguments, what it does to itself before serving, and the handlers it
// keeps. A handler is in sandbox_init_handler.cpp, the requests in sandbox_init_exec.cpp and
// sandbox_init_files.cpp (shared declarations: sandbox_init_internal.h).
//
// Known limits: a command that daemonizes into its own session (setsid) survives the end of its
// exec until the sandbox is released; output beyond max_output_bytes is dropped (reported as
// truncated).

#include "pool/init/sandbox_init_internal.h"
#include "pool/init/capabilities.h"
#include "pool/init/egress_forwarder.h"
#include "pool/init/seccomp_policy.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <new>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace paddock::pool::sandbox_init {
namespace {

int usage(std::FILE *to = stderr)
{
    std::fprintf(to, "usage: paddock-sandbox-init (--listen-fd N | --socket PATH) [--ready-fd N] [--workspace DIR] [--egress-socket PATH]\n"
                     "                            [--seccomp]\n"
                     "Internal: the first process inside every sandbox, started by paddock-pool; not meant to be run by hand.\n"
                     "Options: --help, --version; the protocol is in docs/pool.md (\"The init protocol\").\n");
    return to == stderr ? 2 : 0;
}

struct Options {
    int listenFd = -1, readyFd = -1;
    std::string socketPath;
    bool seccomp = false;
};

// The command line (--workspace and --egress-socket set the globals). nullopt: go on; else the
// status to exit with (--help, --version, a usage error).
std::optional<int> parseArguments(int argc, char **argv, Options &options)
{
    if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0))
        return usage(stdout);
    if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
        std::printf("paddock-sandbox-init %s\n", PADDOCK_VERSION);
        return 0;
    }
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--seccomp") {
            options.seccomp = true;
            continue;
        }
        if (i + 1 >= argc)
            return usage();
        if (a == "--listen-fd")
            options.listenFd = std::atoi(argv[++i]);
        else if (a == "--ready-fd")
            options.readyFd = std::atoi(argv[++i]);
        else if (a == "--socket")
            options.socketPath = argv[++i];
        else if (a == "--workspace")
            g_workspace = argv[++i];
        else if (a == "--egress-socket")
            g_egressSocket = argv[++i];
        else
            return usage();
    }
    return std::nullopt;
}

// A listening unix socket at socketPath, only for its owner; -1 (having said why) when it fails.
int listenOn(const std::string &socketPath)
{
    int listenFd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    if (socketPath.size() >= sizeof addr.sun_path) {
        std::fprintf(stderr, "paddock-sandbox-init: socket path too long: %s\n", socketPath.c_str());
        return -1;
    }
    std::strcpy(addr.sun_path, socketPath.c_str());
    ::unlink(socketPath.c_str());
    if (::bind(listenFd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 || ::listen(listenFd, 128) != 0) {
        std::fprintf(stderr, "paddock-sandbox-init: cannot listen on %s: %s\n", socketPath.c_str(), std::strerror(errno));
        return -1;
    }
    ::chmod(socketPath.c_str(), 0600);
    return listenFd;
}

// Everything PID 1 does to itself before it serves. false (having said why): the sandbox must
// not start.
bool lockDown(const Options &options)
{
    // Die with whatever started us. bwrap does this itself (--die-with-parent), but crun leaves
    // a container running when it is killed: with this, a pool killed with -9 (its runtime gets
    // PR_SET_PDEATHSIG) takes the whole sandbox with it. SIGKILL from the parent's namespace
    // reaches a namespace's init.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    setSchedulerSlice(kHandlerSliceNs);   // inherited by the handlers and the egress forwarder
    ::fcntl(options.listenFd, F_SETFD, FD_CLOEXEC);
    // Whatever else bwrap or the pool let through must not reach the agent's commands.
    for (int fd = 3; fd < 1024; ++fd)
        if (fd != options.listenFd && fd != options.readyFd)
            ::close(fd);
    // Before anything of the agent's can run: every handler, command and the forwarder inherit
    // no capabilities and the filter. Either failing is a sandbox that does not start (fail closed).
    if (const std::string err = paddock::pool::init::dropAllCapabilities(); !err.empty()) {
        std::fprintf(stderr, "paddock-sandbox-init: %s\n", err.c_str());
        return false;
    }
    if (options.seccomp) {
        if (const std::string err = paddock::pool::init::loadSeccompFilter(); !err.empty()) {
            std::fprintf(stderr, "paddock-sandbox-init: cannot load the seccomp filter: %s\n", err.c_str());
            return false;
        }
    }
    return true;
}

// Blocks the signals PID 1 hears on the returned signalfd (mask: them), ignores SIGPIPE, and
// notes every ignored signal in g_ignoredSignals (a command gets them back at their default).
int takeSignals(sigset_t &mask)
{
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
    return sigFd;
}

// PID 1 at work. Handlers are forked ahead of time and kept: an idle one blocks in accept(),
// answers one connection, then goes back to accept(). A request never waits for a fork, and in
// the steady state an exec costs no fork or exit of a handler at all (on a 2-core host that work
// competed with the command for the CPU). Each handler's state is in a shared page, so PID 1
// knows how many are idle without hearing from them on every request: a handler wakes PID 1
// only when it takes the last idle slot, and PID 1 forks more then (or when one exits).
struct Supervisor {
    int listenFd = -1, readyFd = -1, sigFd = -1;
    sigset_t mask;   // the signals sigFd hears; unblocked again in a child
    int notify[2] = {-1, -1};
    HandlerTable *table = nullptr;
    std::map<pid_t, size_t> handlers;   // live handler -> its slot
    // The egress forwarder (allowlist tiers): restarted when it dies (a command may kill it),
    // at most once a second.
    pid_t forwarder = 0;
    int64_t forwarderRestartUs = 0;

    // The wake-up pipe and the handler table; false (having said why) when either fails.
    bool prepare()
    {
        if (::pipe2(notify, O_CLOEXEC | O_NONBLOCK) != 0) {
            std::fprintf(stderr, "paddock-sandbox-init: cannot create a pipe: %s\n", std::strerror(errno));
            return false;
        }
        void *shared = ::mmap(nullptr, sizeof(HandlerTable), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (shared == MAP_FAILED) {
            std::fprintf(stderr, "paddock-sandbox-init: cannot map the handler table: %s\n", std::strerror(errno));
            return false;
        }
        table = new (shared) HandlerTable;
        return true;
    }

    size_t idleCount() const
    {
        size_t n = 0;
        for (const auto &[pid, slot] : handlers)
            n += table->slots[slot].state.load() == HandlerSlot::kIdle ? 1 : 0;
        return n;
    }

    void topUp()
    {
        HandlerSlot *slots = table->slots;
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
    }

    void startForwarder()
    {
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
    }

    // Reads the signals that arrived and reaps. true: a signal other than SIGCHLD asks PID 1 to stop.
    bool takeSignalsAndReap()
    {
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
                if (table->slots[it->second].state.exchange(HandlerSlot::kFree) == HandlerSlot::kIdle)
                    table->idle.fetch_sub(1);   // killed while idle
                handlers.erase(it);
            }
        }
        return stop;
    }

    // SIGTERM and the like: the forwarder and the idle handlers are killed, busy ones finish first.
    void stopAll()
    {
        if (forwarder > 0)
            ::kill(forwarder, SIGKILL);
        table->stopping.store(true);
        for (const auto &[pid, slot] : handlers)
            if (table->slots[slot].state.load() == HandlerSlot::kIdle)
                ::kill(pid, SIGKILL);
    }

    int serve()
    {
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
            if ((fds[1].revents & POLLIN) && takeSignalsAndReap()) {
                stopAll();
                return 0;
            }
            startForwarder();
            topUp();
        }
    }
};

} // namespace
} // namespace paddock::pool::sandbox_init

int main(int argc, char **argv)
{
    using namespace paddock::pool::sandbox_init;
    Options options;
    if (auto exitStatus = parseArguments(argc, argv, options))
        return *exitStatus;
    if (!options.socketPath.empty()) {
        options.listenFd = listenOn(options.socketPath);
        if (options.listenFd < 0)
            return 1;
    }
    if (options.listenFd < 0)
        return usage();
    if (!lockDown(options))
        return 1;

    Supervisor pid1;
    pid1.listenFd = options.listenFd;
    pid1.readyFd = options.readyFd;
    pid1.sigFd = takeSignals(pid1.mask);
    if (!pid1.prepare())
        return 1;
    return pid1.serve();
}
