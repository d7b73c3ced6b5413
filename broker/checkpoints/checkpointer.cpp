#include "broker/checkpoints/checkpointer.h"

#include "checkpoint/sha256.h"
#include "common/clock.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace paddock::checkpoints {

namespace {

constexpr int64_t kBatchBytes = 3 << 20;   // chunk content per ReadCheckpointChunks / PutRestoreChunks

double msSince(int64_t startUs)
{
    return static_cast<double>(monotonicUs() - startUs) / 1000.0;
}

std::unexpected<Failure> atPool(Error error)
{
    return std::unexpected(Failure{FailedAt::Pool, std::move(error)});
}

std::unexpected<Failure> atPool(ErrorCode code, std::string message)
{
    return atPool(Error{code, std::move(message)});
}

std::unexpected<Failure> atStore(Error error)
{
    return std::unexpected(Failure{FailedAt::Store, std::move(error)});
}

// The first file of the manifest that uses chunk `hash`, for messages.
std::string fileUsing(const checkpoint::Manifest &manifest, const std::string &hash)
{
    for (const auto &e : manifest.entries)
        if (std::find(e.chunks.begin(), e.chunks.end(), hash) != e.chunks.end())
            return e.path;
    return "?";
}

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

Outcome<void> Checkpointer::fetchChunks(pool_client::PoolClient &pool, const std::string &sandboxId,
                                        const std::string &token, std::vector<std::string> &hashes, TakeResult &result)
{
    while (!hashes.empty()) {
        auto chunks = pool.readCheckpointChunks(sandboxId, token, hashes);
        if (!chunks)
            return atPool(chunks.error());
        if (chunks->empty())
            return atPool(ErrorCode::Internal, "pool '" + pool.name() + "' sent none of the " +
                                                   std::to_string(hashes.size()) + " chunks asked for");
        for (const auto &chunk : *chunks) {
            if (std::find(hashes.begin(), hashes.end(), chunk.hash) == hashes.end())
                return atPool(ErrorCode::InvalidArgument, "pool '" + pool.name() + "' sent chunk " + chunk.hash
                                                              + ", which was not asked for");
            // Fetched only because hasChunk said the store lacks it.
            if (auto kept = keepChunk(m_store, pool.name(), chunk, result, true); !kept)
                return kept;
            std::erase(hashes, chunk.hash);
        }
    }
    return {};
}

Outcome<void> Checkpointer::storeNewChunks(pool_client::PoolClient &pool, const std::string &sandboxId,
                                           const pool_client::TakenCheckpoint &taken, TakeResult &result)
{
    for (const auto &chunk : taken.chunks)
        if (auto kept = keepChunk(m_store, pool.name(), chunk, result); !kept)
            return kept;
    // Pending chunks the store lacks, fetched in batches of about kBatchBytes.
    std::vector<std::string> batch;
    int64_t batchBytes = 0;
    for (const auto &[hash, size] : taken.pending) {
        auto have = m_store.hasChunk(hash);
        if (!have)
            return have.error().code == ErrorCode::InvalidArgument ? atPool(have.error()) : atStore(have.error());
        if (*have)
            continue;
        batch.push_back(hash);
        batchBytes += size;
        if (batchBytes >= kBatchBytes) {
            if (auto fetched = fetchChunks(pool, sandboxId, taken.token, batch, result); !fetched)
                return fetched;
            batchBytes = 0;
        }
    }
    return fetchChunks(pool, sandboxId, taken.token, batch, result);
}

Outcome<TakeResult> Checkpointer::take(pool_client::PoolClient &pool, const std::string &sandboxId,
                                       const std::string &baseManifest)
{
    const int64_t startUs = monotonicUs();
    auto taken = pool.takeCheckpoint(sandboxId, baseManifest);
    if (!taken)
        return atPool(taken.error());
    TakeResult result;
    result.base = taken->base;
    result.scanMs = taken->scanMs;
    result.bytesSent = static_cast<int64_t>(taken->delta.size());
    if (!taken->base.empty() && taken->base != baseManifest)
        return atPool(ErrorCode::InvalidArgument, "pool '" + pool.name() + "' answered a delta against " + taken->base
                                                      + ", not against the base asked for");
    if (taken->unchanged && taken->base == baseManifest) {
        result.unchanged = true;
        result.manifestId = baseManifest;
        result.durationMs = msSince(startUs);
        return result;
    }
    auto delta = checkpoint::Delta::parse(taken->delta);
    if (!delta || delta->base != taken->base)
        return atPool(ErrorCode::InvalidArgument, "pool '" + pool.name() + "' sent a delta that cannot be read: "
                                                      + (delta ? "its base disagrees with the answer" : delta.error().message));
    if (auto stored = storeNewChunks(pool, sandboxId, *taken, result); !stored)
        return std::unexpected(stored.error());

    checkpoint::Manifest base;
    if (!taken->base.empty()) {
        auto loaded = m_store.getManifest(taken->base);
        if (!loaded)
            return atStore(loaded.error());
        base = std::move(*loaded);
    }
    auto manifest = checkpoint::apply(base, *delta);
    if (!manifest)
        return atPool(ErrorCode::InvalidArgument, "pool '" + pool.name() + "' sent a delta that does not apply: "
                                                      + manifest.error().message);
    // Every chunk a changed entry names is in the store: sent just now, or there before.
    const auto baseChunks = base.chunkHashes();
    for (const auto &e : delta->changed)
        for (const auto &hash : e.chunks) {
            if (std::binary_search(baseChunks.begin(), baseChunks.end(), hash))
                continue;
            auto have = m_store.hasChunk(hash);
            if (!have)
                return atStore(have.error());
            if (!*have)
                return atPool(ErrorCode::DataLoss, "pool '" + pool.name() + "' named chunk " + hash + " of '" + e.path
                                                       + "' without sending it");
        }
    const std::string json = manifest->toJson();
    result.manifestId = checkpoint::sha256Hex(json);
    if (auto stored = m_store.putManifest(result.manifestId, json, *manifest); !stored)
        return atStore(stored.error());
    result.bytesStored += static_cast<int64_t>(json.size());
    result.files = static_cast<int64_t>(manifest->entries.size());
    result.fileBytes = manifest->fileBytes();
    result.changed = static_cast<int64_t>(delta->changed.size());
    result.removed = static_cast<int64_t>(delta->removed.size());
    // The checkpoint is durable now; a pool that does not hear of it sends a full listing next time.
    if (auto committed = pool.commitCheckpoint(sandboxId, taken->token, result.manifestId); !committed)
        spdlog::warn("pool '{}' did not take checkpoint {} of {} as its base ({}); the next checkpoint lists the "
                     "whole workspace", pool.name(), result.manifestId, sandboxId, committed.error().message);
    result.durationMs = msSince(startUs);
    return result;
}

Outcome<RestoreResult> Checkpointer::restore(pool_client::PoolClient &pool, const std::string &sandboxId,
                                             const std::string &manifestId)
{
    const int64_t startUs = monotonicUs();
    auto manifest = m_store.getManifest(manifestId);
    if (!manifest)
        return atStore(manifest.error());
    auto start = pool.beginRestore(sandboxId, manifestId, manifest->toJson());
    if (!start)
        return atPool(start.error());
    RestoreResult result;
    result.manifestId = manifestId;
    std::vector<pool_client::ContentChunk> batch;
    int64_t batchBytes = 0;
    auto send = [&]() -> Outcome<void> {
        if (!batch.empty())
            if (auto sent = pool.putRestoreChunks(sandboxId, start->token, batch); !sent)
                return atPool(sent.error());
        batch.clear();
        batchBytes = 0;
        return {};
    };
    for (const auto &hash : start->missing) {
        auto data = m_store.getChunk(hash);
        if (!data) {
            if (data.error().code == ErrorCode::DataLoss)
                return atStore({ErrorCode::DataLoss, "checkpoint " + manifestId + " cannot be restored: "
                                                         + data.error().message + " (file '" + fileUsing(*manifest, hash) + "')"});
            return atStore(data.error());
        }
        result.chunksSent++;
        result.bytesSent += static_cast<int64_t>(data->size());
        batchBytes += static_cast<int64_t>(data->size());
        batch.push_back({hash, std::move(*data)});
        if (batchBytes >= kBatchBytes)
            if (auto sent = send(); !sent)
                return std::unexpected(sent.error());
    }
    if (auto sent = send(); !sent)
        return std::unexpected(sent.error());
    auto finished = pool.finishRestore(sandboxId, start->token);
    if (!finished)
        return atPool(finished.error());
    result.files = finished->fileCount;
    result.bytes = finished->bytes;
    result.durationMs = msSince(startUs);
    return result;
}

} // namespace paddock::checkpoints
