// SqliteEventStore's schema: the numbered migrations and the code that runs them. Each migration
// runs once, in its own transaction with the user_version bump; a database from a newer Paddock is
// refused when it opens (openWriter, sqlite_event_store.cpp).
//
// Threads: migrate() runs in open(), before the writer thread starts.

#include "broker/store/sqlite_event_store_internal.h"

#include "broker/store/auth_tables.h"
#include "broker/store/decision_index.h"
#include "broker/store/governance_schema.h"
#include "broker/store/log_schema.h"
#include "broker/store/otlp_export_schema.h"
#include "broker/store/submit_requests.h"

#include <spdlog/spdlog.h>

namespace paddock::store {

namespace {

struct Migration {
    int version;
    const char *sql;
};

// Numbered migrations: each runs once, in its own transaction with the user_version bump. Never
// edit one that has shipped; add the next.
constexpr Migration kMigrations[] = {
    {1, kLogSchemaSql},          // events, sessions (log_schema.h)
    {2, kAuthTablesSql},         // audit, tokens (auth_tables.h)
    {3, kGovernanceSchemaSql},   // cost_entries, review_items, review_fetches (governance_schema.h)
    {4, kDecisionsSchemaSql},    // agents, agent_records, decisions (decision_index.h)
    {5, kSubmitRequestsSql},     // submit_requests: idempotent submits (submit_requests.h)
    {6, kOtlpExportSql},         // otlp_export: the OTLP exporter's cursor (otlp_export_schema.h)
};

static_assert(std::size(kMigrations) == kSchemaVersion, "one migration per schema version");
constexpr bool numberedInOrder()
{
    for (size_t i = 0; i < std::size(kMigrations); ++i) {
        if (kMigrations[i].version != static_cast<int>(i) + 1)
            return false;
    }
    return true;
}
static_assert(numberedInOrder(), "migration i has version i + 1: a database at version N runs exactly those after N");

} // namespace

Status SqliteEventStore::migrate()
{
    auto version = m_writeDb.queryInt("PRAGMA user_version");
    if (!version)
        return std::unexpected(version.error());
    for (const auto &migration : kMigrations) {
        if (migration.version <= *version)
            continue;
        // Schema change and version bump commit together, so a crash leaves either both or neither.
        if (auto status = m_writeDb.exec("BEGIN IMMEDIATE"); !status)
            return status;
        Status status = m_writeDb.exec(migration.sql);
        if (status) {
            const std::string bump = "PRAGMA user_version=" + std::to_string(migration.version)
                + "; PRAGMA application_id=" + std::to_string(kApplicationId) + ";";
            status = m_writeDb.exec(bump.c_str());
        }
        if (status)
            status = m_writeDb.exec("COMMIT");
        if (!status) {
            (void)m_writeDb.exec("ROLLBACK");
            return fail(ErrorCode::Internal, "migrating " + m_path.string() + " to schema version "
                                                 + std::to_string(migration.version) + " failed: " + status.error().message);
        }
        spdlog::info("store: {} migrated to schema version {}", m_path.string(), migration.version);
    }
    return {};
}

} // namespace paddock::store
