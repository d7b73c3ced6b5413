// SandboxPool's exec part: commands run through a claimed sandbox's init (exec blocking,
// execAsync on the exec loop), their idempotency records and replays, the reason an exec ended
// (timeout, oom_killed, disk_full), what each command used of its sandbox's cgroup, and the file
// operations (read, write, list).
//
// Threads: exec() and the file operations run on the calling thread; execAsync() returns at once
// and its sink and done run on the exec loop's thread (or the capture thread, after a
// post-mortem). A sandbox's records are guarded by its execMutex.

#include "pool/core/sandbox_pool_internal.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <unistd.h>

namespace paddock::pool {

InitExecRequest SandboxPool::initRequest(const ExecRequest &request) const
{
    InitExecRequest ir;
    ir.argv = request.argv;
    ir.env = request.env;
    ir.cwd = request.cwd;
    ir.stdinData = request.stdinData;
    ir.timeoutMs = request.timeoutMs > 0 ? std::min(request.timeoutMs, m_config.maxExecTimeoutMs) : m_config.defaultExecTimeoutMs;
    ir.maxOutputBytes = m_config.maxOutputBytes;
    return ir;
}

void SandboxPool::finishRecord(Sandbox &sandbox, const std::string &key, ExecRecord &record, const Result<InitExecResult> &r)
{
    {
        std::lock_guard lock(sandbox.execMutex);
        record.result = r;
        record.done = true;
        if (!r) {
            // The command may not have run at all (the init was unreachable): let a retry run it.
            sandbox.records.erase(key);
        } else {
            sandbox.recordBytes += record.bytes;
        }
        // Bound the records: drop the oldest finished ones beyond the count or byte limit.
        size_t scanned = 0;
        while ((sandbox.records.size() > static_cast<size_t>(m_config.execCachePerSandbox) ||
                sandbox.recordBytes > m_config.execCacheBytesPerSandbox) &&
               !sandbox.order.empty() && scanned++ < sandbox.order.size() + 1) {
            std::string oldest = sandbox.order.front();
            sandbox.order.pop_front();
            auto it = sandbox.records.find(oldest);
            if (it == sandbox.records.end())
                continue;
            if (!it->second->done) {
                sandbox.order.push_back(oldest);   // still running: keep it
                continue;
            }
            sandbox.recordBytes -= it->second->bytes;
            sandbox.records.erase(it);
        }
    }
    sandbox.execCv.notify_all();
}

Result<std::shared_ptr<SandboxPool::Sandbox>> SandboxPool::execTarget(const ExecRequest &request) const
{
    auto sandbox = findClaimed(request.sandboxId);
    if (sandbox && (request.argv.empty() || request.argv.front().empty()))
        return fail(ErrorCode::InvalidArgument, "exec needs a command in argv; for a shell line use [\"/bin/sh\", \"-c\", \"...\"]");
    if (sandbox && request.replayOnly && (request.idempotencyKey.empty() || m_config.execCachePerSandbox == 0))
        return fail(ErrorCode::InvalidArgument, "replay_only needs an idempotency_key and exec records (exec_cache_per_sandbox > 0)");
    return sandbox;
}

namespace {

std::unexpected<Error> nothingRanUnder(const std::string &key)
{
    return fail(ErrorCode::NotFound, "no command ran under idempotency key '" + key + "' here; nothing was started");
}

// Started just before a command reaches the init: its CPU time and memory peak from the sandbox's
// cgroup (null without one).
std::shared_ptr<CommandUsageMeter> startUsage(SandboxCgroup *cgroup)
{
    return cgroup ? cgroup->startCommand() : nullptr;
}

// Read as soon as the exit arrives, so that little besides the command counts.
CommandUsage finishUsage(const std::shared_ptr<CommandUsageMeter> &meter)
{
    return meter ? meter->finish() : CommandUsage{};
}

// The figures go with the exit, after nameExit (an init that went away because the sandbox was
// OOM-killed gets its exit there, and the peak says how far it got).
void addUsage(const CommandUsage &usage, Result<InitExecResult> &r)
{
    if (!r)
        return;
    r->peakMemoryBytes = usage.peakMemoryBytes;
    r->cpuTimeUs = usage.cpuTimeUs;
    r->peakMemoryScope = usage.peakScope;
}

} // namespace

Result<ExecResult> SandboxPool::exec(const ExecRequest &request, const ChunkSink &sink)
{
    auto found = execTarget(request);
    if (!found)
        return std::unexpected(found.error());
    auto sandbox = *found;
    auto grants = egressGrants(request);
    if (!grants)
        return std::unexpected(grants.error());

    const InitExecRequest ir = initRequest(request);
    const int64_t oomBefore = sandbox->cgroup ? sandbox->cgroup->oomKills() : -1;
    OutputTail tail;
    auto watch = m_deadlines && sandbox->cgroup ? m_deadlines->arm(sandbox->cgroup->dirs(), ir.timeoutMs) : nullptr;
    auto keepFailure = [&](const Result<InitExecResult> &r) {
        if (r)
            if (auto pm = execFailure(*sandbox, request.argv, *r, tail)) {
                sandbox->captureQueued();
                capturePostMortem(sandbox, std::move(*pm), watch);
            }
    };
    if (request.idempotencyKey.empty() || m_config.execCachePerSandbox == 0) {
        const uint64_t holder = holdEgress(request.sandboxId, *grants);
        auto meter = startUsage(sandbox->cgroup.get());
        auto r = sandbox->init.exec(ir, [&](int stream, std::string_view chunk) {
            tail.add(stream, chunk);
            if (sink)
                sink(stream, chunk);
        });
        const CommandUsage usage = finishUsage(meter);
        revokeEgress(request.sandboxId, holder);
        nameExit(*sandbox, oomBefore, r);
        addUsage(usage, r);
        keepFailure(r);
        if (!r)
            return std::unexpected(r.error());
        return ExecResult{*r, false};
    }

    std::shared_ptr<ExecRecord> record;
    {
        std::unique_lock lock(sandbox->execMutex);
        auto it = sandbox->records.find(request.idempotencyKey);
        if (it != sandbox->records.end()) {
            auto earlier = it->second;
            // A repeat (the broker retried after losing the answer): wait for the first run if it
            // is still going, then answer with what it recorded. The command does not run again.
            sandbox->execCv.wait(lock, [&] { return earlier->done; });
            auto chunks = earlier->chunks;
            auto result = earlier->result;
            lock.unlock();
            if (!result)
                return std::unexpected(result.error());
            if (sink)
                for (const auto &[stream, chunk] : chunks)
                    sink(stream, chunk);
            return ExecResult{*result, true};
        }
        if (request.replayOnly)
            return nothingRanUnder(request.idempotencyKey);
        record = std::make_shared<ExecRecord>();
        sandbox->records.emplace(request.idempotencyKey, record);
        sandbox->order.push_back(request.idempotencyKey);
    }

    const int64_t maxRecorded = m_config.maxOutputBytes;
    const uint64_t holder = holdEgress(request.sandboxId, *grants);
    auto meter = startUsage(sandbox->cgroup.get());
    auto r = sandbox->init.exec(ir, [&](int stream, std::string_view chunk) {
        tail.add(stream, chunk);
        if (record->bytes < maxRecorded) {
            record->chunks.emplace_back(stream, std::string(chunk));
            record->bytes += static_cast<int64_t>(chunk.size());
        }
        if (sink)
            sink(stream, chunk);
    });
    const CommandUsage usage = finishUsage(meter);
    revokeEgress(request.sandboxId, holder);
    nameExit(*sandbox, oomBefore, r);
    addUsage(usage, r);
    keepFailure(r);
    finishRecord(*sandbox, request.idempotencyKey, *record, r);
    if (!r)
        return std::unexpected(r.error());
    return ExecResult{*r, false};
}

bool SandboxPool::execAsync(const ExecRequest &request, ChunkSink sink, ExecDone done)
{
    auto found = execTarget(request);
    if (!found) {
        done(std::unexpected(found.error()));
        return true;
    }
    auto sandbox = *found;
    const bool keyed = !request.idempotencyKey.empty() && m_config.execCachePerSandbox > 0;
    auto grants = egressGrants(request);
    if (!grants) {
        done(std::unexpected(grants.error()));
        return true;
    }

    // A repeat of a finished run is answered from its record, inline; one still running would
    // have to be waited for: the blocking path does that.
    if (keyed) {
        std::unique_lock lock(sandbox->execMutex);
        if (auto answered = replayFinished(*sandbox, request.idempotencyKey, lock, sink, done))
            return *answered;
        if (request.replayOnly) {
            lock.unlock();
            done(nothingRanUnder(request.idempotencyKey));
            return true;
        }
    }

    auto connected = InitExecLoop::connect(sandbox->init.socketPath());
    if (!connected) {
        done(std::unexpected(connected.error()));
        return true;
    }
    if (!*connected)
        return false;   // backlog full: a blocking connect waits for room
    return submitExec(sandbox, request, keyed, **connected, *grants, std::move(sink), std::move(done));
}

std::optional<bool> SandboxPool::replayFinished(Sandbox &sandbox, const std::string &key, std::unique_lock<std::mutex> &lock,
                                                const ChunkSink &sink, const ExecDone &done)
{
    auto it = sandbox.records.find(key);
    if (it == sandbox.records.end())
        return std::nullopt;
    auto earlier = it->second;
    if (!earlier->done)
        return false;
    auto chunks = earlier->chunks;
    auto result = earlier->result;
    lock.unlock();
    if (!result) {
        done(std::unexpected(result.error()));
        return true;
    }
    if (sink)
        for (const auto &[stream, chunk] : chunks)
            sink(stream, chunk);
    done(ExecResult{*result, true});
    return true;
}

bool SandboxPool::submitExec(const std::shared_ptr<Sandbox> &sandbox, const ExecRequest &request, bool keyed, int fd,
                             const std::shared_ptr<const egress::Grants> &grants, ChunkSink sink, ExecDone done)
{
    const InitExecRequest ir = initRequest(request);
    const int64_t oomBefore = sandbox->cgroup ? sandbox->cgroup->oomKills() : -1;
    // The last output of each stream and, near the deadline, the process list: for a post-mortem.
    auto tail = std::make_shared<OutputTail>();
    auto watch = m_deadlines && sandbox->cgroup ? m_deadlines->arm(sandbox->cgroup->dirs(), ir.timeoutMs) : nullptr;
    sink = [tail, inner = std::move(sink)](int stream, std::string_view chunk) {
        tail->add(stream, chunk);
        if (inner)
            inner(stream, chunk);
    };
    auto finish = [this, sandbox, tail, watch, argv = request.argv](Result<InitExecResult> r, const ExecDone &doneFn) {
        answerExec(sandbox, argv, *tail, watch, std::move(r), doneFn);
    };
    // The grants hold from the moment the command can start until its exit reaches us.
    if (!keyed) {
        const uint64_t holder = holdEgress(request.sandboxId, grants);
        auto meter = startUsage(sandbox->cgroup.get());
        m_execLoop.submit(fd, ir, std::move(sink), [this, sandbox, holder, oomBefore, meter, finish, done = std::move(done)](Result<InitExecResult> r) {
            const CommandUsage usage = finishUsage(meter);
            revokeEgress(sandbox->id, holder);
            nameExit(*sandbox, oomBefore, r);
            addUsage(usage, r);
            finish(std::move(r), done);
        });
        return true;
    }

    auto record = std::make_shared<ExecRecord>();
    {
        std::unique_lock lock(sandbox->execMutex);
        if (auto answered = replayFinished(*sandbox, request.idempotencyKey, lock, sink, done)) {   // the same key arrived meanwhile
            ::close(fd);
            return *answered;
        }
        sandbox->records.emplace(request.idempotencyKey, record);
        sandbox->order.push_back(request.idempotencyKey);
    }
    const int64_t maxRecorded = m_config.maxOutputBytes;
    // The sink and done run on the exec loop's thread, one after the other: record needs no lock
    // until finishRecord publishes it.
    auto recordingSink = [record, maxRecorded, sink = std::move(sink)](int stream, std::string_view chunk) {
        if (record->bytes < maxRecorded) {
            record->chunks.emplace_back(stream, std::string(chunk));
            record->bytes += static_cast<int64_t>(chunk.size());
        }
        if (sink)
            sink(stream, chunk);
    };
    const uint64_t holder = holdEgress(request.sandboxId, grants);
    auto meter = startUsage(sandbox->cgroup.get());
    m_execLoop.submit(fd, ir, std::move(recordingSink),
                      [this, sandbox, holder, oomBefore, meter, key = request.idempotencyKey, record, finish,
                       done = std::move(done)](Result<InitExecResult> r) {
                          const CommandUsage usage = finishUsage(meter);
                          revokeEgress(sandbox->id, holder);
                          nameExit(*sandbox, oomBefore, r);
                          addUsage(usage, r);
                          finishRecord(*sandbox, key, *record, r);
                          finish(std::move(r), done);
                      });
    return true;
}

// On the exec loop's thread: a failure is captured on the capture thread, and the result is
// answered after it, so the next command finds the workspace as the failure left it.
void SandboxPool::answerExec(const std::shared_ptr<Sandbox> &sandbox, const std::vector<std::string> &argv,
                             const OutputTail &tail, const std::shared_ptr<DeadlineWatcher::Watch> &watch,
                             Result<InitExecResult> r, const ExecDone &done)
{
    if (r && m_captures)
        if (auto pm = execFailure(*sandbox, argv, *r, tail)) {
            sandbox->captureQueued();
            m_captures->post([this, sandbox, pm = std::move(*pm), watch, exit = *r, doneFn = done]() mutable {
                capturePostMortem(sandbox, std::move(pm), watch);
                doneFn(ExecResult{exit, false});
            });
            return;
        }
    if (!r)
        done(std::unexpected(r.error()));
    else
        done(ExecResult{*r, false});
}

Result<InitFile> SandboxPool::readFile(const std::string &sandboxId, const std::string &path, int64_t maxBytes)
{
    auto sandbox = findClaimed(sandboxId);
    if (!sandbox)
        return std::unexpected(sandbox.error());
    return (*sandbox)->init.readFile(path, maxBytes);
}

Result<int64_t> SandboxPool::writeFile(const std::string &sandboxId, const std::string &path, std::string_view content,
                                       uint32_t mode)
{
    auto sandbox = findClaimed(sandboxId);
    if (!sandbox)
        return std::unexpected(sandbox.error());
    return (*sandbox)->init.writeFile(path, content, mode == 0 ? 0644 : mode);
}

Result<std::vector<InitDirEntry>> SandboxPool::listDir(const std::string &sandboxId, const std::string &path)
{
    auto sandbox = findClaimed(sandboxId);
    if (!sandbox)
        return std::unexpected(sandbox.error());
    return (*sandbox)->init.listDir(path);
}

void SandboxPool::nameExit(const Sandbox &sandbox, int64_t oomBefore, Result<InitExecResult> &r)
{
    if (!r) {
        // The init went away and the cgroup saw an OOM kill meanwhile: under gVisor the
        // command's memory is the sandbox kernel's, so the host kills the whole sandbox.
        if (oomBefore >= 0 && sandbox.cgroup && sandbox.cgroup->oomKills() > oomBefore) {
            InitExecResult killed;
            killed.exitCode = -1;
            killed.signal = 9;
            killed.reason = "oom_killed";
            r = killed;
        }
        return;
    }
    if (r->timedOut) {
        r->reason = "timeout";
        return;
    }
    if (r->signal == 0 && r->exitCode == 0)
        return;
    if (oomBefore >= 0 && sandbox.cgroup && sandbox.cgroup->oomKills() > oomBefore)
        r->reason = "oom_killed";
    else if (sandbox.workspaceFs && workspaceFull(sandbox))
        r->reason = "disk_full";   // a few sysfs reads, only for a command that failed
}

bool SandboxPool::workspaceFull(const Sandbox &sandbox)
{
    // Within 64 KiB of the limit: a write that would cross it fails without using it up, and
    // btrfs counts its metadata in blocks of 16 KiB.
    auto full = [&] {
        const int64_t used = sandbox.workspaceFs->usedBytes(sandbox.qgroupId);
        return used >= 0 && used + kDiskFullMarginBytes >= sandbox.tier->config.diskBytes;
    };
    if (!full())
        return false;
    // Files deleted since btrfs' last commit still count: settle them first (a commit, a few ms,
    // only for a failed command in a workspace that looks full), or a command failing for another
    // reason just after `rm` would be named disk_full.
    sandbox.workspaceFs->commit();
    return full();
}

} // namespace paddock::pool
