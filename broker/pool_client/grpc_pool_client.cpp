#include "broker/pool_client/grpc_pool_client.h"

#include "paddock/v1/pool.grpc.pb.h"
#include "rpc/limits.h"
#include "rpc/status.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <type_traits>

namespace paddock::pool_client {
namespace {

constexpr int64_t kClaimDeadlineMs = 60000;      // a cold start at the tier's max may wait for a slot
constexpr int64_t kFileDeadlineMs = 30000;
constexpr int64_t kReleaseDeadlineMs = 30000;
constexpr int64_t kStatusDeadlineMs = 5000;
constexpr int64_t kSnapshotDeadlineMs = 300000;   // archiving or restoring a large workspace
constexpr int64_t kExecDefaultTimeoutMs = 600000;   // the pool's default when the spec says 0
constexpr int64_t kExecGraceMs = 30000;             // beyond the command's timeout
// A restarted pool is found again within this; gRPC's default backoff grows to 120 s.
constexpr int kInitialReconnectBackoffMs = 100;
constexpr int kMaxReconnectBackoffMs = 2000;

using Stub = v1::PoolService::Stub;

std::shared_ptr<grpc::Channel> makeChannel(const PoolConnection &connection)
{
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kInitialReconnectBackoffMs);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kInitialReconnectBackoffMs);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
    args.SetMaxReceiveMessageSize(rpc::kMaxPoolMessageBytes);   // a checkpoint's listing (rpc/limits.h)
    if (connection.caPem.empty())
        return grpc::CreateCustomChannel(connection.endpoint, grpc::InsecureChannelCredentials(), args);
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = connection.caPem;
    tls.pem_cert_chain = connection.certPem;
    tls.pem_private_key = connection.keyPem;
    if (!connection.serverName.empty())
        args.SetSslTargetNameOverride(connection.serverName);
    return grpc::CreateCustomChannel(connection.endpoint, grpc::SslCredentials(tls), args);
}

// gRPC reports a failed handshake as UNAVAILABLE like a refused connection; its message says why.
bool looksLikeTlsFailure(const std::string &message)
{
    static const char *const kMarkers[] = {"handshake", "Handshake", "SSL", "ssl", "certificate", "Certificate",
                                           "TLS", "tsi", "peer name"};
    return std::any_of(std::begin(kMarkers), std::end(kMarkers),
                       [&](const char *marker) { return message.find(marker) != std::string::npos; });
}

std::vector<ContentChunk> fromChunks(const google::protobuf::RepeatedPtrField<v1::CheckpointChunk> &chunks)
{
    std::vector<ContentChunk> out;
    out.reserve(static_cast<size_t>(chunks.size()));
    for (const auto &c : chunks)
        out.push_back({c.hash(), c.data()});
    return out;
}

ResourcePoint toResourcePoint(const v1::ResourceSample &s)
{
    return {s.time_unix_ms(), s.cpu_cores(), s.memory_bytes(), s.pids(), s.disk_bytes(), s.cpu_throttled(),
            s.cpu_periods(), s.cpu_throttled_periods(), s.cpu_throttled_usec()};
}

class GrpcPoolClient final : public PoolClient {
public:
    explicit GrpcPoolClient(PoolConnection connection)
        : m_name(connection.name), m_endpoint(connection.endpoint), m_tls(!connection.caPem.empty()),
          m_caFile(connection.caFile), m_serverName(connection.serverName),
          m_authorization(connection.token.empty() ? std::string() : "Bearer " + connection.token),
          m_stub(v1::PoolService::NewStub(makeChannel(connection)))
    {
    }

    std::string name() const override { return m_name; }
    std::string endpoint() const override { return m_endpoint; }

    Result<ClaimedSandbox> claim(const std::string &tier, const std::string &sessionId,
                                 const std::string &idempotencyKey) override
    {
        return waitFor<ClaimedSandbox>([&](ClaimDone done) { claimAsync(tier, sessionId, idempotencyKey, std::move(done)); });
    }

