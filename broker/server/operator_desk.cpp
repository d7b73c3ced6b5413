#include "broker/server/operator_desk.h"

#include "broker/server/caller.h"
#include "broker/server/convert.h"

#include "broker/server/queued_writer.h"
#include "common/clock.h"
#include "rpc/status.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

namespace paddock::server {
namespace {

using nlohmann::json;

constexpr int64_t kChunkBytes = 1 << 20;       // a download streams 1 MiB per message
constexpr size_t kMaxQueuedChunks = 4;         // then the reader waits for the client
constexpr int kDefaultListPerPool = 100;

std::string newShellId()
{
    thread_local std::mt19937_64 random{std::random_device{}()};
    static const char *digits = "0123456789abcdef";
    std::string id = "dbg-";
    uint64_t bits = random();
    for (int i = 0; i < 12; ++i, bits >>= 4)
        id += digits[bits & 0xf];
    return id;
}

// The pool keeps a failed command's output as it was; what the broker serves is redacted for
// every secret it holds (redactor may be null: no secrets).
void fill(const pool_client::PostMortemInfo &pm, v1::PostMortem *out, const secrets::Redactor *redactor)
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
}

// debug_shell.exec's payload: what ran, in which shell, for whom, and how it ended.
json execRecord(const v1::DebugShell &shell, const std::vector<std::string> &argv, const std::string &by,
                const std::string &clientUser, const Result<pool_client::ExecOutcome> &outcome)
{
    json payload{{"shell_id", shell.shell_id()}, {"pool", shell.pool()}, {"sandbox_id", shell.sandbox_id()},
                 {"argv", argv}, {"by", by}};
    if (!clientUser.empty())
        payload["client_user"] = clientUser;
    if (outcome) {
        payload["exit_code"] = outcome->exitCode;
        payload["signal"] = outcome->signal;
        payload["duration_ms"] = outcome->durationMs;
        payload["stdout_bytes"] = outcome->stdoutData.size();
        payload["stderr_bytes"] = outcome->stderrData.size();
        if (!outcome->reason.empty())
            payload["reason"] = outcome->reason;
    } else {
        payload["error"] = outcome.error().message;
    }
    return payload;
}

// The last message of a DebugExec stream: how the command ended.
v1::ExecResponse exitMessage(const pool_client::ExecOutcome &outcome)
{
    v1::ExecResponse last;
    auto *exit = last.mutable_exit();
    exit->set_exit_code(outcome.exitCode);
    exit->set_signal(outcome.signal);
    exit->set_duration_ms(outcome.durationMs);
    exit->set_timed_out(outcome.timedOut);
    exit->set_reason(outcome.reason);
    return last;
}

} // namespace

OperatorDesk::OperatorDesk(store::EventStore &store, const placement::PoolSet &pools, OperatorOptions options)
    : m_store(store), m_pools(pools), m_options(options)
{
    for (int i = 0; i < std::max(1, m_options.workers); ++i)
        m_threads.emplace_back([this] { workerLoop(); });
    m_threads.emplace_back([this] { reaperLoop(); });
}

OperatorDesk::~OperatorDesk()
{
    std::vector<Shell> shells;
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
        for (auto &[id, shell] : m_shells)
            shells.push_back(shell);
        m_shells.clear();
    }
    m_cv.notify_all();
    m_reaperWake.notify_all();
    for (auto &t : m_threads)
        t.join();
    for (const auto &shell : shells)
        (void)closeShell(shell, "broker_stopped", "broker");
}

void OperatorDesk::post(std::function<void()> job)
{
    {
        std::lock_guard lock(m_mutex);
        m_jobs.push_back(std::move(job));
    }
    m_cv.notify_one();
}

void OperatorDesk::workerLoop()
{
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_cv.wait(lock, [&] { return m_stopping || !m_jobs.empty(); });
        if (m_jobs.empty())
            return;
        auto job = std::move(m_jobs.front());
        m_jobs.pop_front();
        lock.unlock();
        job();
        lock.lock();
    }
}

