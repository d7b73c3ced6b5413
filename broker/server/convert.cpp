#include "broker/server/convert.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace paddock::server {

void toProto(const core::Event &event, v1::Event *out)
{
    out->set_session_id(event.sessionId);
    out->set_seq(event.seq);
    out->set_time_unix_ms(event.timeUnixMs);
    out->set_kind(event.kind);
    out->set_payload_json(event.payload);
    out->set_cost_micros(event.costMicros);
}

v1::SessionStatus toProto(core::SessionStatus status)
{
    switch (status) {
    case core::SessionStatus::Queued: return v1::SESSION_STATUS_QUEUED;
    case core::SessionStatus::Running: return v1::SESSION_STATUS_RUNNING;
    case core::SessionStatus::WaitingApproval: return v1::SESSION_STATUS_WAITING_APPROVAL;
    case core::SessionStatus::Paused: return v1::SESSION_STATUS_PAUSED;
    case core::SessionStatus::Succeeded: return v1::SESSION_STATUS_SUCCEEDED;
    case core::SessionStatus::Failed: return v1::SESSION_STATUS_FAILED;
    case core::SessionStatus::Cancelled: return v1::SESSION_STATUS_CANCELLED;
    }
    return v1::SESSION_STATUS_UNSPECIFIED;
}

std::optional<core::SessionStatus> fromProto(v1::SessionStatus status)
{
    switch (status) {
    case v1::SESSION_STATUS_QUEUED: return core::SessionStatus::Queued;
    case v1::SESSION_STATUS_RUNNING: return core::SessionStatus::Running;
    case v1::SESSION_STATUS_WAITING_APPROVAL: return core::SessionStatus::WaitingApproval;
    case v1::SESSION_STATUS_PAUSED: return core::SessionStatus::Paused;
    case v1::SESSION_STATUS_SUCCEEDED: return core::SessionStatus::Succeeded;
    case v1::SESSION_STATUS_FAILED: return core::SessionStatus::Failed;
    case v1::SESSION_STATUS_CANCELLED: return core::SessionStatus::Cancelled;
    default: return std::nullopt;
    }
}

void toProto(const core::SessionState &state, v1::Session *out)
{
    out->set_id(state.id);
    out->set_agent(state.agent);
    out->set_goal(state.goal);
    out->set_model(state.model);
    out->set_playbook(state.playbook);
    out->set_status(toProto(state.status));
    out->set_tier(state.tier);
    out->set_tier_chooser(state.tierChooser);
    out->set_pool(state.pool);
    out->set_sandbox_id(state.sandboxId);
    out->set_steps(state.steps);
    out->set_cost_micros(state.costMicros);
    out->set_model_cost_micros(state.modelCostMicros);
    out->set_sandbox_cost_micros(state.sandboxCostMicros);
    out->set_budget_micros(state.budgetMicros);
    out->set_submitted_by(state.submittedBy);
    out->set_created_unix_ms(state.createdUnixMs);
    out->set_updated_unix_ms(state.updatedUnixMs);
    out->set_last_seq(state.lastSeq);
    out->set_last_event_kind(state.lastEventKind);
    out->set_status_reason(state.statusReason);
    out->clear_tags();
    for (const auto &tag : state.tags)
        out->add_tags(tag);
    out->clear_secrets();
    for (const auto &name : state.secrets)
        out->add_secrets(name);
}

void toProto(const policy::TierDecision &decision, v1::EnvironmentDecision *out)
{
    out->set_id(decision.id);
    out->set_requested_tier(decision.requestedTier);
    out->set_chosen_tier(decision.chosenTier);
    out->set_chooser(decision.chooser);
    out->set_rule(decision.rule);
    out->set_reason(decision.reason);
    out->set_agent(decision.agent);
    out->set_trigger(decision.trigger);
    out->set_who(decision.who);
    for (const auto &alternative : decision.alternatives) {
        auto *alt = out->add_alternatives();
        alt->set_tier(alternative.tier);
        alt->set_estimated_cost_micros(alternative.estimatedCostMicros);
        alt->set_note(alternative.note);
    }
}