    void claimAsync(const std::string &tier, const std::string &sessionId, const std::string &idempotencyKey,
                    ClaimDone done) override
    {
        v1::ClaimRequest req;
        req.set_tier(tier);
        req.set_session_id(sessionId);
        req.set_idempotency_key(idempotencyKey);
        callAsync<ClaimedSandbox>(&Stub::async::Claim, "claim", kClaimDeadlineMs, std::move(req),
                                  [](v1::ClaimResponse &resp) {
                                      return ClaimedSandbox{resp.sandbox_id(), resp.tier(), resp.runtime(), resp.host(),
                                                            resp.warm(), resp.claim_ms()};
                                  },
                                  std::move(done));
    }

    Result<ExecOutcome> exec(const ExecSpec &spec, const OutputSink &sink) override
    {
        return waitFor<ExecOutcome>([&](ExecDone done) { execAsync(spec, sink, std::move(done)); });
    }

    void execAsync(const ExecSpec &spec, OutputSink sink, ExecDone done) override
    {
        // Deletes itself when the call is done (ExecReactor::OnDone).
        auto *reactor = new ExecReactor(*this, spec, std::move(sink), std::move(done));
        reactor->start();
    }

    Result<std::string> readFile(const std::string &sandboxId, const std::string &path, int64_t maxBytes) override
    {
        return waitFor<std::string>([&](Done<std::string> done) { readFileAsync(sandboxId, path, maxBytes, std::move(done)); });
    }

    void readFileAsync(const std::string &sandboxId, const std::string &path, int64_t maxBytes,
                       Done<std::string> done) override
    {
        v1::ReadFileRequest req;
        req.set_sandbox_id(sandboxId);
        req.set_path(path);
        req.set_max_bytes(maxBytes);
        callAsync<std::string>(&Stub::async::ReadFile, "read_file", kFileDeadlineMs, std::move(req),
                               [](v1::ReadFileResponse &resp) { return std::move(*resp.mutable_content()); },
                               std::move(done));
    }

    Status writeFile(const std::string &sandboxId, const std::string &path, const std::string &content,
                     uint32_t mode) override
    {
        return waitFor<void>([&](Done<void> done) { writeFileAsync(sandboxId, path, content, mode, std::move(done)); });
    }

    void writeFileAsync(const std::string &sandboxId, const std::string &path, const std::string &content,
                        uint32_t mode, Done<void> done) override
    {
        v1::WriteFileRequest req;
        req.set_sandbox_id(sandboxId);
        req.set_path(path);
        req.set_content(content);
        req.set_mode(mode);
        callAsync<void>(&Stub::async::WriteFile, "write_file", kFileDeadlineMs, std::move(req), nullptr, std::move(done));
    }

    Result<std::vector<DirEntry>> listDir(const std::string &sandboxId, const std::string &path) override
    {
        v1::ListDirRequest req;
        req.set_sandbox_id(sandboxId);
        req.set_path(path);
        auto resp = unary(&Stub::ListDir, "list_dir", kFileDeadlineMs, req);
        if (!resp)
            return std::unexpected(resp.error());
        std::vector<DirEntry> out;
        for (const auto &e : resp->entries())
            out.push_back(DirEntry{e.name(), e.is_dir(), e.size(), e.mode(), e.mtime_unix_ms()});
        return out;
    }

    Status release(const std::string &sandboxId) override
    {
        return waitFor<void>([&](Done<void> done) { releaseAsync(sandboxId, std::move(done)); });
    }

    void releaseAsync(const std::string &sandboxId, Done<void> done) override
    {
        v1::ReleaseRequest req;
        req.set_sandbox_id(sandboxId);
        callAsync<void>(&Stub::async::Release, "release", kReleaseDeadlineMs, std::move(req), nullptr, std::move(done));
    }

