#include "pool/server/pool_service.h"

#include "rpc/status.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>

namespace paddock::pool {
namespace {

constexpr size_t kMaxCoalescedBytes = 1 << 20;   // one Exec stream message carries at most this

const char *kVersion = "0.1.0";

grpc::Status shuttingDown()
{
    return {grpc::StatusCode::UNAVAILABLE, "the pool is shutting down; retry on another pool or when it is back"};
}

} // namespace

// Exec: output chunks come from the exec loop's thread (or a worker's); this reactor writes them with one write in
// flight, coalescing what queued up meanwhile, then the exit, then finishes.
class ExecReactor final : public grpc::ServerWriteReactor<v1::ExecResponse> {
public:
    ExecReactor(PoolService &service, const v1::ExecRequest &req) : m_service(service)
    {
        m_service.m_inFlight++;
        if (m_service.m_draining) {
            complete(shuttingDown());
            return;
        }
        SandboxPool &pool = service.m_pool;
        TaskRunner &runner = service.m_runner;
        ExecRequest request;
        request.sandboxId = req.sandbox_id();
        request.argv.assign(req.argv().begin(), req.argv().end());
        request.env.insert(req.env().begin(), req.env().end());
        request.cwd = req.cwd();
        request.timeoutMs = req.timeout_ms();
        request.stdinData = req.stdin();
        request.idempotencyKey = req.idempotency_key();
        request.replayOnly = req.replay_only();
        for (const auto &g : req.egress_grants())
            request.egressGrants.push_back({g.host(), g.review_id()});
        // Started right here on the gRPC thread (connect and send do not block); the exec loop's
        // thread then streams the output and the exit. No hand-over to a worker on the way.
        auto sink = [this](int stream, std::string_view chunk) { enqueueChunk(stream, chunk); };
        auto done = [this, &pool, id = request.sandboxId, key = request.idempotencyKey](Result<ExecResult> r) {
            answerWithEgress(pool, id, key, std::move(r));
        };
        if (pool.execAsync(request, sink, done))
            return;
        // It would block (a repeat of a run still going, or the init's backlog is full).
        const bool posted = runner.post([this, &pool, request = std::move(request), sink] {
            answerWithEgress(pool, request.sandboxId, request.idempotencyKey, pool.exec(request, sink));
        });
        if (!posted)
            complete(shuttingDown());
    }

    void OnWriteDone(bool ok) override
    {
        {
            std::lock_guard lock(m_mutex);
            m_writing = false;
            if (!ok) {
                m_broken = true;   // the client went away; the run goes on and stays recorded
                m_queue.clear();
            }
        }
        pump();
    }

    void OnDone() override
    {
        m_service.m_inFlight--;
        delete this;
    }

private:
    // The egress attempts of the exec (allowlist tiers) go with its exit.
    void answerWithEgress(SandboxPool &pool, const std::string &sandboxId, const std::string &key, Result<ExecResult> r)
    {
        if (!r) {
            answer(r);
            return;
        }
        const bool replayed = r->replayed;
        pool.egressForExec(sandboxId, key, replayed, [this, r = std::move(r)](std::vector<egress::EgressAttempt> attempts) {
            answer(r, attempts);
        });
    }

    void answer(const Result<ExecResult> &r, const std::vector<egress::EgressAttempt> &egress = {})
    {
        if (!r) {
            complete(toGrpcStatus(r.error()));
            return;
        }
        v1::ExecResponse last;
        auto *exit = last.mutable_exit();
        exit->set_exit_code(r->exit.exitCode);
        exit->set_signal(r->exit.signal);
        exit->set_duration_ms(r->exit.durationMs);
        exit->set_started_unix_us(r->exit.startedUnixUs);
        exit->set_timed_out(r->exit.timedOut);
        exit->set_replayed(r->replayed);
        exit->set_reason(r->exit.reason);
        // Unknown (-1 inside) is 0 on the wire.
        if (r->exit.peakMemoryBytes > 0) {
            exit->set_peak_memory_bytes(r->exit.peakMemoryBytes);
            exit->set_peak_memory_scope(r->exit.peakMemoryScope);
        }
        exit->set_cpu_time_us(std::max<int64_t>(0, r->exit.cpuTimeUs));
        for (const auto &a : egress) {
            auto *e = exit->add_egress();
            e->set_allowed(a.allowed);
            e->set_host(a.host);
            e->set_port(a.port);
            e->set_address(a.address);
            e->set_method(a.method);
            e->set_reason(a.reason);
            e->set_detail(a.detail);
            e->set_error(a.error);
            e->set_bytes_out(a.bytesOut);
            e->set_bytes_in(a.bytesIn);
            e->set_time_unix_ms(a.timeUnixMs);
            e->set_duration_ms(a.durationMs);
            e->set_open(a.open);
            e->set_review_id(a.reviewId);
        }
        finishWith(std::move(last));
    }

