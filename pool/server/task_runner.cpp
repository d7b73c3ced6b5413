#include "pool/server/task_runner.h"

#include <chrono>

namespace paddock::pool {
namespace {
constexpr int kIdleExitMs = 30000;
}

bool TaskRunner::post(std::function<void()> task)
{
    std::lock_guard lock(m_mutex);
    if (m_stopping)
        return false;
    m_queue.push_back(std::move(task));
    if (m_idle == 0 && m_threads < m_maxThreads) {
        ++m_threads;
        std::thread([this] { workerLoop(); }).detach();
    } else {
        m_cv.notify_one();
    }
    return true;
}

void TaskRunner::workerLoop()
{
    std::unique_lock lock(m_mutex);
    for (;;) {
        ++m_idle;
        const bool woke = m_cv.wait_for(lock, std::chrono::milliseconds(kIdleExitMs),
                                        [&] { return !m_queue.empty() || m_stopping; });
        --m_idle;
        if (m_queue.empty() && (m_stopping || !woke))
            break;
        if (m_queue.empty())
            continue;
        auto task = std::move(m_queue.front());
        m_queue.pop_front();
        lock.unlock();
        task();
        lock.lock();
    }
    --m_threads;
    m_exitedCv.notify_all();
}

void TaskRunner::stop()
{
    std::unique_lock lock(m_mutex);
    m_stopping = true;
    m_cv.notify_all();
    // Workers are detached (so idle ones can exit on their own); wait for the count to drop.
    m_exitedCv.wait(lock, [&] { return m_threads == 0; });
}

} // namespace paddock::pool