    Result<PoolStatus> status() override
    {
        auto resp = unary(&Stub::Status, "status", kStatusDeadlineMs, v1::PoolStatusRequest());
        if (!resp)
            return std::unexpected(resp.error());
        PoolStatus out;
        out.poolId = resp->pool_id();
        out.host = resp->host();
        out.version = resp->version();
        out.cgroupVersion = resp->cgroup_version();
        out.diskLimits = resp->disk_limits();
        for (const auto &t : resp->tiers()) {
            TierStatus ts;
            ts.name = t.tier().name();
            ts.runtime = t.tier().runtime();
            ts.warm = t.warm();
            ts.claimed = t.claimed();
            ts.max = t.max();
            ts.hitRate = t.hit_rate();
            ts.coldFallbacks = t.cold_fallbacks();
            ts.claimLatencyUsBuckets.assign(t.claim_latency_us_buckets().begin(), t.claim_latency_us_buckets().end());
            ts.claimLatencyCounts.assign(t.claim_latency_counts().begin(), t.claim_latency_counts().end());
            ts.refillPerSecond = t.refill_per_second();
            ts.pricePerHourUsd = t.tier().price_per_hour_usd();
            ts.isolationIdentity = t.isolation_identity();
            ts.isolationSeccomp = t.isolation_seccomp();
            ts.isolationEtc = t.isolation_etc();
            ts.cpu = t.tier().limits().cpu();
            ts.memoryBytes = t.tier().limits().memory_bytes();
            ts.pids = t.tier().limits().pids();
            ts.diskBytes = t.tier().limits().disk_bytes();
            ts.allowlistNetwork = t.tier().network() == v1::NETWORK_POLICY_ALLOWLIST;
            ts.allowlist.assign(t.tier().allowlist().begin(), t.tier().allowlist().end());
            ts.warmCount = t.tier().warm_count();
            ts.maxCount = t.tier().max_count();
            out.tiers.push_back(std::move(ts));
        }
        return out;
    }

    // ---- snapshots and post-mortems ----

    Result<SnapshotInfo> snapshot(const std::string &sandboxId) override
    {
        v1::SnapshotRequest req;
        req.set_sandbox_id(sandboxId);
        auto resp = unary(&Stub::Snapshot, "snapshot", kSnapshotDeadlineMs, req);
        if (!resp)
            return std::unexpected(resp.error());
        return SnapshotInfo{resp->snapshot_ref(), resp->size_bytes(), resp->file_count(), resp->duration_ms()};
    }

    Result<SnapshotInfo> restore(const std::string &sandboxId, const std::string &ref) override
    {
        v1::RestoreRequest req;
        req.set_sandbox_id(sandboxId);
        req.set_snapshot_ref(ref);
        v1::RestoreResponse resp;
        if (auto s = invoke(&Stub::Restore, kSnapshotDeadlineMs, req, resp); !s.ok()) {
            if (s.error_code() == grpc::StatusCode::DATA_LOSS)
                return fail(ErrorCode::FailedPrecondition, s.error_message());
            return failure("restore", s);
        }
        return SnapshotInfo{ref, 0, resp.file_count(), resp.duration_ms()};
    }

    // ---- checkpoints ----

    Result<TakenCheckpoint> takeCheckpoint(const std::string &sandboxId, const std::string &baseManifest) override
    {
        return waitFor<TakenCheckpoint>([&](Done<TakenCheckpoint> done) {
            takeCheckpointAsync(sandboxId, baseManifest, std::move(done));
        });
    }

    void takeCheckpointAsync(const std::string &sandboxId, const std::string &baseManifest,
                             Done<TakenCheckpoint> done) override
    {
        v1::TakeCheckpointRequest req;
        req.set_sandbox_id(sandboxId);
        req.set_base_manifest(baseManifest);
        callAsync<TakenCheckpoint>(&Stub::async::TakeCheckpoint, "take_checkpoint", kSnapshotDeadlineMs, std::move(req),
                                   [](v1::TakeCheckpointResponse &resp) {
                                       TakenCheckpoint out{resp.token(), resp.base(), std::move(*resp.mutable_delta()),
                                                           resp.unchanged()};
                                       out.chunks = fromChunks(resp.chunks());
                                       for (const auto &p : resp.pending())
                                           out.pending.emplace_back(p.hash(), p.size());
                                       out.filesScanned = resp.files_scanned();
                                       out.filesHashed = resp.files_hashed();
                                       out.bytesHashed = resp.bytes_hashed();
                                       out.skipped = resp.skipped();
                                       out.scanMs = resp.scan_ms();
                                       return out;
                                   },
                                   std::move(done));
    }

