#include "broker/store/review_index.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace paddock::store {

namespace {

using nlohmann::json;

std::string text(const json &j, const char *key)
{
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

int64_t integer(const json &j, const char *key)
{
    return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : 0;
}

class ReviewIndex final : public EventIndex {
public:
    Status prepare(sqlite::Database &db)
    {
        m_db = &db;
        struct Item {
            sqlite::Statement *stmt;
            const char *sql;
        };
        const Item items[] = {
            {&m_insert, "INSERT OR REPLACE INTO review_items(id, session_id, seq, kind, state, risk, requester, agent, "
                        "created_unix_ms, expires_unix_ms, change_hash, payload) "
                        "VALUES(?1, ?2, ?3, ?4, 'pending', ?5, ?6, ?7, ?8, ?9, ?10, ?11)"},
            {&m_decide, "UPDATE review_items SET state = ?2, decider = ?3, decision_reason = ?4, decided_unix_ms = ?5 "
                        "WHERE id = ?1"},
            {&m_fetch, "INSERT OR IGNORE INTO review_fetches(review_id, principal, time_unix_ms) VALUES(?1, ?2, ?3)"},
        };
        for (const auto &item : items) {
            auto stmt = db.prepare(item.sql);
            if (!stmt)
                return std::unexpected(stmt.error());
            *item.stmt = std::move(*stmt);
        }
        return {};
    }

    bool indexes(std::string_view kind) const override
    {
        return kind == core::kind::ApprovalRequested || kind == core::kind::ApprovalDecided
            || kind == core::kind::ApprovalFetched;
    }

    int write(const core::Event &event) override
    {
        const bool requested = event.kind == core::kind::ApprovalRequested;
        const bool decided = event.kind == core::kind::ApprovalDecided;
        const json payload = json::parse(event.payload, nullptr, false);
        const std::string id = text(payload, "review_id");
        if (id.empty())
            return SQLITE_DONE;   // not one of ours: the log keeps it, the queue does not list it
        int rc;
        if (requested) {
            const std::string kind = text(payload, "kind"), risk = text(payload, "risk"),
                              requester = text(payload, "requester"), agent = text(payload, "agent"),
                              hash = text(payload, "change_hash");
            sqlite::ResetGuard guard(m_insert);
            m_insert.bind(1, id);
            m_insert.bind(2, event.sessionId);
            m_insert.bind(3, event.seq);
            m_insert.bind(4, kind);
            m_insert.bind(5, risk);
            m_insert.bind(6, requester);
            m_insert.bind(7, agent);
            m_insert.bind(8, event.timeUnixMs);
            m_insert.bind(9, integer(payload, "expires_unix_ms"));
            m_insert.bind(10, hash);
            m_insert.bind(11, event.payload);
            rc = m_insert.step();
        } else if (decided) {
            const std::string reason = text(payload, "reason"), decider = text(payload, "decider");
            const bool approved = payload.value("approved", false);
            const std::string state = approved ? "approved" : reason == "expired" && decider.empty() ? "expired" : "rejected";
            sqlite::ResetGuard guard(m_decide);
            m_decide.bind(1, id);
            m_decide.bind(2, state);
            if (decider.empty())
                m_decide.bindNull(3);
            else
                m_decide.bind(3, decider);
            m_decide.bind(4, reason);
            m_decide.bind(5, event.timeUnixMs);
            rc = m_decide.step();
        } else {
            const std::string principal = text(payload, "principal");
            sqlite::ResetGuard guard(m_fetch);
            m_fetch.bind(1, id);
            m_fetch.bind(2, principal);
            m_fetch.bind(3, event.timeUnixMs);
            rc = m_fetch.step();
        }
        return rc;
    }

private:
    sqlite::Database *m_db = nullptr;
    sqlite::Statement m_insert, m_decide, m_fetch;
};

constexpr const char *kColumns = "id, session_id, seq, kind, state, risk, requester, agent, created_unix_ms, "
                                 "expires_unix_ms, change_hash, ifnull(decider, ''), ifnull(decision_reason, ''), "
                                 "ifnull(decided_unix_ms, 0), payload, ord";

ReviewRow readRow(sqlite::Statement &stmt)
{
    ReviewRow row;
    row.id = stmt.columnText(0);
    row.sessionId = stmt.columnText(1);
    row.seq = stmt.columnInt(2);
    row.kind = stmt.columnText(3);
    row.state = stmt.columnText(4);
    row.risk = stmt.columnText(5);
    row.requester = stmt.columnText(6);
    row.agent = stmt.columnText(7);
    row.createdUnixMs = stmt.columnInt(8);
    row.expiresUnixMs = stmt.columnInt(9);
    row.changeHash = stmt.columnText(10);
    row.decider = stmt.columnText(11);
    row.decisionReason = stmt.columnText(12);
    row.decidedUnixMs = stmt.columnInt(13);
    row.payload = stmt.columnText(14);
    row.ord = stmt.columnInt(15);
    return row;
}

} // namespace

Result<std::unique_ptr<EventIndex>> makeReviewIndex(sqlite::Database &writer)
{
    auto index = std::make_unique<ReviewIndex>();
    if (auto prepared = index->prepare(writer); !prepared)
        return std::unexpected(prepared.error());
    return std::unique_ptr<EventIndex>(std::move(index));
}

Result<std::unique_ptr<ReviewQueries>> ReviewQueries::open(const std::filesystem::path &dbPath)
{
    auto db = sqlite::Database::open(dbPath, /*readOnly=*/true);
    if (!db)
        return std::unexpected(db.error());
    sqlite3_busy_timeout(db->get(), 5000);
    return std::unique_ptr<ReviewQueries>(new ReviewQueries(std::move(*db)));
}

Result<std::vector<ReviewRow>> ReviewQueries::rows(const std::string &sql, const std::vector<std::string> &texts)
{
    std::lock_guard lock(m_mutex);
    auto stmt = m_db.prepare(sql, false);
    if (!stmt)
        return std::unexpected(stmt.error());
    int index = 1;
    for (const auto &t : texts)
        stmt->bind(index++, t);
    std::vector<ReviewRow> out;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW)
        out.push_back(readRow(*stmt));
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Unavailable, m_db.describe("reading review items", rc));
    return out;
}

