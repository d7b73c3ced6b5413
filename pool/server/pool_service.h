#pragma once
// The gRPC face of the pool: PoolService on the callback API. One reactor per call; a warm Claim
// is answered inline and an Exec is started inline (SandboxPool::execAsync); other blocking work
// goes to a TaskRunner; Exec streams with one write in flight. Errors become grpc::Status
// here and nowhere else.
//
// Threads: reactions run on gRPC's callback threads and only enqueue or start non-blocking work;
// the TaskRunner's workers and SandboxPool's exec loop call back into the reactors. Owned by main(); must outlive the grpc::Server.

#include "common/result.h"
#include "pool/core/sandbox_pool.h"
#include "pool/server/task_runner.h"

#include "paddock/v1/pool.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <atomic>

namespace paddock::pool {

grpc::Status toGrpcStatus(const Error &error);

class PoolService final : public paddock::v1::PoolService::CallbackService {
public:
    explicit PoolService(SandboxPool &pool) : m_pool(pool) {}
    ~PoolService() override { m_runner.stop(); }

    // SIGTERM, step 1: new calls are refused with UNAVAILABLE; calls already running go on.
    void beginDrain() { m_draining = true; }
    // Calls not yet finished.
    int inFlight() const { return m_inFlight.load(); }
    // After the gRPC server has shut down: joins the workers.
    void stop() { m_runner.stop(); }

    grpc::ServerUnaryReactor *Claim(grpc::CallbackServerContext *ctx, const v1::ClaimRequest *req,
                                    v1::ClaimResponse *resp) override;
    grpc::ServerWriteReactor<v1::ExecResponse> *Exec(grpc::CallbackServerContext *ctx,
                                                      const v1::ExecRequest *req) override;
    grpc::ServerUnaryReactor *ReadFile(grpc::CallbackServerContext *ctx, const v1::ReadFileRequest *req,
                                       v1::ReadFileResponse *resp) override;
    grpc::ServerUnaryReactor *WriteFile(grpc::CallbackServerContext *ctx, const v1::WriteFileRequest *req,
                                        v1::WriteFileResponse *resp) override;
    grpc::ServerUnaryReactor *ListDir(grpc::CallbackServerContext *ctx, const v1::ListDirRequest *req,
                                      v1::ListDirResponse *resp) override;
    grpc::ServerUnaryReactor *Release(grpc::CallbackServerContext *ctx, const v1::ReleaseRequest *req,
                                      v1::ReleaseResponse *resp) override;
    grpc::ServerUnaryReactor *Status(grpc::CallbackServerContext *ctx, const v1::PoolStatusRequest *req,
                                     v1::PoolStatusResponse *resp) override;

    // Snapshots and post-mortems (pool_service_snapshots.cpp); all run on the TaskRunner.
    grpc::ServerUnaryReactor *Snapshot(grpc::CallbackServerContext *ctx, const v1::SnapshotRequest *req,
                                       v1::SnapshotResponse *resp) override;
    grpc::ServerUnaryReactor *Restore(grpc::CallbackServerContext *ctx, const v1::RestoreRequest *req,
                                      v1::RestoreResponse *resp) override;
    grpc::ServerUnaryReactor *ListSnapshotFiles(grpc::CallbackServerContext *ctx, const v1::ListSnapshotFilesRequest *req,
                                                v1::ListSnapshotFilesResponse *resp) override;
    grpc::ServerUnaryReactor *ReadSnapshotFile(grpc::CallbackServerContext *ctx, const v1::ReadSnapshotFileRequest *req,
                                               v1::ReadSnapshotFileResponse *resp) override;
    grpc::ServerUnaryReactor *ListPostMortems(grpc::CallbackServerContext *ctx, const v1::ListPostMortemsRequest *req,
                                              v1::ListPostMortemsResponse *resp) override;
    grpc::ServerUnaryReactor *GetPostMortem(grpc::CallbackServerContext *ctx, const v1::GetPostMortemRequest *req,
                                            v1::PostMortem *resp) override;
    grpc::ServerUnaryReactor *GetSamples(grpc::CallbackServerContext *ctx, const v1::GetSamplesRequest *req,
                                         v1::GetSamplesResponse *resp) override;

    // Checkpoints (pool_service_checkpoints.cpp); all run on the TaskRunner.
    grpc::ServerUnaryReactor *TakeCheckpoint(grpc::CallbackServerContext *ctx, const v1::TakeCheckpointRequest *req,
                                             v1::TakeCheckpointResponse *resp) override;
    grpc::ServerUnaryReactor *ReadCheckpointChunks(grpc::CallbackServerContext *ctx, const v1::ReadCheckpointChunksRequest *req,
                                                   v1::ReadCheckpointChunksResponse *resp) override;
    grpc::ServerUnaryReactor *CommitCheckpoint(grpc::CallbackServerContext *ctx, const v1::CommitCheckpointRequest *req,
                                               v1::CommitCheckpointResponse *resp) override;
    grpc::ServerUnaryReactor *BeginRestore(grpc::CallbackServerContext *ctx, const v1::BeginRestoreRequest *req,
                                           v1::BeginRestoreResponse *resp) override;
    grpc::ServerUnaryReactor *PutRestoreChunks(grpc::CallbackServerContext *ctx, const v1::PutRestoreChunksRequest *req,
                                               v1::PutRestoreChunksResponse *resp) override;
    grpc::ServerUnaryReactor *FinishRestore(grpc::CallbackServerContext *ctx, const v1::FinishRestoreRequest *req,
                                            v1::FinishRestoreResponse *resp) override;

private:
    // Runs work on the runner and finishes the reactor with its status.
    grpc::ServerUnaryReactor *runUnary(grpc::CallbackServerContext *ctx, std::function<grpc::Status()> work);

    friend class ExecReactor;

    SandboxPool &m_pool;
    TaskRunner m_runner;
    std::atomic<bool> m_draining{false};
    std::atomic<int> m_inFlight{0};
};

} // namespace paddock::pool
