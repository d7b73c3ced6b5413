#pragma once
// SandboxPool's private types, shared by the files it is split into (sandbox_pool.cpp: create,
// claims, refill, release and starting a sandbox; sandbox_pool_exec.cpp: execs and file
// operations; sandbox_pool_monitor.cpp: samples, status, the monitor, snapshots and post-mortems;
// sandbox_pool_egress.cpp; sandbox_pool_checkpoints.cpp). Not for anyone outside SandboxPool.
//
// Threads: as in sandbox_pool.h. Tier's counters and a Sandbox's state, session and claim key are
// guarded by the pool's m_mutex; a Sandbox's exec records by its execMutex, its samples by its
// sampleMutex, its pending captures by its captureMutex, its checkpoints by its checkpointMutex.

#include "pool/core/sandbox_pool.h"

#include <climits>

namespace paddock::pool {

inline constexpr int kRefillThreadsPerTier = 2;   // the budget measures refill at two parallel starts
inline const std::vector<int64_t> kLatencyBucketsUs = {250, 500, 1000, 2000, 5000, 10000, 25000,
                                                       50000, 100000, 250000, 1000000, INT64_MAX};

inline std::unexpected<Error> noSuchSandbox(const std::string &id)
{
    return fail(ErrorCode::NotFound, "no sandbox '" + id + "' on this pool; it may have been released — claim a new one");
}

struct SandboxPool::ExecRecord {
    bool done = false;                                 // guarded by Sandbox::execMutex
    std::vector<std::pair<int, std::string>> chunks;   // written only by the running thread until done
    int64_t bytes = 0;
    Result<InitExecResult> result;
};

struct SandboxPool::Sandbox {
    enum class State { Warm, Claimed, Dead };

    std::string id;
    Tier *tier = nullptr;
    std::filesystem::path dir;
    std::unique_ptr<RunningSandbox> running;
    InitClient init;
    std::unique_ptr<SandboxCgroup> cgroup;   // null: no limits
    WorkspaceFs *workspaceFs = nullptr;      // null: no disk limit; then qgroupId is 0
    uint64_t qgroupId = 0;
    IdentityLease identity;                  // its block of host ids; destroy() gives it back
    mutable std::mutex sampleMutex;
    std::deque<CgroupSample> samples;        // guarded by sampleMutex
    // Guarded by the pool's m_mutex.
    State state = State::Warm;
    std::string deathReason;
    std::string sessionId;
    std::string claimKey;

    // Exec idempotency records, guarded by execMutex.
    std::mutex execMutex;
    std::condition_variable execCv;
    std::map<std::string, std::shared_ptr<ExecRecord>> records;
    std::deque<std::string> order;
    int64_t recordBytes = 0;

    // Checkpoints (sandbox_pool_checkpoints.cpp): made at the first checkpoint call, dropped by
    // destroy(); the object serialises its own calls.
    std::mutex checkpointMutex;
    std::shared_ptr<WorkspaceCheckpoints> checkpoints;   // guarded by checkpointMutex

    // Post-mortem captures queued or running: destroy() waits for them before deleting the
    // workspace they archive.
    std::mutex captureMutex;
    std::condition_variable captureCv;
    int pendingCaptures = 0;   // guarded by captureMutex
    void captureQueued()
    {
        std::lock_guard lock(captureMutex);
        pendingCaptures++;
    }

    Sandbox(std::string id_, Tier *tier_, std::filesystem::path dir_, std::unique_ptr<RunningSandbox> running_,
            std::unique_ptr<SandboxCgroup> cgroup_)
        : id(std::move(id_)), tier(tier_), dir(std::move(dir_)), running(std::move(running_)),
          init(running->controlSocket()), cgroup(std::move(cgroup_))
    {
    }
};

struct SandboxPool::Tier {
    TierConfig config;
    Runtime *runtime = nullptr;
    // Guarded by the pool's m_mutex.
    std::deque<std::shared_ptr<Sandbox>> warm;
    int claimed = 0;
    int starting = 0;     // cold starts and refills in flight
    int refilling = 0;    // the refill part of `starting`
    int64_t claims = 0;
    int64_t warmClaims = 0;
    int64_t coldFallbacks = 0;
    int64_t starts = 0;
    int64_t startUsTotal = 0;
    int64_t lastClaimUs = 0;
    std::vector<int64_t> latencyCounts = std::vector<int64_t>(kLatencyBucketsUs.size(), 0);
    int64_t claimUsTotal = 0;   // every claim's latency added up (the histogram's sum)

    TierIsolation isolation;   // what the tier promises, in words; set once by create()

    int total() const { return static_cast<int>(warm.size()) + claimed + starting; }
};

} // namespace paddock::pool
