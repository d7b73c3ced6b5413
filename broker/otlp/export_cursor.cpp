#include "broker/otlp/export_cursor.h"

namespace paddock::otlp {

namespace {

int64_t integerAt(const store::SqlRow &row, size_t i)
{
    if (i < row.size()) {
        if (const auto *v = std::get_if<int64_t>(&row[i]))
            return *v;
        if (const auto *d = std::get_if<double>(&row[i]))
            return static_cast<int64_t>(*d);
    }
    return 0;
}

std::string textAt(const store::SqlRow &row, size_t i)
{
    if (i < row.size()) {
        if (const auto *v = std::get_if<std::string>(&row[i]))
            return *v;
    }
    return {};
}

constexpr const char *kCandidatesSql =
    "SELECT s.ord, s.id, s.last_seq FROM sessions s LEFT JOIN otlp_export c ON c.session_id = s.id "
    "WHERE s.ord > ?1 AND (c.session_id IS NULL OR ((c.span_seq < s.last_seq OR c.metric_seq < s.last_seq) "
    "AND (c.owner = ?2 OR c.owner = '' OR c.lease_until_ms < ?3))) ORDER BY s.ord LIMIT ?4";

constexpr const char *kRenewSql = "UPDATE otlp_export SET lease_until_ms = ?1 WHERE owner = ?2";

constexpr const char *kClaimSql =
    "INSERT INTO otlp_export(session_id, owner, lease_until_ms, updated_unix_ms) VALUES(?1, ?2, ?3, ?4) "
    "ON CONFLICT(session_id) DO UPDATE SET owner = excluded.owner, lease_until_ms = excluded.lease_until_ms "
    "WHERE otlp_export.owner = excluded.owner OR otlp_export.owner = '' OR otlp_export.lease_until_ms < ?4";

constexpr const char *kClaimAnySql =
    "INSERT INTO otlp_export(session_id, owner, lease_until_ms, updated_unix_ms) VALUES(?1, ?2, ?3, ?4) "
    "ON CONFLICT(session_id) DO UPDATE SET owner = excluded.owner, lease_until_ms = excluded.lease_until_ms";

constexpr const char *kOwnedSql =
    "SELECT c.session_id, c.span_seq, c.metric_seq, s.last_seq FROM otlp_export c JOIN sessions s ON s.id = c.session_id "
    "WHERE c.owner = ?1";

constexpr const char *kAdvanceSql =
    "UPDATE otlp_export SET span_seq = ?1, metric_seq = ?2, updated_unix_ms = ?3 "
    "WHERE session_id = ?4 AND owner = ?5 AND span_seq = ?6 AND metric_seq = ?7";

constexpr const char *kAdvanceAndReleaseSql =
    "UPDATE otlp_export SET span_seq = ?1, metric_seq = ?2, updated_unix_ms = ?3, owner = '', lease_until_ms = 0 "
    "WHERE session_id = ?4 AND owner = ?5 AND span_seq = ?6 AND metric_seq = ?7";

constexpr const char *kRowSql = "SELECT span_seq, metric_seq, owner FROM otlp_export WHERE session_id = ?1";

constexpr const char *kReleaseAllSql = "UPDATE otlp_export SET owner = '', lease_until_ms = 0 WHERE owner = ?1";

} // namespace

Result<std::vector<Candidate>> exportCandidates(store::EventStore &store, const std::string &owner, int64_t afterOrd,
                                                int64_t nowMs, int limit)
{
    auto rows = store.query({kCandidatesSql, {afterOrd, owner, nowMs, int64_t{limit}}});
    if (!rows)
        return std::unexpected(rows.error());
    std::vector<Candidate> out;
    out.reserve(rows->size());
    for (const auto &row : *rows)
        out.push_back({integerAt(row, 0), textAt(row, 1), integerAt(row, 2)});
    return out;
}

store::SqlStatement renewStatement(const std::string &owner, int64_t leaseUntilMs)
{
    return {kRenewSql, {leaseUntilMs, owner}};
}

std::vector<store::SqlStatement> claimStatements(const std::string &owner, const std::vector<std::string> &sessionIds,
                                                 int64_t nowMs, int64_t leaseUntilMs, bool takeAny)
{
    std::vector<store::SqlStatement> out;
    for (const auto &id : sessionIds)
        out.push_back({takeAny ? kClaimAnySql : kClaimSql, {id, owner, leaseUntilMs, nowMs}});
    return out;
}

Result<std::map<std::string, CursorRow>> ownedRows(store::EventStore &store, const std::string &owner)
{
    auto rows = store.query({kOwnedSql, {owner}});
    if (!rows)
        return std::unexpected(rows.error());
    std::map<std::string, CursorRow> out;
    for (const auto &row : *rows) {
        CursorRow cursor{textAt(row, 0), integerAt(row, 1), integerAt(row, 2), integerAt(row, 3)};
        out[cursor.sessionId] = cursor;
    }
    return out;
}

store::SqlStatement advanceStatement(const std::string &owner, const CursorRow &from, const CursorRow &to, bool release,
                                     int64_t nowMs)
{
    return {release ? kAdvanceAndReleaseSql : kAdvanceSql,
            {to.spanSeq, to.metricSeq, nowMs, from.sessionId, owner, from.spanSeq, from.metricSeq}};
}

Result<CursorRow> cursorRow(store::EventStore &store, const std::string &sessionId, std::string *owner)
{
    auto rows = store.query({kRowSql, {sessionId}});
    if (!rows)
        return std::unexpected(rows.error());
    if (rows->empty())
        return CursorRow{};
    if (owner)
        *owner = textAt(rows->front(), 2);
    return CursorRow{sessionId, integerAt(rows->front(), 0), integerAt(rows->front(), 1)};
}

store::SqlStatement releaseAllStatement(const std::string &owner)
{
    return {kReleaseAllSql, {owner}};
}

Status runWrites(store::EventStore &store, std::vector<store::SqlStatement> statements)
{
    if (statements.empty())
        return {};
    store::AppendRequest request;
    request.writes = std::move(statements);
    auto done = store.appendSync(std::move(request));
    if (!done)
        return std::unexpected(done.error());
    return {};
}

} // namespace paddock::otlp
