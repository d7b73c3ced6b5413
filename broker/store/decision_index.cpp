#include "broker/store/decision_index.h"

#include <nlohmann/json.hpp>

namespace paddock::store {

namespace {

using nlohmann::json;

class DecisionIndex final : public EventIndex {
public:
    sqlite::Statement insert, outcome;

    bool indexes(std::string_view kind) const override
    {
        return kind == core::kind::EnvDecision || kind == core::kind::EnvOutcome;
    }

    int write(const core::Event &event) override
    {
        const json payload = json::parse(event.payload, nullptr, /*allow_exceptions=*/false);
        if (!payload.is_object())
            return SQLITE_DONE;   // the fold skips what it cannot read; so does the index
        auto text = [&](const char *key) {
            auto it = payload.find(key);
            return it != payload.end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        if (event.kind == core::kind::EnvDecision) {
            // Bound texts must outlive the step: keep them here.
            const std::string fields[] = {text("id"), text("agent"), text("trigger"), text("requested_tier"),
                                          text("chosen_tier"), text("chooser"), text("rule"), text("reason"),
                                          text("who"), text("verdict")};
            const std::string alternatives = payload.value("alternatives", json::array()).dump();
            const std::string outcomeText = fields[9] == "granted" || fields[9].empty() ? "" : fields[9];
            if (fields[0].empty())
                return SQLITE_DONE;
            sqlite::ResetGuard guard(insert);
            insert.bind(1, fields[0]);
            insert.bind(2, event.sessionId);
            insert.bind(3, event.seq);
            for (int i = 1; i < 10; ++i)
                insert.bind(3 + i, fields[i]);
            insert.bind(13, alternatives);
            insert.bind(14, event.timeUnixMs);
            insert.bind(15, outcomeText);
            const int rc = insert.step();
            return rc == SQLITE_ROW ? SQLITE_DONE : rc;
        }
        const std::string id = text("decision_id");
        const std::string result = text("outcome");
        const std::string fitting = text("fitting_tier");
        sqlite::ResetGuard guard(outcome);
        outcome.bind(1, id);
        outcome.bind(2, result);
        outcome.bind(3, payload.value("peak_memory_bytes", int64_t{0}));
        outcome.bind(4, payload.value("memory_limit_bytes", int64_t{0}));
        sqlite3_bind_double(outcome.get(), 5, payload.value("mean_cpu_fraction", 0.0));
        sqlite3_bind_double(outcome.get(), 6, payload.value("throttled_fraction", 0.0));
        outcome.bind(7, fitting);
        outcome.bind(8, event.timeUnixMs);
        const int rc = outcome.step();
        return rc == SQLITE_ROW ? SQLITE_DONE : rc;
    }
};

} // namespace

Result<std::unique_ptr<EventIndex>> makeDecisionIndex(sqlite::Database &writer)
{
    auto index = std::make_unique<DecisionIndex>();
    auto insert = writer.prepare(
        "INSERT OR IGNORE INTO decisions(id, session_id, seq, agent, trigger, requested_tier, chosen_tier, chooser, "
        "rule, reason, who, verdict, alternatives, time_unix_ms, outcome) "
        "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
    if (!insert)
        return std::unexpected(insert.error());
    auto outcome = writer.prepare(
        "UPDATE decisions SET outcome = ?2, peak_memory_bytes = ?3, memory_limit_bytes = ?4, mean_cpu_fraction = ?5, "
        "throttled_fraction = ?6, fitting_tier = ?7, outcome_unix_ms = ?8 WHERE id = ?1");
    if (!outcome)
        return std::unexpected(outcome.error());
    index->insert = std::move(*insert);
    index->outcome = std::move(*outcome);
    return std::unique_ptr<EventIndex>(std::move(index));
}

} // namespace paddock::store
