#pragma once
// The pool core: warm sandboxes per tier, claims, idempotent execs through each sandbox's init,
// file operations, release and statistics. It knows nothing of gRPC (pool/server translates).
//
// Threads: every public method may be called from any thread concurrently (the gRPC server calls
// them from its worker threads). Internally: one mutex (m_mutex) guards the tier state and the
// sandbox table; each sandbox has its own mutex for its exec records. Background threads:
// kRefillThreadsPerTier refill workers per tier, one monitor that notices sandboxes dying, and
// the exec loop (InitExecLoop) that waits on the execs started by execAsync().
// Blocking work (starting a sandbox, talking to an init) never happens under m_mutex.
// A sampler thread reads each sandbox's cgroup once a second (kept per sandbox, for post-mortems).

#include "common/result.h"
#include "common/sandbox_values.h"
#include "pool/core/pool_config.h"
#include "pool/core/post_mortem_capture.h"
#include "pool/core/post_mortem_store.h"
#include "pool/core/sandbox_hardening.h"
#include "pool/init/init_client.h"
#include "pool/init/init_exec_loop.h"
#include "pool/runtimes/cgroup.h"
#include "pool/egress/egress_proxy.h"
#include "pool/runtimes/runtime.h"
#include "pool/runtimes/workspace_fs.h"
#include "pool/snapshot/snapshot_store.h"
#include "pool/snapshot/workspace_checkpoint.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace paddock::pool {

using paddock::ClaimedSandbox;   // common/sandbox_values.h: what a claim hands back, as the broker reads it

// A host an approved egress_exception review opens for one command (docs/egress.md, "Approved hosts").
struct EgressGrantSpec {
    std::string host;       // an allowlist entry: name, name:port, *.domain, address
    std::string reviewId;
};

struct ExecRequest {
    std::string sandboxId;
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;
    std::string cwd;
    int64_t timeoutMs = 0;        // 0: the configured default
    std::string stdinData;
    std::string idempotencyKey;   // empty: not recorded
    std::vector<EgressGrantSpec> egressGrants;   // held by the egress proxy while this command runs
    bool replayOnly = false;      // answer from the run recorded under idempotencyKey, or NotFound; start nothing
};

struct ExecResult {
    InitExecResult exit;
    bool replayed = false;
};

struct TierStats {
    TierConfig config;
    int warm = 0;
    int claimed = 0;
    int starting = 0;
    double hitRate = 0;
    int64_t coldFallbacks = 0;
    double refillPerSecond = 0;
    std::vector<int64_t> latencyBucketsUs;   // upper bounds
    std::vector<int64_t> latencyCounts;
    int64_t claimUsTotal = 0;                // the latencies added up
    TierIsolation isolation;                 // what the tier promises (sandbox_hardening.h)
};

struct PoolStats {
    std::string poolId;
    std::string host;
    std::string cgroupVersion;
    std::string diskLimits;   // SandboxPool::diskLimits()
    int64_t uptimeMs = 0;
    std::vector<TierStats> tiers;
};

class SandboxPool {
public:
    // Checks the config (runtimes exist, the init binary is there, the state directory is usable)
    // and clears sandboxes left by an earlier run. Starts no thread yet.
    static Result<std::unique_ptr<SandboxPool>> create(PoolConfig config);
    ~SandboxPool();

    // Starts the refill workers and the monitor.
    void start();
    // Stops refilling, kills every sandbox and deletes their workspaces. Idempotent.
    void shutdown();

    Result<ClaimedSandbox> claim(const std::string &tier, const std::string &sessionId, const std::string &idempotencyKey);
    // claim() when it cannot block: a warm sandbox is ready (or the key was answered before, or
    // the request is invalid). nullopt: call claim() from a thread that may block.
    // It does not wake the refill workers: call wakeRefill() once the answer is on its way, so
    // their wake-ups do not sit between the claim and its reply.
    std::optional<Result<ClaimedSandbox>> claimIfWarm(const std::string &tier, const std::string &sessionId,
                                                   const std::string &idempotencyKey);
    void wakeRefill() { m_cv.notify_all(); }
    // sink gets output chunks as they arrive (stream 1 stdout, 2 stderr), on the calling thread.
    Result<ExecResult> exec(const ExecRequest &request, const ChunkSink &sink);
    using ExecDone = std::function<void(Result<ExecResult>)>;
    // exec() without blocking the calling thread (a gRPC callback thread may call it): the
    // request is sent to the init at once and the exec loop's thread calls sink, then done.
    // false when it would have to block (a repeat of a keyed run still going, or the init's
    // backlog is full): nothing was done; call exec() from a thread that may block. When true,
    // done is called exactly once, possibly before execAsync returns (errors, replays).
    bool execAsync(const ExecRequest &request, ChunkSink sink, ExecDone done);
    Result<InitFile> readFile(const std::string &sandboxId, const std::string &path, int64_t maxBytes);
    Result<int64_t> writeFile(const std::string &sandboxId, const std::string &path, std::string_view content, uint32_t mode);
    Result<std::vector<InitDirEntry>> listDir(const std::string &sandboxId, const std::string &path);
    // Idempotent for recently released ids; NotFound for ids this pool never handed out.
    Status release(const std::string &sandboxId);
    PoolStats stats() const;

