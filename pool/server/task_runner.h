#pragma once
// Runs blocking work (sandbox starts, calls into a sandbox init) off gRPC's callback threads,
// which must never block. Elastic: a task starts at once on an idle worker or a new one; idle
// workers exit after kIdleExitMs.
//
// Threads: post() from any thread; stop() once, from the owner's thread, after the gRPC server
// has stopped posting.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace paddock::pool {

class TaskRunner {
public:
    explicit TaskRunner(int maxThreads = 1024) : m_maxThreads(maxThreads) {}
    ~TaskRunner() { stop(); }

    // false when stopping: the caller must answer the call itself.
    bool post(std::function<void()> task);
    // Runs what is queued, then joins every worker.
    void stop();

private:
    void workerLoop();

    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::condition_variable m_exitedCv;
    std::deque<std::function<void()>> m_queue;
    int m_threads = 0;
    int m_idle = 0;
    bool m_stopping = false;
    const int m_maxThreads;
};

} // namespace paddock::pool
