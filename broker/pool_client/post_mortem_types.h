#pragma once
// Value types for the operator calls a PoolClient forwards to its pool: post-mortems of failed
// sandboxes, workspace snapshots and their files. Plain data; copy freely.

#include "common/sandbox_values.h"

#include <cstdint>
#include <string>
#include <vector>

namespace paddock::pool_client {

struct ProcessInfo {
    int pid = 0;
    int ppid = 0;
    std::string state;
    int64_t rssBytes = 0;
    std::string command;
};

struct ResourcePoint {
    int64_t timeUnixMs = 0;
    double cpuCores = 0;
    int64_t memoryBytes = 0;
    int64_t pids = 0;
    int64_t diskBytes = 0;            // the workspace's disk use; 0: not measured (no disk limit)
    bool cpuThrottled = false;        // throttled in at least one CFS period since the sample before
    // The cgroup's CFS bandwidth counters since the sandbox started (cpu.stat; 0: not known): the
    // periods its tasks ran, the periods they used the whole quota in and waited, the time waited.
    int64_t cpuPeriods = 0;
    int64_t cpuThrottledPeriods = 0;
    int64_t cpuThrottledUs = 0;
};

struct PostMortemInfo {
    std::string pool;             // the broker's name for the pool (set by the client)
    std::string poolId;           // the pool's own id
    std::string sandboxId;
    std::string sessionId;
    std::string tier;
    std::string runtime;
    std::string reason;           // oom_killed, timeout, nonzero_exit, seccomp_killed, crashed
    std::string detail;
    int exitCode = 0;
    int signal = 0;
    double durationMs = 0;
    std::vector<std::string> argv;
    std::string lastStdout;
    std::string lastStderr;
    int64_t stdoutBytes = 0;
    int64_t stderrBytes = 0;
    std::vector<ResourcePoint> samples;
    std::vector<ProcessInfo> processes;
    std::string processesNote;
    std::string snapshotRef;
    std::string snapshotError;
    int64_t snapshotSizeBytes = 0;
    double snapshotMs = 0;
    int64_t peakMemoryBytes = 0;
    double cpuLimit = 0;
    int64_t memoryLimitBytes = 0;
    int64_t pidsLimit = 0;
    int64_t diskLimitBytes = 0;
    int64_t timeUnixMs = 0;
};

struct SnapshotInfo {
    std::string ref;
    int64_t sizeBytes = 0;
    int64_t fileCount = 0;
    double durationMs = 0;
};

// One file of a snapshot and a chunk of its content: the pool's own values (common/sandbox_values.h).
using paddock::SnapshotChunk;
using paddock::SnapshotFile;

} // namespace paddock::pool_client
