#pragma once
// PostgreSQL implementation of EventStore, for teams: the same interface and semantics as the
// SQLite store (sqlite_event_store.h): dense per-session seqs, compare-and-append, group commit on
// one writer thread, the session projection in the same transaction, the tables beside the log
// written through AppendRequest::writes in the portable SQL both engines accept. Leases live in the
// database (a leases table, FOR UPDATE SKIP LOCKED, an expiry and a fencing token that appends
// carry), so they outlive a broker, and several brokers share one database: each store hears the
// others' commits through LISTEN/NOTIFY (postgres_commit_feed.cpp; docs/store.md, "Several brokers
// on one database").
//
// Built on libpq, PostgreSQL's C API, with our own RAII wrappers (pg_handle.h); why not libpqxx is
// written there and in docs/store.md.
//
// Passwords never appear in a connection string Paddock writes or logs: libpq reads them from
// PGPASSWORD or the file PGPASSFILE names (~/.pgpass by default). Messages name the target as
// user@host:port/db.
//
// Known limits: the writer keeps the tails of live sessions in memory (like the SQLite store);
// another broker's appends make them stale until the feed says so, and a request decided against a
// stale tail (a refusal, or an insert that collides on the events' primary key) is decided again
// against the database: correct, one round trip slower.

#include "broker/store/event_store.h"

#include <memory>
#include <string>

namespace paddock::store {

struct PostgresOptions {
    int maxBatchEvents = 10000;     // events per grouped commit, at most
    int maxBatchDelayUs = 1000;     // how long the writer waits to fill a group once it has work
    int reconnectDelayMs = 200;     // between attempts to reach a server that went away
    // Every connection's application_name: paddockd names itself so (broker_roster.h), and the
    // brokers on one database see which of them are alive. Empty: libpq's default.
    std::string applicationName;
};

// Connects (a libpq connection string: postgresql://user@host/db or "host=... dbname=..."),
// creates or migrates the schema. Refuses, with FailedPrecondition naming both versions, a schema
// written by a newer Paddock; Unavailable when the server is not there; PermissionDenied when it
// refuses the login.
Result<std::unique_ptr<EventStore>> openPostgresEventStore(const std::string &conninfo,
                                                           const PostgresOptions &options = {});

// The schema version this build writes (paddock_schema.version).
int postgresSchemaVersion();

} // namespace paddock::store
