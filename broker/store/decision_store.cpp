#include "broker/store/decision_store.h"

#include "broker/store/event_index.h"
#include "broker/store/sql_values.h"

namespace paddock::store {

namespace {

constexpr const char *kColumns =
    "ord, id, session_id, seq, agent, trigger, requested_tier, chosen_tier, chooser, rule, reason, who, verdict, "
    "alternatives, time_unix_ms, outcome, peak_memory_bytes, memory_limit_bytes, mean_cpu_fraction, "
    "throttled_fraction, fitting_tier, outcome_unix_ms";

DecisionRecord readRow(const SqlRow &r)
{
    DecisionRecord d;
    d.id = textAt(r, 1);
    d.sessionId = textAt(r, 2);
    d.seq = intAt(r, 3);
    d.agent = textAt(r, 4);
    d.trigger = textAt(r, 5);
    d.requestedTier = textAt(r, 6);
    d.chosenTier = textAt(r, 7);
    d.chooser = textAt(r, 8);
    d.rule = textAt(r, 9);
    d.reason = textAt(r, 10);
    d.who = textAt(r, 11);
    d.verdict = textAt(r, 12);
    d.alternativesJson = textAt(r, 13);
    d.timeUnixMs = intAt(r, 14);
    d.outcome = textAt(r, 15);
    d.peakMemoryBytes = intAt(r, 16);
    d.memoryLimitBytes = intAt(r, 17);
    d.meanCpuFraction = realAt(r, 18);
    d.throttledFraction = realAt(r, 19);
    d.fittingTier = textAt(r, 20);
    d.outcomeUnixMs = intAt(r, 21);
    return d;
}

} // namespace

DecisionStore::DecisionStore(EventStore &store) : m_store(store) {}
DecisionStore::~DecisionStore() = default;

Result<std::unique_ptr<DecisionStore>> DecisionStore::open(EventStore &store)
{
    return std::unique_ptr<DecisionStore>(new DecisionStore(store));
}

Result<DecisionPage> DecisionStore::list(const DecisionQuery &query)
{
    int64_t beforeOrd = INT64_MAX;
    if (!query.pageToken.empty()) {
        try {
            size_t used = 0;
            beforeOrd = std::stoll(query.pageToken, &used);
            if (used != query.pageToken.size() || beforeOrd <= 0)
                throw std::invalid_argument("token");
        } catch (const std::exception &) {
            return fail(ErrorCode::InvalidArgument, "page token '" + query.pageToken + "' was not handed out by "
                            "ListDecisions: pass the next_page_token of the previous page, or none for the first");
        }
    }
    SqlStatement select{std::string("SELECT ") + kColumns + " FROM decisions WHERE ord < ?1", {}};
    select.params.emplace_back(beforeOrd);
    auto filter = [&](const std::string &value, const char *column) {
        if (value.empty())
            return;
        select.params.emplace_back(value == "pending" && std::string(column) == "outcome" ? std::string() : value);
        select.sql += std::string(" AND ") + column + " = ?" + std::to_string(select.params.size());
    };
    filter(query.sessionId, "session_id");
    filter(query.agent, "agent");
    filter(query.chooser, "chooser");
    filter(query.tier, "chosen_tier");
    filter(query.outcome, "outcome");
    select.params.emplace_back(int64_t{query.pageSize} + 1);
    select.sql += " ORDER BY ord DESC LIMIT ?" + std::to_string(select.params.size());
    auto rows = m_store.query(select);
    if (!rows)
        return std::unexpected(rows.error());
    DecisionPage page;
    std::vector<int64_t> ords;
    for (const auto &row : *rows) {
        ords.push_back(intAt(row, 0));
        page.decisions.push_back(readRow(row));
    }
    if (static_cast<int>(page.decisions.size()) > query.pageSize) {
        page.decisions.resize(static_cast<size_t>(query.pageSize));
        page.nextPageToken = std::to_string(ords[static_cast<size_t>(query.pageSize) - 1]);
    }
    return page;
}

Result<DecisionRecord> DecisionStore::get(const std::string &id)
{
    auto rows = m_store.query(sqlStatement(std::string("SELECT ") + kColumns + " FROM decisions WHERE id = ?1", id));
    if (!rows)
        return std::unexpected(rows.error());
    if (rows->empty())
        return fail(ErrorCode::NotFound, "no decision '" + id + "': `paddockctl decisions ls` lists them");
    return readRow(rows->front());
}

Result<std::vector<DecisionStatsLine>> DecisionStore::stats(const std::string &groupBy)
{
    const std::string by = groupBy.empty() ? "tier" : groupBy;
    const char *column = by == "tier" ? "chosen_tier" : by == "agent" ? "agent" : by == "chooser" ? "chooser" : nullptr;
    if (!column)
        return fail(ErrorCode::InvalidArgument, "cannot group decisions by '" + groupBy + "': use tier, agent or chooser");
    // CASE, not sum(outcome = ''): PostgreSQL does not sum booleans.
    auto count = [](const char *outcome) {
        return std::string(", sum(CASE WHEN outcome = '") + outcome + "' THEN 1 ELSE 0 END)";
    };
    const std::string sql = std::string("SELECT ") + column + ", count(*)" + count("") + count("ok") + count("oom")
        + count("timeout") + count("over_allocated") + count("under_allocated") + " FROM decisions GROUP BY 1 ORDER BY 1";
    auto rows = m_store.query({sql, {}});
    if (!rows)
        return std::unexpected(rows.error());
    std::vector<DecisionStatsLine> out;
    for (const auto &row : *rows) {
        DecisionStatsLine line;
        line.key = textAt(row, 0);
        line.total = intAt(row, 1);
        line.pending = intAt(row, 2);
        line.ok = intAt(row, 3);
        line.oom = intAt(row, 4);
        line.timeout = intAt(row, 5);
        line.overAllocated = intAt(row, 6);
        line.underAllocated = intAt(row, 7);
        out.push_back(std::move(line));
    }
    return out;
}

} // namespace paddock::store
