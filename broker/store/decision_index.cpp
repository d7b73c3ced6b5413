#include "broker/store/decision_index.h"

#include <nlohmann/json.hpp>

namespace paddock::store {

namespace {

using nlohmann::json;

class DecisionIndex final : public EventIndex {
public:
    bool indexes(std::string_view kind) const override
    {
        return kind == core::kind::EnvDecision || kind == core::kind::EnvOutcome;
    }

    void statements(const core::Event &event, std::vector<SqlStatement> &out) const override
    {
        const json payload = json::parse(event.payload, nullptr, /*allow_exceptions=*/false);
        if (!payload.is_object())
            return;   // the fold skips what it cannot read; so does the index
        auto text = [&](const char *key) {
            auto it = payload.find(key);
            return it != payload.end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        if (event.kind == core::kind::EnvDecision) {
            const std::string id = text("id"), verdict = text("verdict");
            if (id.empty())
                return;
            const std::string outcome = verdict == "granted" || verdict.empty() ? "" : verdict;
            out.push_back(sqlStatement(
                "INSERT INTO decisions(id, session_id, seq, agent, trigger, requested_tier, chosen_tier, chooser, "
                "rule, reason, who, verdict, alternatives, time_unix_ms, outcome) "
                "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) ON CONFLICT DO NOTHING",
                id, event.sessionId, event.seq, text("agent"), text("trigger"), text("requested_tier"),
                text("chosen_tier"), text("chooser"), text("rule"), text("reason"), text("who"), verdict,
                payload.value("alternatives", json::array()).dump(), event.timeUnixMs, outcome));
            return;
        }
        out.push_back(sqlStatement(
            "UPDATE decisions SET outcome = ?2, peak_memory_bytes = ?3, memory_limit_bytes = ?4, "
            "mean_cpu_fraction = ?5, throttled_fraction = ?6, fitting_tier = ?7, outcome_unix_ms = ?8 WHERE id = ?1",
            text("decision_id"), text("outcome"), payload.value("peak_memory_bytes", int64_t{0}),
            payload.value("memory_limit_bytes", int64_t{0}), payload.value("mean_cpu_fraction", 0.0),
            payload.value("throttled_fraction", 0.0), text("fitting_tier"), event.timeUnixMs));
    }
};

} // namespace

std::unique_ptr<EventIndex> makeDecisionIndex() { return std::make_unique<DecisionIndex>(); }

} // namespace paddock::store
