#pragma once
// Execs through sandbox inits without a thread per exec: the request is sent by the caller
// without blocking (so a gRPC callback thread may start it, with no hand-over to a worker), and
// one thread waits on every exec connection with epoll, parses the init's frames and calls back.
// On a 2-core host this takes one thread wake-up off every exec's latency path (the warm path's
// budget is 2 ms; each wake-up costs 0.05-0.3 ms there).
//
// Threads: connect() and submit() from any thread; never block. The sink and done callbacks run
// on the loop's own thread (or inline in submit() when the loop is stopping); they must not
// block. stop() once, from the owner's thread; it fails every exec still running.
//
// Known limits: output is forwarded as it arrives with no backpressure (like InitClient::exec,
// whose sink never blocks either).

#include "common/result.h"
#include "pool/init/init_client.h"

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace paddock::pool {

class InitExecLoop {
public:
    using Done = std::function<void(Result<InitExecResult>)>;

    InitExecLoop();   // starts the loop's thread
    ~InitExecLoop();
    InitExecLoop(const InitExecLoop &) = delete;
    InitExecLoop &operator=(const InitExecLoop &) = delete;

    // A non-blocking connection to the init at socketPath. nullopt when the init's accept backlog
    // is full right now (the caller should then use the blocking InitClient from a worker).
    static Result<std::optional<int>> connect(const std::filesystem::path &socketPath);

    // Takes fd (from connect()) and sends the request without blocking; the rest is written when
    // the socket has room. sink gets output chunks, then done is called exactly once.
    void submit(int fd, const InitExecRequest &request, ChunkSink sink, Done done);

    // Fails every exec in flight with Unavailable and joins the thread. Idempotent.
    void stop();

    int inFlight() const { return m_inFlight.load(); }

private:
    struct Conn;

    void run();
    void finish(uint64_t id, Result<InitExecResult> result);

    int m_epollFd = -1;
    int m_wakeFd = -1;   // eventfd: stop() or a new deadline
    std::mutex m_mutex;  // guards m_conns and m_stopping; callbacks run outside it
    std::map<uint64_t, std::unique_ptr<Conn>> m_conns;
    uint64_t m_nextId = 1;
    bool m_stopping = false;
    std::atomic<int> m_inFlight{0};
    std::thread m_thread;
};

} // namespace paddock::pool
