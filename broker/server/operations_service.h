#pragma once
// OperationsService (proto/paddock/v1/operations.proto): execution capacity (ListPools), and what
// operators inspect of sandboxes without SSH: post-mortems, snapshot files and debug shells
// (OperatorDesk, operator_desk.h) and live resource samples of a claimed sandbox (SampleWatches,
// sample_watch.h); the checkpoint store's figures and collection (CheckpointCollector,
// broker/checkpoints/checkpoint_collector.h).
//
// Threads: methods run on gRPC's callback threads; pool calls that block run on the desk's
// workers; sample watches on their own poller. The destructor closes every shell and ends every
// watch.

#include "broker/server/operator_desk.h"
#include "broker/server/sample_watch.h"
#include "broker/server/service_context.h"

#include "paddock/v1/operations.grpc.pb.h"

#include <memory>

namespace paddock::server {

class OperationsService final : public v1::OperationsService::CallbackService {
public:
    explicit OperationsService(ServiceContext &context);
    ~OperationsService() override;

    grpc::ServerUnaryReactor *ListPools(grpc::CallbackServerContext *context, const v1::ListPoolsRequest *request,
                                        v1::ListPoolsResponse *response) override;

    grpc::ServerUnaryReactor *ListPostMortems(grpc::CallbackServerContext *ctx, const v1::ListPoolPostMortemsRequest *req,
                                              v1::ListPoolPostMortemsResponse *resp) override;
    grpc::ServerUnaryReactor *GetPostMortem(grpc::CallbackServerContext *ctx, const v1::GetPoolPostMortemRequest *req,
                                            v1::PostMortem *resp) override;
    grpc::ServerUnaryReactor *ListSnapshotFiles(grpc::CallbackServerContext *ctx, const v1::ListPoolSnapshotFilesRequest *req,
                                                v1::ListSnapshotFilesResponse *resp) override;
    grpc::ServerWriteReactor<v1::FileChunk> *ReadSnapshotFile(grpc::CallbackServerContext *ctx,
                                                              const v1::ReadPoolSnapshotFileRequest *req) override;
    grpc::ServerUnaryReactor *OpenDebugShell(grpc::CallbackServerContext *ctx, const v1::OpenDebugShellRequest *req,
                                             v1::DebugShell *resp) override;
    grpc::ServerWriteReactor<v1::ExecResponse> *DebugExec(grpc::CallbackServerContext *ctx,
                                                          const v1::DebugExecRequest *req) override;
    grpc::ServerUnaryReactor *CloseDebugShell(grpc::CallbackServerContext *ctx, const v1::CloseDebugShellRequest *req,
                                              v1::CloseDebugShellResponse *resp) override;

    grpc::ServerWriteReactor<v1::SandboxSamples> *WatchSandboxSamples(grpc::CallbackServerContext *ctx,
                                                                      const v1::WatchSandboxSamplesRequest *req) override;

    // The checkpoint store's figures and collection, answered from the collector's thread.
    grpc::ServerUnaryReactor *GetStorage(grpc::CallbackServerContext *ctx, const v1::GetStorageRequest *req,
                                         v1::StorageInfo *resp) override;
    grpc::ServerUnaryReactor *CollectStorage(grpc::CallbackServerContext *ctx, const v1::CollectStorageRequest *req,
                                             v1::StorageCollection *resp) override;

private:
    ServiceContext &m_context;
    std::unique_ptr<OperatorDesk> m_desk;
    std::unique_ptr<SampleWatches> m_sampleWatches;
};

} // namespace paddock::server
