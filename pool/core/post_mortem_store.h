#pragma once
// Post-mortems: what the pool keeps about a sandbox or a command that ended abnormally (OOM kill,
// timeout, non-zero exit, death of the sandbox's init). One JSON file per post-mortem under
// <state_dir>/postmortems/<sandbox-id>.json (written to a temporary file, then renamed), so they
// survive a restart of the pool. A sandbox keeps its newest post-mortem only: a later failure
// replaces an earlier one (and its snapshot).
//
// Kept for `post_mortem_retention_hours` (default 72) and at most `post_mortem_max_count`
// (default 1000), oldest dropped first, with their workspace snapshots.
//
// Threads: every method may be called from any thread (one mutex; file writes happen under it,
// they are rare: one per failure).

#include "common/result.h"
#include "pool/runtimes/cgroup.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace paddock::pool {

struct ProcessRecord {
    int pid = 0;
    int ppid = 0;
    std::string state;
    int64_t rssBytes = 0;
    std::string command;
};

struct PostMortemRecord {
    std::string sandboxId;
    std::string sessionId;
    std::string poolId;
    std::string tier;
    std::string runtime;
    std::string reason;               // oom_killed, timeout, nonzero_exit, crashed
    std::string detail;               // one line for lists
    int exitCode = 0;
    int signal = 0;
    double durationMs = 0;
    std::vector<std::string> argv;
    std::string lastStdout;           // the last kOutputTailBytes
    std::string lastStderr;
    int64_t stdoutBytes = 0;
    int64_t stderrBytes = 0;
    std::vector<CgroupSample> samples;
    std::vector<ProcessRecord> processes;
    std::string processesNote;
    std::string snapshotRef;
    std::string snapshotError;
    int64_t snapshotSizeBytes = 0;
    double snapshotMs = 0;
    double cpuLimit = 0;
    int64_t memoryLimitBytes = 0;
    int64_t pidsLimit = 0;
    int64_t diskLimitBytes = 0;
    int64_t timeUnixMs = 0;
};

class PostMortemStore {
public:
    static constexpr size_t kOutputTailBytes = 64 * 1024;

    struct Options {
        std::filesystem::path dir;
        int64_t retentionMs = 72ll * 3600 * 1000;
        size_t maxCount = 1000;
        // Called (outside the store's lock) for each post-mortem dropped or replaced, so its
        // snapshot can go too.
        std::function<void(const PostMortemRecord &)> onDrop;
    };

    // Creates the directory and loads what an earlier run kept (expired ones are dropped;
    // unreadable files are logged and moved aside as <name>.bad).
    static Result<std::unique_ptr<PostMortemStore>> open(Options options);

    // Stores (or replaces) the post-mortem of record.sandboxId, durably.
    Status save(const PostMortemRecord &record);
    // Newest first; sessionId "" for all. limit 0: all.
    std::vector<PostMortemRecord> list(const std::string &sessionId, size_t limit) const;
    Result<PostMortemRecord> get(const std::string &sandboxId) const;
    // Drops the expired ones and those beyond maxCount; nowUnixMs is a parameter for tests.
    // Returns how many were dropped.
    size_t prune(int64_t nowUnixMs);
    size_t size() const;

    static std::string toJson(const PostMortemRecord &record);
    static Result<PostMortemRecord> fromJson(const std::string &text);

private:
    explicit PostMortemStore(Options options) : m_options(std::move(options)) {}
    std::filesystem::path fileOf(const std::string &sandboxId) const;

    const Options m_options;
    mutable std::mutex m_mutex;
    std::map<std::string, PostMortemRecord> m_records;   // by sandbox id; guarded by m_mutex
};

} // namespace paddock::pool
