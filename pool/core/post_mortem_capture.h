#pragma once
// What the pool gathers when a command or a sandbox fails, apart from the snapshot:
// - OutputTail keeps the last 64 KiB of each output stream of an exec (a copy per chunk; the
//   only post-mortem cost every exec pays, besides arming a DeadlineWatcher);
// - readCgroupProcesses lists the processes in a sandbox's cgroup from the host's /proc;
// - DeadlineWatcher takes that list shortly before an exec's deadline, because the init kills the
//   command's process group at the deadline and the list afterwards says nothing about the hang;
// - CaptureQueue runs captures (snapshot, file write) on its own thread, so the exec loop's
//   thread and the monitor never wait for an archive to be written.
//
// Threads: OutputTail belongs to the thread feeding one exec's output. DeadlineWatcher and
// CaptureQueue own one thread each; their methods may be called from any thread.

#include "pool/core/post_mortem_store.h"

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace paddock::pool {

class OutputTail {
public:
    void add(int stream, std::string_view chunk);
    std::string tail(int stream) const;   // 1 stdout, 2 stderr
    int64_t bytes(int stream) const { return stream == 1 ? m_outBytes : m_errBytes; }

private:
    std::string m_out, m_err;
    int64_t m_outBytes = 0, m_errBytes = 0;
};

// Processes in the cgroups (their cgroup.procs files), read from /proc: pid, ppid, state, rss,
// command line. Processes that exit meanwhile are skipped.
std::vector<ProcessRecord> readCgroupProcesses(const std::vector<std::filesystem::path> &cgroupDirs);

class DeadlineWatcher {
public:
    struct Watch {
        std::mutex mutex;
        std::optional<std::vector<ProcessRecord>> processes;   // set when it fired
        int64_t firedBeforeDeadlineMs = 0;
        std::vector<std::filesystem::path> dirs;
        bool cancelled = false;
    };

    DeadlineWatcher();
    ~DeadlineWatcher();
    // Lists the processes in dirs at (deadline - margin), margin = timeout/10 between 20 and
    // 500 ms. The watch is dropped when the caller drops the returned pointer.
    std::shared_ptr<Watch> arm(std::vector<std::filesystem::path> dirs, int64_t timeoutMs);
    void stop();

private:
    void loop();
    struct Item {
        int64_t atUs;
        int64_t marginMs;
        std::weak_ptr<Watch> watch;
        bool operator>(const Item &o) const { return atUs > o.atUs; }
    };
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> m_items;
    // When the loop's current wait ends; 0 while it runs. arm() wakes it only for an earlier
    // deadline: with the loop waking at least every kTickUs, an exec whose deadline is further
    // out (every exec with a timeout over a second) arms without a thread wake-up on its path.
    int64_t m_wakeAtUs = 0;
    bool m_stopping = false;
    std::thread m_thread;
};

class CaptureQueue {
public:
    CaptureQueue();
    ~CaptureQueue();
    void post(std::function<void()> job);
    // Runs what is queued, then joins.
    void stop();

private:
    void loop();
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<std::function<void()>> m_jobs;
    bool m_stopping = false;
    std::thread m_thread;
};

} // namespace paddock::pool
