#pragma once
// The pool's egress proxy: the only way out of a sandbox of an allowlist tier. One proxy serves
// every sandbox of the pool; each sandbox gets its own unix socket (bound into the sandbox at
// /run/paddock/egress.sock), so every attempt is attributed to the sandbox whose socket it came
// through. It speaks HTTP proxy: `CONNECT host:port` (HTTPS and any TCP) and absolute-URI
// requests (`GET http://host/path`), decides each with address_policy.h (resolving names itself
// and connecting only to the addresses it checked), and records every attempt, allowed or
// refused, until the pool takes them to report with the exec they happened in.
//
// Limits: at most maxConnectionsPerSandbox connections relaying per sandbox; a request head of at
// most maxHeadBytes read within headTimeoutMs; a relay with no byte either way for idleTimeoutMs
// is closed; each direction buffers at most bufferBytes (reading stops until it drains); at most
// maxAttemptsKept attempts wait per sandbox (the rest are counted and reported as one entry).
//
// Known limits: one request per plain-HTTP connection (the proxy asks the server to close after
// it); no proxy authentication (the socket is per sandbox); an attempt still open when taken is
// reported with the bytes so far and `open` set, and not again.
//
// Threads: one event-loop thread owns every socket and connection; kResolverThreads resolve
// names (getaddrinfo blocks). Every public method may be called from any thread; callbacks given
// to takeAttempts() run on the loop thread, or inline when nothing is open.

#include "common/result.h"
#include "common/address_policy.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace paddock::pool::egress {

struct EgressAttempt {
    bool allowed = false;       // the policy let it through and a connection was attempted
    std::string host;           // as normalized (or as sent, when it did not normalize)
    int port = 0;
    std::string address;        // the address connected to, or the one refused
    std::string method;         // CONNECT, GET, POST, ...
    std::string reason;         // refused: a reason code (address_policy.h Decision::reason,
                                // bad_request, too_many_connections, not_recorded)
    std::string detail;         // a sentence for people
    std::string error;          // allowed, but connecting or relaying failed
    int64_t bytesOut = 0;       // sandbox -> destination
    int64_t bytesIn = 0;        // destination -> sandbox
    int64_t timeUnixMs = 0;     // when the request arrived
    double durationMs = 0;
    bool open = false;          // still relaying when reported
    std::string reviewId;       // allowed by a grant (an approved review), not the tier's allowlist
};

struct EgressLimits {
    int maxConnectionsPerSandbox = 32;
    int64_t headTimeoutMs = 10000;
    int64_t connectTimeoutMs = 10000;
    int64_t idleTimeoutMs = 60000;
    size_t maxHeadBytes = 16 * 1024;
    size_t bufferBytes = 64 * 1024;
    size_t maxAttemptsKept = 1000;
};

class EgressProxy {
public:
    explicit EgressProxy(EgressLimits limits = {}, Resolver resolver = systemResolve);
    ~EgressProxy();
    EgressProxy(const EgressProxy &) = delete;
    EgressProxy &operator=(const EgressProxy &) = delete;

    // Creates a listening unix socket at socketPath (0600; the directory must exist) for one
    // sandbox; attempts through it are decided with allowlist and kept under sandboxId.
    Status addSandbox(const std::string &sandboxId, const std::filesystem::path &socketPath,
                      std::shared_ptr<const Allowlist> allowlist);
    // Closes the sandbox's socket and every connection of it; its attempts are dropped.
    void removeSandbox(const std::string &sandboxId);
    // Grants (approved hosts, address_policy.h) for the connections the sandbox opens from now on
    // until revokeGrants(sandboxId, holder): one set per holder (an exec), the union applies.
    // Connections already past their head keep the decision they got. An unknown sandbox (a tier
    // without network) ignores both.
    void addGrants(const std::string &sandboxId, uint64_t holder, std::shared_ptr<const Grants> grants);
    void revokeGrants(const std::string &sandboxId, uint64_t holder);

    using AttemptsDone = std::function<void(std::vector<EgressAttempt>)>;
    // Hands over the sandbox's attempts recorded since the last take. Connections still open are
    // waited for up to waitMs (a command's connections close as it exits, a moment after the
    // exec's end reaches the pool); those open after that are reported as they are.
    void takeAttempts(const std::string &sandboxId, int64_t waitMs, AttemptsDone done);
    std::vector<EgressAttempt> takeAttemptsBlocking(const std::string &sandboxId, int64_t waitMs);

    static constexpr int kResolverThreads = 2;

private:
    struct Conn;
    struct Sandbox;
    struct Job;
    struct Loop;

    void loopMain();
    void resolverMain();
    void post(std::function<void()> fn);

    const EgressLimits m_limits;
    const Resolver m_resolver;
    std::unique_ptr<Loop> m_loop;   // state owned by the loop thread

    std::mutex m_mutex;                                  // guards the queues below
    std::condition_variable m_jobsCv;
    std::deque<std::function<void()>> m_commands;        // for the loop thread
    std::deque<std::unique_ptr<Job>> m_jobs;             // for the resolvers
    bool m_stopping = false;
    int m_wakeFd = -1;
    int m_epollFd = -1;
    std::vector<std::thread> m_threads;
};

} // namespace paddock::pool::egress
