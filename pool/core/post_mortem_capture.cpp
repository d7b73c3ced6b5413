#include "pool/core/post_mortem_capture.h"

#include "common/clock.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace paddock::pool {
namespace fs = std::filesystem;

namespace {

void keepTail(std::string &s, std::string_view chunk)
{
    constexpr size_t kKeep = PostMortemStore::kOutputTailBytes;
    if (chunk.size() >= kKeep) {
        s.assign(chunk.substr(chunk.size() - kKeep));
        return;
    }
    s.append(chunk);
    if (s.size() > 2 * kKeep)   // trim in batches: one move per 64 KiB of output
        s.erase(0, s.size() - kKeep);
}

// Asks a worker thread to stop (its loop returns once it sees stopping) and joins it. A second
// call does nothing.
void stopWorker(std::mutex &mutex, bool &stopping, std::condition_variable &cv, std::thread &thread)
{
    {
        std::lock_guard lock(mutex);
        if (stopping)
            return;
        stopping = true;
    }
    cv.notify_all();
    if (thread.joinable())
        thread.join();
}

std::string readSmall(const fs::path &p)
{
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

} // namespace

void OutputTail::add(int stream, std::string_view chunk)
{
    if (stream == 1) {
        keepTail(m_out, chunk);
        m_outBytes += static_cast<int64_t>(chunk.size());
    } else {
        keepTail(m_err, chunk);
        m_errBytes += static_cast<int64_t>(chunk.size());
    }
}

std::string OutputTail::tail(int stream) const
{
    const std::string &s = stream == 1 ? m_out : m_err;
    constexpr size_t kKeep = PostMortemStore::kOutputTailBytes;
    return s.size() > kKeep ? s.substr(s.size() - kKeep) : s;
}

std::vector<ProcessRecord> readCgroupProcesses(const std::vector<fs::path> &cgroupDirs)
{
    std::vector<int> pids;
    for (const auto &dir : cgroupDirs) {
        std::ifstream in(dir / "cgroup.procs");
        int pid;
        while (in >> pid)
            pids.push_back(pid);
    }
    std::sort(pids.begin(), pids.end());
    pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
    static const long pageSize = ::sysconf(_SC_PAGESIZE);
    std::vector<ProcessRecord> out;
    for (int pid : pids) {
        const fs::path proc = fs::path("/proc") / std::to_string(pid);
        const std::string stat = readSmall(proc / "stat");
        // pid (comm) state ppid ... ; comm may hold spaces and parentheses: split at the last ')'.
        const auto close = stat.rfind(')');
        const auto open = stat.find('(');
        if (close == std::string::npos || open == std::string::npos)
            continue;   // exited meanwhile
        ProcessRecord p;
        p.pid = pid;
        const std::string comm = stat.substr(open + 1, close - open - 1);
        std::istringstream rest(stat.substr(close + 1));
        std::vector<std::string> fields;
        std::string f;
        while (rest >> f)
            fields.push_back(f);
        // fields[0] = state (field 3), fields[1] = ppid, fields[21] = rss in pages (field 24).
        if (fields.size() > 21) {
            p.state = fields[0];
            p.ppid = std::atoi(fields[1].c_str());
            p.rssBytes = std::atoll(fields[21].c_str()) * pageSize;
        }
        std::string cmdline = readSmall(proc / "cmdline");
        while (!cmdline.empty() && cmdline.back() == '\0')
            cmdline.pop_back();
        std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
        if (cmdline.size() > 512)
            cmdline = cmdline.substr(0, 512) + "...";
        p.command = cmdline.empty() ? "(" + comm + ")" : cmdline;
        out.push_back(std::move(p));
    }
    return out;
}

DeadlineWatcher::DeadlineWatcher() : m_thread([this] { loop(); }) {}

DeadlineWatcher::~DeadlineWatcher()
{
    stop();
}

void DeadlineWatcher::stop()
{
    stopWorker(m_mutex, m_stopping, m_cv, m_thread);
}

std::shared_ptr<DeadlineWatcher::Watch> DeadlineWatcher::arm(std::vector<fs::path> dirs, int64_t timeoutMs)
{
    if (dirs.empty() || timeoutMs <= 0)
        return nullptr;
    auto watch = std::make_shared<Watch>();
    watch->dirs = std::move(dirs);
    const int64_t marginMs = std::clamp<int64_t>(timeoutMs / 10, 20, 500);
    const int64_t atUs = monotonicUs() + (timeoutMs - marginMs) * 1000;
    bool wake;
    {
        std::lock_guard lock(m_mutex);
        wake = atUs < m_wakeAtUs;
        m_items.push(Item{atUs, marginMs, watch});
    }
    if (wake)
        m_cv.notify_one();
    return watch;
}

void DeadlineWatcher::loop()
{
    constexpr int64_t kTickUs = 1000000;
    std::unique_lock lock(m_mutex);
    for (;;) {
        if (m_stopping)
            return;
        // Watches whose exec ended (the caller dropped them) go without waiting for their time.
        if (!m_items.empty() && m_items.top().watch.expired()) {
            m_items.pop();
            continue;
        }
        const int64_t now = monotonicUs();
        if (m_items.empty() || m_items.top().atUs > now) {
            // Even with nothing to watch: a tick a second is what lets arm() skip the notify.
            const int64_t until = m_items.empty() ? now + kTickUs : std::min(m_items.top().atUs, now + kTickUs);
            m_wakeAtUs = until;
            m_cv.wait_for(lock, std::chrono::microseconds(until - now));
            m_wakeAtUs = 0;
            continue;
        }
        Item item = m_items.top();
        m_items.pop();
        auto watch = item.watch.lock();
        if (!watch)
            continue;
        lock.unlock();
        auto processes = readCgroupProcesses(watch->dirs);
        {
            std::lock_guard wl(watch->mutex);
            watch->processes = std::move(processes);
            watch->firedBeforeDeadlineMs = item.marginMs;
        }
        lock.lock();
    }
}

CaptureQueue::CaptureQueue() : m_thread([this] { loop(); }) {}

CaptureQueue::~CaptureQueue()
{
    stop();
}

void CaptureQueue::post(std::function<void()> job)
{
    {
        std::lock_guard lock(m_mutex);
        if (!m_stopping) {
            m_jobs.push_back(std::move(job));
            job = nullptr;
        }
    }
    if (job) {
        job();   // stopping: run it here rather than lose a capture
        return;
    }
    m_cv.notify_one();
}

void CaptureQueue::stop()
{
    stopWorker(m_mutex, m_stopping, m_cv, m_thread);
}

void CaptureQueue::loop()
{
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_cv.wait(lock, [&] { return m_stopping || !m_jobs.empty(); });
        if (m_jobs.empty())
            return;   // stopping and drained
        auto job = std::move(m_jobs.front());
        m_jobs.pop_front();
        lock.unlock();
        job();
        lock.lock();
    }
}

} // namespace paddock::pool