void OperatorDesk::reaperLoop()
{
    const auto tick = std::chrono::milliseconds(std::clamp<int64_t>(m_options.debugShellIdleTimeoutMs / 4, 10, 1000));
    std::unique_lock lock(m_mutex);
    while (!m_stopping) {
        m_reaperWake.wait_for(lock, tick, [&] { return m_stopping; });
        if (m_stopping)
            return;
        std::vector<Shell> idle;
        const int64_t now = monotonicUs();
        for (auto it = m_shells.begin(); it != m_shells.end();) {
            if (it->second.busy == 0 && now - it->second.lastUsedUs > m_options.debugShellIdleTimeoutMs * 1000) {
                idle.push_back(it->second);
                it = m_shells.erase(it);
            } else {
                ++it;
            }
        }
        lock.unlock();
        for (const auto &shell : idle) {
            spdlog::info("debug shell {} idle for {} ms: closing it", shell.info.shell_id(), m_options.debugShellIdleTimeoutMs);
            (void)closeShell(shell, "idle", "broker");
        }
        lock.lock();
    }
}

grpc::ServerUnaryReactor *OperatorDesk::runUnary(grpc::CallbackServerContext *ctx, std::function<grpc::Status()> work)
{
    auto *reactor = ctx->DefaultReactor();
    post([reactor, work = std::move(work)] { reactor->Finish(work()); });
    return reactor;
}

Result<pool_client::PoolClient *> OperatorDesk::pool(const std::string &name) const
{
    if (name.empty())
        return fail(ErrorCode::InvalidArgument, "name the pool (the post-mortem's pool; `paddockctl pools` lists them)");
    if (auto *client = m_pools.find(name))
        return client;
    return fail(ErrorCode::NotFound, "no pool named '" + name + "'; the broker has: " + m_pools.names());
}

Status OperatorDesk::audit(const std::string &sessionId, const std::string &kind, const json &payload)
{
    store::AppendRequest req;
    req.sessionId = sessionId;
    std::string text = payload.dump(-1, ' ', false, json::error_handler_t::replace);
    if (m_options.secrets)
        m_options.secrets->snapshot()->redactor.redactJsonText(text);   // a command line may quote a value
    req.events.push_back(core::NewEvent{kind, std::move(text), 0});
    auto r = m_store.appendSync(std::move(req));
    if (!r)
        return std::unexpected(r.error());
    return {};
}

Status OperatorDesk::closeShell(const Shell &shell, const std::string &reason, const std::string &by)
{
    Status released;
    if (auto client = pool(shell.info.pool()); client)
        released = (*client)->release(shell.info.sandbox_id());
    else
        released = std::unexpected(client.error());
    json payload{{"shell_id", shell.info.shell_id()}, {"pool", shell.info.pool()}, {"sandbox_id", shell.info.sandbox_id()},
                 {"reason", reason}, {"by", by}};
    if (!released)
        payload["release_error"] = released.error().message;
    if (auto st = audit(shell.info.session_id(), "debug_shell.closed", payload); !st)
        spdlog::warn("debug shell {} closed, but the session's log could not record it: {}", shell.info.shell_id(),
                     st.error().message);
    return released;
}