void toProto(const store::DecisionRecord &decision, v1::EnvironmentDecision *out)
{
    out->set_id(decision.id);
    out->set_session_id(decision.sessionId);
    out->set_requested_tier(decision.requestedTier);
    out->set_chosen_tier(decision.chosenTier);
    out->set_chooser(decision.chooser);
    out->set_rule(decision.rule);
    out->set_reason(decision.reason);
    out->set_outcome(decision.outcome);
    out->set_time_unix_ms(decision.timeUnixMs);
    out->set_agent(decision.agent);
    out->set_trigger(decision.trigger);
    out->set_who(decision.who);
    out->set_peak_memory_bytes(decision.peakMemoryBytes);
    out->set_memory_limit_bytes(decision.memoryLimitBytes);
    out->set_mean_cpu_fraction(decision.meanCpuFraction);
    out->set_throttled_fraction(decision.throttledFraction);
    out->set_fitting_tier(decision.fittingTier);
    out->set_outcome_unix_ms(decision.outcomeUnixMs);
    const auto alternatives = nlohmann::json::parse(decision.alternativesJson, nullptr, false);
    if (alternatives.is_array()) {
        for (const auto &alternative : alternatives) {
            if (!alternative.is_object())
                continue;
            auto *alt = out->add_alternatives();
            alt->set_tier(alternative.value("tier", std::string()));
            alt->set_estimated_cost_micros(alternative.value("estimated_cost_micros", int64_t{0}));
            alt->set_note(alternative.value("note", std::string()));
        }
    }
}

void toProto(const pool_client::ResourcePoint &point, v1::ResourceSample *out)
{
    out->set_time_unix_ms(point.timeUnixMs);
    out->set_cpu_cores(point.cpuCores);
    out->set_memory_bytes(point.memoryBytes);
    out->set_pids(point.pids);
    out->set_disk_bytes(point.diskBytes);
    out->set_cpu_throttled(point.cpuThrottled);
    out->set_cpu_periods(point.cpuPeriods);
    out->set_cpu_throttled_periods(point.cpuThrottledPeriods);
    out->set_cpu_throttled_usec(point.cpuThrottledUs);
}

Result<store::SessionQuery> toQuery(const v1::SessionFilter &filter)
{
    store::SessionQuery query;
    for (int raw : filter.statuses()) {
        auto status = fromProto(static_cast<v1::SessionStatus>(raw));
        if (!status)
            return fail(ErrorCode::InvalidArgument,
                        "unknown session status " + std::to_string(raw)
                            + " in the filter: use queued, running, waiting_approval, paused, succeeded, failed or cancelled");
        query.statuses.push_back(*status);
    }
    query.agent = filter.agent();
    query.text = filter.text();
    return query;
}

bool matches(const v1::SessionFilter &filter, const core::SessionState &state)
{
    if (filter.statuses_size() > 0) {
        const auto status = toProto(state.status);
        if (std::find(filter.statuses().begin(), filter.statuses().end(), status) == filter.statuses().end())
            return false;
    }
    if (!filter.agent().empty() && filter.agent() != state.agent)
        return false;
    if (!filter.text().empty()) {
        const auto &text = filter.text();
        if (state.id.find(text) == std::string::npos && state.goal.find(text) == std::string::npos
            && state.playbook.find(text) == std::string::npos)
            return false;
    }
    return true;
}

void toProto(const checkpoints::CollectionReport &report, v1::StorageCollection *out)
{
    out->set_dry_run(report.dryRun);
    out->set_time_unix_ms(report.atUnixMs);
    out->set_duration_ms(report.durationMs);
    out->set_chunks_freed(report.chunksFreed);
    out->set_chunk_bytes_freed(report.chunkBytesFreed);
    out->set_manifests_freed(report.manifestsFreed);
    out->set_manifest_bytes_freed(report.manifestBytesFreed);
    out->set_chunks_kept(report.chunksKept);
    out->set_manifests_kept(report.manifestsKept);
    out->set_kept_for_grace(report.keptForGrace);
    out->set_missing_manifests(report.missingManifests);
    out->set_live_sessions(report.liveSessions);
    out->set_retained_sessions(report.retainedSessions);
    out->set_expired_sessions(report.expiredSessions);
    out->set_chunks_swept(report.chunksSwept);
    out->set_problem(report.problem);
}

void toProto(checkpoints::CheckpointCollector &collector, const checkpoints::StorageFigures &figures,
             v1::StorageInfo *out)
{
    out->set_store(collector.store().kind());
    out->set_where(collector.store().describe());
    out->set_retention_hours(collector.retentionHours());
    out->set_grace_ms(checkpoints::kCollectGraceMs);
    out->set_chunks(figures.chunks);
    out->set_chunk_bytes(figures.chunkBytes);
    out->set_manifests(figures.manifests);
    out->set_manifest_bytes(figures.manifestBytes);
    out->set_bytes_stored(figures.bytesStored());
    out->set_logical_bytes(figures.logicalBytes);
    out->set_unreadable_manifests(figures.unreadableManifests);
    out->set_dedup_ratio(figures.dedupRatio());
    toProto(figures.wouldFree, out->mutable_would_free());
    if (auto last = collector.lastCollection())
        toProto(*last, out->mutable_last_collection());
    out->set_computed_unix_ms(figures.computedUnixMs);
}

} // namespace paddock::server