    Result<std::vector<ContentChunk>> readCheckpointChunks(const std::string &sandboxId, const std::string &token,
                                                           const std::vector<std::string> &hashes) override
    {
        return waitFor<std::vector<ContentChunk>>([&](Done<std::vector<ContentChunk>> done) {
            readCheckpointChunksAsync(sandboxId, token, hashes, std::move(done));
        });
    }

    void readCheckpointChunksAsync(const std::string &sandboxId, const std::string &token,
                                   const std::vector<std::string> &hashes, Done<std::vector<ContentChunk>> done) override
    {
        v1::ReadCheckpointChunksRequest req;
        req.set_sandbox_id(sandboxId);
        req.set_token(token);
        for (const auto &h : hashes)
            req.add_hashes(h);
        callAsync<std::vector<ContentChunk>>(&Stub::async::ReadCheckpointChunks, "read_checkpoint_chunks",
                                             kSnapshotDeadlineMs, std::move(req),
                                             [](v1::ReadCheckpointChunksResponse &resp) { return fromChunks(resp.chunks()); },
                                             std::move(done));
    }

    Status commitCheckpoint(const std::string &sandboxId, const std::string &token, const std::string &manifestId) override
    {
        return waitFor<void>([&](Done<void> done) { commitCheckpointAsync(sandboxId, token, manifestId, std::move(done)); });
    }

    void commitCheckpointAsync(const std::string &sandboxId, const std::string &token, const std::string &manifestId,
                               Done<void> done) override
    {
        v1::CommitCheckpointRequest req;
        req.set_sandbox_id(sandboxId);
        req.set_token(token);
        req.set_manifest_id(manifestId);
        callAsync<void>(&Stub::async::CommitCheckpoint, "commit_checkpoint", kFileDeadlineMs, std::move(req), nullptr,
                        std::move(done));
    }

    Result<RestoreStart> beginRestore(const std::string &sandboxId, const std::string &manifestId,
                                      const std::string &manifestJson) override
    {
        return waitFor<RestoreStart>([&](Done<RestoreStart> done) {
            beginRestoreAsync(sandboxId, manifestId, manifestJson, std::move(done));
        });
    }

    void beginRestoreAsync(const std::string &sandboxId, const std::string &manifestId, const std::string &manifestJson,
                           Done<RestoreStart> done) override
    {
        v1::BeginRestoreRequest req;
        req.set_sandbox_id(sandboxId);
        req.set_manifest_id(manifestId);
        req.set_manifest(manifestJson);
        callAsync<RestoreStart>(&Stub::async::BeginRestore, "begin_restore", kSnapshotDeadlineMs, std::move(req),
                                [](v1::BeginRestoreResponse &resp) {
                                    return RestoreStart{resp.token(), {resp.missing().begin(), resp.missing().end()}};
                                },
                                std::move(done));
    }

    Status putRestoreChunks(const std::string &sandboxId, const std::string &token,
                            const std::vector<ContentChunk> &chunks) override
    {
        return waitFor<void>([&](Done<void> done) { putRestoreChunksAsync(sandboxId, token, chunks, std::move(done)); });
    }

    void putRestoreChunksAsync(const std::string &sandboxId, const std::string &token,
                               const std::vector<ContentChunk> &chunks, Done<void> done) override
    {
        v1::PutRestoreChunksRequest req;
        req.set_sandbox_id(sandboxId);
        req.set_token(token);
        for (const auto &c : chunks) {
            auto *out = req.add_chunks();
            out->set_hash(c.hash);
            out->set_data(c.data);
        }
        callAsync<void>(&Stub::async::PutRestoreChunks, "put_restore_chunks", kSnapshotDeadlineMs, std::move(req),
                        nullptr, std::move(done));
    }

    Result<RestoredWorkspace> finishRestore(const std::string &sandboxId, const std::string &token) override
    {
        return waitFor<RestoredWorkspace>([&](Done<RestoredWorkspace> done) {
            finishRestoreAsync(sandboxId, token, std::move(done));
        });
    }

