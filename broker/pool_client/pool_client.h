#pragma once
// The broker's view of one pool agent (paddock-pool). grpc_pool_client.h implements it over gRPC;
// tests may implement it directly.
//
// Threads: every method may be called from any thread concurrently; each call blocks until done
// or until its deadline, except the *Async ones: they return at once and call `done` exactly once
// later, on a thread of the client's (gRPC's callback threads), or on the caller's before returning
// for clients that do not override them. `done` must not block; the step engine hands the result
// to a step worker, so that a session whose command runs holds no thread (broker/engine).

#include "broker/pool_client/post_mortem_types.h"
#include "common/result.h"
#include "common/sandbox_values.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace paddock::pool_client {

using paddock::ClaimedSandbox;   // common/sandbox_values.h: the pool's word for the same claim

// A host an approved egress_exception review opens for a session's commands.
struct EgressGrant {
    std::string host;        // as approved: an allowlist entry
    std::string reviewId;
};

struct ExecSpec {
    std::string sandboxId;
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;
    std::string cwd;                      // empty: /workspace
    int64_t timeoutMs = 0;                // 0: the pool's default
    std::string stdinData;
    std::string idempotencyKey;
    std::vector<EgressGrant> egressGrants;   // allowed by the pool's egress proxy while this command runs
    bool replayOnly = false;              // only the run recorded under idempotencyKey answers; NotFound if none
};

// One attempt of a sandbox to reach out through its pool's egress proxy (allowlist tiers).
struct EgressAttempt {
    bool allowed = false;
    std::string host;
    int port = 0;
    std::string address;        // connected to, or refused
    std::string method;         // CONNECT, GET, ...
    std::string reason;         // refused: not_allowlisted, metadata, loopback, private, ...
    std::string detail;
    std::string error;          // allowed, but the connection failed
    int64_t bytesOut = 0;
    int64_t bytesIn = 0;
    int64_t timeUnixMs = 0;
    double durationMs = 0;
    bool open = false;          // still relaying when the exec ended
    std::string reviewId;       // allowed by an approved host (ExecSpec::egressGrants), not the tier's allowlist
};

struct ExecOutcome {
    int exitCode = 0;                     // -1 when killed by a signal
    int signal = 0;
    std::string stdoutData;
    std::string stderrData;
    double durationMs = 0;
    int64_t startedUnixUs = 0;            // when the pool spawned the command, on its host's clock (0: unknown)
    bool timedOut = false;
    bool replayed = false;                // an earlier run with the same key answered
    std::string reason;                   // "", "oom_killed" or "timeout", as the pool named it
    std::vector<EgressAttempt> egress;    // attempts through the egress proxy during the exec
    // The sandbox's cgroup around the command, read at its exit (0: the pool did not measure:
    // no cgroup). peakMemoryScope says what the peak covers: "command", "concurrent" (other
    // commands of the sandbox ran meanwhile) or "sandbox" (the kernel could not reset it).
    int64_t peakMemoryBytes = 0;
    int64_t cpuTimeUs = 0;
    std::string peakMemoryScope;
};

struct DirEntry {
    std::string name;
    bool isDir = false;
    int64_t size = 0;
    uint32_t mode = 0;
    int64_t mtimeUnixMs = 0;
};

struct TierStatus {
    std::string name;
    std::string runtime;
    int warm = 0;
    int claimed = 0;
    int max = 0;
    double hitRate = 0;
    int64_t coldFallbacks = 0;
    // What the pool's Status says besides the counts (ListPools passes all of it on).
    std::vector<int64_t> claimLatencyUsBuckets;   // histogram bucket upper bounds, in microseconds
    std::vector<int64_t> claimLatencyCounts;      // one count per bucket
    double refillPerSecond = 0;
    double pricePerHourUsd = 0;
    // What the tier promises, in the pool's words (pool.proto TierStatus.isolation_*).
    std::string isolationIdentity;
    std::string isolationSeccomp;
    std::string isolationEtc;
    double cpu = 0;                               // limits: cores
    int64_t memoryBytes = 0;
    int64_t pids = 0;
    int64_t diskBytes = 0;
    bool allowlistNetwork = false;                // false: no network
    std::vector<std::string> allowlist;
    int warmCount = 0;                            // configured warm and max counts
    int maxCount = 0;
};

struct PoolStatus {
    std::string poolId;
    std::string host;
    std::string version;
    std::string cgroupVersion;
    std::string diskLimits;   // "btrfs qgroups" (tiers' disk_mb enforced) or "none (why)"
    std::vector<TierStatus> tiers;
};