grpc::ServerUnaryReactor *OperatorDesk::listPostMortems(grpc::CallbackServerContext *ctx,
                                                           const v1::ListPoolPostMortemsRequest *req,
                                                           v1::ListPoolPostMortemsResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        if (req->page_size() < 0)
            return {grpc::StatusCode::INVALID_ARGUMENT, "page_size must be 0 (the default, 100) or more"};
        if (!req->pool().empty())
            if (auto p = pool(req->pool()); !p)
                return rpc::toGrpcStatus(p.error());
        const int limit = req->page_size() == 0 ? kDefaultListPerPool : std::min(req->page_size(), 1000);
        std::vector<pool_client::PostMortemInfo> all;
        const auto &entries = m_pools.entries();
        for (size_t i = 0; i < entries.size(); ++i) {
            auto *client = entries[i].client.get();
            if (!req->pool().empty() && client->name() != req->pool())
                continue;
            const auto health = m_pools.health(i);
            if (health.checked && !health.healthy) {
                auto *e = resp->add_pool_errors();
                e->set_pool(client->name());
                e->set_error("the pool is unhealthy (" + health.lastError + "); its post-mortems are listed when it answers again");
                continue;
            }
            auto listed = client->listPostMortems(req->session_id(), limit);
            if (!listed) {
                auto *e = resp->add_pool_errors();
                e->set_pool(client->name());
                e->set_error(listed.error().message);
                continue;
            }
            all.insert(all.end(), listed->begin(), listed->end());
        }
        std::stable_sort(all.begin(), all.end(), [](const auto &a, const auto &b) { return a.timeUnixMs > b.timeUnixMs; });
        const auto secrets = m_options.secrets ? m_options.secrets->snapshot() : nullptr;
        for (const auto &pm : all)
            fill(pm, resp->add_post_mortems(), secrets ? &secrets->redactor : nullptr);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *OperatorDesk::getPostMortem(grpc::CallbackServerContext *ctx, const v1::GetPoolPostMortemRequest *req,
                                                         v1::PostMortem *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto client = pool(req->pool());
        if (!client)
            return rpc::toGrpcStatus(client.error());
        if (req->sandbox_id().empty())
            return {grpc::StatusCode::INVALID_ARGUMENT, "name the failed sandbox (`paddockctl postmortems ls` lists them)"};
        auto pm = (*client)->getPostMortem(req->sandbox_id());
        if (!pm)
            return rpc::toGrpcStatus(pm.error());
        const auto secrets = m_options.secrets ? m_options.secrets->snapshot() : nullptr;
        fill(*pm, resp, secrets ? &secrets->redactor : nullptr);
        return grpc::Status::OK;
    });
}

grpc::ServerUnaryReactor *OperatorDesk::listSnapshotFiles(grpc::CallbackServerContext *ctx,
                                                             const v1::ListPoolSnapshotFilesRequest *req,
                                                             v1::ListSnapshotFilesResponse *resp)
{
    return runUnary(ctx, [this, req, resp]() -> grpc::Status {
        auto client = pool(req->pool());
        if (!client)
            return rpc::toGrpcStatus(client.error());
        auto files = (*client)->listSnapshotFiles(req->snapshot_ref(), req->path_prefix());
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
        auto client = pool(req->pool());
        if (!client) {
            writer->finish(rpc::toGrpcStatus(client.error()));
            return;
        }
        if (req->offset() < 0 || req->max_bytes() < 0) {
            writer->finish({grpc::StatusCode::INVALID_ARGUMENT, "offset and max_bytes must be 0 or more"});
            return;
        }
        int64_t offset = req->offset();
        int64_t left = req->max_bytes() > 0 ? req->max_bytes() : INT64_MAX;
        for (;;) {
            auto chunk = (*client)->readSnapshotFile(req->snapshot_ref(), req->path(), offset, std::min(left, kChunkBytes));
            if (!chunk) {
                writer->finish(rpc::toGrpcStatus(chunk.error()));
                return;
            }
            const int64_t got = static_cast<int64_t>(chunk->content.size());
            v1::FileChunk msg;
            msg.set_offset(chunk->offset);
            msg.set_size(chunk->size);
            left -= got;
            offset = chunk->offset + got;
            const bool last = chunk->eof || left <= 0 || got == 0;
            msg.set_eof(chunk->eof);
            msg.set_data(std::move(chunk->content));
            if (!writer->push(std::move(msg)))
                break;
            if (last)
                break;
        }
        writer->finish(grpc::Status::OK);
    });
    return writer;
}