    void enqueueChunk(int stream, std::string_view chunk)
    {
        std::unique_lock lock(m_mutex);
        if (m_broken)
            return;
        // Merge into the last queued message while it is small: fewer, larger writes.
        if (m_queue.empty() || m_queue.back().has_exit() ||
            static_cast<size_t>(m_queue.back().ByteSizeLong()) + chunk.size() > kMaxCoalescedBytes)
            m_queue.emplace_back();
        auto &msg = m_queue.back();
        if (stream == 1)
            msg.mutable_stdout()->append(chunk);
        else
            msg.mutable_stderr()->append(chunk);
        lock.unlock();
        pump();
    }

    // The last message and an OK status, queued together.
    void finishWith(v1::ExecResponse last)
    {
        {
            std::lock_guard lock(m_mutex);
            if (!m_broken)
                m_queue.push_back(std::move(last));
            m_final = grpc::Status::OK;
        }
        pump();
    }

    void complete(grpc::Status status)
    {
        {
            std::lock_guard lock(m_mutex);
            m_final = std::move(status);
        }
        pump();
    }

    // Decides under the lock, acts outside it: gRPC may run a reaction inline.
    void pump()
    {
        enum { kNone, kWrite, kWriteAndFinish, kFinish } action = kNone;
        {
            std::lock_guard lock(m_mutex);
            if (m_writing || m_finished)
                return;
            if (m_queue.size() == 1 && m_final && m_final->ok() && m_queue.front().has_exit()) {
                // The exit and the status in one operation: one reaction less per exec.
                m_current = std::move(m_queue.front());
                m_queue.pop_front();
                m_finished = true;
                action = kWriteAndFinish;
            } else if (!m_queue.empty()) {
                m_current = std::move(m_queue.front());
                m_queue.pop_front();
                m_writing = true;
                action = kWrite;
            } else if (m_final) {
                m_finished = true;
                action = kFinish;
            }
        }
        if (action == kWrite)
            StartWrite(&m_current);
        else if (action == kWriteAndFinish)
            StartWriteAndFinish(&m_current, grpc::WriteOptions(), grpc::Status::OK);
        else if (action == kFinish)
            Finish(*m_final);
    }

