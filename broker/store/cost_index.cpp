#include "broker/store/cost_index.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace paddock::store {

namespace {

class CostIndex final : public EventIndex {
public:
    Status prepare(sqlite::Database &db)
    {
        m_db = &db;
        auto stmt = db.prepare("INSERT OR REPLACE INTO cost_entries(session_id, seq, time_unix_ms, agent, tier, model, "
                               "kind, cost_micros) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
        if (!stmt)
            return std::unexpected(stmt.error());
        m_insert = std::move(*stmt);
        return {};
    }

    bool indexes(std::string_view kind) const override { return kind == core::kind::Cost; }

    int write(const core::Event &event) override
    {
        const auto payload = nlohmann::json::parse(event.payload, nullptr, false);
        auto text = [&](const char *key) {
            return payload.is_object() && payload.contains(key) && payload[key].is_string()
                ? payload[key].get<std::string>() : std::string();
        };
        const std::string agent = text("agent"), tier = text("tier"), model = text("model");
        std::string kind = text("kind");
        if (kind.empty())
            kind = "other";
        sqlite::ResetGuard guard(m_insert);
        m_insert.bind(1, event.sessionId);
        m_insert.bind(2, event.seq);
        m_insert.bind(3, event.timeUnixMs);
        m_insert.bind(4, agent);
        m_insert.bind(5, tier);
        m_insert.bind(6, model);
        m_insert.bind(7, kind);
        m_insert.bind(8, event.costMicros);
        return m_insert.step();
    }

private:
    sqlite::Database *m_db = nullptr;
    sqlite::Statement m_insert;
};

} // namespace

Result<std::unique_ptr<EventIndex>> makeCostIndex(sqlite::Database &writer)
{
    auto index = std::make_unique<CostIndex>();
    if (auto prepared = index->prepare(writer); !prepared)
        return std::unexpected(prepared.error());
    return std::unique_ptr<EventIndex>(std::move(index));
}

Result<std::unique_ptr<CostQueries>> CostQueries::open(const std::filesystem::path &dbPath)
{
    auto db = sqlite::Database::open(dbPath, /*readOnly=*/true);
    if (!db)
        return std::unexpected(db.error());
    sqlite3_busy_timeout(db->get(), 5000);
    return std::unique_ptr<CostQueries>(new CostQueries(std::move(*db)));
}

Result<CostSums> CostQueries::sums(const CostQuery &query)
{
    static const std::map<std::string, std::string> kKeys = {
        {"session", "session_id"}, {"agent", "agent"}, {"tier", "tier"}, {"model", "model"}, {"kind", "kind"},
        // UTC days, as "YYYY-MM-DD"
        {"day", "strftime('%Y-%m-%d', time_unix_ms / 1000, 'unixepoch')"},
    };
    auto key = kKeys.find(query.groupBy.empty() ? std::string("session") : query.groupBy);
    if (key == kKeys.end())
        return fail(ErrorCode::InvalidArgument, "cannot group costs by '" + query.groupBy
                        + "': use session, agent, tier, model, day or kind");
    if (query.bucketMs < 0)
        return fail(ErrorCode::InvalidArgument, "bucket_ms must be 0 (no buckets) or positive, not "
                        + std::to_string(query.bucketMs));
    const std::string bucket = query.bucketMs > 0
        ? "(time_unix_ms / " + std::to_string(query.bucketMs) + ") * " + std::to_string(query.bucketMs) : "0";
    std::string sql = "SELECT " + key->second + ", " + bucket + " AS b, sum(cost_micros) FROM cost_entries WHERE 1";
    std::vector<std::string> texts;
    if (!query.sessionId.empty()) {
        sql += " AND session_id = ?";
        texts.push_back(query.sessionId);
    }
    if (!query.agent.empty()) {
        sql += " AND agent = ?";
        texts.push_back(query.agent);
    }
    if (query.fromUnixMs > 0)
        sql += " AND time_unix_ms >= " + std::to_string(query.fromUnixMs);
    if (query.toUnixMs > 0)
        sql += " AND time_unix_ms < " + std::to_string(query.toUnixMs);
    sql += " GROUP BY 1, 2 ORDER BY 2, 3 DESC, 1";

    std::lock_guard lock(m_mutex);
    auto stmt = m_db.prepare(sql, false);
    if (!stmt)
        return std::unexpected(stmt.error());
    int index = 1;
    for (const auto &text : texts)
        stmt->bind(index++, text);
    CostSums out;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
        CostSumLine line{stmt->columnText(0), stmt->columnInt(2), stmt->columnInt(1)};
        out.totalMicros += line.costMicros;
        out.lines.push_back(std::move(line));
    }
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Unavailable, m_db.describe("summing costs", rc));
    return out;
}

Result<std::map<std::string, int64_t>> CostQueries::spentByAgentSince(int64_t sinceUnixMs)
{
    std::lock_guard lock(m_mutex);
    auto stmt = m_db.prepare("SELECT agent, sum(cost_micros) FROM cost_entries WHERE time_unix_ms >= ?1 GROUP BY agent",
                             false);
    if (!stmt)
        return std::unexpected(stmt.error());
    stmt->bind(1, sinceUnixMs);
    std::map<std::string, int64_t> out;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW)
        out[stmt->columnText(0)] = stmt->columnInt(1);
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Unavailable, m_db.describe("summing costs per agent", rc));
    return out;
}

} // namespace paddock::store
