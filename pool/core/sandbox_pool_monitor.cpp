// SandboxPool's monitoring part: statistics (stats, the cgroup and disk views), the sampler that
// reads each claimed sandbox's cgroup once a second, the monitor that notices sandboxes dying,
// and workspace snapshots and post-mortems.
//
// Threads: the accessors may be called from any thread; samplerLoop and monitorLoop run on their
// own threads (started by start()); capturePostMortem runs on the capture thread or a thread that
// may block.

#include "pool/core/sandbox_pool_internal.h"

#include "common/clock.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <fstream>
#include <poll.h>
#include <unistd.h>

namespace paddock::pool {
namespace fs = std::filesystem;

namespace {

std::string hostName()
{
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

} // namespace

PoolStats SandboxPool::stats() const
{
    PoolStats s;
    s.poolId = m_config.poolId;
    s.host = hostName();
    s.cgroupVersion = m_cgroups || m_cgroupLayout.version == "none"
                          ? m_cgroupLayout.statusText()
                          : m_cgroupLayout.version + " (not writable: no limits enforced)";
    s.diskLimits = m_diskLimits;
    s.uptimeMs = (monotonicUs() - m_startedUs) / 1000;
    std::lock_guard lock(m_mutex);
    for (const auto &tier : m_tiers) {
        TierStats t;
        t.config = tier->config;
        t.warm = static_cast<int>(tier->warm.size());
        t.claimed = tier->claimed;
        t.starting = tier->starting;
        t.hitRate = tier->claims ? static_cast<double>(tier->warmClaims) / static_cast<double>(tier->claims) : 0;
        t.coldFallbacks = tier->coldFallbacks;
        if (tier->starts > 0 && tier->startUsTotal > 0)
            t.refillPerSecond = kRefillThreadsPerTier * 1e6 * static_cast<double>(tier->starts) / static_cast<double>(tier->startUsTotal);
        t.latencyBucketsUs = kLatencyBucketsUs;
        t.latencyCounts = tier->latencyCounts;
        t.claimUsTotal = tier->claimUsTotal;
        t.isolation = tier->isolation;
        s.tiers.push_back(std::move(t));
    }
    return s;
}

int64_t SandboxPool::workspaceUsedBytes(const std::string &sandboxId) const
{
    std::shared_ptr<Sandbox> sandbox;
    {
        std::lock_guard lock(m_mutex);
        auto it = m_sandboxes.find(sandboxId);
        if (it == m_sandboxes.end())
            return -1;
        sandbox = it->second;
    }
    return sandbox->workspaceFs ? sandbox->workspaceFs->usedBytes(sandbox->qgroupId) : -1;
}

std::vector<fs::path> SandboxPool::cgroupDirs(const std::string &sandboxId) const
{
    std::lock_guard lock(m_mutex);
    auto it = m_sandboxes.find(sandboxId);
    if (it == m_sandboxes.end() || !it->second->cgroup)
        return {};
    return it->second->cgroup->dirs();
}

std::vector<fs::path> SandboxPool::cgroupPoolDirs() const
{
    return m_cgroups ? m_cgroups->poolDirs() : std::vector<fs::path>{};
}

std::vector<CgroupSample> SandboxPool::samples(const std::string &sandboxId) const
{
    std::shared_ptr<Sandbox> sandbox;
    {
        std::lock_guard lock(m_mutex);
        auto it = m_sandboxes.find(sandboxId);
        if (it == m_sandboxes.end())
            return {};
        sandbox = it->second;
    }
    std::lock_guard lock(sandbox->sampleMutex);
    return {sandbox->samples.begin(), sandbox->samples.end()};
}

Result<std::vector<CgroupSample>> SandboxPool::claimedSamples(const std::string &sandboxId) const
{
    std::shared_ptr<Sandbox> sandbox;
    {
        std::lock_guard lock(m_mutex);
        auto it = m_sandboxes.find(sandboxId);
        if (it == m_sandboxes.end() || it->second->state == Sandbox::State::Warm)
            return noSuchSandbox(sandboxId);
        sandbox = it->second;
    }
    std::lock_guard lock(sandbox->sampleMutex);
    return std::vector<CgroupSample>(sandbox->samples.begin(), sandbox->samples.end());
}

void SandboxPool::samplerLoop()
{
    auto next = std::chrono::steady_clock::now();
    for (;;) {
        std::vector<std::shared_ptr<Sandbox>> claimed;
        {
            std::unique_lock lock(m_mutex);
            next += std::chrono::seconds(1);
            if (m_cv.wait_until(lock, next, [&] { return m_stopping; }))
                return;
            for (const auto &[id, sb] : m_sandboxes)
                if (sb->state == Sandbox::State::Claimed && sb->cgroup)
                    claimed.push_back(sb);
        }
        // Reading a few files per sandbox: outside m_mutex.
        for (const auto &sb : claimed) {
            CgroupSample sample = sb->cgroup->sample();
            if (sb->workspaceFs)
                sample.diskBytes = sb->workspaceFs->usedBytes(sb->qgroupId);
            std::lock_guard lock(sb->sampleMutex);
            sb->samples.push_back(sample);
            while (sb->samples.size() > kSamplesKept)
                sb->samples.pop_front();
        }
        const auto now = std::chrono::steady_clock::now();
        if (next < now - std::chrono::seconds(5))
            next = now;   // the host was suspended or overloaded: do not catch up in a burst
    }
}

void SandboxPool::monitorLoop()
{
    for (;;) {
        std::vector<std::shared_ptr<Sandbox>> watched;
        std::vector<pollfd> fds;
        fds.push_back({m_wakeFd, POLLIN, 0});
        {
            std::lock_guard lock(m_mutex);
            if (m_stopping)
                return;
            for (const auto &[id, sb] : m_sandboxes) {
                if (sb->state == Sandbox::State::Dead || sb->running->exitFd() < 0)
                    continue;
                watched.push_back(sb);
                fds.push_back({sb->running->exitFd(), POLLIN, 0});
            }
        }
        int rc = ::poll(fds.data(), fds.size(), -1);
        if (rc < 0 && errno != EINTR)
            return;
        if (fds[0].revents & POLLIN) {
            uint64_t count;
            (void)!::read(m_wakeFd, &count, sizeof count);
        }
        std::vector<std::shared_ptr<Sandbox>> toDestroy, crashed;
        for (size_t i = 1; i < fds.size(); ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            auto &sb = watched[i - 1];
            auto reason = sb->running->exitReason();
            if (!reason)
                continue;
            std::lock_guard lock(m_mutex);
            auto it = m_sandboxes.find(sb->id);
            if (it == m_sandboxes.end() || it->second != sb)
                continue;   // released meanwhile
            if (sb->state == Sandbox::State::Warm) {
                auto &warm = sb->tier->warm;
                warm.erase(std::remove(warm.begin(), warm.end(), sb), warm.end());
                m_sandboxes.erase(it);
                toDestroy.push_back(sb);
                spdlog::warn("warm sandbox {} died ({}); starting a replacement", sb->id, *reason);
            } else {
                sb->state = Sandbox::State::Dead;
                sb->deathReason = *reason;
                spdlog::warn("claimed sandbox {} (session '{}') died: {}", sb->id, sb->sessionId, *reason);
                crashed.push_back(sb);
            }
        }
        for (auto &sb : crashed) {
            PostMortemRecord pm = baseRecord(*sb);
            pm.reason = "crashed";
            pm.detail = "the sandbox's init died (" + sb->deathReason + ")";
            sb->captureQueued();
            m_captures->post([this, sb, pm]() mutable { capturePostMortem(sb, std::move(pm), nullptr); });
        }
        if (!toDestroy.empty())
            m_cv.notify_all();
        for (auto &sb : toDestroy)
            destroy(sb);
    }
}

// ---- snapshots and post-mortems ----

namespace {

std::string commandLine(const std::vector<std::string> &argv)
{
    std::string s;
    for (const auto &a : argv) {
        if (!s.empty())
            s += ' ';
        s += a;
    }
    if (s.size() > 200)
        s = s.substr(0, 200) + "...";
    return s;
}

std::string mib(int64_t bytes)
{
    return std::to_string(bytes >> 20) + " MiB";
}

// The cgroup's memory high-water mark (v1 memory.max_usage_in_bytes, v2 memory.peak), or -1.
int64_t peakMemory(const std::vector<fs::path> &dirs)
{
    for (const auto &dir : dirs)
        for (const char *name : {"memory.max_usage_in_bytes", "memory.peak"}) {
            std::ifstream in(dir / name);
            int64_t v;
            if (in >> v)
                return v;
        }
    return -1;
}

} // namespace

Result<SnapshotInfo> SandboxPool::snapshot(const std::string &sandboxId)
{
    auto sandbox = findClaimed(sandboxId);
    if (!sandbox)
        return std::unexpected(sandbox.error());
    auto info = m_snapshots->create((*sandbox)->dir / "workspace", sandboxId, ownerMap(**sandbox));
    if (info)
        spdlog::info("snapshot {} of {}: {} entries, {} bytes, {:.1f} ms", info->ref, sandboxId, info->fileCount,
                     info->sizeBytes, info->durationMs);
    pruneSnapshots(false);
    return info;
}

Result<SnapshotInfo> SandboxPool::restore(const std::string &sandboxId, const std::string &ref)
{
    auto sandbox = findClaimed(sandboxId);
    if (!sandbox)
        return std::unexpected(sandbox.error());
    auto info = m_snapshots->restore(ref, (*sandbox)->dir / "workspace", (*sandbox)->dir / "scratch", ownerMap(**sandbox));
    if (info)
        spdlog::info("restored {} into {}: {} entries, {:.1f} ms", ref, sandboxId, info->fileCount, info->durationMs);
    else
        spdlog::warn("restore of {} into {} failed: {}", ref, sandboxId, info.error().message);
    return info;
}

PostMortemRecord SandboxPool::baseRecord(const Sandbox &sandbox) const
{
    PostMortemRecord pm;
    pm.sandboxId = sandbox.id;
    {
        std::lock_guard lock(m_mutex);
        pm.sessionId = sandbox.sessionId;
    }
    pm.poolId = m_config.poolId;
    pm.tier = sandbox.tier->config.name;
    pm.runtime = sandbox.tier->config.runtime;
    pm.cpuLimit = sandbox.tier->config.cpu;
    pm.memoryLimitBytes = sandbox.tier->config.memoryBytes;
    pm.pidsLimit = sandbox.tier->config.pids;
    pm.diskLimitBytes = sandbox.tier->config.diskBytes;
    pm.timeUnixMs = nowUnixMs();
    return pm;
}

std::optional<PostMortemRecord> SandboxPool::execFailure(const Sandbox &sandbox, const std::vector<std::string> &argv,
                                                         const InitExecResult &exit, const OutputTail &tail) const
{
    if (exit.reason.empty() && exit.exitCode == 0 && exit.signal == 0)
        return std::nullopt;
    PostMortemRecord pm = baseRecord(sandbox);
    pm.reason = exit.reason.empty() ? (exit.signal == SIGSYS ? "seccomp_killed" : "nonzero_exit") : exit.reason;
    pm.exitCode = exit.exitCode;
    pm.signal = exit.signal;
    pm.durationMs = exit.durationMs;
    pm.argv = argv;
    pm.lastStdout = tail.tail(1);
    pm.lastStderr = tail.tail(2);
    pm.stdoutBytes = tail.bytes(1);
    pm.stderrBytes = tail.bytes(2);
    const std::string cmd = "'" + commandLine(argv) + "'";
    if (pm.reason == "oom_killed")
        pm.detail = cmd + " was killed by the OOM killer at the tier's memory limit of " + mib(pm.memoryLimitBytes);
    else if (pm.reason == "disk_full")
        pm.detail = cmd + " failed with the workspace full: the tier's disk limit of " + mib(pm.diskLimitBytes) +
                    " is used up (delete files in /workspace or use a tier with more disk_mb)";
    else if (pm.reason == "timeout")
        pm.detail = cmd + " timed out after " + std::to_string(static_cast<int64_t>(exit.durationMs)) + " ms and was killed";
    else if (pm.reason == "seccomp_killed")
        pm.detail = cmd + " was killed by SIGSYS: a seccomp filter refused a system call (the sandbox's own filter answers "
                          "EPERM, so the program or a library it loaded installed one that kills; docs/security.md)";
    else if (exit.signal != 0)
        pm.detail = cmd + " was killed by signal " + std::to_string(exit.signal);
    else
        pm.detail = cmd + " exited with " + std::to_string(exit.exitCode);
    return pm;
}

void SandboxPool::capturePostMortem(const std::shared_ptr<Sandbox> &sandbox, PostMortemRecord pm,
                                    const std::shared_ptr<DeadlineWatcher::Watch> &watch)
{
    const int64_t t0 = monotonicUs();
    // A plain non-zero exit does not replace the post-mortem of a worse failure of the sandbox.
    auto earlier = m_postMortems->get(sandbox->id);
    const bool keepEarlier = earlier && pm.reason == "nonzero_exit" && earlier->reason != "nonzero_exit";
    if (!keepEarlier) {
        std::vector<fs::path> dirs = sandbox->cgroup ? sandbox->cgroup->dirs() : std::vector<fs::path>{};
        if (watch && pm.reason == "timeout") {
            std::lock_guard lock(watch->mutex);
            if (watch->processes) {
                pm.processes = *watch->processes;
                pm.processesNote = "taken " + std::to_string(watch->firedBeforeDeadlineMs) +
                                   " ms before the deadline, before the init killed the command's process group";
            }
        }
        if (pm.processesNote.empty()) {
            if (dirs.empty()) {
                pm.processesNote = "not available: the pool runs without cgroups";
            } else {
                pm.processes = readCgroupProcesses(dirs);
                pm.processesNote = pm.reason == "oom_killed"
                                       ? "after the OOM kill: what was left in the sandbox's cgroup (the killed process is gone)"
                                       : "after the failure: what was still in the sandbox's cgroup";
            }
        }
        pm.samples = samples(sandbox->id);
        if (sandbox->cgroup) {
            CgroupSample last = sandbox->cgroup->sample();
            if (sandbox->workspaceFs)
                last.diskBytes = sandbox->workspaceFs->usedBytes(sandbox->qgroupId);
            // At an OOM kill the cgroup was at its limit: the sample at the failure carries the
            // high-water mark, so the curve shows where it died, not what was left after.
            if (pm.reason == "oom_killed")
                last.memoryBytes = std::max(last.memoryBytes, peakMemory(dirs));
            last.unixMs = pm.timeUnixMs;
            pm.samples.push_back(last);
        }
        auto snap = m_snapshots->create(sandbox->dir / "workspace", sandbox->id, ownerMap(*sandbox));
        if (snap) {
            pm.snapshotRef = snap->ref;
            pm.snapshotSizeBytes = snap->sizeBytes;
            pm.snapshotMs = snap->durationMs;
        } else {
            pm.snapshotError = snap.error().message;
        }
        if (auto saved = m_postMortems->save(pm); !saved) {
            spdlog::error("post-mortem of {} not kept: {}", sandbox->id, saved.error().message);
            if (snap)
                m_snapshots->remove(snap->ref);
        } else {
            spdlog::info("post-mortem of {} (session '{}'): {}; snapshot {} ({} bytes, {:.1f} ms); captured in {:.1f} ms",
                         sandbox->id, pm.sessionId, pm.detail, pm.snapshotRef.empty() ? pm.snapshotError : pm.snapshotRef,
                         pm.snapshotSizeBytes, pm.snapshotMs, static_cast<double>(monotonicUs() - t0) / 1000.0);
        }
    }
    {
        std::lock_guard lock(sandbox->captureMutex);
        sandbox->pendingCaptures--;
    }
    sandbox->captureCv.notify_all();
}

void SandboxPool::pruneSnapshots(bool now)
{
    if (m_config.snapshotRetentionHours <= 0)
        return;
    // At most every 10 minutes: a listing of the directory per snapshot would cost more than it saves.
    const int64_t t = monotonicUs();
    int64_t last = m_lastSnapshotPruneUs.load();
    if (!now && last != 0 && t - last < 600ll * 1000 * 1000)
        return;
    if (!m_lastSnapshotPruneUs.compare_exchange_strong(last, t))
        return;   // another thread is at it
    std::set<std::string> kept;
    for (const auto &pm : m_postMortems->list("", 0))
        kept.insert(pm.snapshotRef);
    const size_t dropped = m_snapshots->prune(nowUnixMs() - m_config.snapshotRetentionHours * 3600 * 1000,
                                              [&](const std::string &ref) { return kept.count(ref) > 0; });
    if (dropped > 0)
        spdlog::info("{} snapshots older than {} hours deleted (snapshot_retention_hours)", dropped,
                     m_config.snapshotRetentionHours);
}

} // namespace paddock::pool
