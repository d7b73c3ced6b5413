#pragma once
// Moves checkpoints between a pool and the checkpoint store (docs/checkpoints.md).
//
// take(): the pool scans the sandbox's /workspace against the session's last checkpoint and
// answers a delta with the new chunks. Every new chunk is checked against its name and stored
// (durably: the blob store fsyncs or has the object store's 200) before the manifest that names it,
// and the manifest before take() returns, so a checkpoint event appended afterwards never names
// something that could be lost. Only then is the pool told to make it its base.
//
// restore(): reads the manifest and the chunks the pool lacks from the store (each checked) and
// has the pool rebuild /workspace from them, in any pool of any tier.
//
// takeAsync() and restoreAsync() do the same without holding a thread while the pool works: the
// pool's part runs on its client's *Async calls, the store's part (hashing, writes with fsync, an
// object store's requests) on the executor the caller gives, never on gRPC's callback threads.
// take() and restore() wait, running the store's part on the calling thread.
//
// Threads: all may be called from any thread concurrently, for different sandboxes.

#include "broker/checkpoints/checkpoint_store.h"
#include "broker/pool_client/pool_client.h"

#include <expected>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace paddock::checkpoints {

struct TakeResult {
    std::string manifestId;      // "" when the workspace is empty and was never checkpointed
    std::string base;            // what the delta was against ("" for a full listing)
    bool unchanged = false;      // nothing changed since base: manifestId == base, nothing stored
    int64_t files = 0;           // entries of the manifest
    int64_t fileBytes = 0;       // the workspace's file content
    int64_t changed = 0;         // entries added or changed
    int64_t removed = 0;
    int64_t chunksNew = 0;       // chunks the store did not have
    int64_t bytesSent = 0;       // chunk bytes and the delta, pool to broker
    int64_t bytesStored = 0;     // new chunks and the manifest written to the store
    double scanMs = 0;           // inside the pool
    double durationMs = 0;       // the whole checkpoint, as the broker saw it
};

struct RestoreResult {
    std::string manifestId;
    int64_t files = 0;
    int64_t bytes = 0;           // file content restored
    int64_t chunksSent = 0;
    int64_t bytesSent = 0;
    double durationMs = 0;
};

// Which side a checkpoint or a restore failed on: the pool (its transport, or what it sent) or the
// checkpoint store. The engine treats them differently: a pool that does not answer may be lost
// (failover), a store that does not answer is waited for.
enum class FailedAt { Pool, Store };

struct Failure {
    FailedAt at = FailedAt::Pool;
    Error error;
};

template <typename T>
using Outcome = std::expected<T, Failure>;

// Runs one piece of a checkpoint's store work on a thread that may block (a step worker's).
using Executor = std::function<void(std::function<void()>)>;

template <typename T>
using OutcomeDone = std::function<void(Outcome<T>)>;

class Checkpointer {
public:
    explicit Checkpointer(CheckpointStore &store) : m_store(store) {}

    CheckpointStore &store() { return m_store; }

    // done is called exactly once, on the executor's thread or on one of the pool client's (it must
    // not block); the pool client and this Checkpointer must outlive the call.
    void takeAsync(pool_client::PoolClient &pool, const std::string &sandboxId, const std::string &baseManifest,
                   Executor run, OutcomeDone<TakeResult> done);
    void restoreAsync(pool_client::PoolClient &pool, const std::string &sandboxId, const std::string &manifestId,
                      Executor run, OutcomeDone<RestoreResult> done);

    // Errors: the pool's (Unavailable when it is gone), the store's (Unavailable, ResourceExhausted),
    // DataLoss for a chunk that arrived damaged, InvalidArgument for a delta that does not parse or
    // apply (the pool is confused or hostile). Nothing is appended by the caller then, and the
    // checkpoint before stays the session's last.
    Outcome<TakeResult> take(pool_client::PoolClient &pool, const std::string &sandboxId, const std::string &baseManifest);
    // Errors: NotFound (no such manifest), DataLoss naming the chunk (and a file that needs it) when
    // the store holds it damaged or not at all, the pool's errors; the sandbox's /workspace is then
    // as it was.
    Outcome<RestoreResult> restore(pool_client::PoolClient &pool, const std::string &sandboxId, const std::string &manifestId);

private:
    struct TakeOp;
    struct RestoreOp;

    CheckpointStore &m_store;
};

} // namespace paddock::checkpoints