    // The cgroup layout detected at create(); cgroupsEnforced() is false when sandboxes run
    // without limits (no usable hierarchy, or not writable).
    const CgroupLayout &cgroupLayout() const { return m_cgroupLayout; }
    bool cgroupsEnforced() const { return m_cgroups != nullptr; }
    // Disk limits (workspace_fs.h): "btrfs qgroups" when each sandbox directory is held to its
    // tier's disk_mb, else "none (...)" saying why. Without them a sandbox can fill the host's disk.
    const std::string &diskLimits() const { return m_diskLimits; }
    bool diskLimitsEnforced() const { return m_workspaceFs != nullptr; }
    // What a sandbox's directory (its workspace, mostly) uses now, or -1 (no disk limits, unknown id).
    int64_t workspaceUsedBytes(const std::string &sandboxId) const;
    // The cgroup directories of a claimed sandbox (empty without cgroups or for unknown ids).
    std::vector<std::filesystem::path> cgroupDirs(const std::string &sandboxId) const;
    // The pool's own cgroup directories (CgroupManager::poolDirs); empty when limits are off.
    std::vector<std::filesystem::path> cgroupPoolDirs() const;
    // The last resource samples of a claimed sandbox, oldest first (at most kSamplesKept, one a
    // second). GetSamples and post-mortems carry them out.
    std::vector<CgroupSample> samples(const std::string &sandboxId) const;
    // samples(), but NotFound for a sandbox that is not claimed (GetSamples).
    Result<std::vector<CgroupSample>> claimedSamples(const std::string &sandboxId) const;
    static constexpr size_t kSamplesKept = 300;

    // Workspace snapshots and post-mortems (pool/snapshot, post_mortem_store.h). A command that
    // ends abnormally (oom_killed, timeout, non-zero exit) or a claimed sandbox whose init dies
    // leaves a post-mortem with a snapshot of /workspace, taken before the exec's result is
    // returned (on the capture thread, not the exec loop's), so the next command cannot change
    // the workspace first.
    Result<SnapshotInfo> snapshot(const std::string &sandboxId);
    Result<SnapshotInfo> restore(const std::string &sandboxId, const std::string &ref);
    SnapshotStore &snapshots() { return *m_snapshots; }
    PostMortemStore &postMortems() { return *m_postMortems; }

    // Checkpoints of a claimed sandbox's /workspace, kept off the host by the broker
    // (sandbox_pool_checkpoints.cpp; pool/snapshot/workspace_checkpoint.h says what each does). A
    // sandbox's base and pending chunks live until it is released; each call blocks for its
    // scan, transfer or restore (call them from a thread that may block).
    Result<TakenCheckpoint> takeCheckpoint(const std::string &sandboxId, const std::string &baseManifest);
    Result<std::vector<CheckpointChunkData>> readCheckpointChunks(const std::string &sandboxId, const std::string &token,
                                                                  const std::vector<std::string> &hashes);
    Status commitCheckpoint(const std::string &sandboxId, const std::string &token, const std::string &manifestId);
    Result<RestoreBegun> beginRestore(const std::string &sandboxId, const std::string &manifestId, std::string_view manifest);
    Status putRestoreChunks(const std::string &sandboxId, const std::string &token,
                            std::span<const CheckpointChunkView> chunks);
    Result<RestoreDone> finishRestore(const std::string &sandboxId, const std::string &token);

