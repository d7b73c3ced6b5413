// Checkpointer::restore and restoreAsync (checkpointer.h): a checkpoint rebuilt in a sandbox, as a
// sequence of stages like take's (checkpointer.cpp): the store's reads on the executor, the pool's
// calls on its client's *Async calls.
//
//   the manifest from the store -> BeginRestore (the pool answers the chunks it lacks)
//   -> per batch of ~3 MiB: the chunks from the store, each checked -> PutRestoreChunks
//   -> FinishRestore -> done

#include "broker/checkpoints/checkpointer_internal.h"

#include "common/clock.h"

#include <algorithm>

namespace paddock::checkpoints {

using namespace detail;

namespace {

// The first file of the manifest that uses chunk `hash`, for messages.
std::string fileUsing(const checkpoint::Manifest &manifest, const std::string &hash)
{
    for (const auto &e : manifest.entries)
        if (std::find(e.chunks.begin(), e.chunks.end(), hash) != e.chunks.end())
            return e.path;
    return "?";
}

} // namespace

struct Checkpointer::RestoreOp : Stages<RestoreOp, RestoreResult> {
    RestoreOp(CheckpointStore &fromStore, pool_client::PoolClient &toPool, std::string sandbox, std::string manifestId,
              Executor executor, OutcomeDone<RestoreResult> then)
        : Stages(std::move(executor), std::move(then)), store(fromStore), pool(toPool), sandboxId(std::move(sandbox))
    {
        result.manifestId = std::move(manifestId);
    }

    CheckpointStore &store;
    pool_client::PoolClient &pool;
    const std::string sandboxId;

    const int64_t startUs = monotonicUs();
    RestoreResult result;
    checkpoint::Manifest manifest;
    pool_client::RestoreStart begun;
    size_t nextMissing = 0;   // into begun.missing

    void start()
    {
        runStage([self = shared_from_this()] { self->readManifest(); });
    }

    void readManifest()
    {
        auto loaded = store.getManifest(result.manifestId);
        if (!loaded)
            return fail({FailedAt::Store, loaded.error()});
        manifest = std::move(*loaded);
        pool.beginRestoreAsync(sandboxId, result.manifestId, manifest.toJson(), onStoreThread(&RestoreOp::begin));
    }

    void begin(Result<pool_client::RestoreStart> answer)
    {
        if (!answer)
            return fail({FailedAt::Pool, answer.error()});
        begun = std::move(*answer);
        sendNext({});
    }

    // The next batch of the chunks the pool lacks, or FinishRestore once all are there.
    void sendNext(Status sent)
    {
        if (!sent)
            return fail({FailedAt::Pool, sent.error()});
        if (nextMissing == begun.missing.size()) {
            pool.finishRestoreAsync(sandboxId, begun.token, [self = shared_from_this()](Result<pool_client::RestoredWorkspace> finished) {
                if (!finished)
                    return self->fail({FailedAt::Pool, finished.error()});
                self->result.files = finished->fileCount;
                self->result.bytes = finished->bytes;
                self->result.durationMs = msSince(self->startUs);
                self->done(std::move(self->result));
            });
            return;
        }
        std::vector<pool_client::ContentChunk> batch;
        int64_t batchBytes = 0;
        while (nextMissing < begun.missing.size() && batchBytes < kBatchBytes) {
            const std::string &hash = begun.missing[nextMissing++];
            auto data = store.getChunk(hash);
            if (!data) {
                if (data.error().code == ErrorCode::DataLoss)
                    return fail({FailedAt::Store,
                                 {ErrorCode::DataLoss, "checkpoint " + result.manifestId + " cannot be restored: "
                                                           + data.error().message + " (file '" + fileUsing(manifest, hash) + "')"}});
                return fail({FailedAt::Store, data.error()});
            }
            result.chunksSent++;
            result.bytesSent += static_cast<int64_t>(data->size());
            batchBytes += static_cast<int64_t>(data->size());
            batch.push_back({hash, std::move(*data)});
        }
        pool.putRestoreChunksAsync(sandboxId, begun.token, batch, onStoreThread(&RestoreOp::sendNext));
    }
};

void Checkpointer::restoreAsync(pool_client::PoolClient &pool, const std::string &sandboxId,
                                const std::string &manifestId, Executor run, OutcomeDone<RestoreResult> done)
{
    auto op = std::make_shared<RestoreOp>(m_store, pool, sandboxId, manifestId, std::move(run), std::move(done));
    op->start();
}

Outcome<RestoreResult> Checkpointer::restore(pool_client::PoolClient &pool, const std::string &sandboxId,
                                             const std::string &manifestId)
{
    return runHere<RestoreResult>([&](Executor run, OutcomeDone<RestoreResult> done) {
        restoreAsync(pool, sandboxId, manifestId, std::move(run), std::move(done));
    });
}

} // namespace paddock::checkpoints
