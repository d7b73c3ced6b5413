#include "broker/core/session_state.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace paddock::core {

namespace {

struct StatusName {
    SessionStatus status;
    const char *name;
};

constexpr StatusName kStatusNames[] = {
    {SessionStatus::Queued, "queued"},
    {SessionStatus::Running, "running"},
    {SessionStatus::WaitingApproval, "waiting_approval"},
    {SessionStatus::Paused, "paused"},
    {SessionStatus::Succeeded, "succeeded"},
    {SessionStatus::Failed, "failed"},
    {SessionStatus::Cancelled, "cancelled"},
};

std::string stringField(const nlohmann::json &j, const char *key)
{
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t intField(const nlohmann::json &j, const char *key)
{
    auto it = j.find(key);
    return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// approval.decided: the session leaves waiting_approval. An approved budget extension raises the
// budget, a granted secret joins the session's grants and an approved host its approved hosts; a
// rejected budget extension ends the session (docs/governance.md, "Cost and budgets"), any other
// rejection resumes it with the rejection as the tool's result.
void applyDecision(SessionState &state, const nlohmann::json &payload)
{
    const std::string reviewId = stringField(payload, "review_id");
    if (reviewId.empty() || reviewId != state.pendingReviewId)
        return;
    state.pendingReviewId.clear();
    const std::string kind = stringField(payload, "kind");
    const auto approved = payload.find("approved");
    const bool yes = approved != payload.end() && approved->is_boolean() && approved->get<bool>();
    if (yes && kind == "budget_extension") {
        if (stringField(payload, "scope") == "agent_day")
            state.dayAllowanceMicros += intField(payload, "budget_increase_micros");
        else
            state.budgetMicros += intField(payload, "budget_increase_micros");
        state.budgetWarned = false;
    }
    if (yes && kind == "secret_access") {
        const std::string secret = stringField(payload, "secret");
        if (!secret.empty() && std::find(state.secrets.begin(), state.secrets.end(), secret) == state.secrets.end())
            state.secrets.push_back(secret);
    }
    if (yes && kind == "egress_exception") {
        const std::string host = stringField(payload, "host");
        const bool known = std::any_of(state.approvedHosts.begin(), state.approvedHosts.end(),
                                       [&](const ApprovedHost &h) { return h.host == host; });
        if (!host.empty() && !known)
            state.approvedHosts.push_back({host, reviewId});
    }
    if (isTerminal(state.status) || state.status != SessionStatus::WaitingApproval)
        return;
    if (!yes && kind == "budget_extension") {
        state.status = SessionStatus::Failed;
        state.statusReason = "budget exceeded and the extension was " + std::string(
            stringField(payload, "reason") == "expired" ? "not decided in time (expired)" : "rejected by "
            + stringField(payload, "decider") + ": " + stringField(payload, "reason"));
        return;
    }
    state.status = SessionStatus::Running;
    state.statusReason.clear();
}

} // namespace

const char *statusName(SessionStatus status)
{
    for (const auto &entry : kStatusNames) {
        if (entry.status == status)
            return entry.name;
    }
    return "unknown";
}

std::optional<SessionStatus> statusFromName(std::string_view name)
{
    for (const auto &entry : kStatusNames) {
        if (name == entry.name)
            return entry.status;
    }
    return std::nullopt;
}

bool isTerminal(SessionStatus status)
{
    return status == SessionStatus::Succeeded || status == SessionStatus::Failed
        || status == SessionStatus::Cancelled;
}

bool SessionState::needsWork() const
{
    if (isTerminal(status))
        return !sandboxId.empty();
    return status == SessionStatus::Queued || status == SessionStatus::Running;
}

void applyEvent(SessionState &state, const Event &event)
{
    state.lastSeq = event.seq;
    state.lastEventKind = event.kind;
    state.updatedUnixMs = event.timeUnixMs;
    state.costMicros += event.costMicros;

    const bool interesting = event.kind == kind::SessionCreated || event.kind == kind::StateChanged
        || event.kind == kind::SandboxClaimed || event.kind == kind::SandboxReleased
        || event.kind == kind::SandboxFailed || event.kind == kind::SandboxLost || event.kind == kind::ToolResult
        || event.kind == kind::TierOverride || event.kind == kind::Cost || event.kind == kind::BudgetWarning
        || event.kind == kind::ApprovalRequested || event.kind == kind::ApprovalDecided || event.kind == kind::EnvDecision
        || event.kind == kind::Checkpoint;
    if (!interesting)
        return;

    // A payload that does not parse is kept in the log as it is; the fold skips what it cannot read.
    const auto payload = nlohmann::json::parse(event.payload, nullptr, /*allow_exceptions=*/false);
    if (!payload.is_object())
        return;

    if (event.kind == kind::SessionCreated) {
        state.id = event.sessionId;
        state.agent = stringField(payload, "agent");
        state.goal = stringField(payload, "goal");
        state.model = stringField(payload, "model");
        state.playbook = stringField(payload, "playbook");
        state.tier = stringField(payload, "tier");
        state.submittedBy = stringField(payload, "submitted_by");
        state.tags.clear();
        if (auto tags = payload.find("tags"); tags != payload.end() && tags->is_array()) {
            for (const auto &tag : *tags) {
                if (tag.is_string())
                    state.tags.push_back(tag.get<std::string>());
            }
        }
        state.secrets.clear();
        if (auto secrets = payload.find("secrets"); secrets != payload.end() && secrets->is_array()) {
            for (const auto &name : *secrets) {
                if (name.is_string())
                    state.secrets.push_back(name.get<std::string>());
            }
        }
        state.createdUnixMs = event.timeUnixMs;
        state.status = SessionStatus::Queued;
        state.budgetMicros = intField(payload, "budget_micros");
    } else if (event.kind == kind::StateChanged) {
        if (auto status = statusFromName(stringField(payload, "status"))) {
            // A final state is final: a late pause or resume cannot revive a session.
            if (!isTerminal(state.status))
                state.status = *status;
            state.statusReason = stringField(payload, "reason");
        }
    } else if (event.kind == kind::SandboxClaimed) {
        state.sandboxId = stringField(payload, "sandbox_id");
        state.pool = stringField(payload, "pool");
        if (auto tier = stringField(payload, "tier"); !tier.empty())
            state.tier = tier;
    } else if (event.kind == kind::SandboxReleased || event.kind == kind::SandboxFailed
               || event.kind == kind::SandboxLost) {
        state.sandboxId.clear();
        if (auto manifest = stringField(payload, "manifest"); !manifest.empty())
            state.checkpoint = manifest;
    } else if (event.kind == kind::Checkpoint) {
        if (auto manifest = stringField(payload, "manifest"); !manifest.empty())
            state.checkpoint = manifest;
    } else if (event.kind == kind::ToolResult) {
        ++state.steps;
    } else if (event.kind == kind::TierOverride) {
        // The tier the session wants from now on; the engine moves it there at the next step.
        if (auto tier = stringField(payload, "to"); !tier.empty())
            state.tier = tier;
    } else if (event.kind == kind::Cost) {
        if (stringField(payload, "kind") == "model")
            state.modelCostMicros += event.costMicros;
        else
            state.sandboxCostMicros += event.costMicros;
    } else if (event.kind == kind::BudgetWarning) {
        state.budgetWarned = true;
    } else if (event.kind == kind::ApprovalRequested) {
        if (!isTerminal(state.status)) {
            state.pendingReviewId = stringField(payload, "review_id");
            state.status = SessionStatus::WaitingApproval;
            state.statusReason = "waiting for review " + state.pendingReviewId + " (" + stringField(payload, "kind")
                + "): " + stringField(payload, "summary");
        }
    } else if (event.kind == kind::ApprovalDecided) {
        applyDecision(state, payload);
    } else if (event.kind == kind::EnvDecision) {
        // A granted decision names the tier the session wants from now on, and who chose it.
        const std::string verdict = stringField(payload, "verdict");
        if (verdict.empty() || verdict == "granted") {
            if (auto tier = stringField(payload, "chosen_tier"); !tier.empty())
                state.tier = tier;
            state.tierChooser = stringField(payload, "chooser");
        }
    }
}

SessionState foldEvents(std::span<const Event> events)
{
    SessionState state;
    for (const auto &event : events)
        applyEvent(state, event);
    return state;
}

} // namespace paddock::core
