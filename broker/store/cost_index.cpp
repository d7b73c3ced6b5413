#include "broker/store/cost_index.h"

#include "broker/store/sql_values.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

namespace paddock::store {

namespace {

class CostIndex final : public EventIndex {
public:
    bool indexes(std::string_view kind) const override { return kind == core::kind::Cost; }

    void statements(const core::Event &event, std::vector<SqlStatement> &out) const override
    {
        const auto payload = nlohmann::json::parse(event.payload, nullptr, false);
        auto text = [&](const char *key) {
            return payload.is_object() && payload.contains(key) && payload[key].is_string()
                ? payload[key].get<std::string>() : std::string();
        };
        std::string kind = text("kind");
        if (kind.empty())
            kind = "other";
        // An event is appended once, so the key never repeats; the upsert only keeps a replayed
        // index from failing the append.
        out.push_back(sqlStatement(
            "INSERT INTO cost_entries(session_id, seq, time_unix_ms, agent, tier, model, kind, cost_micros) "
            "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(session_id, seq) DO UPDATE SET "
            "time_unix_ms = excluded.time_unix_ms, agent = excluded.agent, tier = excluded.tier, "
            "model = excluded.model, kind = excluded.kind, cost_micros = excluded.cost_micros",
            event.sessionId, event.seq, event.timeUnixMs, text("agent"), text("tier"), text("model"), std::move(kind),
            event.costMicros));
    }
};

} // namespace

std::unique_ptr<EventIndex> makeCostIndex() { return std::make_unique<CostIndex>(); }

Result<std::unique_ptr<CostQueries>> CostQueries::open(EventStore &store)
{
    return std::unique_ptr<CostQueries>(new CostQueries(store));
}

namespace {

constexpr int64_t kDayMs = 86'400'000;

// "YYYY-MM-DD" of a UTC day number (days since 1970-01-01), without the C library's time zone state.
std::string dayName(int64_t day)
{
    // Howard Hinnant's civil_from_days.
    const int64_t z = day + 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const int64_t doe = z - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    const int64_t d = doy - (153 * mp + 2) / 5 + 1;
    const int64_t m = mp < 10 ? mp + 3 : mp - 9;
    const int64_t y = yoe + era * 400 + (m <= 2 ? 1 : 0);
    char out[64];
    std::snprintf(out, sizeof out, "%04lld-%02lld-%02lld", static_cast<long long>(y), static_cast<long long>(m),
                  static_cast<long long>(d));
    return out;
}

} // namespace

Result<CostSums> CostQueries::sums(const CostQuery &query)
{
    // UTC days group by their number, named after the query: the same SQL on both backends.
    static const std::map<std::string, std::string> kKeys = {
        {"session", "session_id"}, {"agent", "agent"}, {"tier", "tier"}, {"model", "model"}, {"kind", "kind"},
        {"day", "time_unix_ms / " + std::to_string(kDayMs)},
    };
    const std::string groupBy = query.groupBy.empty() ? std::string("session") : query.groupBy;
    auto key = kKeys.find(groupBy);
    if (key == kKeys.end())
        return fail(ErrorCode::InvalidArgument, "cannot group costs by '" + query.groupBy
                        + "': use session, agent, tier, model, day or kind");
    if (query.bucketMs < 0)
        return fail(ErrorCode::InvalidArgument, "bucket_ms must be 0 (no buckets) or positive, not "
                        + std::to_string(query.bucketMs));
    const std::string bucket = query.bucketMs > 0
        ? "(time_unix_ms / " + std::to_string(query.bucketMs) + ") * " + std::to_string(query.bucketMs) : "0";
    SqlStatement select{"SELECT " + key->second + ", " + bucket + " AS b, sum(cost_micros) FROM cost_entries WHERE 1 = 1",
                        {}};
    if (!query.sessionId.empty()) {
        select.params.emplace_back(query.sessionId);
        select.sql += " AND session_id = ?" + std::to_string(select.params.size());
    }
    if (!query.agent.empty()) {
        select.params.emplace_back(query.agent);
        select.sql += " AND agent = ?" + std::to_string(select.params.size());
    }
    if (query.fromUnixMs > 0)
        select.sql += " AND time_unix_ms >= " + std::to_string(query.fromUnixMs);
    if (query.toUnixMs > 0)
        select.sql += " AND time_unix_ms < " + std::to_string(query.toUnixMs);
    select.sql += " GROUP BY 1, 2 ORDER BY 2, 3 DESC, 1";
    auto rows = m_store.query(select);
    if (!rows)
        return std::unexpected(rows.error());
    CostSums out;
    for (const auto &row : *rows) {
        CostSumLine line{groupBy == "day" ? dayName(intAt(row, 0)) : textAt(row, 0), intAt(row, 2), intAt(row, 1)};
        out.totalMicros += line.costMicros;
        out.lines.push_back(std::move(line));
    }
    return out;
}

Result<std::map<std::string, int64_t>> CostQueries::spentByAgentSince(int64_t sinceUnixMs)
{
    auto rows = m_store.query(
        sqlStatement("SELECT agent, sum(cost_micros) FROM cost_entries WHERE time_unix_ms >= ?1 GROUP BY agent", sinceUnixMs));
    if (!rows)
        return std::unexpected(rows.error());
    std::map<std::string, int64_t> out;
    for (const auto &row : *rows)
        out[textAt(row, 0)] = intAt(row, 1);
    return out;
}

} // namespace paddock::store
