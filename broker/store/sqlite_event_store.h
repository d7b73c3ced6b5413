#pragma once
// SQLite implementation of EventStore: WAL, one writer thread that owns the write connection and
// groups appends into transactions, statements prepared once, a separate read connection.
//
// Known limits: one broker process owns the database file (it takes an exclusive lock file beside it);
// leases therefore live in memory and every lease is void after a restart.

#include "broker/store/event_store.h"

#include <filesystem>
#include <memory>

namespace paddock::store {

struct SqliteOptions {
    int maxBatchEvents = 10000;     // events per grouped commit, at most
    int maxBatchDelayUs = 1000;     // how long the writer waits to fill a group once it has work
};

// Opens (creating if needed) and migrates the database at path. Refuses, with a message naming the
// versions, a database written by a newer Paddock. Fails when another process holds the database.
Result<std::unique_ptr<EventStore>> openSqliteEventStore(const std::filesystem::path &path,
                                                         const SqliteOptions &options = {});

// The schema version this build writes (PRAGMA user_version).
int sqliteSchemaVersion();

} // namespace paddock::store