grpc::ServerUnaryReactor *OperatorDesk::openDebugShell(grpc::CallbackServerContext *ctx, const v1::OpenDebugShellRequest *req,
                                                          v1::DebugShell *resp)
{
    const Caller caller = callerOf(ctx);
    const std::string &by = caller.principal, &clientUser = caller.claimed;
    return runUnary(ctx, [this, req, resp, by = by, clientUser = clientUser]() -> grpc::Status {
        auto client = pool(req->pool());
        if (!client)
            return rpc::toGrpcStatus(client.error());
        auto pm = (*client)->getPostMortem(req->sandbox_id());
        if (!pm)
            return rpc::toGrpcStatus(pm.error());
        if (pm->snapshotRef.empty())
            return {grpc::StatusCode::FAILED_PRECONDITION,
                    "the post-mortem of '" + pm->sandboxId + "' has no workspace snapshot (" +
                        (pm->snapshotError.empty() ? std::string("none was taken") : pm->snapshotError) +
                        "); there is nothing to open a debug shell on"};
        if (pm->sessionId.empty())
            return {grpc::StatusCode::FAILED_PRECONDITION,
                    "the post-mortem of '" + pm->sandboxId + "' names no session, and debug shells are audited in the "
                    "session's log; open a shell only on a session's sandbox"};
        const std::string tier = req->tier().empty() ? pm->tier : req->tier();
        const std::string shellId = newShellId();
        auto claimed = (*client)->claim(tier, pm->sessionId + ":debug", shellId);
        if (!claimed)
            return rpc::toGrpcStatus(claimed.error());
        auto restored = (*client)->restore(claimed->sandboxId, pm->snapshotRef);
        if (!restored) {
            (void)(*client)->release(claimed->sandboxId);
            return rpc::toGrpcStatus(restored.error());
        }
        v1::DebugShell info;
        info.set_shell_id(shellId);
        info.set_pool((*client)->name());
        info.set_sandbox_id(claimed->sandboxId);
        info.set_tier(claimed->tier);
        info.set_session_id(pm->sessionId);
        info.set_post_mortem_sandbox_id(pm->sandboxId);
        info.set_snapshot_ref(pm->snapshotRef);
        info.set_idle_timeout_ms(m_options.debugShellIdleTimeoutMs);
        info.set_opened_by(by);
        json payload{{"shell_id", shellId}, {"pool", info.pool()}, {"sandbox_id", info.sandbox_id()}, {"tier", info.tier()},
                     {"post_mortem_sandbox_id", pm->sandboxId}, {"snapshot_ref", pm->snapshotRef}, {"by", by},
                     {"restored_files", restored->fileCount}};
        if (!clientUser.empty())
            payload["client_user"] = clientUser;
        if (auto st = audit(pm->sessionId, "debug_shell.opened", payload); !st) {
            (void)(*client)->release(info.sandbox_id());
            return {grpc::StatusCode::FAILED_PRECONDITION,
                    "cannot record the debug shell in session '" + pm->sessionId + "''s log (" + st.error().message +
                        "), so it was not opened; debug shells are audited in the failed session's log"};
        }
        {
            std::lock_guard lock(m_mutex);
            m_shells[shellId] = Shell{info, monotonicUs(), 0, false};
        }
        spdlog::info("debug shell {} opened on {} ({}, tier {}) from {} of session {}", shellId, info.sandbox_id(), info.pool(),
                     info.tier(), pm->snapshotRef, pm->sessionId);
        *resp = info;
        return grpc::Status::OK;
    });
}

