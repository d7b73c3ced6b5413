// OperatorDesk's post-mortems and snapshot files: what the pools kept about failed sandboxes,
// and, for a pool that does not answer (or is gone from the config), what the broker's archive
// copied off its host (broker/checkpoints/post_mortem_archive.h). A snapshot ref
// "checkpoint:<manifest id>" is read from the checkpoint store, without any pool.
//
// Threads: as operator_desk.h: the work runs on the desk's workers.

#include "broker/server/operator_desk.h"

#include "broker/checkpoints/checkpoint_files.h"
#include "broker/server/convert.h"
#include "broker/server/queued_writer.h"
#include "rpc/status.h"

#include <algorithm>
#include <climits>
#include <set>

namespace paddock::server {
namespace {

constexpr int64_t kChunkBytes = 1 << 20;       // a download streams 1 MiB per message
constexpr size_t kMaxQueuedChunks = 4;         // then the reader waits for the client
constexpr int kDefaultListPerPool = 100;

// The pool keeps a failed command's output as it was; what the broker serves is redacted for
// every secret it holds (redactor may be null: no secrets).
void fill(const pool_client::PostMortemInfo &pm, v1::PostMortem *out, const secrets::Redactor *redactor, bool archived)
{
    auto r = [redactor](const std::string &text) { return redactor ? redactor->redact(text) : text; };
    out->set_sandbox_id(pm.sandboxId);
    out->set_session_id(pm.sessionId);
    out->set_tier(pm.tier);
    out->set_reason(pm.reason);
    out->set_exit_code(pm.exitCode);
    out->set_signal(pm.signal);
    out->set_last_stdout(r(pm.lastStdout));
    out->set_last_stderr(r(pm.lastStderr));
    for (const auto &s : pm.samples)
        toProto(s, out->add_samples());
    for (const auto &p : pm.processes) {
        auto *o = out->add_processes();
        o->set_pid(p.pid);
        o->set_ppid(p.ppid);
        o->set_state(p.state);
        o->set_rss_bytes(p.rssBytes);
        o->set_command(r(p.command));
    }
    out->set_snapshot_ref(pm.snapshotRef);
    out->set_time_unix_ms(pm.timeUnixMs);
    out->set_pool_id(pm.poolId);
    out->set_pool(pm.pool);
    for (const auto &a : pm.argv)
        out->add_argv(r(a));
    out->set_duration_ms(pm.durationMs);
    out->mutable_limits()->set_cpu(pm.cpuLimit);
    out->mutable_limits()->set_memory_bytes(pm.memoryLimitBytes);
    out->mutable_limits()->set_pids(pm.pidsLimit);
    out->mutable_limits()->set_disk_bytes(pm.diskLimitBytes);
    out->set_runtime(pm.runtime);
    out->set_processes_note(pm.processesNote);
    out->set_snapshot_error(pm.snapshotError);
    out->set_snapshot_size_bytes(pm.snapshotSizeBytes);
    out->set_stdout_bytes(pm.stdoutBytes);
    out->set_stderr_bytes(pm.stderrBytes);
    out->set_detail(r(pm.detail));
    out->set_peak_memory_bytes(pm.peakMemoryBytes);
    out->set_snapshot_ms(pm.snapshotMs);
    out->set_archived(archived);
}

// An archived post-mortem as the desk serves it: its workspace is the checkpoint, not the pool's
// archive (which went with the host).
pool_client::PostMortemInfo served(const checkpoints::ArchivedPostMortem &archived)
{
    pool_client::PostMortemInfo pm = archived.info;
    if (!archived.manifest.empty()) {
        pm.snapshotRef = checkpoints::kCheckpointRefPrefix + archived.manifest;
        pm.snapshotError.clear();
    } else {
        pm.snapshotRef.clear();
        pm.snapshotError = "the session had no checkpoint when the sandbox failed, and the pool's own snapshot is "
                           "not reachable";
    }
    return pm;
}

} // namespace

Result<OperatorDesk::FoundPostMortem> OperatorDesk::findPostMortem(const std::string &poolName,
                                                                  const std::string &sandboxId) const
{
    if (sandboxId.empty())
        return fail(ErrorCode::InvalidArgument, "name the failed sandbox (`paddockctl postmortems ls` lists them)");
    auto client = pool(poolName);
    Error error = client ? Error{} : client.error();
    if (client) {
        auto pm = (*client)->getPostMortem(sandboxId);
        if (pm)
            return FoundPostMortem{*pm, *client, false};
        error = pm.error();
        const bool poolGone = error.code == ErrorCode::Unavailable || error.code == ErrorCode::DeadlineExceeded
            || error.code == ErrorCode::NotFound;
        if (!poolGone)
            return std::unexpected(error);
    } else if (poolName.empty()) {
        return std::unexpected(error);
    }
    if (m_options.archive)
        if (auto archived = m_options.archive->get(poolName, sandboxId))
            return FoundPostMortem{served(*archived), nullptr, true};
    return std::unexpected(error);
}

grpc::ServerUnaryReactor *OperatorDesk::listPostMortems(grpc::CallbackServerContext *ctx,
                                                           const v1::ListPoolPostMortemsRequest *req,
                                                           v1::ListPoolPostMortemsResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        if (req->page_size() < 0)
            return {grpc::StatusCode::INVALID_ARGUMENT, "page_size must be 0 (the default, 100) or more"};
        const int limit = req->page_size() == 0 ? kDefaultListPerPool : std::min(req->page_size(), 1000);
        std::vector<std::pair<pool_client::PostMortemInfo, bool>> all;   // with "archived"
        std::set<std::string> answered;
        const auto &entries = m_pools.entries();
        for (size_t i = 0; i < entries.size(); ++i) {
            auto *client = entries[i].client.get();
            if (!req->pool().empty() && client->name() != req->pool())
                continue;
            const auto health = m_pools.health(i);
            auto listed = health.checked && !health.healthy
                ? Result<std::vector<pool_client::PostMortemInfo>>(fail(ErrorCode::Unavailable, health.lastError))
                : client->listPostMortems(req->session_id(), limit);
            if (!listed) {
                auto *e = resp->add_pool_errors();
                e->set_pool(client->name());
                e->set_error("the pool did not answer (" + listed.error().message + "); "
                             + (m_options.archive ? "its post-mortems are listed from the broker's archive"
                                                  : "its post-mortems are listed when it answers again"));
                continue;
            }
            answered.insert(client->name());
            for (auto &pm : *listed)
                all.emplace_back(std::move(pm), false);
        }
        // The archive speaks for every pool that did not answer, and for pools gone from the config.
        if (m_options.archive) {
            auto archived = m_options.archive->list(req->session_id(), req->pool(), limit);
            if (!archived)
                return rpc::toGrpcStatus(archived.error());
            for (const auto &a : *archived)
                if (!answered.contains(a.info.pool))
                    all.emplace_back(served(a), true);
        } else if (!req->pool().empty()) {
            if (auto p = pool(req->pool()); !p)
                return rpc::toGrpcStatus(p.error());
        }
        std::stable_sort(all.begin(), all.end(),
                         [](const auto &a, const auto &b) { return a.first.timeUnixMs > b.first.timeUnixMs; });
        const auto secrets = m_options.secrets ? m_options.secrets->snapshot() : nullptr;
        for (const auto &[pm, archivedCopy] : all)
            fill(pm, resp->add_post_mortems(), secrets ? &secrets->redactor : nullptr, archivedCopy);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *OperatorDesk::getPostMortem(grpc::CallbackServerContext *ctx, const v1::GetPoolPostMortemRequest *req,
                                                         v1::PostMortem *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto found = findPostMortem(req->pool(), req->sandbox_id());
        if (!found)
            return rpc::toGrpcStatus(found.error());
        const auto secrets = m_options.secrets ? m_options.secrets->snapshot() : nullptr;
        fill(found->info, resp, secrets ? &secrets->redactor : nullptr, found->archived);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *OperatorDesk::listSnapshotFiles(grpc::CallbackServerContext *ctx,
                                                             const v1::ListPoolSnapshotFilesRequest *req,
                                                             v1::ListSnapshotFilesResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        Result<std::vector<SnapshotFile>> files = fail(ErrorCode::FailedPrecondition, "this broker keeps no checkpoints");
        if (const std::string manifest = checkpoints::manifestOfRef(req->snapshot_ref()); !manifest.empty()) {
            if (m_options.checkpointer)
                files = checkpoints::listCheckpointFiles(m_options.checkpointer->store(), manifest, req->path_prefix());
        } else {
            auto client = pool(req->pool());
            if (!client)
                return rpc::toGrpcStatus(client.error());
            files = (*client)->listSnapshotFiles(req->snapshot_ref(), req->path_prefix());
        }
        if (!files)
            return rpc::toGrpcStatus(files.error());
        for (const auto &f : *files) {
            auto *o = resp->add_files();
            o->set_path(f.path);
            o->set_is_dir(f.isDir);
            o->set_is_symlink(f.isSymlink);
            o->set_symlink_target(f.symlinkTarget);
            o->set_size(f.size);
            o->set_mode(f.mode);
            o->set_mtime_unix_ms(f.mtimeUnixMs);
        }
        return grpc::Status::OK;
    });
}

grpc::ServerWriteReactor<v1::FileChunk> *OperatorDesk::readSnapshotFile(grpc::CallbackServerContext *,
                                                                           const v1::ReadPoolSnapshotFileRequest *req)
{
    auto *writer = new QueuedWriter<v1::FileChunk>(kMaxQueuedChunks, QueuedWriter<v1::FileChunk>::Overflow::Wait);
    post([this, writer, req] {
        // A checkpoint's file comes from the store; any other ref from its pool.
        std::function<Result<SnapshotChunk>(int64_t, int64_t)> read;
        if (const std::string manifest = checkpoints::manifestOfRef(req->snapshot_ref()); !manifest.empty()) {
            if (!m_options.checkpointer) {
                writer->finish({grpc::StatusCode::FAILED_PRECONDITION, "this broker keeps no checkpoints"});
                return;
            }
            read = [this, manifest, req](int64_t offset, int64_t max) {
                return checkpoints::readCheckpointFile(m_options.checkpointer->store(), manifest, req->path(), offset, max);
            };
        } else {
            auto client = pool(req->pool());
            if (!client) {
                writer->finish(rpc::toGrpcStatus(client.error()));
                return;
            }
            read = [client = *client, req](int64_t offset, int64_t max) {
                return client->readSnapshotFile(req->snapshot_ref(), req->path(), offset, max);
            };
        }
        writer->finish(streamFile(*writer, read, req->offset(), req->max_bytes()));
    });
    return writer;
}

grpc::Status OperatorDesk::streamFile(QueuedWriter<v1::FileChunk> &writer,
                                      const std::function<Result<SnapshotChunk>(int64_t, int64_t)> &read, int64_t offset,
                                      int64_t maxBytes)
{
    if (offset < 0 || maxBytes < 0)
        return {grpc::StatusCode::INVALID_ARGUMENT, "offset and max_bytes must be 0 or more"};
    int64_t left = maxBytes > 0 ? maxBytes : INT64_MAX;
    for (;;) {
        auto chunk = read(offset, std::min(left, kChunkBytes));
        if (!chunk)
            return rpc::toGrpcStatus(chunk.error());
        const int64_t got = static_cast<int64_t>(chunk->content.size());
        v1::FileChunk msg;
        msg.set_offset(chunk->offset);
        msg.set_size(chunk->size);
        left -= got;
        offset = chunk->offset + got;
        const bool last = chunk->eof || left <= 0 || got == 0;
        msg.set_eof(chunk->eof);
        msg.set_data(std::move(chunk->content));
        if (!writer.push(std::move(msg)) || last)
            return grpc::Status::OK;
    }
}

} // namespace paddock::server
