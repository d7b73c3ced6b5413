// PostgresEventStore's schema: the numbered migrations and the code that runs them. Versions 1 to 4
// are the SQLite store's migrations, the same text translated to PostgreSQL's types
// (pg::translateDdl), so the two schemas cannot drift; version 5 adds what only a shared database
// needs (leases); version 6 is the SQLite store's version 5 (submit_requests, idempotent submits),
// translated the same way; version 7 adds the brokers' roster (PostgreSQL only); version 8 is the
// SQLite store's version 6 (otlp_export, the OTLP exporter's cursor). The version lives in
// paddock_schema (one row); each migration runs once, in its own transaction with the version bump,
// under an advisory lock so two brokers starting together migrate once.
//
// Threads: migratePostgres runs in open(), before the writer thread starts.

#include "broker/store/postgres_event_store_internal.h"

#include "broker/store/auth_tables.h"
#include "broker/store/decision_index.h"
#include "broker/store/governance_schema.h"
#include "broker/store/log_schema.h"
#include "broker/store/otlp_export_schema.h"
#include "broker/store/submit_requests.h"

#include <spdlog/spdlog.h>

namespace paddock::store {

namespace {

// pg_advisory_xact_lock's key: "PDDK", as the SQLite store's application_id.
constexpr const char *kMigrationLock = "SELECT pg_advisory_xact_lock(1346650187)";

// Leases (docs/store.md): one row per session, made with it. A lease is held while expires_us
// (the server's clock) is in the future; token is the fencing token of the latest grant, from one
// sequence, so it only grows, per session and overall. grant_order: sessions are leased oldest
// first, and a grant moves the session to the back.
constexpr const char *kLeasesSql = R"sql(
CREATE SEQUENCE lease_tokens;
CREATE SEQUENCE lease_order;
CREATE TABLE leases(
    session_id     TEXT   PRIMARY KEY,
    token          BIGINT NOT NULL DEFAULT 0,
    worker_id      TEXT   NOT NULL DEFAULT '',
    expires_us     BIGINT NOT NULL DEFAULT 0,
    retry_after_us BIGINT NOT NULL DEFAULT 0,
    grant_order    BIGINT NOT NULL DEFAULT nextval('lease_order')
);
CREATE INDEX leases_by_order ON leases(grant_order);
INSERT INTO leases(session_id) SELECT id FROM sessions ORDER BY ord;
)sql";

// The brokers on this database (broker/daemon/broker_roster.h): each running paddockd's row, with
// the digest of each section of its configuration that all of them must share. A row whose
// instance has no connection left (pg_stat_activity's application_name) is a broker that is gone.
constexpr const char *kBrokersSql = R"sql(
CREATE TABLE brokers(
    instance        TEXT   PRIMARY KEY,
    host            TEXT   NOT NULL,
    pid             BIGINT NOT NULL,
    started_unix_ms BIGINT NOT NULL,
    sections        TEXT   NOT NULL
);
)sql";

struct Migration {
    int version;
    std::string sql;
};

std::vector<Migration> migrations()
{
    return {
        {1, pg::translateDdl(kLogSchemaSql)},          // events, sessions (log_schema.h)
        {2, pg::translateDdl(kAuthTablesSql)},         // audit, tokens (auth_tables.h)
        {3, pg::translateDdl(kGovernanceSchemaSql)},   // cost_entries, review_items, review_fetches
        {4, pg::translateDdl(kDecisionsSchemaSql)},    // agents, agent_records, decisions
        {5, kLeasesSql},                               // leases (PostgreSQL only)
        {6, pg::translateDdl(kSubmitRequestsSql)},     // submit_requests (submit_requests.h)
        {7, kBrokersSql},                              // brokers (PostgreSQL only)
        {8, pg::translateDdl(kOtlpExportSql)},         // otlp_export: the OTLP exporter's cursor
    };
}

Result<int64_t> schemaVersion(pg::Connection &db)
{
    auto result = db.exec("SELECT version FROM paddock_schema");
    if (!pg::ok(result.get()))
        return std::unexpected(db.error(result.get(), "reading the schema version"));
    return PQntuples(result.get()) > 0 ? pg::cellInt(result.get(), 0, 0) : 0;
}

} // namespace

Status migratePostgres(pg::Connection &db)
{
    const std::string &target = db.target();
    auto found = db.exec("SELECT to_regclass('paddock_schema') IS NOT NULL, to_regclass('events') IS NOT NULL");
    if (!pg::ok(found.get()))
        return std::unexpected(db.error(found.get(), "looking for Paddock's schema"));
    const bool ours = pg::cellText(found.get(), 0, 0) == "t";
    if (!ours && pg::cellText(found.get(), 0, 1) == "t")
        return fail(ErrorCode::FailedPrecondition,
                    "the database " + target + " has an events table but no paddock_schema: it belongs to another "
                    "application. Give Paddock a database of its own (createdb), or fix the connection string");
    if (!ours) {
        if (auto status = db.run("CREATE TABLE IF NOT EXISTS paddock_schema(version INTEGER NOT NULL)",
                                 "creating paddock_schema");
            !status)
            return status;
    }

    const auto all = migrations();
    for (;;) {
        if (auto status = db.run("BEGIN", "starting a migration"); !status)
            return status;
        auto rollback = [&](Error error) -> Status {
            (void)db.exec("ROLLBACK");
            return std::unexpected(std::move(error));
        };
        if (auto status = db.run(kMigrationLock, "waiting for another broker's migration"); !status)
            return rollback(status.error());
        auto version = schemaVersion(db);
        if (!version)
            return rollback(version.error());
        if (*version > kPostgresSchemaVersion)
            return rollback({ErrorCode::FailedPrecondition,
                             "the database " + target + " has schema version " + std::to_string(*version)
                                 + ", written by a newer Paddock; this build reads up to version "
                                 + std::to_string(kPostgresSchemaVersion)
                                 + ". Upgrade Paddock, or point the broker at another database"});
        if (*version == kPostgresSchemaVersion) {
            (void)db.exec("ROLLBACK");
            return {};
        }
        const auto &migration = all[static_cast<size_t>(*version)];   // version N runs migration N + 1
        Status status = db.run(migration.sql.c_str(), "migrating to schema version " + std::to_string(migration.version));
        if (status) {
            pg::Params params;
            params.add(int64_t{migration.version});
            status = db.run(*version == 0 ? "INSERT INTO paddock_schema(version) VALUES($1)"
                                          : "UPDATE paddock_schema SET version = $1",
                            params, "recording schema version " + std::to_string(migration.version));
        }
        if (status)
            status = db.run("COMMIT", "committing schema version " + std::to_string(migration.version));
        if (!status)
            return rollback({ErrorCode::Internal, "migrating " + target + " to schema version "
                                                      + std::to_string(migration.version)
                                                      + " failed: " + status.error().message});
        spdlog::info("store: {} migrated to schema version {}", target, migration.version);
    }
}

} // namespace paddock::store