// A chunk of workspace content, named by the SHA-256 of its bytes (checkpoint/manifest.h).
struct ContentChunk {
    std::string hash;
    std::string data;
};

// What TakeCheckpoint answers (pool.proto): a delta against `base` and the new chunks, some inline,
// the rest to fetch with readCheckpointChunks.
struct TakenCheckpoint {
    std::string token;
    std::string base;                     // the delta's base: the one asked for, or "" (a full listing)
    std::string delta;                    // checkpoint::Delta as JSON
    bool unchanged = false;
    std::vector<ContentChunk> chunks;
    std::vector<std::pair<std::string, int64_t>> pending;   // hash, size
    int64_t filesScanned = 0;
    int64_t filesHashed = 0;
    int64_t bytesHashed = 0;
    int64_t skipped = 0;
    double scanMs = 0;
};

struct RestoreStart {
    std::string token;
    std::vector<std::string> missing;     // chunk hashes the pool needs
};

struct RestoredWorkspace {
    int64_t fileCount = 0;
    int64_t bytes = 0;
    double durationMs = 0;
};

// Called with chunks of output as they arrive (stream 1 = stdout, 2 = stderr).
using OutputSink = std::function<void(int stream, const std::string &chunk)>;

// The completion of an *Async call: called exactly once with the call's result.
template <typename T>
using Done = std::function<void(Result<T>)>;
using ClaimDone = Done<ClaimedSandbox>;
using ExecDone = Done<ExecOutcome>;

class PoolClient {
public:
    virtual ~PoolClient() = default;
    virtual std::string name() const = 0;
    virtual std::string endpoint() const = 0;

    // Errors: NotFound (unknown sandbox or tier), Unavailable (pool unreachable), ResourceExhausted
    // (tier at its max), and the pool's own statuses passed through.
    virtual Result<ClaimedSandbox> claim(const std::string &tier, const std::string &sessionId,
                                         const std::string &idempotencyKey) = 0;
    virtual Result<ExecOutcome> exec(const ExecSpec &spec, const OutputSink &sink = {}) = 0;
    // The same two calls without holding a thread while the pool works. The defaults call the
    // blocking ones (clients for tests).
    virtual void claimAsync(const std::string &tier, const std::string &sessionId, const std::string &idempotencyKey,
                            ClaimDone done)
    {
        done(claim(tier, sessionId, idempotencyKey));
    }
    virtual void execAsync(const ExecSpec &spec, OutputSink sink, ExecDone done) { done(exec(spec, sink)); }
    virtual Result<std::string> readFile(const std::string &sandboxId, const std::string &path,
                                         int64_t maxBytes = 0) = 0;
    virtual Status writeFile(const std::string &sandboxId, const std::string &path,
                             const std::string &content, uint32_t mode = 0644) = 0;
    virtual Result<std::vector<DirEntry>> listDir(const std::string &sandboxId, const std::string &path) = 0;
    virtual Status release(const std::string &sandboxId) = 0;
    // The file calls and release without holding a thread; the defaults call the blocking ones.
    virtual void readFileAsync(const std::string &sandboxId, const std::string &path, int64_t maxBytes,
                               Done<std::string> done)
    {
        done(readFile(sandboxId, path, maxBytes));
    }
    virtual void writeFileAsync(const std::string &sandboxId, const std::string &path, const std::string &content,
                                uint32_t mode, Done<void> done)
    {
        done(writeFile(sandboxId, path, content, mode));
    }
    virtual void releaseAsync(const std::string &sandboxId, Done<void> done) { done(release(sandboxId)); }
    virtual Result<PoolStatus> status() = 0;

