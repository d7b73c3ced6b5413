#include "broker/store/review_index.h"

#include "broker/store/sql_values.h"

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
    bool indexes(std::string_view kind) const override
    {
        return kind == core::kind::ApprovalRequested || kind == core::kind::ApprovalDecided
            || kind == core::kind::ApprovalFetched;
    }

    void statements(const core::Event &event, std::vector<SqlStatement> &out) const override
    {
        const json payload = json::parse(event.payload, nullptr, false);
        const std::string id = text(payload, "review_id");
        if (id.empty())
            return;   // not one of ours: the log keeps it, the queue does not list it
        if (event.kind == core::kind::ApprovalRequested) {
            // A request for an id already known replaces that item, at the end of the queue (a new
            // ord), as INSERT OR REPLACE did: delete, then insert, which both engines accept.
            out.push_back(sqlStatement("DELETE FROM review_items WHERE id = ?1", id));
            out.push_back(sqlStatement(
                "INSERT INTO review_items(id, session_id, seq, kind, state, risk, requester, agent, created_unix_ms, "
                "expires_unix_ms, change_hash, payload) VALUES(?1, ?2, ?3, ?4, 'pending', ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                id, event.sessionId, event.seq, text(payload, "kind"), text(payload, "risk"),
                text(payload, "requester"), text(payload, "agent"), event.timeUnixMs,
                integer(payload, "expires_unix_ms"), text(payload, "change_hash"), event.payload));
        } else if (event.kind == core::kind::ApprovalDecided) {
            const std::string reason = text(payload, "reason"), decider = text(payload, "decider");
            const bool approved = payload.value("approved", false);
            const std::string state = approved ? "approved" : reason == "expired" && decider.empty() ? "expired" : "rejected";
            out.push_back(sqlStatement(
                "UPDATE review_items SET state = ?2, decider = ?3, decision_reason = ?4, decided_unix_ms = ?5 "
                "WHERE id = ?1",
                id, state, decider.empty() ? SqlValue{} : SqlValue{decider}, reason, event.timeUnixMs));
        } else {
            out.push_back(sqlStatement("INSERT INTO review_fetches(review_id, principal, time_unix_ms) "
                                       "VALUES(?1, ?2, ?3) ON CONFLICT DO NOTHING",
                                       id, text(payload, "principal"), event.timeUnixMs));
        }
    }
};

constexpr const char *kColumns = "id, session_id, seq, kind, state, risk, requester, agent, created_unix_ms, "
                                 "expires_unix_ms, change_hash, coalesce(decider, ''), coalesce(decision_reason, ''), "
                                 "coalesce(decided_unix_ms, 0), payload, ord";

ReviewRow readRow(const SqlRow &r)
{
    ReviewRow row;
    row.id = textAt(r, 0);
    row.sessionId = textAt(r, 1);
    row.seq = intAt(r, 2);
    row.kind = textAt(r, 3);
    row.state = textAt(r, 4);
    row.risk = textAt(r, 5);
    row.requester = textAt(r, 6);
    row.agent = textAt(r, 7);
    row.createdUnixMs = intAt(r, 8);
    row.expiresUnixMs = intAt(r, 9);
    row.changeHash = textAt(r, 10);
    row.decider = textAt(r, 11);
    row.decisionReason = textAt(r, 12);
    row.decidedUnixMs = intAt(r, 13);
    row.payload = textAt(r, 14);
    row.ord = intAt(r, 15);
    return row;
}

} // namespace

std::unique_ptr<EventIndex> makeReviewIndex() { return std::make_unique<ReviewIndex>(); }

Result<std::unique_ptr<ReviewQueries>> ReviewQueries::open(EventStore &store)
{
    return std::unique_ptr<ReviewQueries>(new ReviewQueries(store));
}

Result<std::vector<ReviewRow>> ReviewQueries::rows(const std::string &sql, const std::vector<std::string> &texts)
{
    SqlStatement statement{sql, {}};
    for (const auto &text : texts)
        statement.params.emplace_back(text);
    auto found = m_store.query(statement);
    if (!found)
        return std::unexpected(found.error());
    std::vector<ReviewRow> out;
    out.reserve(found->size());
    for (const auto &row : *found)
        out.push_back(readRow(row));
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
    auto found = m_store.query(sqlStatement("SELECT 1 FROM review_fetches WHERE review_id = ?1 AND principal = ?2", id,
                                            principal));
    if (!found)
        return std::unexpected(found.error());
    return !found->empty();
}

Result<std::vector<ReviewRow>> ReviewQueries::duePending(int64_t nowUnixMs)
{
    return rows(std::string("SELECT ") + kColumns + " FROM review_items WHERE state = 'pending' AND expires_unix_ms > 0 "
                    "AND expires_unix_ms <= " + std::to_string(nowUnixMs) + " ORDER BY ord",
                {});
}

Result<std::vector<ApproverRow>> ReviewQueries::approvers()
{
    auto found = m_store.query({"SELECT decider, state, decided_unix_ms - created_unix_ms FROM review_items "
                                "WHERE decider IS NOT NULL ORDER BY decider, 3",
                                {}});
    if (!found)
        return std::unexpected(found.error());
    std::vector<ApproverRow> out;
    for (const auto &row : *found) {
        const std::string who = textAt(row, 0);
        if (out.empty() || out.back().principal != who)
            out.push_back(ApproverRow{who, 0, 0, {}});
        (textAt(row, 1) == "approved" ? out.back().approved : out.back().rejected)++;
        out.back().decideMs.push_back(intAt(row, 2));
    }
    return out;
}

Result<std::vector<std::pair<std::string, int64_t>>> ReviewQueries::pendingBudgetExtensions()
{
    auto found = m_store.query({"SELECT agent, count(*) FROM review_items WHERE state = 'pending' AND "
                                "kind = 'budget_extension' GROUP BY agent",
                                {}});
    if (!found)
        return std::unexpected(found.error());
    std::vector<std::pair<std::string, int64_t>> out;
    for (const auto &row : *found)
        out.emplace_back(textAt(row, 0), intAt(row, 1));
    return out;
}

} // namespace paddock::store
