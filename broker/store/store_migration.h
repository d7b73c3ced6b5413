#pragma once
// `paddockd migrate` (docs/deployment.md, "A team on PostgreSQL"): copies a SQLite store
// (broker.db) into a PostgreSQL database with its whole history: every session's events with
// their seqs, times and costs, the sessions' projection, and every table beside the log (audit,
// tokens, cost entries, review items and fetches, agents and their records, decisions). Events
// keep the time they were recorded at, which an append cannot do (the store stamps appends with
// the time of the commit), so the rows are copied as they are, with COPY, in one transaction that
// commits only after the counts of every table, and each session's events (count, last seq, first
// and last time, cost), have been found equal in the target: a failure or a mismatch leaves the
// target as it was.
//
// Both stores are opened as a broker opens them first: the source is locked (a broker still
// running on it is named) and brought to this build's schema; the target's schema is created or
// migrated, and a schema from a newer Paddock is refused. The target gets a lease row per session
// and its identity sequences moved past the copied rows, so a broker starts on it as on its own.
//
// Not in the database, so not copied: secrets (secrets.toml next to broker.toml) and workspace
// checkpoints (the [checkpoints] store, which the new broker keeps using).
//
// Known limits: the source is SQLite and the target PostgreSQL (the way a team moves); nothing
// else may write to the target meanwhile (its tables are locked for the copy; brokers already
// running on it would keep stale tails: stop them).
//
// Threads: migrateToPostgres runs on the caller's thread, progress is called on it.

#include "common/result.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace paddock::store {

struct MigrationProgress {
    int64_t sessionsCopied = 0;   // sessions whose events are all in the target
    int64_t sessionsTotal = 0;
    int64_t eventsCopied = 0;
    int64_t eventsTotal = 0;
};

struct MigrationOptions {
    std::filesystem::path from;      // a SQLite store: <data_dir>/broker.db
    std::string toConninfo;          // libpq connection string, password included; never logged
    // The target may hold sessions already: this store's are added after them (their ord and ids
    // assigned anew, in the source's order). A session, token, agent or review the target already
    // has fails the copy, naming it; nothing is written.
    bool merge = false;
    // After each session's events are copied, and once at the end.
    std::function<void(const MigrationProgress &)> progress;
};

struct TableCount {
    std::string table;
    int64_t source = 0;
    int64_t targetBefore = 0;   // rows the target held before the copy (only with merge)
    int64_t targetAfter = 0;    // rows the target holds after the copy
};

struct MigrationReport {
    std::string source;                    // the SQLite file
    std::string target;                    // user@host:port/db
    bool merge = false;
    std::vector<TableCount> tables;        // every table copied, in the order copied
    int64_t sessionsChecked = 0;           // sessions whose events were compared
    // Each names its table (or session) and both figures. Not empty: nothing was committed.
    std::vector<std::string> mismatches;
    bool committed = false;
    int64_t elapsedMs = 0;
};

// Copies options.from into the database options.toConninfo names. An error means nothing was
// written (FailedPrecondition: no source file, a source a broker holds, a schema from a newer
// Paddock, a target that already holds rows without merge; PermissionDenied and Unavailable from
// connecting; AlreadyExists or Internal from a copy the target refused, with the server's reason).
// A report with mismatches was rolled back too.
Result<MigrationReport> migrateToPostgres(const MigrationOptions &options);

// The tables migrate copies, in the order it copies them.
std::vector<std::string> migratedTables();

} // namespace paddock::store