    // Egress (sandbox_pool_egress.cpp): the attempts a sandbox of an allowlist tier made through
    // the egress proxy during an exec, handed to done (on the proxy's thread, or inline). A
    // replayed exec gets the attempts its first run reported (kept per idempotency key); a
    // sandbox of a tier without network gets none.
    using EgressDone = std::function<void(std::vector<egress::EgressAttempt>)>;
    void egressForExec(const std::string &sandboxId, const std::string &idempotencyKey, bool replayed, EgressDone done);
    static constexpr int64_t kEgressSettleMs = 250;   // open connections waited for at an exec's end
    static constexpr size_t kEgressKeysKept = 4096;

    const PoolConfig &config() const { return m_config; }
    // Blocks until every tier has its warm_count ready (or timeoutMs passes). For tests and
    // benchmarks that want to measure warm claims.
    bool waitWarm(int64_t timeoutMs);

private:
    struct ExecRecord;
    struct Sandbox;
    struct Tier;

    SandboxPool(PoolConfig config, std::map<std::string, std::unique_ptr<Runtime>> runtimes);
    Result<std::shared_ptr<Sandbox>> startSandbox(Tier &tier);
    // startSandbox's steps: the spec of a new sandbox of the tier, and its directory with its
    // qgroup (0 without disk limits); when that fails, the cgroup is removed and no directory is left.
    SandboxSpec sandboxSpec(const TierConfig &tier, const std::string &id, const std::filesystem::path &dir) const;
    Result<uint64_t> makeSandboxDir(const TierConfig &tier, const SandboxSpec &spec, const std::filesystem::path &dir,
                                    WorkspaceFs *workspaceFs, SandboxCgroup *cgroup) const;
    Result<std::shared_ptr<Sandbox>> findClaimed(const std::string &sandboxId) const;
    // The claimed sandbox an exec runs in, once the request names a command.
    Result<std::shared_ptr<Sandbox>> execTarget(const ExecRequest &request) const;
    // execAsync's steps (sandbox_pool_exec.cpp). A keyed run's record answers a repeat once it is
    // done: true/false as execAsync returns, nullopt when the key has no record (lock is released
    // when it answers). submitExec hands the request to the exec loop on fd; answerExec calls done
    // with the result, after a post-mortem when the command failed.
    static std::optional<bool> replayFinished(Sandbox &sandbox, const std::string &key, std::unique_lock<std::mutex> &lock,
                                              const ChunkSink &sink, const ExecDone &done);
    bool submitExec(const std::shared_ptr<Sandbox> &sandbox, const ExecRequest &request, bool keyed, int fd,
                    const std::shared_ptr<const egress::Grants> &grants, ChunkSink sink, ExecDone done);
    void answerExec(const std::shared_ptr<Sandbox> &sandbox, const std::vector<std::string> &argv, const OutputTail &tail,
                    const std::shared_ptr<DeadlineWatcher::Watch> &watch, Result<InitExecResult> r, const ExecDone &done);
    void destroy(const std::shared_ptr<Sandbox> &sandbox);
    void refillLoop(Tier *tier);
    void monitorLoop();
    void samplerLoop();
    // Fills exit.reason: "timeout", or "oom_killed" when the cgroup's OOM kill count went up
    // during the exec (from oomBefore) and the command did not succeed, or "disk_full" when it
    // failed with the sandbox directory at its disk limit.
    static void nameExit(const Sandbox &sandbox, int64_t oomBefore, Result<InitExecResult> &r);
    static bool workspaceFull(const Sandbox &sandbox);
    // How its snapshots keep owners: ids as seen inside the sandbox.
    static OwnerMap ownerMap(const Sandbox &sandbox);
    // Its OCI bundle and runtime state: <state>/runtime/<id>, off the workspace filesystem.
    std::filesystem::path runtimeDirOf(const std::string &sandboxId) const;
    // The checkpoints of a claimed sandbox, made at its first checkpoint call.
    Result<std::shared_ptr<WorkspaceCheckpoints>> checkpointsOf(const std::string &sandboxId);
    static constexpr int64_t kDiskFullMarginBytes = 64 << 10;
    void wakeMonitor();
    // Builds, snapshots and stores a post-mortem (blocking: call it on the capture thread or a
    // thread that may block).
    void capturePostMortem(const std::shared_ptr<Sandbox> &sandbox, PostMortemRecord record,
                           const std::shared_ptr<DeadlineWatcher::Watch> &watch);
    // The post-mortem for a finished exec, or nullopt when it ended normally.
    std::optional<PostMortemRecord> execFailure(const Sandbox &sandbox, const std::vector<std::string> &argv,
                                                const InitExecResult &exit, const OutputTail &tail) const;
    PostMortemRecord baseRecord(const Sandbox &sandbox) const;
    // Deletes snapshots past snapshot_retention_hours that no post-mortem holds (at most every
    // 10 minutes unless now).
    void pruneSnapshots(bool now);
    void recordClaimLatency(Tier &tier, int64_t us);
    InitExecRequest initRequest(const ExecRequest &request) const;
    // A keyed run finished: store its result, drop it when it failed, bound the records.
    void finishRecord(Sandbox &sandbox, const std::string &key, ExecRecord &record, const Result<InitExecResult> &r);
    ClaimedSandbox finishClaimLocked(Tier &tier, const std::shared_ptr<Sandbox> &sandbox, bool warm, int64_t t0,
                                  const std::string &sessionId, const std::string &idempotencyKey, bool notify = true);

