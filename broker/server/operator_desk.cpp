#include "broker/server/operator_desk.h"

#include "broker/checkpoints/checkpoint_files.h"
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

constexpr size_t kMaxQueuedChunks = 4;         // then the reader waits for the client

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

Result<OperatorDesk::ShellSandbox> OperatorDesk::restoredSandbox(const FoundPostMortem &found, const std::string &tier,
                                                                const std::string &shellId)
{
    pool_client::PoolClient *client = found.pool;
    if (!client) {
        // The post-mortem's pool is gone: any pool offering the tier will do.
        auto chosen = m_pools.choose(tier);
        if (!chosen) {
            // Placement speaks for a waiting session ("the session waits ..."), and its
            // Unavailable reads to paddockctl as a lost broker; a shell is opened now or not at
            // all, so say that, as FailedPrecondition.
            std::string why = chosen.error().message;
            if (const auto cut = why.find(" the session waits"); cut != std::string::npos) {
                why.resize(cut);
                while (!why.empty() && (why.back() == ';' || why.back() == ':'))
                    why.pop_back();
                why += "; start a pool offering tier '" + tier + "' (`paddockctl pools` shows which the broker sees "
                       "healthy) and try again";
            }
            const ErrorCode code = chosen.error().code == ErrorCode::Unavailable ? ErrorCode::FailedPrecondition
                                                                                   : chosen.error().code;
            return fail(code, "the post-mortem's pool '" + found.info.pool + "' does not answer, so its shell opens "
                                  "on another pool from the broker's archive, and " + why);
        }
        client = *chosen;
    }
    auto claimed = client->claim(tier, found.info.sessionId + ":debug", shellId);
    if (!claimed)
        return std::unexpected(claimed.error());
    Result<int64_t> files = fail(ErrorCode::FailedPrecondition, "this broker keeps no checkpoints");
    if (const std::string manifest = checkpoints::manifestOfRef(found.info.snapshotRef); !manifest.empty()) {
        if (m_options.checkpointer) {
            auto restored = m_options.checkpointer->restore(*client, claimed->sandboxId, manifest);
            files = restored ? Result<int64_t>(restored->files) : std::unexpected(restored.error().error);
        }
    } else {
        auto restored = client->restore(claimed->sandboxId, found.info.snapshotRef);
        files = restored ? Result<int64_t>(restored->fileCount) : std::unexpected(restored.error());
    }
    if (!files) {
        (void)client->release(claimed->sandboxId);
        return std::unexpected(files.error());
    }
    return ShellSandbox{client, *claimed, *files};
}

grpc::ServerUnaryReactor *OperatorDesk::openDebugShell(grpc::CallbackServerContext *ctx, const v1::OpenDebugShellRequest *req,
                                                          v1::DebugShell *resp)
{
    const Caller caller = callerOf(ctx);
    const std::string &by = caller.principal, &clientUser = caller.claimed;
    return runUnary(ctx, [this, req, resp, by = by, clientUser = clientUser]() -> grpc::Status {
        auto found = findPostMortem(req->pool(), req->sandbox_id());
        if (!found)
            return rpc::toGrpcStatus(found.error());
        const pool_client::PostMortemInfo &pm = found->info;
        if (pm.snapshotRef.empty())
            return {grpc::StatusCode::FAILED_PRECONDITION,
                    "the post-mortem of '" + pm.sandboxId + "' has no workspace snapshot (" +
                        (pm.snapshotError.empty() ? std::string("none was taken") : pm.snapshotError) +
                        "); there is nothing to open a debug shell on"};
        if (pm.sessionId.empty())
            return {grpc::StatusCode::FAILED_PRECONDITION,
                    "the post-mortem of '" + pm.sandboxId + "' names no session, and debug shells are audited in the "
                    "session's log; open a shell only on a session's sandbox"};
        const std::string shellId = newShellId();
        auto sandbox = restoredSandbox(*found, req->tier().empty() ? pm.tier : req->tier(), shellId);
        if (!sandbox)
            return rpc::toGrpcStatus(sandbox.error());
        v1::DebugShell info;
        info.set_shell_id(shellId);
        info.set_pool(sandbox->pool->name());
        info.set_sandbox_id(sandbox->claimed.sandboxId);
        info.set_tier(sandbox->claimed.tier);
        info.set_session_id(pm.sessionId);
        info.set_post_mortem_sandbox_id(pm.sandboxId);
        info.set_snapshot_ref(pm.snapshotRef);
        info.set_idle_timeout_ms(m_options.debugShellIdleTimeoutMs);
        info.set_opened_by(by);
        json payload{{"shell_id", shellId}, {"pool", info.pool()}, {"sandbox_id", info.sandbox_id()}, {"tier", info.tier()},
                     {"post_mortem_sandbox_id", pm.sandboxId}, {"snapshot_ref", pm.snapshotRef}, {"by", by},
                     {"restored_files", sandbox->restoredFiles}, {"archived", found->archived}};
        if (!clientUser.empty())
            payload["client_user"] = clientUser;
        if (auto st = audit(pm.sessionId, "debug_shell.opened", payload); !st) {
            (void)sandbox->pool->release(info.sandbox_id());
            return {grpc::StatusCode::FAILED_PRECONDITION,
                    "cannot record the debug shell in session '" + pm.sessionId + "''s log (" + st.error().message +
                        "), so it was not opened; debug shells are audited in the failed session's log"};
        }
        {
            std::lock_guard lock(m_mutex);
            m_shells[shellId] = Shell{info, monotonicUs(), 0, false};
        }
        spdlog::info("debug shell {} opened on {} ({}, tier {}) from {} of session {}", shellId, info.sandbox_id(), info.pool(),
                     info.tier(), pm.snapshotRef, pm.sessionId);
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