    void finishRestoreAsync(const std::string &sandboxId, const std::string &token, Done<RestoredWorkspace> done) override
    {
        v1::FinishRestoreRequest req;
        req.set_sandbox_id(sandboxId);
        req.set_token(token);
        callAsync<RestoredWorkspace>(&Stub::async::FinishRestore, "finish_restore", kSnapshotDeadlineMs, std::move(req),
                                     [](v1::FinishRestoreResponse &resp) {
                                         return RestoredWorkspace{resp.file_count(), resp.bytes(), resp.duration_ms()};
                                     },
                                     std::move(done));
    }

    Result<std::vector<PostMortemInfo>> listPostMortems(const std::string &sessionId, int limit) override
    {
        v1::ListPostMortemsRequest req;
        req.set_session_id(sessionId);
        req.set_page_size(limit);
        auto resp = unary(&Stub::ListPostMortems, "list_post_mortems", kFileDeadlineMs, req);
        if (!resp)
            return std::unexpected(resp.error());
        std::vector<PostMortemInfo> out;
        for (const auto &pm : resp->post_mortems())
            out.push_back(toPostMortem(pm));
        return out;
    }

    Result<PostMortemInfo> getPostMortem(const std::string &sandboxId) override
    {
        v1::GetPostMortemRequest req;
        req.set_sandbox_id(sandboxId);
        auto resp = unary(&Stub::GetPostMortem, "get_post_mortem", kFileDeadlineMs, req);
        if (!resp)
            return std::unexpected(resp.error());
        return toPostMortem(*resp);
    }

    Result<std::vector<ResourcePoint>> samples(const std::string &sandboxId, int64_t afterUnixMs) override
    {
        return waitFor<std::vector<ResourcePoint>>([&](Done<std::vector<ResourcePoint>> done) {
            samplesAsync(sandboxId, afterUnixMs, std::move(done));
        });
    }

    void samplesAsync(const std::string &sandboxId, int64_t afterUnixMs, Done<std::vector<ResourcePoint>> done) override
    {
        v1::GetSamplesRequest req;
        req.set_sandbox_id(sandboxId);
        req.set_after_unix_ms(afterUnixMs);
        callAsync<std::vector<ResourcePoint>>(&Stub::async::GetSamples, "get_samples", kStatusDeadlineMs, std::move(req),
                                              [](v1::GetSamplesResponse &resp) {
                                                  std::vector<ResourcePoint> out;
                                                  out.reserve(static_cast<size_t>(resp.samples_size()));
                                                  for (const auto &s : resp.samples())
                                                      out.push_back(toResourcePoint(s));
                                                  return out;
                                              },
                                              std::move(done));
    }

    Result<std::vector<SnapshotFile>> listSnapshotFiles(const std::string &ref, const std::string &pathPrefix) override
    {
        v1::ListSnapshotFilesRequest req;
        req.set_snapshot_ref(ref);
        req.set_path_prefix(pathPrefix);
        auto resp = unary(&Stub::ListSnapshotFiles, "list_snapshot_files", kFileDeadlineMs, req);
        if (!resp)
            return std::unexpected(resp.error());
        std::vector<SnapshotFile> out;
        for (const auto &f : resp->files())
            out.push_back(SnapshotFile{f.path(), f.is_dir(), f.is_symlink(), f.symlink_target(), f.size(), f.mode(),
                                       f.mtime_unix_ms()});
        return out;
    }

    Result<SnapshotChunk> readSnapshotFile(const std::string &ref, const std::string &path, int64_t offset,
                                           int64_t maxBytes) override
    {
        v1::ReadSnapshotFileRequest req;
        req.set_snapshot_ref(ref);
        req.set_path(path);
        req.set_offset(offset);
        req.set_max_bytes(maxBytes);
        auto resp = unary(&Stub::ReadSnapshotFile, "read_snapshot_file", kFileDeadlineMs, req);
        if (!resp)
            return std::unexpected(resp.error());
        return SnapshotChunk{std::move(*resp->mutable_content()), resp->offset(), resp->size(), resp->eof()};
    }