    const PoolConfig m_config;
    const std::map<std::string, std::unique_ptr<Runtime>> m_runtimes;
    const int64_t m_startedUs;
    CgroupLayout m_cgroupLayout;
    std::unique_ptr<CgroupManager> m_cgroups;   // null: no limits
    std::unique_ptr<WorkspaceFs> m_workspaceFs; // null: no disk limits
    std::string m_diskLimits;
    SandboxHardening m_hardening;   // fixed after create()

    mutable std::mutex m_mutex;
    std::condition_variable m_cv;   // warm sandbox added, slot freed, claim key resolved, stopping
    std::vector<std::unique_ptr<Tier>> m_tiers;                        // fixed after construction
    std::map<std::string, std::shared_ptr<Sandbox>> m_sandboxes;       // claimed ones, by id
    // Claim idempotency: key -> result; nullopt while the first claim with that key is running.
    std::map<std::string, std::optional<ClaimedSandbox>> m_claimKeys;
    bool m_stopping = false;
    std::set<std::string> m_releasedIds;      // recent releases, so a retried Release succeeds
    std::deque<std::string> m_releasedOrder;

    std::vector<std::thread> m_threads;
    InitExecLoop m_execLoop;
    int m_wakeFd = -1;              // eventfd: the monitor's set of sandboxes changed
    int m_lockFd = -1;              // flock on <state>/pool.lock, held for the pool's life
    std::atomic<bool> m_shutDown{false};

    // Egress (sandbox_pool_egress.cpp). Allowlists by tier name, fixed after create(); the proxy
    // exists when some tier has network = "allowlist".
    static Result<std::map<std::string, std::shared_ptr<const egress::Allowlist>>> egressPolicies(const PoolConfig &config);
    Status startEgress(const TierConfig &tier, const std::string &sandboxId, const std::filesystem::path &dir,
                       SandboxSpec &spec);
    void stopEgress(const std::string &sandboxId);
    // The request's grants, parsed (null when it has none or the sandbox has no network); an
    // invalid entry is an InvalidArgument and nothing runs.
    Result<std::shared_ptr<const egress::Grants>> egressGrants(const ExecRequest &request);
    // Hands grants to the proxy for the sandbox's connections until revokeEgress(holder); returns
    // the holder (0: nothing was held).
    uint64_t holdEgress(const std::string &sandboxId, std::shared_ptr<const egress::Grants> grants);
    void revokeEgress(const std::string &sandboxId, uint64_t holder);
    std::atomic<uint64_t> m_nextGrantHolder{1};
    std::map<std::string, std::shared_ptr<const egress::Allowlist>> m_allowlists;
    std::mutex m_egressMutex;
    std::set<std::string> m_egressSandboxes;                                   // guarded by m_egressMutex
    std::map<std::string, std::vector<egress::EgressAttempt>> m_egressByKey;   // guarded by m_egressMutex
    std::deque<std::string> m_egressKeyOrder;                                  // guarded by m_egressMutex
    std::unique_ptr<egress::EgressProxy> m_egress;   // last: destroyed first, while the rest still stands
    std::unique_ptr<SnapshotStore> m_snapshots;
    std::unique_ptr<PostMortemStore> m_postMortems;
    std::unique_ptr<DeadlineWatcher> m_deadlines;
    std::unique_ptr<CaptureQueue> m_captures;
    std::atomic<int64_t> m_lastSnapshotPruneUs{0};
};

} // namespace paddock::pool
