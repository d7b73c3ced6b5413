// SandboxPool's checkpoints: each call finds the claimed sandbox and hands over to its
// WorkspaceCheckpoints (pool/snapshot/workspace_checkpoint.h), made at its first checkpoint call
// with its paths: the workspace, the sandbox's scratch directory beside it (restore staging, on
// the workspace's filesystem, not visible inside) and a spool of the pool's own,
// <state>/checkpoints/<id> (off the sandbox's disk limit: a full workspace can still be
// checkpointed). destroy() drops the object, and its spool with it.
//
// Threads: the callers' (PoolService's TaskRunner workers); every call blocks for its work.

#include "pool/core/sandbox_pool_internal.h"

#include <spdlog/spdlog.h>

namespace paddock::pool {

Result<std::shared_ptr<WorkspaceCheckpoints>> SandboxPool::checkpointsOf(const std::string &sandboxId)
{
    auto sandbox = findClaimed(sandboxId);
    if (!sandbox)
        return std::unexpected(sandbox.error());
    Sandbox &sb = **sandbox;
    std::lock_guard lock(sb.checkpointMutex);
    if (!sb.checkpoints) {
        CheckpointPaths paths{sb.dir / "workspace", sb.dir / "scratch", m_config.stateDir / "checkpoints" / sb.id};
        sb.checkpoints = std::make_shared<WorkspaceCheckpoints>(std::move(paths), ownerMap(sb));
    }
    return sb.checkpoints;
}

Result<TakenCheckpoint> SandboxPool::takeCheckpoint(const std::string &sandboxId, const std::string &baseManifest)
{
    auto checkpoints = checkpointsOf(sandboxId);
    if (!checkpoints)
        return std::unexpected(checkpoints.error());
    auto taken = (*checkpoints)->take(baseManifest);
    if (!taken) {
        spdlog::warn("checkpoint of {} failed: {}", sandboxId, taken.error().message);
        return taken;
    }
    spdlog::debug("checkpoint of {} against '{}': {}, {} files, {} read ({} bytes), {} chunks inline, {} pending, {:.2f} ms",
                  sandboxId, taken->base, taken->unchanged ? "unchanged" : "changed", taken->filesScanned,
                  taken->filesHashed, taken->bytesHashed, taken->chunks.size(), taken->pending.size(), taken->scanMs);
    return taken;
}

Result<std::vector<CheckpointChunkData>> SandboxPool::readCheckpointChunks(const std::string &sandboxId, const std::string &token,
                                                                           const std::vector<std::string> &hashes)
{
    auto checkpoints = checkpointsOf(sandboxId);
    if (!checkpoints)
        return std::unexpected(checkpoints.error());
    return (*checkpoints)->readChunks(token, hashes);
}

Status SandboxPool::commitCheckpoint(const std::string &sandboxId, const std::string &token, const std::string &manifestId)
{
    auto checkpoints = checkpointsOf(sandboxId);
    if (!checkpoints)
        return std::unexpected(checkpoints.error());
    auto committed = (*checkpoints)->commit(token, manifestId);
    if (!committed)
        spdlog::warn("commit of checkpoint {} of {} failed: {}", token, sandboxId, committed.error().message);
    return committed;
}

Result<RestoreBegun> SandboxPool::beginRestore(const std::string &sandboxId, const std::string &manifestId,
                                               std::string_view manifest)
{
    auto checkpoints = checkpointsOf(sandboxId);
    if (!checkpoints)
        return std::unexpected(checkpoints.error());
    return (*checkpoints)->beginRestore(manifestId, manifest);
}

Status SandboxPool::putRestoreChunks(const std::string &sandboxId, const std::string &token,
                                     std::span<const CheckpointChunkView> chunks)
{
    auto checkpoints = checkpointsOf(sandboxId);
    if (!checkpoints)
        return std::unexpected(checkpoints.error());
    return (*checkpoints)->putRestoreChunks(token, chunks);
}

Result<RestoreDone> SandboxPool::finishRestore(const std::string &sandboxId, const std::string &token)
{
    auto checkpoints = checkpointsOf(sandboxId);
    if (!checkpoints)
        return std::unexpected(checkpoints.error());
    auto done = (*checkpoints)->finishRestore(token);
    if (done)
        spdlog::info("restored a checkpoint into {}: {} entries, {} bytes, {:.1f} ms", sandboxId, done->fileCount, done->bytes,
                     done->durationMs);
    else
        spdlog::warn("restore of a checkpoint into {} failed: {}", sandboxId, done.error().message);
    return done;
}

} // namespace paddock::pool
