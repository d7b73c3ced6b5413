#include "broker/store/state_json.h"

#include <nlohmann/json.hpp>

#include <variant>

namespace paddock::store {

namespace {

using core::SessionState;
using StringMember = std::string SessionState::*;
using IntMember = int64_t SessionState::*;

// The scalar fields, each named once for both directions. nlohmann::json keeps an object's keys
// sorted, so the order here changes nothing in the text.
struct ScalarField {
    const char *key;
    std::variant<StringMember, IntMember> member;
};
constexpr ScalarField kScalarFields[] = {
    {"id", &SessionState::id},
    {"agent", &SessionState::agent},
    {"goal", &SessionState::goal},
    {"model", &SessionState::model},
    {"playbook", &SessionState::playbook},
    {"tier", &SessionState::tier},
    {"tier_chooser", &SessionState::tierChooser},
    {"status_reason", &SessionState::statusReason},
    {"pool", &SessionState::pool},
    {"sandbox_id", &SessionState::sandboxId},
    {"steps", &SessionState::steps},
    {"cost_micros", &SessionState::costMicros},
    {"model_cost_micros", &SessionState::modelCostMicros},
    {"sandbox_cost_micros", &SessionState::sandboxCostMicros},
    {"budget_micros", &SessionState::budgetMicros},
    {"day_allowance_micros", &SessionState::dayAllowanceMicros},
    {"submitted_by", &SessionState::submittedBy},
    {"pending_review_id", &SessionState::pendingReviewId},
    {"created_unix_ms", &SessionState::createdUnixMs},
    {"updated_unix_ms", &SessionState::updatedUnixMs},
    {"last_seq", &SessionState::lastSeq},
    {"last_event_kind", &SessionState::lastEventKind},
};

// A missing key or a value of another type leaves `out` as it was.
void readValue(const nlohmann::json &j, const char *key, std::string &out)
{
    if (auto it = j.find(key); it != j.end() && it->is_string())
        out = it->get<std::string>();
}

void readValue(const nlohmann::json &j, const char *key, int64_t &out)
{
    if (auto it = j.find(key); it != j.end() && it->is_number_integer())
        out = it->get<int64_t>();
}

// The strings of an array; other elements are skipped.
void readStringList(const nlohmann::json &j, const char *key, std::vector<std::string> &out)
{
    if (auto it = j.find(key); it != j.end() && it->is_array()) {
        for (const auto &item : *it) {
            if (item.is_string())
                out.push_back(item.get<std::string>());
        }
    }
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
        {"tags", state.tags},
        {"secrets", state.secrets},
        {"approved_hosts", approvedHostsJson(state.approvedHosts)},
        {"status", core::statusName(state.status)},
        {"budget_warned", state.budgetWarned},
    };
    for (const auto &field : kScalarFields)
        std::visit([&](auto member) { j[field.key] = state.*member; }, field.member);
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
    for (const auto &field : kScalarFields)
        std::visit([&](auto member) { readValue(j, field.key, state.*member); }, field.member);
    readStringList(j, "tags", state.tags);
    readStringList(j, "secrets", state.secrets);
    if (auto it = j.find("approved_hosts"); it != j.end() && it->is_array()) {
        for (const auto &h : *it) {
            core::ApprovedHost host;
            if (h.is_object()) {
                readValue(h, "host", host.host);
                readValue(h, "review_id", host.reviewId);
            }
            if (!host.host.empty())
                state.approvedHosts.push_back(std::move(host));
        }
    }
    std::string status;
    readValue(j, "status", status);
    if (auto parsed = core::statusFromName(status))
        state.status = *parsed;
    if (auto it = j.find("budget_warned"); it != j.end() && it->is_boolean())
        state.budgetWarned = it->get<bool>();
    return state;
}

} // namespace paddock::store
