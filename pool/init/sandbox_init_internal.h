#pragma once
// What the pieces of paddock-sandbox-init share (the executable only; not part of paddock_pool_init):
// sandbox_init.cpp is PID 1 (arguments, lock-down, keeping handlers forked, reaping);
// sandbox_init_handler.cpp a handler process (accept, read the request frame, dispatch, reply);
// sandbox_init_exec.cpp runs a command; sandbox_init_files.cpp reads, writes and lists files.
//
// Threads: none. PID 1 and each handler are single-threaded processes. The globals are set by
// main() before the first handler is forked and only read after; g_childSignalFd is each
// handler's own. HandlerTable lives in pages shared by PID 1 and every handler (atomics only).

#include "pool/init/init_protocol.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <string>

namespace paddock::pool::sandbox_init {

namespace proto = paddock::pool::init;
using nlohmann::json;

constexpr size_t kSpareHandlers = 2;     // idle handlers PID 1 keeps ready
constexpr size_t kMaxIdleHandlers = 4;   // beyond this a handler exits when done
constexpr size_t kMaxHandlers = 4096;    // concurrent requests; more wait in the accept backlog

extern std::string g_workspace;
extern std::string g_egressSocket;   // set: commands get the proxy variables; a forwarder relays to it
// A handler's SIGCHLD signalfd: how it hears of its command's exit where pidfd_open is missing
// (gVisor's runsc has none); -1 where pidfds work.
extern int g_childSignalFd;
extern sigset_t g_ignoredSignals;   // SIG_IGN in this process (SIGPIPE, and whatever was inherited)

int64_t monoUs();
std::string dumpJson(const json &j);
void sendError(int conn, const char *code, const std::string &message);
std::string errnoText(int err);
// Sandbox paths: absolute as given, relative ones under the workspace.
std::string sandboxPath(const std::string &path);

// The fair scheduler's slice asked for by the init and its handlers (Linux 6.12+ lets a
// SCHED_OTHER task ask for a slice between 0.1 and 100 ms; EEVDF gives a shorter slice an earlier
// deadline, so a woken handler runs sooner on a busy host instead of waiting out another task's
// slice). Commands get the default back before their exec: they run as in a cold start. On older
// kernels and under gVisor the call fails and nothing changes.
constexpr uint64_t kHandlerSliceNs = 100000;
void setSchedulerSlice(uint64_t ns);

// The requests (sandbox_init_exec.cpp, sandbox_init_files.cpp): each answers on conn.
void handleExec(int conn, const json &header);
void handleReadFile(int conn, const json &header);
void handleWriteFile(int conn, const json &header);
void handleListDir(int conn, const json &header);

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
[[noreturn]] void handlerLoop(int listenFd, int notifyFd, HandlerTable *table, size_t mySlot);

} // namespace paddock::pool::sandbox_init