grpc::ServerWriteReactor<v1::ExecResponse> *OperatorDesk::debugExec(grpc::CallbackServerContext *ctx,
                                                                       const v1::DebugExecRequest *req)
{
    auto *writer = new QueuedWriter<v1::ExecResponse>(kMaxQueuedChunks, QueuedWriter<v1::ExecResponse>::Overflow::Wait);
    const Caller caller = callerOf(ctx);
    const std::string &by = caller.principal, &clientUser = caller.claimed;
    post([this, writer, req, by = by, clientUser = clientUser] {
        Shell shell;
        {
            std::lock_guard lock(m_mutex);
            auto it = m_shells.find(req->shell_id());
            if (it == m_shells.end()) {
                writer->finish({grpc::StatusCode::NOT_FOUND, "no debug shell '" + req->shell_id() +
                                                                 "'; it was closed or idle too long — open a new one"});
                return;
            }
            it->second.busy++;
            it->second.lastUsedUs = monotonicUs();
            shell = it->second;
        }
        auto done = [&] {
            std::lock_guard lock(m_mutex);
            if (auto it = m_shells.find(req->shell_id()); it != m_shells.end()) {
                it->second.busy--;
                it->second.lastUsedUs = monotonicUs();
            }
        };
        if (req->argv().empty() || req->argv(0).empty()) {
            done();
            writer->finish({grpc::StatusCode::INVALID_ARGUMENT,
                            "give a command in argv; for a shell line use [\"/bin/sh\", \"-c\", \"...\"]"});
            return;
        }
        auto client = pool(shell.info.pool());
        if (!client) {
            done();
            writer->finish(rpc::toGrpcStatus(client.error()));
            return;
        }
        pool_client::ExecSpec spec;
        spec.sandboxId = shell.info.sandbox_id();
        spec.argv.assign(req->argv().begin(), req->argv().end());
        spec.timeoutMs = req->timeout_ms() > 0 ? req->timeout_ms() : m_options.debugExecDefaultTimeoutMs;
        spec.stdinData = req->stdin();
        // The output reaches the operator as it comes, redacted like everything the broker serves: a
        // value split across two chunks is held back until it is whole, then replaced.
        const auto held = m_options.secrets ? m_options.secrets->snapshot() : nullptr;
        const secrets::Redactor noSecrets;
        secrets::Redactor::Stream outStream(held ? held->redactor : noSecrets);
        secrets::Redactor::Stream errStream(held ? held->redactor : noSecrets);
        auto send = [writer](int stream, std::string text) {
            if (text.empty())
                return;
            v1::ExecResponse msg;
            if (stream == 1)
                msg.set_stdout(std::move(text));
            else
                msg.set_stderr(std::move(text));
            writer->push(std::move(msg));
        };
        auto outcome = (*client)->exec(spec, [&](int stream, const std::string &chunk) {
            send(stream, (stream == 1 ? outStream : errStream).feed(chunk));
        });
        send(1, outStream.finish());
        send(2, errStream.finish());
        const json payload = execRecord(shell.info, spec.argv, by, clientUser, outcome);
        // Recorded before the caller hears the exit: what the log says is what was run.
        const auto recorded = audit(shell.info.session_id(), "debug_shell.exec", payload);
        if (!recorded)
            spdlog::error("debug shell {}: '{}' ran but could not be recorded in session {}: {}", shell.info.shell_id(),
                          spec.argv.front(), shell.info.session_id(), recorded.error().message);
        done();
        if (!outcome) {
            writer->finish(rpc::toGrpcStatus(outcome.error()));
            return;
        }
        writer->push(exitMessage(*outcome));
        writer->finish(recorded ? grpc::Status::OK
                                : grpc::Status(grpc::StatusCode::INTERNAL, "the command ran but the audit record failed: " +
                                                                              recorded.error().message));
    });
    return writer;
}

grpc::ServerUnaryReactor *OperatorDesk::closeDebugShell(grpc::CallbackServerContext *ctx,
                                                           const v1::CloseDebugShellRequest *req, v1::CloseDebugShellResponse *)
{
    const std::string by = callerOf(ctx).principal;
    return runUnary(ctx, [this, req, by]() -> grpc::Status {
        Shell shell;
        {
            std::lock_guard lock(m_mutex);
            auto it = m_shells.find(req->shell_id());
            if (it == m_shells.end())
                return {grpc::StatusCode::NOT_FOUND, "no debug shell '" + req->shell_id() + "'; it was closed or idle too long"};
            shell = it->second;
            m_shells.erase(it);
        }
        if (auto st = closeShell(shell, "closed", by); !st)
            return rpc::toGrpcStatus(st.error());
        return grpc::Status::OK;
    });
}

} // namespace paddock::server
