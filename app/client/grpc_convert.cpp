#include "app/client/grpc_convert.h"
#include "app/client/grpc_text.h"

namespace paddock::console {

SessionInfo toSessionInfo(const v1::Session &s)
{
    SessionInfo info;
    info.id = qs(s.id());
    info.agent = qs(s.agent());
    info.goal = qs(s.goal());
    info.model = qs(s.model());
    info.playbook = qs(s.playbook());
    info.tier = qs(s.tier());
    info.pool = qs(s.pool());
    info.sandboxId = qs(s.sandbox_id());
    info.statusReason = qs(s.status_reason());
    info.lastEventKind = qs(s.last_event_kind());
    for (const auto &tag : s.tags())
        info.tags << qs(tag);
    // The console's enum follows the proto's numbering.
    const int status = s.status();
    info.status = status >= 0 && status <= static_cast<int>(SessionStatus::Cancelled) ? static_cast<SessionStatus>(status)
                                                                                      : SessionStatus::Unknown;
    info.steps = s.steps();
    info.costMicros = s.cost_micros();
    info.createdUnixMs = s.created_unix_ms();
    info.updatedUnixMs = s.updated_unix_ms();
    info.lastSeq = s.last_seq();
    info.tierChooser = qs(s.tier_chooser());
    info.submittedBy = qs(s.submitted_by());
    info.modelCostMicros = s.model_cost_micros();
    info.sandboxCostMicros = s.sandbox_cost_micros();
    info.budgetMicros = s.budget_micros();
    return info;
}

PoolInfo toPoolInfo(const v1::PoolInfo &p)
{
    PoolInfo info;
    info.name = qs(p.name());
    info.endpoint = qs(p.endpoint());
    info.healthy = p.healthy();
    info.local = p.local();
    info.error = qs(p.error());
    info.lost = p.lost();
    info.sessionsMovedAway = p.sessions_moved_away();
    for (const auto &id : p.moved_session_ids())
        info.movedSessionIds.append(qs(id));
    for (const auto &t : p.tiers()) {
        TierInfo tier;
        tier.name = qs(t.tier().name());
        tier.runtime = qs(t.tier().runtime());
        tier.warm = t.warm();
        tier.claimed = t.claimed();
        tier.max = t.max();
        tier.hitRate = t.hit_rate();
        tier.coldFallbacks = t.cold_fallbacks();
        for (const auto bucket : t.claim_latency_us_buckets())
            tier.latencyBucketsUs.append(bucket);
        for (const auto count : t.claim_latency_counts())
            tier.latencyCounts.append(count);
        tier.refillPerSecond = t.refill_per_second();
        tier.pricePerHourUsd = t.tier().price_per_hour_usd();
        tier.cpu = t.tier().limits().cpu();
        tier.memoryBytes = t.tier().limits().memory_bytes();
        tier.network = t.tier().network() == v1::NETWORK_POLICY_ALLOWLIST ? QStringLiteral("allowlist") : QStringLiteral("none");
        tier.isolationIdentity = qs(t.isolation_identity());
        tier.isolationSeccomp = qs(t.isolation_seccomp());
        tier.isolationEtc = qs(t.isolation_etc());
        info.tiers.append(tier);
    }
    for (const auto &h : p.history())
        info.history.append({h.time_unix_ms(), h.healthy(), h.warm(), h.claimed()});
    return info;
}

QByteArray toByteArray(const std::string &data)
{
    return QByteArray(data.data(), static_cast<qsizetype>(data.size()));
}

PostMortemInfo toPostMortem(const v1::PostMortem &p)
{
    PostMortemInfo pm;
    pm.pool = qs(p.pool());
    pm.sandboxId = qs(p.sandbox_id());
    pm.sessionId = qs(p.session_id());
    pm.tier = qs(p.tier());
    pm.runtime = qs(p.runtime());
    pm.reason = qs(p.reason());
    pm.detail = qs(p.detail());
    pm.exitCode = p.exit_code();
    pm.signal = p.signal();
    for (const auto &arg : p.argv())
        pm.argv << qs(arg);
    pm.durationMs = p.duration_ms();
    pm.lastStdout = toByteArray(p.last_stdout());
    pm.lastStderr = toByteArray(p.last_stderr());
    pm.stdoutBytes = p.stdout_bytes();
    pm.stderrBytes = p.stderr_bytes();
    for (const auto &sample : p.samples())
        pm.samples.append({sample.time_unix_ms(), sample.cpu_cores(), sample.memory_bytes(), sample.pids(),
                           sample.cpu_throttled()});
    for (const auto &process : p.processes())
        pm.processes.append({process.pid(), process.ppid(), qs(process.state()), process.rss_bytes(), qs(process.command())});
    pm.processesNote = qs(p.processes_note());
    pm.snapshotRef = qs(p.snapshot_ref());
    pm.snapshotError = qs(p.snapshot_error());
    pm.snapshotSizeBytes = p.snapshot_size_bytes();
    pm.timeUnixMs = p.time_unix_ms();
    pm.cpuLimit = p.limits().cpu();
    pm.memoryLimitBytes = p.limits().memory_bytes();
    pm.pidsLimit = p.limits().pids();
    return pm;
}

SnapshotFile toSnapshotFile(const v1::SnapshotFile &f)
{
    return SnapshotFile{qs(f.path()), f.is_dir(), f.is_symlink(), qs(f.symlink_target()), f.size(), f.mode(),
                         f.mtime_unix_ms()};
}

DebugShellInfo toDebugShell(const v1::DebugShell &d)
{
    DebugShellInfo shell;
    shell.shellId = qs(d.shell_id());
    shell.pool = qs(d.pool());
    shell.sandboxId = qs(d.sandbox_id());
    shell.tier = qs(d.tier());
    shell.sessionId = qs(d.session_id());
    shell.postMortemSandboxId = qs(d.post_mortem_sandbox_id());
    shell.snapshotRef = qs(d.snapshot_ref());
    shell.openedBy = qs(d.opened_by());
    shell.idleTimeoutMs = d.idle_timeout_ms();
    return shell;
}

EventRecord toEventRecord(const v1::Event &e, KindInterner &kinds)
{
    return EventRecord{e.seq(), e.time_unix_ms(), kinds.intern(e.kind()),
                       QByteArray(e.payload_json().data(), static_cast<qsizetype>(e.payload_json().size())),
                       e.cost_micros()};
}

QString statusText(const grpc::Status &status)
{
    QString message = qs(status.error_message());
    if (message.isEmpty())
        message = QStringLiteral("gRPC status %1").arg(static_cast<int>(status.error_code()));
    return message;
}

CheckpointStorage toCheckpointStorage(const v1::StorageInfo &s)
{
    CheckpointStorage out;
    out.store = qs(s.store());
    out.where = qs(s.where());
    out.retentionHours = s.retention_hours();
    out.chunks = s.chunks();
    out.manifests = s.manifests();
    out.bytesStored = s.bytes_stored();
    out.logicalBytes = s.logical_bytes();
    out.dedupRatio = s.dedup_ratio();
    const auto &would = s.would_free();
    out.freeableBytes = would.chunk_bytes_freed() + would.manifest_bytes_freed();
    out.freeableChunks = would.chunks_freed();
    out.freeableManifests = would.manifests_freed();
    out.problem = qs(would.problem());
    if (s.has_last_collection()) {
        out.lastCollectionUnixMs = s.last_collection().time_unix_ms();
        out.lastFreedBytes = s.last_collection().chunk_bytes_freed() + s.last_collection().manifest_bytes_freed();
    }
    out.computedUnixMs = s.computed_unix_ms();
    return out;
}

} // namespace paddock::console
