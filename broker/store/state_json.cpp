#include "broker/store/state_json.h"

#include <nlohmann/json.hpp>

namespace paddock::store {

namespace {

void readString(const nlohmann::json &j, const char *key, std::string &out)
{
    if (auto it = j.find(key); it != j.end() && it->is_string())
        out = it->get<std::string>();
}

void readInt(const nlohmann::json &j, const char *key, int64_t &out)
{
    if (auto it = j.find(key); it != j.end() && it->is_number_integer())
        out = it->get<int64_t>();
}

nlohmann::json approvedHostsJson(const std::vector<core::ApprovedHost> &hosts)
{
    auto out = nlohmann::json::array();
    for (const auto &h : hosts)
        out.push_back({{"host", h.host}, {"review_id", h.reviewId}});
    return out;
}

} // namespace

std::string sessionStateToJson(const core::SessionState &state)
{
    nlohmann::json j{
        {"id", state.id},
        {"agent", state.agent},
        {"goal", state.goal},
        {"model", state.model},
        {"playbook", state.playbook},
        {"tier", state.tier},
        {"tier_chooser", state.tierChooser},
        {"tags", state.tags},
        {"secrets", state.secrets},
        {"approved_hosts", approvedHostsJson(state.approvedHosts)},
        {"status", core::statusName(state.status)},
        {"status_reason", state.statusReason},
        {"pool", state.pool},
        {"sandbox_id", state.sandboxId},
        {"steps", state.steps},
        {"cost_micros", state.costMicros},
        {"model_cost_micros", state.modelCostMicros},
        {"sandbox_cost_micros", state.sandboxCostMicros},
        {"budget_micros", state.budgetMicros},
        {"budget_warned", state.budgetWarned},
        {"day_allowance_micros", state.dayAllowanceMicros},
        {"submitted_by", state.submittedBy},
        {"pending_review_id", state.pendingReviewId},
        {"created_unix_ms", state.createdUnixMs},
        {"updated_unix_ms", state.updatedUnixMs},
        {"last_seq", state.lastSeq},
        {"last_event_kind", state.lastEventKind},
    };
    // Session ids come from callers and are not checked for UTF-8; replace rather than throw on the
    // writer thread.
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<core::SessionState> sessionStateFromJson(std::string_view text)
{
    const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object())
        return std::nullopt;
    core::SessionState state;
    readString(j, "id", state.id);
    readString(j, "agent", state.agent);
    readString(j, "goal", state.goal);
    readString(j, "model", state.model);
    readString(j, "playbook", state.playbook);
    readString(j, "tier", state.tier);
    readString(j, "tier_chooser", state.tierChooser);
    if (auto it = j.find("tags"); it != j.end() && it->is_array()) {
        for (const auto &tag : *it) {
            if (tag.is_string())
                state.tags.push_back(tag.get<std::string>());
        }
    }
    if (auto it = j.find("secrets"); it != j.end() && it->is_array()) {
        for (const auto &name : *it) {
            if (name.is_string())
                state.secrets.push_back(name.get<std::string>());
        }
    }
    if (auto it = j.find("approved_hosts"); it != j.end() && it->is_array()) {
        for (const auto &h : *it) {
            core::ApprovedHost host;
            if (h.is_object()) {
                readString(h, "host", host.host);
                readString(h, "review_id", host.reviewId);
            }
            if (!host.host.empty())
                state.approvedHosts.push_back(std::move(host));
        }
    }
    std::string status;
    readString(j, "status", status);
    if (auto parsed = core::statusFromName(status))
        state.status = *parsed;
    readString(j, "status_reason", state.statusReason);
    readString(j, "pool", state.pool);
    readString(j, "sandbox_id", state.sandboxId);
    readInt(j, "steps", state.steps);
    readInt(j, "cost_micros", state.costMicros);
    readInt(j, "model_cost_micros", state.modelCostMicros);
    readInt(j, "sandbox_cost_micros", state.sandboxCostMicros);
    readInt(j, "budget_micros", state.budgetMicros);
    readInt(j, "day_allowance_micros", state.dayAllowanceMicros);
    if (auto it = j.find("budget_warned"); it != j.end() && it->is_boolean())
        state.budgetWarned = it->get<bool>();
    readString(j, "submitted_by", state.submittedBy);
    readString(j, "pending_review_id", state.pendingReviewId);
    readInt(j, "created_unix_ms", state.createdUnixMs);
    readInt(j, "updated_unix_ms", state.updatedUnixMs);
    readInt(j, "last_seq", state.lastSeq);
    readString(j, "last_event_kind", state.lastEventKind);
    return state;
}

} // namespace paddock::store