    PostMortemInfo toPostMortem(const v1::PostMortem &pm) const
    {
        PostMortemInfo out;
        out.pool = m_name;
        out.poolId = pm.pool_id();
        out.sandboxId = pm.sandbox_id();
        out.sessionId = pm.session_id();
        out.tier = pm.tier();
        out.runtime = pm.runtime();
        out.reason = pm.reason();
        out.detail = pm.detail();
        out.exitCode = pm.exit_code();
        out.signal = pm.signal();
        out.durationMs = pm.duration_ms();
        out.argv.assign(pm.argv().begin(), pm.argv().end());
        out.lastStdout = pm.last_stdout();
        out.lastStderr = pm.last_stderr();
        out.stdoutBytes = pm.stdout_bytes();
        out.stderrBytes = pm.stderr_bytes();
        for (const auto &s : pm.samples())
            out.samples.push_back(toResourcePoint(s));
        for (const auto &p : pm.processes())
            out.processes.push_back(ProcessInfo{p.pid(), p.ppid(), p.state(), p.rss_bytes(), p.command()});
        out.processesNote = pm.processes_note();
        out.snapshotRef = pm.snapshot_ref();
        out.snapshotError = pm.snapshot_error();
        out.snapshotSizeBytes = pm.snapshot_size_bytes();
        out.snapshotMs = pm.snapshot_ms();
        out.peakMemoryBytes = pm.peak_memory_bytes();
        out.cpuLimit = pm.limits().cpu();
        out.memoryLimitBytes = pm.limits().memory_bytes();
        out.pidsLimit = pm.limits().pids();
        out.diskLimitBytes = pm.limits().disk_bytes();
        out.timeUnixMs = pm.time_unix_ms();
        return out;
    }

