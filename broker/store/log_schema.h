#pragma once
// Schema of the event log and the session projection (docs/store.md): migration 1 of both
// backends. Written in SQLite's dialect; the PostgreSQL store runs it through pg::translateDdl
// (INTEGER is 64-bit there too, INTEGER PRIMARY KEY an identity column). Private to broker/store.

namespace paddock::store {

inline constexpr const char *kLogSchemaSql = R"sql(
CREATE TABLE events(
    session_id   TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    time_unix_ms INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    cost_micros  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE sessions(
    ord             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    agent           TEXT    NOT NULL,
    goal            TEXT    NOT NULL,
    playbook        TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    needs_work      INTEGER NOT NULL,
    created_unix_ms INTEGER NOT NULL,
    updated_unix_ms INTEGER NOT NULL,
    last_seq        INTEGER NOT NULL,
    state           TEXT    NOT NULL
);
CREATE INDEX sessions_by_status ON sessions(status, ord);
CREATE INDEX sessions_by_agent ON sessions(agent, ord);
CREATE INDEX sessions_needing_work ON sessions(needs_work) WHERE needs_work = 1;
)sql";

} // namespace paddock::store
