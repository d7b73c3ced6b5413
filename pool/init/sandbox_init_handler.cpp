// paddock-sandbox-init's handler processes: one accepts a connection from the pool, reads the
// request frame (protocol in init_protocol.h and docs/pool.md), answers it (sandbox_init_exec.cpp,
// sandbox_init_files.cpp) and goes back to accept(). Also what every piece shares: the init's
// settings and the reply helpers.
//
// Threads: none; each handler is a single-threaded process forked by PID 1 (sandbox_init.cpp).

#include "pool/init/sandbox_init_internal.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace paddock::pool::sandbox_init {

std::string g_workspace = "/workspace";
std::string g_egressSocket;
int g_childSignalFd = -1;
sigset_t g_ignoredSignals;

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

std::string sandboxPath(const std::string &path)
{
    if (path.empty())
        return g_workspace;
    if (path.front() == '/')
        return path;
    return g_workspace + "/" + path;
}

namespace {

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

} // namespace

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

} // namespace paddock::pool::sandbox_init