Result<ReviewPage> ReviewQueries::list(const ReviewListQuery &query)
{
    const int pageSize = std::clamp(query.pageSize <= 0 ? 100 : query.pageSize, 1, 1000);
    int64_t after = 0;
    if (!query.pageToken.empty()) {
        try {
            after = std::stoll(query.pageToken);
        } catch (const std::exception &) {
            return fail(ErrorCode::InvalidArgument, "the page token is not one this broker issued; list again without it");
        }
    }
    static const std::vector<std::string> kStates = {"pending", "approved", "rejected", "expired", "all"};
    const std::string state = query.state.empty() ? "pending" : query.state;
    if (std::find(kStates.begin(), kStates.end(), state) == kStates.end())
        return fail(ErrorCode::InvalidArgument, "unknown review state '" + state
                        + "': use pending, approved, rejected, expired or all");
    std::string sql = std::string("SELECT ") + kColumns + " FROM review_items WHERE ord > " + std::to_string(after);
    std::vector<std::string> texts;
    if (state != "all") {
        sql += " AND state = ?";
        texts.push_back(state);
    }
    if (!query.kind.empty()) {
        sql += " AND kind = ?";
        texts.push_back(query.kind);
    }
    if (!query.sessionId.empty()) {
        sql += " AND session_id = ?";
        texts.push_back(query.sessionId);
    }
    sql += " ORDER BY ord LIMIT " + std::to_string(pageSize + 1);
    auto found = rows(sql, texts);
    if (!found)
        return std::unexpected(found.error());
    ReviewPage page;
    page.items = std::move(*found);
    if (static_cast<int>(page.items.size()) > pageSize) {
        page.items.pop_back();
        page.nextPageToken = std::to_string(page.items.back().ord);
    }
    return page;
}

Result<ReviewRow> ReviewQueries::get(const std::string &id)
{
    auto found = rows(std::string("SELECT ") + kColumns + " FROM review_items WHERE id = ?", {id});
    if (!found)
        return std::unexpected(found.error());
    if (found->empty())
        return fail(ErrorCode::NotFound, "no review item '" + id + "': `paddockctl reviews ls` lists the pending ones");
    return std::move(found->front());
}

Result<bool> ReviewQueries::fetched(const std::string &id, const std::string &principal)
{
    std::lock_guard lock(m_mutex);
    auto stmt = m_db.prepare("SELECT 1 FROM review_fetches WHERE review_id = ?1 AND principal = ?2", false);
    if (!stmt)
        return std::unexpected(stmt.error());
    stmt->bind(1, id);
    stmt->bind(2, principal);
    const int rc = stmt->step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return fail(ErrorCode::Unavailable, m_db.describe("reading review fetches", rc));
    return rc == SQLITE_ROW;
}

Result<std::vector<ReviewRow>> ReviewQueries::duePending(int64_t nowUnixMs)
{
    return rows(std::string("SELECT ") + kColumns + " FROM review_items WHERE state = 'pending' AND expires_unix_ms > 0 "
                    "AND expires_unix_ms <= " + std::to_string(nowUnixMs) + " ORDER BY ord",
                {});
}

Result<std::vector<ApproverRow>> ReviewQueries::approvers()
{
    std::lock_guard lock(m_mutex);
    auto stmt = m_db.prepare("SELECT decider, state, decided_unix_ms - created_unix_ms FROM review_items "
                             "WHERE decider IS NOT NULL ORDER BY decider, 3",
                             false);
    if (!stmt)
        return std::unexpected(stmt.error());
    std::vector<ApproverRow> out;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW) {
        const std::string who = stmt->columnText(0);
        if (out.empty() || out.back().principal != who)
            out.push_back(ApproverRow{who, 0, 0, {}});
        (stmt->columnText(1) == "approved" ? out.back().approved : out.back().rejected)++;
        out.back().decideMs.push_back(stmt->columnInt(2));
    }
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Unavailable, m_db.describe("reading approver stats", rc));
    return out;
}

Result<std::vector<std::pair<std::string, int64_t>>> ReviewQueries::pendingBudgetExtensions()
{
    std::lock_guard lock(m_mutex);
    auto stmt = m_db.prepare("SELECT agent, count(*) FROM review_items WHERE state = 'pending' AND "
                             "kind = 'budget_extension' GROUP BY agent",
                             false);
    if (!stmt)
        return std::unexpected(stmt.error());
    std::vector<std::pair<std::string, int64_t>> out;
    int rc;
    while ((rc = stmt->step()) == SQLITE_ROW)
        out.emplace_back(stmt->columnText(0), stmt->columnInt(1));
    if (rc != SQLITE_DONE)
        return fail(ErrorCode::Unavailable, m_db.describe("counting budget extensions", rc));
    return out;
}

} // namespace paddock::store
