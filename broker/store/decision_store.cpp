#include "broker/store/decision_store.h"

#include "broker/store/sqlite_handle.h"

namespace paddock::store {

namespace {

constexpr int kBusyTimeoutMs = 5000;
constexpr const char *kColumns =
    "ord, id, session_id, seq, agent, trigger, requested_tier, chosen_tier, chooser, rule, reason, who, verdict, "
    "alternatives, time_unix_ms, outcome, peak_memory_bytes, memory_limit_bytes, mean_cpu_fraction, "
    "throttled_fraction, fitting_tier, outcome_unix_ms";

DecisionRecord readRow(const sqlite::Statement &stmt)
{
    DecisionRecord d;
    d.id = stmt.columnText(1);
    d.sessionId = stmt.columnText(2);
    d.seq = stmt.columnInt(3);
    d.agent = stmt.columnText(4);
    d.trigger = stmt.columnText(5);
    d.requestedTier = stmt.columnText(6);
    d.chosenTier = stmt.columnText(7);
    d.chooser = stmt.columnText(8);
    d.rule = stmt.columnText(9);
    d.reason = stmt.columnText(10);
    d.who = stmt.columnText(11);
    d.verdict = stmt.columnText(12);
    d.alternativesJson = stmt.columnText(13);
    d.timeUnixMs = stmt.columnInt(14);
    d.outcome = stmt.columnText(15);
    d.peakMemoryBytes = stmt.columnInt(16);
    d.memoryLimitBytes = stmt.columnInt(17);
    d.meanCpuFraction = sqlite3_column_double(stmt.get(), 18);
    d.throttledFraction = sqlite3_column_double(stmt.get(), 19);
    d.fittingTier = stmt.columnText(20);
    d.outcomeUnixMs = stmt.columnInt(21);
    return d;
}

} // namespace

DecisionStore::DecisionStore(std::unique_ptr<sqlite::Database> db) : m_db(std::move(db)) {}
DecisionStore::~DecisionStore() = default;

Result<std::unique_ptr<DecisionStore>> DecisionStore::open(const std::filesystem::path &path)
{
    auto db = sqlite::Database::open(path, /*readOnly=*/true);
    if (!db)
        return std::unexpected(db.error());
    sqlite3_busy_timeout(db->get(), kBusyTimeoutMs);
    return std::unique_ptr<DecisionStore>(new DecisionStore(std::make_unique<sqlite::Database>(std::move(*db))));
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
    std::string sql = std::string("SELECT ") + kColumns + " FROM decisions WHERE ord < ?1";
    std::vector<std::string> binds;
    auto filter = [&](const std::string &value, const char *column) {
        if (value.empty())
            return;
        binds.push_back(value == "pending" && std::string(column) == "outcome" ? std::string() : value);
        sql += std::string(" AND ") + column + " = ?" + std::to_string(binds.size() + 1);
    };
    filter(query.sessionId, "session_id");
    filter(query.agent, "agent");
    filter(query.chooser, "chooser");
    filter(query.tier, "chosen_tier");
    filter(query.outcome, "outcome");
    sql += " ORDER BY ord DESC LIMIT ?" + std::to_string(binds.size() + 2);
    std::lock_guard lock(m_mutex);
    auto stmt = m_db->prepare(sql, false);
    if (!stmt)
        return std::unexpected(stmt.error());
    stmt->bind(1, beforeOrd);
    for (size_t i = 0; i < binds.size(); ++i)
        stmt->bind(static_cast<int>(i) + 2, binds[i]);
    stmt->bind(static_cast<int>(binds.size()) + 2, int64_t{query.pageSize} + 1);
    DecisionPage page;
    std::vector<int64_t> ords;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
        ords.push_back(stmt->columnInt(0));
        page.decisions.push_back(readRow(*stmt));
    }
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Unavailable, m_db->describe("listing decisions", rc));
    if (static_cast<int>(page.decisions.size()) > query.pageSize) {
        page.decisions.resize(static_cast<size_t>(query.pageSize));
        page.nextPageToken = std::to_string(ords[static_cast<size_t>(query.pageSize) - 1]);
    }
    return page;
}

Result<DecisionRecord> DecisionStore::get(const std::string &id)
{
    std::lock_guard lock(m_mutex);
    auto stmt = m_db->prepare(std::string("SELECT ") + kColumns + " FROM decisions WHERE id = ?1", false);
    if (!stmt)
        return std::unexpected(stmt.error());
    stmt->bind(1, id);
    const int rc = stmt->step();
    if (rc == SQLITE_ROW)
        return readRow(*stmt);
    if (rc == SQLITE_DONE)
        return fail(ErrorCode::NotFound, "no decision '" + id + "': `paddockctl decisions ls` lists them");
    return fail(ErrorCode::Unavailable, m_db->describe("reading decision " + id, rc));
}

Result<std::vector<DecisionStatsLine>> DecisionStore::stats(const std::string &groupBy)
{
    const std::string by = groupBy.empty() ? "tier" : groupBy;
    const char *column = by == "tier" ? "chosen_tier" : by == "agent" ? "agent" : by == "chooser" ? "chooser" : nullptr;
    if (!column)
        return fail(ErrorCode::InvalidArgument, "cannot group decisions by '" + groupBy + "': use tier, agent or chooser");
    const std::string sql = std::string("SELECT ") + column + ", count(*), "
        "sum(outcome = ''), sum(outcome = 'ok'), sum(outcome = 'oom'), sum(outcome = 'timeout'), "
        "sum(outcome = 'over_allocated'), sum(outcome = 'under_allocated') FROM decisions GROUP BY 1 ORDER BY 1";
    std::lock_guard lock(m_mutex);
    auto stmt = m_db->prepare(sql, false);
    if (!stmt)
        return std::unexpected(stmt.error());
    std::vector<DecisionStatsLine> out;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
        DecisionStatsLine line;
        line.key = stmt->columnText(0);
        line.total = stmt->columnInt(1);
        line.pending = stmt->columnInt(2);
        line.ok = stmt->columnInt(3);
        line.oom = stmt->columnInt(4);
        line.timeout = stmt->columnInt(5);
        line.overAllocated = stmt->columnInt(6);
        line.underAllocated = stmt->columnInt(7);
        out.push_back(std::move(line));
    }
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Unavailable, m_db->describe("counting decisions", rc));
    return out;
}

} // namespace paddock::store
