#pragma once
// Checkpoints of one sandbox's workspace: the pool's side of PoolService's checkpoint calls
// (proto/paddock/v1/pool.proto; the format is checkpoint/manifest.h). The broker keeps the
// checkpoints off the host; the pool keeps, per sandbox, the base: the manifest the broker last
// committed (or restored), its id, its chunk hashes and each file's stat key then.
//
// take(): scans the workspace (workspace_scan.h). Asked for the delta against the base the pool
// holds, it re-reads only files whose stat key changed and answers diff(base, scan); asked for
// anything else (a pool restarted, a new sandbox, a broker that wants another base), it reads every
// file and answers a full listing (base ""). A chunk is new when the base does not name it (in a
// full listing every chunk is): up to kInlineTotalBytes of new chunks of at most kInlineChunkBytes
// go inline, the rest into the spool, named by hash, until commit(), the next take() or the end.
// An unchanged workspace opens no file and serialises no manifest (its id is never computed then).
//
// beginRestore() .. finishRestore(): the manifest is parsed and its id checked; the chunks put are
// checked against their hashes and kept in the spool; finishRestore builds the whole tree in
// staging under `scratch` (workspace_build.h) and swaps it in for the workspace's content
// (swapWorkspace): any failure leaves the workspace as it was. The manifest becomes the base, so the
// next take() is incremental.
//
// The spool is the pool's own, per sandbox, outside what the sandbox sees (and off its disk limit);
// the staging directory is on the workspace's filesystem, also out of the sandbox's view.
//
// Threads: every method may be called from any thread; one mutex per object serialises the calls
// for its sandbox (a scan holds it for its length). Sandboxes have an object each.

#include "checkpoint/manifest.h"
#include "common/result.h"
#include "pool/snapshot/workspace_files.h"
#include "pool/snapshot/workspace_scan.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::pool {

struct CheckpointPaths {
    std::filesystem::path workspace;   // the sandbox's /workspace, from the host
    std::filesystem::path scratch;     // on the workspace's filesystem, not visible inside: staging, old content
    std::filesystem::path spool;       // the pool's own, for this sandbox alone: removed with the object
};

struct CheckpointChunkData {
    std::string hash;
    std::string data;
};

struct CheckpointChunkView {
    std::string_view hash;
    std::string_view data;
};

struct CheckpointChunkRef {
    std::string hash;
    int64_t size = 0;
};

struct TakenCheckpoint {
    std::string token;                          // names the pending chunks
    std::string base;                           // what delta is against; "" for a full listing
    std::string delta;                          // checkpoint::Delta as JSON
    bool unchanged = false;                     // the base the broker named, and no change since
    std::vector<CheckpointChunkData> chunks;    // new chunks, inline
    std::vector<CheckpointChunkRef> pending;    // new chunks in the spool
    int64_t filesScanned = 0;
    int64_t filesHashed = 0;
    int64_t bytesHashed = 0;
    int64_t skipped = 0;
    double scanMs = 0;
};

struct RestoreBegun {
    std::string token;
    std::vector<std::string> missing;   // chunk hashes to put, sorted
};

struct RestoreDone {
    int64_t fileCount = 0;   // files, directories and symlinks
    int64_t bytes = 0;
    double durationMs = 0;   // beginRestore to the swap
};

class WorkspaceCheckpoints {
public:
    static constexpr int64_t kInlineChunkBytes = 64 << 10;
    static constexpr int64_t kInlineTotalBytes = 1 << 20;
    static constexpr int64_t kReadChunksBytes = 3 << 20;

    WorkspaceCheckpoints(CheckpointPaths paths, OwnerMap owners);
    ~WorkspaceCheckpoints();   // removes the spool
    WorkspaceCheckpoints(const WorkspaceCheckpoints &) = delete;
    WorkspaceCheckpoints &operator=(const WorkspaceCheckpoints &) = delete;

    // A new checkpoint against baseManifest (see above); the previous pending one is dropped.
    Result<TakenCheckpoint> take(const std::string &baseManifest);
    // Pending chunks of checkpoint `token`, in the order asked, as many as fit in kReadChunksBytes
    // (at least one). NotFound for a token that is not pending or a hash it does not hold.
    Result<std::vector<CheckpointChunkData>> readChunks(const std::string &token, const std::vector<std::string> &hashes);
    // The broker stored checkpoint `token` as manifestId: it becomes the base. InvalidArgument (the
    // base stays) when manifestId is not the id of what the pool scanned; a repeat of the last
    // commit succeeds.
    Status commit(const std::string &token, const std::string &manifestId);

    // InvalidArgument for a manifest that does not parse or whose id is not manifestId. A restore
    // begun before is dropped.
    Result<RestoreBegun> beginRestore(const std::string &manifestId, std::string_view manifestJson);
    // DataLoss naming the hash for a chunk whose bytes do not match it (the chunks before it in the
    // call are kept); InvalidArgument for one the manifest does not name.
    Status putRestoreChunks(const std::string &token, std::span<const CheckpointChunkView> chunks);
    // FailedPrecondition naming the chunk and the file when a chunk was not put (put it and finish
    // again); the workspace changes only when the result is a success.
    Result<RestoreDone> finishRestore(const std::string &token);

    // The committed base's id, "" when there is none.
    std::string baseId() const;

private:
    struct Base;
    struct Take;
    struct Restore;

    // A chunk the scan read: kept inline or in the take's spool when it is new.
    Status keepChunk(Take &take, const Base *base, TakenCheckpoint &out, const std::string &hash, std::string_view data);
    Result<std::string> readPending(const Take &take, const std::string &hash, int64_t size) const;
    Status checkAllPut(const Restore &restore) const;
    void dropTakeLocked();
    void dropRestoreLocked();

    const CheckpointPaths m_paths;
    const OwnerMap m_owners;
    mutable std::mutex m_mutex;
    std::unique_ptr<Base> m_base;         // guarded by m_mutex, and the three below
    std::unique_ptr<Take> m_take;
    std::unique_ptr<Restore> m_restore;
    std::string m_lastCommitToken;
};

} // namespace paddock::pool
