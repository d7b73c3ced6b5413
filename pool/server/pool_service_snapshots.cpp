// PoolService: Snapshot, Restore, ListSnapshotFiles, ReadSnapshotFile, ListPostMortems and
// GetPostMortem. Each runs on the TaskRunner (archives and files are blocking work).

#include "pool/server/pool_service.h"

#include "common/clock.h"

#include <algorithm>
#include <limits>

namespace paddock::pool {
namespace {

// The samples newer than afterUnixMs, oldest first. cpu_cores and cpu_throttled come from the
// counters' change since the sample before; the throttling counters are sent as they are.
void fillSamples(const std::vector<CgroupSample> &samples, int64_t afterUnixMs,
                 google::protobuf::RepeatedPtrField<v1::ResourceSample> *out)
{
    for (size_t i = 0; i < samples.size(); ++i) {
        const auto &s = samples[i];
        if (s.unixMs <= afterUnixMs)
            continue;
        auto *o = out->Add();
        o->set_time_unix_ms(s.unixMs);
        o->set_memory_bytes(std::max<int64_t>(0, s.memoryBytes));
        o->set_pids(std::max<int64_t>(0, s.pids));
        o->set_disk_bytes(std::max<int64_t>(0, s.diskBytes));
        if (s.throttling.known()) {
            o->set_cpu_periods(s.throttling.periods);
            o->set_cpu_throttled_periods(s.throttling.throttledPeriods);
            o->set_cpu_throttled_usec(std::max<int64_t>(0, s.throttling.throttledUs));
        }
        if (i == 0)
            continue;
        const auto &p = samples[i - 1];
        const int64_t dt = s.unixMs - p.unixMs;
        if (dt > 0 && s.cpuUsageUs >= 0 && p.cpuUsageUs >= 0 && s.cpuUsageUs >= p.cpuUsageUs)
            o->set_cpu_cores(static_cast<double>(s.cpuUsageUs - p.cpuUsageUs) / 1000.0 / static_cast<double>(dt));
        o->set_cpu_throttled(s.throttling.known() && p.throttling.known()
                             && s.throttling.throttledPeriods > p.throttling.throttledPeriods);
    }
}

void fillPostMortem(const PostMortemRecord &r, bool full, v1::PostMortem *out)
{
    out->set_sandbox_id(r.sandboxId);
    out->set_session_id(r.sessionId);
    out->set_tier(r.tier);
    out->set_reason(r.reason);
    out->set_exit_code(r.exitCode);
    out->set_signal(r.signal);
    out->set_snapshot_ref(r.snapshotRef);
    out->set_time_unix_ms(r.timeUnixMs);
    out->set_pool_id(r.poolId);
    for (const auto &a : r.argv)
        out->add_argv(a);
    out->set_duration_ms(r.durationMs);
    auto *limits = out->mutable_limits();
    limits->set_cpu(r.cpuLimit);
    limits->set_memory_bytes(r.memoryLimitBytes);
    limits->set_pids(r.pidsLimit);
    limits->set_disk_bytes(r.diskLimitBytes);
    out->set_runtime(r.runtime);
    out->set_snapshot_error(r.snapshotError);
    out->set_snapshot_size_bytes(r.snapshotSizeBytes);
    out->set_snapshot_ms(r.snapshotMs);
    out->set_stdout_bytes(r.stdoutBytes);
    out->set_stderr_bytes(r.stderrBytes);
    out->set_detail(r.detail);
    int64_t peak = 0;
    for (const auto &s : r.samples)
        peak = std::max(peak, s.memoryBytes);
    out->set_peak_memory_bytes(peak);
    if (!full)
        return;
    out->set_last_stdout(r.lastStdout);
    out->set_last_stderr(r.lastStderr);
    fillSamples(r.samples, std::numeric_limits<int64_t>::min(), out->mutable_samples());
    for (const auto &p : r.processes) {
        auto *o = out->add_processes();
        o->set_pid(p.pid);
        o->set_ppid(p.ppid);
        o->set_state(p.state);
        o->set_rss_bytes(p.rssBytes);
        o->set_command(p.command);
    }
    out->set_processes_note(r.processesNote);
}

} // namespace

grpc::ServerUnaryReactor *PoolService::Snapshot(grpc::CallbackServerContext *ctx, const v1::SnapshotRequest *req,
                                                v1::SnapshotResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto r = m_pool.snapshot(req->sandbox_id());
        if (!r)
            return toGrpcStatus(r.error());
        resp->set_snapshot_ref(r->ref);
        resp->set_size_bytes(r->sizeBytes);
        resp->set_file_count(r->fileCount);
        resp->set_duration_ms(r->durationMs);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::Restore(grpc::CallbackServerContext *ctx, const v1::RestoreRequest *req,
                                               v1::RestoreResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto r = m_pool.restore(req->sandbox_id(), req->snapshot_ref());
        if (!r) {
            // A damaged archive is data loss in gRPC's terms; the message names the ref.
            if (r.error().code == ErrorCode::FailedPrecondition && r.error().message.find("is damaged") != std::string::npos)
                return {grpc::StatusCode::DATA_LOSS, r.error().message};
            return toGrpcStatus(r.error());
        }
        resp->set_file_count(r->fileCount);
        resp->set_duration_ms(r->durationMs);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::ListSnapshotFiles(grpc::CallbackServerContext *ctx, const v1::ListSnapshotFilesRequest *req,
                                                         v1::ListSnapshotFilesResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto r = m_pool.snapshots().list(req->snapshot_ref(), req->path_prefix());
        if (!r)
            return toGrpcStatus(r.error());
        for (const auto &e : *r) {
            auto *f = resp->add_files();
            f->set_path(e.path);
            f->set_is_dir(e.isDir);
            f->set_is_symlink(e.isSymlink);
            f->set_symlink_target(e.symlinkTarget);
            f->set_size(e.size);
            f->set_mode(e.mode);
            f->set_mtime_unix_ms(e.mtimeUnixMs);
        }
        if (auto size = m_pool.snapshots().sizeOf(req->snapshot_ref()))
            resp->set_size_bytes(*size);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::ReadSnapshotFile(grpc::CallbackServerContext *ctx, const v1::ReadSnapshotFileRequest *req,
                                                        v1::ReadSnapshotFileResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto r = m_pool.snapshots().read(req->snapshot_ref(), req->path(), req->offset(), req->max_bytes());
        if (!r)
            return toGrpcStatus(r.error());
        resp->set_content(std::move(r->content));
        resp->set_offset(r->offset);
        resp->set_size(r->size);
        resp->set_eof(r->eof);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::ListPostMortems(grpc::CallbackServerContext *ctx, const v1::ListPostMortemsRequest *req,
                                                       v1::ListPostMortemsResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        if (req->page_size() < 0)
            return {grpc::StatusCode::INVALID_ARGUMENT, "page_size must be 0 (the default, 100) or more"};
        const size_t pageSize = req->page_size() == 0 ? 100 : std::min(req->page_size(), 1000);
        size_t start = 0;
        if (!req->page_token().empty()) {
            try {
                start = std::stoul(req->page_token());
            } catch (...) {
                return {grpc::StatusCode::INVALID_ARGUMENT, "page_token '" + req->page_token() +
                                                                "' is not one this pool gave; start again without it"};
            }
        }
        m_pool.postMortems().prune(nowUnixMs());
        auto all = m_pool.postMortems().list(req->session_id(), 0);
        for (size_t i = start; i < all.size() && i < start + pageSize; ++i)
            fillPostMortem(all[i], false, resp->add_post_mortems());
        if (start + pageSize < all.size())
            resp->set_next_page_token(std::to_string(start + pageSize));
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::GetPostMortem(grpc::CallbackServerContext *ctx, const v1::GetPostMortemRequest *req,
                                                     v1::PostMortem *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto r = m_pool.postMortems().get(req->sandbox_id());
        if (!r)
            return toGrpcStatus(r.error());
        fillPostMortem(*r, true, resp);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::GetSamples(grpc::CallbackServerContext *ctx, const v1::GetSamplesRequest *req,
                                                  v1::GetSamplesResponse *resp)
{
    // Copies at most kSamplesKept samples under the sandbox's sample lock: cheap, answered inline.
    auto *reactor = ctx->DefaultReactor();
    auto r = m_pool.claimedSamples(req->sandbox_id());
    if (!r) {
        reactor->Finish(toGrpcStatus(r.error()));
        return reactor;
    }
    fillSamples(*r, req->after_unix_ms(), resp->mutable_samples());
    reactor->Finish(grpc::Status::OK);
    return reactor;
}

} // namespace paddock::pool
