// Checkpointer::take and takeAsync (checkpointer.h): a checkpoint of a sandbox's workspace, as a
// sequence of stages. The pool's stages are its client's *Async calls; each answer hops to the
// executor, where the store's stage runs; so no thread waits on the pool.
//
//   TakeCheckpoint -> keep the inline chunks, find the pending ones the store lacks
//   ReadCheckpointChunks (per batch of ~3 MiB, again for what a batch left out) -> keep them
//   -> the manifest: applied to its base, every chunk checked present, stored
//   CommitCheckpoint (its failure only costs the next checkpoint a full listing) -> done

#include "broker/checkpoints/checkpointer_internal.h"

#include "broker/metrics/broker_metrics.h"
#include "checkpoint/sha256.h"
#include "common/clock.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unordered_set>

namespace paddock::checkpoints {

using namespace detail;

double detail::msSince(int64_t startUs)
{
    return static_cast<double>(monotonicUs() - startUs) / 1000.0;
}

namespace {

// Stores a chunk the pool sent. A chunk that does not hash to its name arrived damaged: the pool's
// failure, not the store's.
Outcome<void> keepChunk(CheckpointStore &store, const std::string &pool, const pool_client::ContentChunk &chunk,
                        TakeResult &result, bool knownAbsent = false)
{
    auto stored = store.putChunk(chunk.hash, chunk.data, knownAbsent);
    if (!stored) {
        if (stored.error().code == ErrorCode::DataLoss || stored.error().code == ErrorCode::InvalidArgument)
            return atPool(stored.error().code, "pool '" + pool + "': " + stored.error().message);
        return atStore(stored.error());
    }
    const auto size = static_cast<int64_t>(chunk.data.size());
    result.bytesSent += size;
    if (*stored) {
        result.chunksNew++;
        result.bytesStored += size;
    }
    return {};
}

} // namespace

struct Checkpointer::TakeOp : Stages<TakeOp, TakeResult> {
    TakeOp(CheckpointStore &toStore, pool_client::PoolClient &fromPool, std::string sandbox, std::string base,
           Executor executor, OutcomeDone<TakeResult> then)
        : Stages(std::move(executor), std::move(then)), store(toStore), pool(fromPool), sandboxId(std::move(sandbox)),
          baseManifest(std::move(base))
    {
    }

    CheckpointStore &store;
    pool_client::PoolClient &pool;
    const std::string sandboxId;
    const std::string baseManifest;

    const int64_t startUs = monotonicUs();
    TakeResult result;
    pool_client::TakenCheckpoint taken;
    checkpoint::Delta delta;
    std::vector<std::vector<std::string>> batches;   // pending chunks the store lacks, ~kBatchBytes each
    size_t nextBatch = 0;
    std::vector<std::string> asked;                  // the batch being fetched, less what arrived
    // Chunks this take stored or found stored: finish() need not ask the store about them again
    // (an object store's HEAD each).
    std::unordered_set<std::string> present;

    void start()
    {
        pool.takeCheckpointAsync(sandboxId, baseManifest, onStoreThread(&TakeOp::scanned));
    }

    void scanned(Result<pool_client::TakenCheckpoint> answer)
    {
        if (!answer)
            return fail({FailedAt::Pool, answer.error()});
        taken = std::move(*answer);
        result.base = taken.base;
        result.scanMs = taken.scanMs;
        result.bytesSent = static_cast<int64_t>(taken.delta.size());
        if (!taken.base.empty() && taken.base != baseManifest)
            return fail(atPool(ErrorCode::InvalidArgument, "pool '" + pool.name() + "' answered a delta against "
                                                               + taken.base + ", not against the base asked for").error());
        if (taken.unchanged && taken.base == baseManifest) {
            result.unchanged = true;
            result.manifestId = baseManifest;
            result.durationMs = msSince(startUs);
            return done(std::move(result));
        }
        auto parsed = checkpoint::Delta::parse(taken.delta);
        if (!parsed || parsed->base != taken.base)
            return fail(atPool(ErrorCode::InvalidArgument,
                               "pool '" + pool.name() + "' sent a delta that cannot be read: "
                                   + (parsed ? "its base disagrees with the answer" : parsed.error().message)).error());
        delta = std::move(*parsed);
        for (const auto &chunk : taken.chunks) {
            if (auto kept = keepChunk(store, pool.name(), chunk, result); !kept)
                return fail(kept.error());
            present.insert(chunk.hash);
        }
        taken.chunks.clear();
        // The pending chunks the store lacks, in batches of about kBatchBytes.
        int64_t batchBytes = kBatchBytes;
        for (const auto &[hash, size] : taken.pending) {
            auto have = store.hasChunk(hash);
            if (!have)
                return fail(have.error().code == ErrorCode::InvalidArgument ? Failure{FailedAt::Pool, have.error()}
                                                                            : Failure{FailedAt::Store, have.error()});
            if (*have) {
                present.insert(hash);
                continue;
            }
            if (batchBytes >= kBatchBytes) {
                batches.emplace_back();
                batchBytes = 0;
            }
            batches.back().push_back(hash);
            batchBytes += size;
        }
        fetchNext();
    }

