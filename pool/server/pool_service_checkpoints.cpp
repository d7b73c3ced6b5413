// PoolService: TakeCheckpoint, ReadCheckpointChunks, CommitCheckpoint, BeginRestore,
// PutRestoreChunks and FinishRestore. Each runs on the TaskRunner (scans, chunk files and restores
// are blocking work) and translates between the messages and SandboxPool's checkpoint calls.

#include "pool/server/pool_service.h"

#include "pool/metrics/pool_metrics.h"

#include <vector>

namespace paddock::pool {

grpc::ServerUnaryReactor *PoolService::TakeCheckpoint(grpc::CallbackServerContext *ctx, const v1::TakeCheckpointRequest *req,
                                                      v1::TakeCheckpointResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto r = m_pool.takeCheckpoint(req->sandbox_id(), req->base_manifest());
        if (!r)
            return toGrpcStatus(r.error());
        resp->set_token(std::move(r->token));
        resp->set_base(std::move(r->base));
        uint64_t sent = r->delta.size();
        resp->set_delta(std::move(r->delta));
        resp->set_unchanged(r->unchanged);
        for (auto &chunk : r->chunks) {
            sent += chunk.data.size();
            auto *out = resp->add_chunks();
            out->set_hash(std::move(chunk.hash));
            out->set_data(std::move(chunk.data));
        }
        for (auto &ref : r->pending) {
            auto *out = resp->add_pending();
            out->set_hash(std::move(ref.hash));
            out->set_size(ref.size);
        }
        resp->set_files_scanned(r->filesScanned);
        resp->set_files_hashed(r->filesHashed);
        resp->set_bytes_hashed(r->bytesHashed);
        resp->set_scan_ms(r->scanMs);
        resp->set_skipped(r->skipped);
        pool_metrics::countCheckpointSent(sent);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::ReadCheckpointChunks(grpc::CallbackServerContext *ctx,
                                                            const v1::ReadCheckpointChunksRequest *req,
                                                            v1::ReadCheckpointChunksResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        const std::vector<std::string> hashes(req->hashes().begin(), req->hashes().end());
        auto r = m_pool.readCheckpointChunks(req->sandbox_id(), req->token(), hashes);
        if (!r)
            return toGrpcStatus(r.error());
        uint64_t sent = 0;
        for (auto &chunk : *r) {
            sent += chunk.data.size();
            auto *out = resp->add_chunks();
            out->set_hash(std::move(chunk.hash));
            out->set_data(std::move(chunk.data));
        }
        pool_metrics::countCheckpointSent(sent);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::CommitCheckpoint(grpc::CallbackServerContext *ctx, const v1::CommitCheckpointRequest *req,
                                                        v1::CommitCheckpointResponse *)
{
    return runUnary(ctx, [this, req]() -> grpc::Status {
        auto r = m_pool.commitCheckpoint(req->sandbox_id(), req->token(), req->manifest_id());
        if (!r)
            return toGrpcStatus(r.error());
        pool_metrics::countCheckpointCommitted();
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::BeginRestore(grpc::CallbackServerContext *ctx, const v1::BeginRestoreRequest *req,
                                                    v1::BeginRestoreResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto r = m_pool.beginRestore(req->sandbox_id(), req->manifest_id(), req->manifest());
        if (!r)
            return toGrpcStatus(r.error());
        resp->set_token(std::move(r->token));
        for (auto &hash : r->missing)
            resp->add_missing(std::move(hash));
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::PutRestoreChunks(grpc::CallbackServerContext *ctx, const v1::PutRestoreChunksRequest *req,
                                                        v1::PutRestoreChunksResponse *)
{
    return runUnary(ctx, [this, req]() -> grpc::Status {
        // Views into the request, which outlives the call.
        std::vector<CheckpointChunkView> chunks;
        chunks.reserve(static_cast<size_t>(req->chunks_size()));
        uint64_t received = 0;
        for (const auto &chunk : req->chunks()) {
            chunks.push_back({chunk.hash(), chunk.data()});
            received += chunk.data().size();
        }
        auto r = m_pool.putRestoreChunks(req->sandbox_id(), req->token(), chunks);
        if (!r)
            return toGrpcStatus(r.error());
        pool_metrics::countRestoreReceived(received);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::FinishRestore(grpc::CallbackServerContext *ctx, const v1::FinishRestoreRequest *req,
                                                     v1::FinishRestoreResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto r = m_pool.finishRestore(req->sandbox_id(), req->token());
        if (!r)
            return toGrpcStatus(r.error());
        resp->set_file_count(r->fileCount);
        resp->set_bytes(r->bytes);
        resp->set_duration_ms(r->durationMs);
        return grpc::Status::OK;
    });
}

} // namespace paddock::pool