    void cancelInFlight() override
    {
        std::lock_guard lock(m_callsMutex);
        for (grpc::ClientContext *ctx : m_calls)
            ctx->TryCancel();
    }

private:
    // One call's context with its deadline, registered while the call runs so that
    // cancelInFlight() can end it from another thread.
    struct Call {
        Call(GrpcPoolClient &client, int64_t deadlineMs) : m_client(client)
        {
            ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadlineMs));
            if (!m_client.m_authorization.empty())
                ctx.AddMetadata("authorization", m_client.m_authorization);
            std::lock_guard lock(m_client.m_callsMutex);
            m_client.m_calls.insert(&ctx);
        }
        ~Call()
        {
            std::lock_guard lock(m_client.m_callsMutex);
            m_client.m_calls.erase(&ctx);
        }
        Call(const Call &) = delete;
        Call &operator=(const Call &) = delete;

        GrpcPoolClient &m_client;
        grpc::ClientContext ctx;
    };

    // A unary callback call's context (registered for cancelInFlight), request and response, kept
    // alive by the completion callback until it has run.
    template <typename Request, typename Response>
    struct AsyncUnary {
        AsyncUnary(GrpcPoolClient &client, int64_t deadlineMs) : call(client, deadlineMs), ctx(call.ctx) {}
        Call call;
        grpc::ClientContext &ctx;
        Request req;
        Response resp;
    };

    // Blocks the calling thread on one of the *Async calls: the blocking methods and the
    // asynchronous ones share one implementation.
    template <typename T, typename Start>
    static Result<T> waitFor(Start start)
    {
        std::promise<Result<T>> promise;
        auto future = promise.get_future();
        start([&promise](Result<T> result) { promise.set_value(std::move(result)); });
        return future.get();
    }

    // One of the async stub's unary methods, e.g. &v1::PoolService::Stub::async::ReadFile.
    template <typename Request, typename Response>
    using AsyncMethod = void (Stub::async::*)(grpc::ClientContext *, const Request *, Response *,
                                              std::function<void(grpc::Status)>);

    // One unary call on gRPC's callback API under its deadline (cancelInFlight ends it): done gets
    // convert(response), or the failure worded by failure(op). For T = void, convert is unused.
    template <typename T, typename Request, typename Response, typename Convert>
    void callAsync(AsyncMethod<Request, Response> method, const char *op, int64_t deadlineMs, Request req,
                   Convert convert, Done<T> done)
    {
        auto call = std::make_shared<AsyncUnary<Request, Response>>(*this, deadlineMs);
        call->req = std::move(req);
        (m_stub->async()->*method)(&call->ctx, &call->req, &call->resp,
                                   [this, call, op, convert = std::move(convert), done = std::move(done)](grpc::Status s) mutable {
                                       Result<T> result;
                                       if (!s.ok())
                                           result = failure(op, s);
                                       else if constexpr (!std::is_void_v<T>)
                                           result = convert(call->resp);
                                       else
                                           (void)convert;
                                       // The call leaves the client's list before done(): once done
                                       // has run, the client may be gone (a blocking caller returns),
                                       // while gRPC destroys this callback only later.
                                       call.reset();
                                       done(std::move(result));
                                   });
    }

    // One Exec: output gathered (and passed to the sink) as the pool streams it, the exit and the
    // egress attempts from its last message. gRPC's callback threads run it; it holds no thread
    // while the command runs.
    class ExecReactor final : public grpc::ClientReadReactor<v1::ExecResponse> {
    public:
        ExecReactor(GrpcPoolClient &client, const ExecSpec &spec, OutputSink sink, ExecDone done)
            : m_client(client), m_call(client, (spec.timeoutMs > 0 ? spec.timeoutMs : kExecDefaultTimeoutMs) + kExecGraceMs),
              m_sink(std::move(sink)), m_done(std::move(done))
        {
            m_req.set_sandbox_id(spec.sandboxId);
            for (const auto &a : spec.argv)
                m_req.add_argv(a);
            m_req.mutable_env()->insert(spec.env.begin(), spec.env.end());
            m_req.set_cwd(spec.cwd);
            m_req.set_timeout_ms(spec.timeoutMs);
            m_req.set_stdin(spec.stdinData);
            m_req.set_idempotency_key(spec.idempotencyKey);
            m_req.set_replay_only(spec.replayOnly);
            for (const auto &g : spec.egressGrants) {
                auto *grant = m_req.add_egress_grants();
                grant->set_host(g.host);
                grant->set_review_id(g.reviewId);
            }
        }

        void start()
        {
            m_client.m_stub->async()->Exec(&m_call.ctx, &m_req, this);
            StartRead(&m_msg);
            StartCall();
        }

        void OnReadDone(bool ok) override
        {
            if (!ok)
                return;   // the stream ended: OnDone follows
            take(m_msg);
            StartRead(&m_msg);
        }

        void OnDone(const grpc::Status &s) override
        {
            Result<ExecOutcome> result = m_out;
            if (!s.ok())
                result = m_client.failure("exec", s);
            else if (!m_sawExit)
                result = fail(ErrorCode::Internal, "pool '" + m_client.m_name
                                                       + "' ended an exec without reporting the exit; retry with the same idempotency key");
            ExecDone done = std::move(m_done);
            delete this;   // before done(): the Call leaves the client's list of calls in progress
            done(std::move(result));
        }

    private:
        void take(const v1::ExecResponse &msg)
        {
            if (!msg.stdout().empty()) {
                m_out.stdoutData += msg.stdout();
                if (m_sink)
                    m_sink(1, msg.stdout());
            }
            if (!msg.stderr().empty()) {
                m_out.stderrData += msg.stderr();
                if (m_sink)
                    m_sink(2, msg.stderr());
            }
            if (!msg.has_exit())
                return;
            m_sawExit = true;
            const auto &exit = msg.exit();
            m_out.exitCode = exit.exit_code();
            m_out.signal = exit.signal();
            m_out.durationMs = exit.duration_ms();
            m_out.startedUnixUs = exit.started_unix_us();
            m_out.timedOut = exit.timed_out();
            m_out.replayed = exit.replayed();
            m_out.reason = exit.reason();
            m_out.peakMemoryBytes = exit.peak_memory_bytes();
            m_out.cpuTimeUs = exit.cpu_time_us();
            m_out.peakMemoryScope = exit.peak_memory_scope();
            for (const auto &e : exit.egress()) {
                EgressAttempt a;
                a.allowed = e.allowed();
                a.host = e.host();
                a.port = e.port();
                a.address = e.address();
                a.method = e.method();
                a.reason = e.reason();
                a.detail = e.detail();
                a.error = e.error();
                a.bytesOut = e.bytes_out();
                a.bytesIn = e.bytes_in();
                a.timeUnixMs = e.time_unix_ms();
                a.durationMs = e.duration_ms();
                a.open = e.open();
                a.reviewId = e.review_id();
                m_out.egress.push_back(std::move(a));
            }
        }

        GrpcPoolClient &m_client;
        Call m_call;
        OutputSink m_sink;
        ExecDone m_done;
        v1::ExecRequest m_req;
        v1::ExecResponse m_msg;
        ExecOutcome m_out;
        bool m_sawExit = false;
    };

    // One of the stub's blocking unary methods, e.g. &v1::PoolService::Stub::Claim.
    template <typename Request, typename Response>
    using UnaryMethod = grpc::Status (v1::PoolService::Stub::*)(grpc::ClientContext *, const Request &, Response *);

    // One unary call under its deadline, as a Call so that cancelInFlight() can end it.
    template <typename Request, typename Response>
    grpc::Status invoke(UnaryMethod<Request, Response> method, int64_t deadlineMs, const Request &req, Response &resp)
    {
        Call call(*this, deadlineMs);
        return ((*m_stub).*method)(&call.ctx, req, &resp);
    }

    // The same, with a failure worded by failure(op).
    template <typename Request, typename Response>
    Result<Response> unary(UnaryMethod<Request, Response> method, const char *op, int64_t deadlineMs,
                           const Request &req)
    {
        Response resp;
        if (auto s = invoke(method, deadlineMs, req, resp); !s.ok())
            return failure(op, s);
        return resp;
    }

    // The pool's own messages already say what to do; transport failures get the pool named.
    std::unexpected<Error> failure(const char *op, const grpc::Status &s) const
    {
        const ErrorCode code = rpc::fromGrpcCode(s.error_code());
        if (code == ErrorCode::Unavailable && m_tls && looksLikeTlsFailure(s.error_message())) {
            const std::string host = m_serverName.empty() ? m_endpoint.substr(0, m_endpoint.rfind(':')) : m_serverName;
            return fail(code, "pool '" + m_name + "' at " + m_endpoint + ": TLS handshake failed (" + op + ": "
                                  + s.error_message() + "); the pool's certificate must be signed by the CA in tls_ca ("
                                  + (m_caFile.empty() ? std::string("the configured CA") : m_caFile)
                                  + ") and name '" + host + "' in its subjectAltName: give the pool a certificate "
                                  "from that CA for that name (paddock-pool --tls-cert), or fix tls_ca / "
                                  "tls_server_name in this pool's [[pool]] entry");
        }
        if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED)
            return fail(code, "pool '" + m_name + "' at " + m_endpoint + " refused the broker's credentials (" + op + ": "
                                  + s.error_message() + "); token_file in its [[pool]] entry must hold the token the "
                                  "pool was started with (paddock-pool --token-file)");
        if (code == ErrorCode::Unavailable && s.error_message().find("pool") == std::string::npos)
            return fail(code, "pool '" + m_name + "' at " + m_endpoint + " is unreachable (" + op + ": " + s.error_message() +
                                  "); check that paddock-pool is running there");
        if (code == ErrorCode::DeadlineExceeded)
            return fail(code, "pool '" + m_name + "' did not answer " + op + " in time (" + s.error_message() +
                                  "); the pool may be overloaded — retry with the same idempotency key");
        return fail(code, s.error_message());
    }

    const std::string m_name;
    const std::string m_endpoint;
    const bool m_tls;
    const std::string m_caFile;
    const std::string m_serverName;
    const std::string m_authorization;            // "Bearer <token>", or empty
    const std::unique_ptr<v1::PoolService::Stub> m_stub;

    std::mutex m_callsMutex;                      // guards m_calls
    std::set<grpc::ClientContext *> m_calls;      // calls in progress
};

} // namespace

std::unique_ptr<PoolClient> makeGrpcPoolClient(PoolConnection connection)
{
    return std::make_unique<GrpcPoolClient>(std::move(connection));
}

std::unique_ptr<PoolClient> makeGrpcPoolClient(std::string name, std::string endpoint)
{
    PoolConnection connection;
    connection.name = std::move(name);
    connection.endpoint = std::move(endpoint);
    return makeGrpcPoolClient(std::move(connection));
}

} // namespace paddock::pool_client