    PoolService &m_service;
    std::mutex m_mutex;
    std::deque<v1::ExecResponse> m_queue;
    v1::ExecResponse m_current;            // the one write in flight
    std::optional<grpc::Status> m_final;
    bool m_writing = false;
    bool m_finished = false;
    bool m_broken = false;
};

grpc::Status toGrpcStatus(const Error &error)
{
    return {rpc::toGrpcCode(error.code), error.message};
}

grpc::ServerUnaryReactor *PoolService::runUnary(grpc::CallbackServerContext *ctx, std::function<grpc::Status()> work)
{
    auto *reactor = ctx->DefaultReactor();
    m_inFlight++;
    if (m_draining || !m_runner.post([this, reactor, work = std::move(work)] {
            reactor->Finish(work());
            m_inFlight--;
        })) {
        reactor->Finish(shuttingDown());
        m_inFlight--;
    }
    return reactor;
}

grpc::ServerUnaryReactor *PoolService::Claim(grpc::CallbackServerContext *ctx, const v1::ClaimRequest *req,
                                             v1::ClaimResponse *resp)
{
    auto answer = [resp](const Result<ClaimedSandbox> &r) -> grpc::Status {
        if (!r)
            return toGrpcStatus(r.error());
        resp->set_sandbox_id(r->sandboxId);
        resp->set_tier(r->tier);
        resp->set_runtime(r->runtime);
        resp->set_host(r->host);
        resp->set_warm(r->warm);
        resp->set_claim_ms(r->claimMs);
        return grpc::Status::OK;
    };
    const std::string tier = req->tier().empty() ? "lite" : req->tier();
    // A warm sandbox is a handover under a short lock: answer inline, without a thread hop.
    if (!m_draining) {
        if (auto quick = m_pool.claimIfWarm(tier, req->session_id(), req->idempotency_key())) {
            // The refill workers are woken once the reply is out (OnDone): their wake-ups are
            // not billed to the claim, and the refill waits 10 ms after a claim anyway.
            class WarmClaimReactor final : public grpc::ServerUnaryReactor {
            public:
                explicit WarmClaimReactor(SandboxPool &pool) : m_pool(pool) {}
                void OnDone() override
                {
                    m_pool.wakeRefill();
                    delete this;
                }
            private:
                SandboxPool &m_pool;
            };
            auto *reactor = new WarmClaimReactor(m_pool);
            reactor->Finish(answer(*quick));
            return reactor;
        }
    }
    return runUnary(ctx, [this, req, tier, answer]() -> grpc::Status {
        return answer(m_pool.claim(tier, req->session_id(), req->idempotency_key()));
    });
}

grpc::ServerWriteReactor<v1::ExecResponse> *PoolService::Exec(grpc::CallbackServerContext *, const v1::ExecRequest *req)
{
    return new ExecReactor(*this, *req);
}

grpc::ServerUnaryReactor *PoolService::ReadFile(grpc::CallbackServerContext *ctx, const v1::ReadFileRequest *req,
                                                v1::ReadFileResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto r = m_pool.readFile(req->sandbox_id(), req->path(), req->max_bytes());
        if (!r)
            return toGrpcStatus(r.error());
        resp->set_content(std::move(r->content));
        resp->set_truncated(r->truncated);
        resp->set_size(r->size);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::WriteFile(grpc::CallbackServerContext *ctx, const v1::WriteFileRequest *req,
                                                 v1::WriteFileResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto r = m_pool.writeFile(req->sandbox_id(), req->path(), req->content(), req->mode());
        if (!r)
            return toGrpcStatus(r.error());
        resp->set_size(*r);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::ListDir(grpc::CallbackServerContext *ctx, const v1::ListDirRequest *req,
                                               v1::ListDirResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto r = m_pool.listDir(req->sandbox_id(), req->path());
        if (!r)
            return toGrpcStatus(r.error());
        for (const auto &e : *r) {
            auto *out = resp->add_entries();
            out->set_name(e.name);
            out->set_is_dir(e.isDir);
            out->set_size(e.size);
            out->set_mode(e.mode);
            out->set_mtime_unix_ms(e.mtimeUnixMs);
        }
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *PoolService::Release(grpc::CallbackServerContext *ctx, const v1::ReleaseRequest *req,
                                               v1::ReleaseResponse *)
{
    return runUnary(ctx, [this, req]() -> grpc::Status {
        auto r = m_pool.release(req->sandbox_id());
        return r ? grpc::Status::OK : toGrpcStatus(r.error());
    });
}

grpc::ServerUnaryReactor *PoolService::Status(grpc::CallbackServerContext *ctx, const v1::PoolStatusRequest *,
                                              v1::PoolStatusResponse *resp)
{
    // Cheap (a short lock): answered inline.
    const PoolStats s = m_pool.stats();
    resp->set_pool_id(s.poolId);
    resp->set_host(s.host);
    resp->set_version(kVersion);
    resp->set_uptime_ms(s.uptimeMs);
    resp->set_cgroup_version(s.cgroupVersion);
    resp->set_disk_limits(s.diskLimits);
    for (const auto &t : s.tiers) {
        auto *out = resp->add_tiers();
        auto *tier = out->mutable_tier();
        tier->set_name(t.config.name);
        tier->set_runtime(t.config.runtime);
        tier->mutable_limits()->set_cpu(t.config.cpu);
        tier->mutable_limits()->set_memory_bytes(t.config.memoryBytes);
        tier->mutable_limits()->set_pids(t.config.pids);
        tier->mutable_limits()->set_disk_bytes(t.config.diskBytes);
        tier->set_network(t.config.network == "allowlist" ? v1::NETWORK_POLICY_ALLOWLIST : v1::NETWORK_POLICY_NONE);
        for (const auto &a : t.config.allowlist)
            tier->add_allowlist(a);
        tier->set_price_per_hour_usd(t.config.pricePerHour);
        tier->set_warm_count(t.config.warmCount);
        tier->set_max_count(t.config.maxCount);
        out->set_warm(t.warm);
        out->set_claimed(t.claimed);
        out->set_max(t.config.maxCount);
        out->set_hit_rate(t.hitRate);
        out->set_refill_per_second(t.refillPerSecond);
        out->set_cold_fallbacks(t.coldFallbacks);
        out->set_isolation_identity(t.isolation.identity);
        out->set_isolation_seccomp(t.isolation.seccomp);
        out->set_isolation_etc(t.isolation.etc);
        for (auto b : t.latencyBucketsUs)
            out->add_claim_latency_us_buckets(b);
        for (auto c : t.latencyCounts)
            out->add_claim_latency_counts(c);
    }
    auto *reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
}

} // namespace paddock::pool
