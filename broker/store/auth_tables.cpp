#include "broker/store/auth_tables.h"

#include <algorithm>
#include <charconv>

namespace paddock::store {

const char kAuthTablesSql[] = R"sql(
CREATE TABLE audit(
    id           INTEGER PRIMARY KEY,
    time_unix_ms INTEGER NOT NULL,
    principal    TEXT    NOT NULL,
    role         TEXT    NOT NULL,
    method       TEXT    NOT NULL,
    target       TEXT    NOT NULL,
    result       TEXT    NOT NULL,
    detail       TEXT    NOT NULL
);
CREATE INDEX audit_by_principal ON audit(principal, id);
CREATE INDEX audit_by_method ON audit(method, id);

CREATE TABLE tokens(
    id                TEXT    PRIMARY KEY,
    principal         TEXT    NOT NULL,
    description       TEXT    NOT NULL,
    hash              TEXT    NOT NULL,
    created_unix_ms   INTEGER NOT NULL,
    expires_unix_ms   INTEGER NOT NULL,
    last_used_unix_ms INTEGER NOT NULL,
    revoked           INTEGER NOT NULL
);
)sql";

namespace {

constexpr int kMaxAuditPage = 1000;

int64_t intAt(const SqlRow &row, size_t column)
{
    const auto *value = column < row.size() ? std::get_if<int64_t>(&row[column]) : nullptr;
    return value ? *value : 0;
}

std::string textAt(const SqlRow &row, size_t column)
{
    const auto *value = column < row.size() ? std::get_if<std::string>(&row[column]) : nullptr;
    return value ? *value : std::string();
}

// Built one value at a time: GCC 12 warns (maybe-uninitialized) about variants in an initializer list.
template <typename... Values>
SqlStatement statement(std::string sql, Values &&...values)
{
    SqlStatement out{std::move(sql), {}};
    out.params.reserve(sizeof...(Values));
    (out.params.emplace_back(std::forward<Values>(values)), ...);
    return out;
}

} // namespace

SqlStatement auditInsert(const AuditEntry &entry)
{
    return statement("INSERT INTO audit(time_unix_ms, principal, role, method, target, result, detail) "
                     "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                     entry.timeUnixMs, entry.principal, entry.role, entry.method, entry.target, entry.result,
                     entry.detail);
}

Result<AuditPage> listAudit(EventStore &store, const AuditQuery &query)
{
    SqlStatement select = statement("SELECT id, time_unix_ms, principal, role, method, target, result, detail "
                                    "FROM audit WHERE 1 = 1");
    auto where = [&](const char *clause, auto value) {
        select.params.emplace_back(std::move(value));
        select.sql += std::string(" AND ") + clause + " ?" + std::to_string(select.params.size());
    };
    if (!query.principal.empty())
        where("principal =", query.principal);
    if (!query.method.empty())
        where("method =", query.method);
    if (query.fromUnixMs > 0)
        where("time_unix_ms >=", query.fromUnixMs);
    if (!query.pageToken.empty()) {
        int64_t before = 0;
        const auto *end = query.pageToken.data() + query.pageToken.size();
        const auto parsed = std::from_chars(query.pageToken.data() + (query.pageToken.starts_with("a") ? 1 : 0), end, before);
        if (!query.pageToken.starts_with("a") || parsed.ec != std::errc() || parsed.ptr != end)
            return fail(ErrorCode::InvalidArgument, "the page token is not one this broker issued; list again without it");
        where("id <", before);
    }
    const int pageSize = std::clamp(query.pageSize > 0 ? query.pageSize : 100, 1, kMaxAuditPage);
    select.params.emplace_back(int64_t{pageSize} + 1);
    select.sql += " ORDER BY id DESC LIMIT ?" + std::to_string(select.params.size());
    auto rows = store.query(select);
    if (!rows)
        return std::unexpected(rows.error());
    AuditPage page;
    for (const auto &row : *rows) {
        if (static_cast<int>(page.entries.size()) == pageSize) {
            page.nextPageToken = "a" + std::to_string(page.entries.back().id);
            break;
        }
        page.entries.push_back({intAt(row, 0), intAt(row, 1), textAt(row, 2), textAt(row, 3), textAt(row, 4),
                                textAt(row, 5), textAt(row, 6), textAt(row, 7)});
    }
    return page;
}

SqlStatement tokenInsert(const auth::TokenRecord &record)
{
    const auto &info = record.info;
    return statement("INSERT INTO tokens(id, principal, description, hash, created_unix_ms, expires_unix_ms, "
                     "last_used_unix_ms, revoked) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                     info.id, info.principal, info.description, record.hash, info.createdUnixMs, info.expiresUnixMs,
                     info.lastUsedUnixMs, int64_t{info.revoked ? 1 : 0});
}

SqlStatement tokenRevoke(const std::string &id)
{
    return statement("UPDATE tokens SET revoked = 1 WHERE id = ?1", id);
}

SqlStatement tokenTouch(const std::string &id, int64_t lastUsedUnixMs)
{
    // CASE, not max(a, b): PostgreSQL spells the two-argument max greatest().
    return statement("UPDATE tokens SET last_used_unix_ms = CASE WHEN last_used_unix_ms < ?2 THEN ?2 "
                     "ELSE last_used_unix_ms END WHERE id = ?1",
                     id, lastUsedUnixMs);
}

Result<std::vector<auth::TokenRecord>> loadTokens(EventStore &store)
{
    auto rows = store.query(statement("SELECT id, principal, description, hash, created_unix_ms, expires_unix_ms, "
                                      "last_used_unix_ms, revoked FROM tokens ORDER BY created_unix_ms"));
    if (!rows)
        return std::unexpected(rows.error());
    std::vector<auth::TokenRecord> out;
    for (const auto &row : *rows) {
        auth::TokenRecord record;
        record.info = {textAt(row, 0), textAt(row, 1), textAt(row, 2), intAt(row, 4), intAt(row, 5), intAt(row, 6),
                       intAt(row, 7) != 0};
        record.hash = textAt(row, 3);
        out.push_back(std::move(record));
    }
    return out;
}

} // namespace paddock::store
