#pragma once
// Schema of the tables the store derives from cost and approval events (docs/store.md). Private to
// broker/store: sqlite_event_store_schema.cpp runs it as a numbered migration.

namespace paddock::store {

// Migration 2: cost entries (one row per cost event) and review items with their fetches.
inline constexpr const char *kGovernanceSchemaSql = R"sql(
CREATE TABLE cost_entries(
    session_id   TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    time_unix_ms INTEGER NOT NULL,
    agent        TEXT    NOT NULL,
    tier         TEXT    NOT NULL,
    model        TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    cost_micros  INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX cost_by_time ON cost_entries(time_unix_ms);
CREATE INDEX cost_by_agent ON cost_entries(agent, time_unix_ms);

CREATE TABLE review_items(
    ord             INTEGER PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    session_id      TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    kind            TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    risk            TEXT    NOT NULL,
    requester       TEXT    NOT NULL,
    agent           TEXT    NOT NULL,
    created_unix_ms INTEGER NOT NULL,
    expires_unix_ms INTEGER NOT NULL,
    change_hash     TEXT    NOT NULL,
    decider         TEXT,
    decision_reason TEXT,
    decided_unix_ms INTEGER,
    payload         TEXT    NOT NULL
);
CREATE INDEX review_by_state ON review_items(state, ord);
CREATE INDEX review_by_session ON review_items(session_id);
CREATE INDEX review_by_decider ON review_items(decider) WHERE decider IS NOT NULL;

CREATE TABLE review_fetches(
    review_id    TEXT    NOT NULL,
    principal    TEXT    NOT NULL,
    time_unix_ms INTEGER NOT NULL,
    PRIMARY KEY (review_id, principal)
);
)sql";

} // namespace paddock::store