    void fetchNext()
    {
        if (asked.empty() && nextBatch == batches.size())
            return finish();
        if (asked.empty())
            asked = std::move(batches[nextBatch++]);
        pool.readCheckpointChunksAsync(sandboxId, taken.token, asked, onStoreThread(&TakeOp::fetched));
    }

    void fetched(Result<std::vector<pool_client::ContentChunk>> chunks)
    {
        if (!chunks)
            return fail({FailedAt::Pool, chunks.error()});
        if (chunks->empty())
            return fail(atPool(ErrorCode::Internal, "pool '" + pool.name() + "' sent none of the "
                                                        + std::to_string(asked.size()) + " chunks asked for").error());
        for (const auto &chunk : *chunks) {
            if (std::find(asked.begin(), asked.end(), chunk.hash) == asked.end())
                return fail(atPool(ErrorCode::InvalidArgument, "pool '" + pool.name() + "' sent chunk " + chunk.hash
                                                                   + ", which was not asked for").error());
            // Fetched only because hasChunk said the store lacks it.
            if (auto kept = keepChunk(store, pool.name(), chunk, result, true); !kept)
                return fail(kept.error());
            present.insert(chunk.hash);
            std::erase(asked, chunk.hash);
        }
        fetchNext();   // what the answer left out (its size limit), then the next batch
    }

    void finish()
    {
        checkpoint::Manifest base;
        if (!taken.base.empty()) {
            auto loaded = store.getManifest(taken.base);
            if (!loaded)
                return fail({FailedAt::Store, loaded.error()});
            base = std::move(*loaded);
        }
        auto manifest = checkpoint::apply(base, delta);
        if (!manifest)
            return fail(atPool(ErrorCode::InvalidArgument, "pool '" + pool.name() + "' sent a delta that does not apply: "
                                                               + manifest.error().message).error());
        // Every chunk a changed entry names is in the store: sent just now, or there before.
        const auto baseChunks = base.chunkHashes();
        for (const auto &e : delta.changed)
            for (const auto &hash : e.chunks) {
                if (present.contains(hash) || std::binary_search(baseChunks.begin(), baseChunks.end(), hash))
                    continue;
                auto have = store.hasChunk(hash);
                if (!have)
                    return fail({FailedAt::Store, have.error()});
                if (!*have)
                    return fail(atPool(ErrorCode::DataLoss, "pool '" + pool.name() + "' named chunk " + hash + " of '"
                                                                + e.path + "' without sending it").error());
            }
        const std::string json = manifest->toJson();
        result.manifestId = checkpoint::sha256Hex(json);
        if (auto stored = store.putManifest(result.manifestId, json, *manifest); !stored)
            return fail({FailedAt::Store, stored.error()});
        result.bytesStored += static_cast<int64_t>(json.size());
        broker_metrics::countCheckpoint(result.bytesStored);
        result.files = static_cast<int64_t>(manifest->entries.size());
        result.fileBytes = manifest->fileBytes();
        result.changed = static_cast<int64_t>(delta.changed.size());
        result.removed = static_cast<int64_t>(delta.removed.size());
        // The checkpoint is durable now; a pool that does not hear of it sends a full listing next time.
        pool.commitCheckpointAsync(sandboxId, taken.token, result.manifestId, [self = shared_from_this()](Status committed) {
            if (!committed)
                spdlog::warn("pool '{}' did not take checkpoint {} of {} as its base ({}); the next checkpoint lists "
                             "the whole workspace", self->pool.name(), self->result.manifestId, self->sandboxId,
                             committed.error().message);
            self->result.durationMs = msSince(self->startUs);
            self->done(std::move(self->result));
        });
    }
};

void Checkpointer::takeAsync(pool_client::PoolClient &pool, const std::string &sandboxId,
                             const std::string &baseManifest, Executor run, OutcomeDone<TakeResult> done)
{
    auto op = std::make_shared<TakeOp>(m_store, pool, sandboxId, baseManifest, std::move(run), std::move(done));
    op->start();
}

Outcome<TakeResult> Checkpointer::take(pool_client::PoolClient &pool, const std::string &sandboxId,
                                       const std::string &baseManifest)
{
    return runHere<TakeResult>([&](Executor run, OutcomeDone<TakeResult> done) {
        takeAsync(pool, sandboxId, baseManifest, std::move(run), std::move(done));
    });
}

} // namespace paddock::checkpoints
