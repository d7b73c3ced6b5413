#pragma once
// Post-mortems off the host: the pools keep a post-mortem of every sandbox or command that ended
// abnormally (reason, exit, output tails, resource samples, process list), on their own disk. The
// archive copies each one into the checkpoint store, under
//     post-mortems/<pool>/<sandbox>-<time>.json
// with the id of the checkpoint that holds the workspace as it was when the command failed (the
// checkpoint recorded with that command's result, else the one before). When the pool's host is
// gone, the operator desk (broker/server/operator_desk.h) answers from here: the post-mortem, the
// files of its workspace (from the checkpoint) and a debug shell restored on another pool.
//
// A copier thread asks every healthy pool for its newest post-mortems once per intervalMs (and at
// once after nudge()), so a post-mortem reaches the archive within about a second of being taken.
//
// Threads: start(), stop() on the owner's thread; the copier on its own; list(), get(), nudge()
// and copyNow() from any thread (the index has its own mutex).
//
// Retention: an archived post-mortem older than retentionMs is deleted (the copier looks once an
// hour); its checkpoint is then collected like any other (checkpoint_collector.h). 0 keeps them.
//
// Known limits: a host that dies within the copy interval of a failure takes that post-mortem with
// it (the session's log and checkpoints are safe).

#include "broker/checkpoints/checkpoint_store.h"
#include "broker/core/event.h"
#include "broker/placement/pool_set.h"
#include "broker/pool_client/post_mortem_types.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace paddock::checkpoints {

struct ArchivedPostMortem {
    pool_client::PostMortemInfo info;   // as the pool kept it, full (output tails, samples, processes)
    std::string manifest;                // the workspace's checkpoint; "" when the session had none
    int64_t archivedUnixMs = 0;
};

// The checkpoint of the workspace at a failure at timeUnixMs: the one recorded with the first
// tool.result within 5 s after that time (a command's failure is recorded with its result), else
// the last one before. "" when there is none. Pure.
std::string manifestAtFailure(std::span<const core::Event> log, int64_t timeUnixMs);

class PostMortemArchive {
public:
    // The session's log, for manifestAtFailure.
    using LogReader = std::function<Result<std::vector<core::Event>>(const std::string &sessionId)>;

    static constexpr int64_t kCopyIntervalMs = 1000;

    PostMortemArchive(CheckpointStore &store, const placement::PoolSet &pools, LogReader readLog,
                      int64_t intervalMs = kCopyIntervalMs, int64_t retentionMs = 0);
    ~PostMortemArchive();
    PostMortemArchive(const PostMortemArchive &) = delete;
    PostMortemArchive &operator=(const PostMortemArchive &) = delete;

    void start();
    void stop();
    // Copy soon (a step just recorded a failure).
    void nudge();
    // One pass over every healthy pool now; the number of post-mortems copied.
    Result<int> copyNow();
    // Deletes the archived post-mortems taken before olderThanUnixMs; how many went.
    Result<int> expire(int64_t olderThanUnixMs);

    // Newest first; sessionId or pool "" for all; the index is read from the store on first use.
    Result<std::vector<ArchivedPostMortem>> list(const std::string &sessionId, const std::string &pool, int limit);
    // The newest archived post-mortem of the sandbox on that pool; NotFound when none.
    Result<ArchivedPostMortem> get(const std::string &pool, const std::string &sandboxId);

    static std::string keyOf(const pool_client::PostMortemInfo &pm);

private:
    void copierLoop();
    Status loadIndex();   // under m_mutex
    Result<bool> copyOne(pool_client::PoolClient &pool, const pool_client::PostMortemInfo &listed);

    CheckpointStore &m_store;
    const placement::PoolSet &m_pools;
    LogReader m_readLog;
    const int64_t m_intervalMs;
    const int64_t m_retentionMs;
    int64_t m_lastExpiryUs = 0;   // the copier's thread only

    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stopping = false;
    bool m_nudged = false;
    bool m_indexLoaded = false;
    std::map<std::string, ArchivedPostMortem> m_index;   // by key; guarded by m_mutex
    std::thread m_copier;
};

} // namespace paddock::checkpoints