    // Snapshots and post-mortems (operators, debug shells). The defaults answer Unimplemented so
    // that clients for tests need not implement them.
    virtual Result<SnapshotInfo> snapshot(const std::string & /*sandboxId*/) { return unimplemented("Snapshot"); }
    virtual Result<SnapshotInfo> restore(const std::string & /*sandboxId*/, const std::string & /*ref*/)
    {
        return unimplemented("Restore");
    }
    // Checkpoints (pool.proto TakeCheckpoint .. FinishRestore; broker/checkpoints/checkpointer.h
    // drives them).
    virtual Result<TakenCheckpoint> takeCheckpoint(const std::string & /*sandboxId*/, const std::string & /*baseManifest*/)
    {
        return unimplemented("TakeCheckpoint");
    }
    virtual Result<std::vector<ContentChunk>> readCheckpointChunks(const std::string & /*sandboxId*/,
                                                                   const std::string & /*token*/,
                                                                   const std::vector<std::string> & /*hashes*/)
    {
        return unimplemented("ReadCheckpointChunks");
    }
    virtual Status commitCheckpoint(const std::string & /*sandboxId*/, const std::string & /*token*/,
                                    const std::string & /*manifestId*/)
    {
        return unimplemented("CommitCheckpoint");
    }
    virtual Result<RestoreStart> beginRestore(const std::string & /*sandboxId*/, const std::string & /*manifestId*/,
                                              const std::string & /*manifestJson*/)
    {
        return unimplemented("BeginRestore");
    }
    virtual Status putRestoreChunks(const std::string & /*sandboxId*/, const std::string & /*token*/,
                                    const std::vector<ContentChunk> & /*chunks*/)
    {
        return unimplemented("PutRestoreChunks");
    }
    virtual Result<RestoredWorkspace> finishRestore(const std::string & /*sandboxId*/, const std::string & /*token*/)
    {
        return unimplemented("FinishRestore");
    }
    // The checkpoint calls without holding a thread (Checkpointer::takeAsync, restoreAsync); the
    // defaults call the blocking ones.
    virtual void takeCheckpointAsync(const std::string &sandboxId, const std::string &baseManifest,
                                     Done<TakenCheckpoint> done)
    {
        done(takeCheckpoint(sandboxId, baseManifest));
    }
    virtual void readCheckpointChunksAsync(const std::string &sandboxId, const std::string &token,
                                           const std::vector<std::string> &hashes, Done<std::vector<ContentChunk>> done)
    {
        done(readCheckpointChunks(sandboxId, token, hashes));
    }
    virtual void commitCheckpointAsync(const std::string &sandboxId, const std::string &token,
                                       const std::string &manifestId, Done<void> done)
    {
        done(commitCheckpoint(sandboxId, token, manifestId));
    }
    virtual void beginRestoreAsync(const std::string &sandboxId, const std::string &manifestId,
                                   const std::string &manifestJson, Done<RestoreStart> done)
    {
        done(beginRestore(sandboxId, manifestId, manifestJson));
    }
    virtual void putRestoreChunksAsync(const std::string &sandboxId, const std::string &token,
                                       const std::vector<ContentChunk> &chunks, Done<void> done)
    {
        done(putRestoreChunks(sandboxId, token, chunks));
    }
    virtual void finishRestoreAsync(const std::string &sandboxId, const std::string &token,
                                    Done<RestoredWorkspace> done)
    {
        done(finishRestore(sandboxId, token));
    }

    // Newest first; output and samples left out (getPostMortem has them). sessionId "" for all.
    virtual Result<std::vector<PostMortemInfo>> listPostMortems(const std::string & /*sessionId*/, int /*limit*/)
    {
        return unimplemented("ListPostMortems");
    }
    virtual Result<PostMortemInfo> getPostMortem(const std::string & /*sandboxId*/) { return unimplemented("GetPostMortem"); }
    // Live samples of a claimed sandbox newer than afterUnixMs, oldest first. NotFound once it is
    // released (or was never claimed).
    virtual Result<std::vector<ResourcePoint>> samples(const std::string & /*sandboxId*/, int64_t /*afterUnixMs*/)
    {
        return unimplemented("GetSamples");
    }
    virtual void samplesAsync(const std::string &sandboxId, int64_t afterUnixMs, Done<std::vector<ResourcePoint>> done)
    {
        done(samples(sandboxId, afterUnixMs));
    }
    virtual Result<std::vector<SnapshotFile>> listSnapshotFiles(const std::string & /*ref*/, const std::string & /*pathPrefix*/)
    {
        return unimplemented("ListSnapshotFiles");
    }
    virtual Result<SnapshotChunk> readSnapshotFile(const std::string & /*ref*/, const std::string & /*path*/,
                                                   int64_t /*offset*/, int64_t /*maxBytes*/)
    {
        return unimplemented("ReadSnapshotFile");
    }

    // Ends every call in progress with Cancelled, from any thread (the broker is shutting down).
    // Work the pool started goes on there under its idempotency key, so the next broker gets its
    // result by repeating the call.
    virtual void cancelInFlight() = 0;

private:
    std::unexpected<Error> unimplemented(const char *call) const
    {
        return fail(ErrorCode::Unimplemented, std::string(call) + " is not supported by the client of pool '" + name() +
                                                  "'; use a pool reached over gRPC");
    }
};

} // namespace paddock::pool_client
