// OperationsService (proto/paddock/v1/operations.proto): the pools and their health, and what an
// operator inspects of a sandbox without SSH: post-mortems, snapshot files, debug shells (forwarded
// to the pools by OperatorDesk, operator_desk.h) and live resource samples (SampleWatches,
// sample_watch.h). Every call is checked here; the debug-shell calls are recorded in the audit log
// before their work starts.

#include "broker/server/operations_service.h"

#include "broker/server/convert.h"

namespace paddock::server {

namespace {

constexpr const char *kNoCheckpointStore = "this broker keeps no checkpoint store, so it has no storage to show or "
                                           "collect; paddockd opens one from [checkpoints] in broker.toml";

OperatorOptions operatorOptions(const ServiceOptions &options)
{
    OperatorOptions operatorOptions;
    operatorOptions.debugShellIdleTimeoutMs = options.debugShellIdleTimeoutMs;
    operatorOptions.secrets = options.secrets;
    operatorOptions.archive = options.postMortems;
    operatorOptions.checkpointer = options.checkpointer;
    return operatorOptions;
}

} // namespace

OperationsService::OperationsService(ServiceContext &context)
    : m_context(context),
      m_desk(std::make_unique<OperatorDesk>(context.store, context.pools, operatorOptions(context.options))),
      m_sampleWatches(std::make_unique<SampleWatches>(context.pools))
{
}

OperationsService::~OperationsService() = default;

grpc::ServerUnaryReactor *OperationsService::ListPools(grpc::CallbackServerContext *context, const v1::ListPoolsRequest *,
                                                   v1::ListPoolsResponse *response)
{
    if (auto call = m_context.access.authorize(context, "ListPools"); !call)
        return finish(context, call);
    for (size_t i = 0; i < m_context.pools.entries().size(); ++i) {
        const auto &entry = m_context.pools.entries()[i];
        auto *info = response->add_pools();
        info->set_name(entry.client->name());
        info->set_endpoint(entry.client->endpoint());
        info->set_local(entry.local);
        info->set_execution(entry.local ? "local execution" : "remote");
        info->set_transport(entry.transport);
        info->set_token(entry.token);
        auto status = m_context.pools.statusOf(i);
        const placement::PoolHealth health = m_context.pools.health(i);
        info->set_healthy(status.has_value());
        info->set_checked_unix_ms(health.checkedUnixMs);
        info->set_unhealthy_since_unix_ms(health.unhealthySinceUnixMs);
        info->set_lost(health.lost);
        info->set_sessions_moved_away(health.movedAway);
        for (const auto &id : health.movedAwaySessions)
            info->add_moved_session_ids(id);
        for (const auto &sample : health.history) {
            auto *out = info->add_history();
            out->set_time_unix_ms(sample.timeUnixMs);
            out->set_healthy(sample.healthy);
            out->set_latency_ms(sample.latencyMs);
            out->set_warm(sample.warm);
            out->set_claimed(sample.claimed);
            out->set_max(sample.max);
            out->set_error(sample.error);
        }
        if (!status) {
            info->set_error(status.error().message);
            continue;
        }
        info->set_disk_limits(status->diskLimits);
        info->set_cgroups(status->cgroupVersion);
        for (const auto &tier : status->tiers) {
            auto *out = info->add_tiers();
            out->mutable_tier()->set_name(tier.name);
            out->mutable_tier()->set_runtime(tier.runtime);
            out->set_warm(tier.warm);
            out->set_claimed(tier.claimed);
            out->set_max(tier.max);
            out->set_hit_rate(tier.hitRate);
            out->set_cold_fallbacks(tier.coldFallbacks);
            out->set_isolation_identity(tier.isolationIdentity);
            out->set_isolation_seccomp(tier.isolationSeccomp);
            out->set_isolation_etc(tier.isolationEtc);
            for (int64_t bound : tier.claimLatencyUsBuckets)
                out->add_claim_latency_us_buckets(bound);
            for (int64_t count : tier.claimLatencyCounts)
                out->add_claim_latency_counts(count);
            out->set_refill_per_second(tier.refillPerSecond);
            auto *spec = out->mutable_tier();
            spec->set_price_per_hour_usd(tier.pricePerHourUsd);
            spec->mutable_limits()->set_cpu(tier.cpu);
            spec->mutable_limits()->set_memory_bytes(tier.memoryBytes);
            spec->mutable_limits()->set_pids(tier.pids);
            spec->mutable_limits()->set_disk_bytes(tier.diskBytes);
            spec->set_network(tier.allowlistNetwork ? v1::NETWORK_POLICY_ALLOWLIST : v1::NETWORK_POLICY_NONE);
            for (const auto &pattern : tier.allowlist)
                spec->add_allowlist(pattern);
            spec->set_warm_count(tier.warmCount);
            spec->set_max_count(tier.maxCount);
        }
    }
    response->set_local_execution(m_context.pools.anyLocal());
    return finish(context, grpc::Status::OK);
}

grpc::ServerWriteReactor<v1::SandboxSamples> *OperationsService::WatchSandboxSamples(grpc::CallbackServerContext *context,
                                                                                 const v1::WatchSandboxSamplesRequest *req)
{
    if (auto call = m_context.access.authorize(context, "WatchSandboxSamples"); !call)
        return refusedStream<v1::SandboxSamples>(toGrpcStatus(call.error()));
    return m_sampleWatches->watch(*req);
}

grpc::ServerUnaryReactor *OperationsService::ListPostMortems(grpc::CallbackServerContext *ctx, const v1::ListPoolPostMortemsRequest *req,
                                                         v1::ListPoolPostMortemsResponse *resp)
{
    if (auto call = m_context.access.authorize(ctx, "ListPostMortems"); !call)
        return finishUnary(ctx, rpc::toGrpcStatus(call.error()));
    return m_desk->listPostMortems(ctx, req, resp);
}

grpc::ServerUnaryReactor *OperationsService::GetPostMortem(grpc::CallbackServerContext *ctx, const v1::GetPoolPostMortemRequest *req,
                                                       v1::PostMortem *resp)
{
    if (auto call = m_context.access.authorize(ctx, "GetPostMortem", req->sandbox_id()); !call)
        return finishUnary(ctx, rpc::toGrpcStatus(call.error()));
    return m_desk->getPostMortem(ctx, req, resp);
}

grpc::ServerUnaryReactor *OperationsService::ListSnapshotFiles(grpc::CallbackServerContext *ctx,
                                                           const v1::ListPoolSnapshotFilesRequest *req,
                                                           v1::ListSnapshotFilesResponse *resp)
{
    if (auto call = m_context.access.authorize(ctx, "ListSnapshotFiles"); !call)
        return finishUnary(ctx, rpc::toGrpcStatus(call.error()));
    return m_desk->listSnapshotFiles(ctx, req, resp);
}

grpc::ServerWriteReactor<v1::FileChunk> *OperationsService::ReadSnapshotFile(grpc::CallbackServerContext *ctx,
                                                                         const v1::ReadPoolSnapshotFileRequest *req)
{
    if (auto call = m_context.access.authorize(ctx, "ReadSnapshotFile"); !call)
        return refusedStream<v1::FileChunk>(rpc::toGrpcStatus(call.error()));
    return m_desk->readSnapshotFile(ctx, req);
}

grpc::ServerUnaryReactor *OperationsService::OpenDebugShell(grpc::CallbackServerContext *ctx, const v1::OpenDebugShellRequest *req,
                                                        v1::DebugShell *resp)
{
    // Debug shells finish on a worker thread: the audit record is written before the work starts
    // (the session's log records what happened: debug_shell.opened, .exec, .closed).
    auto call = m_context.access.authorize(ctx, "OpenDebugShell", req->pool() + "/" + req->sandbox_id());
    if (auto recorded = call ? m_context.access.recordNow(*call, "tier " + req->tier()) : Status(std::unexpected(call.error())); !recorded)
        return finishUnary(ctx, rpc::toGrpcStatus(recorded.error()));
    return m_desk->openDebugShell(ctx, req, resp);
}

grpc::ServerWriteReactor<v1::ExecResponse> *OperationsService::DebugExec(grpc::CallbackServerContext *ctx,
                                                                     const v1::DebugExecRequest *req)
{
    auto call = m_context.access.authorize(ctx, "DebugExec", req->shell_id());
    if (auto recorded = call ? m_context.access.recordNow(*call, {}) : Status(std::unexpected(call.error())); !recorded)
        return refusedStream<v1::ExecResponse>(rpc::toGrpcStatus(recorded.error()));
    return m_desk->debugExec(ctx, req);
}

grpc::ServerUnaryReactor *OperationsService::CloseDebugShell(grpc::CallbackServerContext *ctx, const v1::CloseDebugShellRequest *req,
                                                         v1::CloseDebugShellResponse *resp)
{
    auto call = m_context.access.authorize(ctx, "CloseDebugShell", req->shell_id());
    if (auto recorded = call ? m_context.access.recordNow(*call, {}) : Status(std::unexpected(call.error())); !recorded)
        return finishUnary(ctx, rpc::toGrpcStatus(recorded.error()));
    return m_desk->closeDebugShell(ctx, req, resp);
}

grpc::ServerUnaryReactor *OperationsService::GetStorage(grpc::CallbackServerContext *ctx, const v1::GetStorageRequest *,
                                                    v1::StorageInfo *resp)
{
    if (auto call = m_context.access.authorize(ctx, "GetStorage"); !call)
        return finish(ctx, call);
    checkpoints::CheckpointCollector *collector = m_context.options.storage;
    if (!collector)
        return finish(ctx, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, kNoCheckpointStore));
    auto *reactor = ctx->DefaultReactor();
    collector->figuresLater([reactor, resp, collector](Result<checkpoints::StorageFigures> figures) {
        if (figures)
            toProto(*collector, *figures, resp);
        reactor->Finish(statusOf(figures));
    });
    return reactor;
}

grpc::ServerUnaryReactor *OperationsService::CollectStorage(grpc::CallbackServerContext *ctx,
                                                        const v1::CollectStorageRequest *req, v1::StorageCollection *resp)
{
    // Like a debug shell, audited before the work starts (the broker's log says what was freed).
    auto call = m_context.access.authorize(ctx, "CollectStorage", "checkpoint store");
    const std::string detail = req->dry_run() ? "dry run" : "collect";
    if (auto recorded = call ? m_context.access.recordNow(*call, detail) : Status(std::unexpected(call.error())); !recorded)
        return finishUnary(ctx, rpc::toGrpcStatus(recorded.error()));
    checkpoints::CheckpointCollector *collector = m_context.options.storage;
    if (!collector)
        return finish(ctx, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, kNoCheckpointStore));
    auto *reactor = ctx->DefaultReactor();
    collector->collectLater(req->dry_run(), [reactor, resp](Result<checkpoints::CollectionReport> report) {
        if (report)
            toProto(*report, resp);
        reactor->Finish(statusOf(report));
    });
    return reactor;
}

} // namespace paddock::server
