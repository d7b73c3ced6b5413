#pragma once
// The decisions table: one row per env.decision event, its outcome filled in by the env.outcome
// event (docs/governance.md, docs/store.md). The schema is migration 2 of the store.

#include "broker/store/event_index.h"

namespace paddock::store {

inline constexpr const char kDecisionsSchemaSql[] = R"sql(
CREATE TABLE agents(
    name                      TEXT    PRIMARY KEY,
    owner                     TEXT    NOT NULL,
    default_tier              TEXT    NOT NULL,
    allowed_tiers             TEXT    NOT NULL,
    selection_mode            TEXT    NOT NULL,
    budget_per_session_micros INTEGER NOT NULL,
    budget_per_day_micros     INTEGER NOT NULL,
    created_unix_ms           INTEGER NOT NULL,
    updated_unix_ms           INTEGER NOT NULL
);

CREATE TABLE agent_records(
    agent           TEXT    NOT NULL,
    key             TEXT    NOT NULL,
    value           TEXT    NOT NULL,
    updated_unix_ms INTEGER NOT NULL,
    PRIMARY KEY (agent, key)
);

CREATE TABLE decisions(
    ord                INTEGER PRIMARY KEY,
    id                 TEXT    NOT NULL UNIQUE,
    session_id         TEXT    NOT NULL,
    seq                INTEGER NOT NULL,
    agent              TEXT    NOT NULL,
    trigger            TEXT    NOT NULL,
    requested_tier     TEXT    NOT NULL,
    chosen_tier        TEXT    NOT NULL,
    chooser            TEXT    NOT NULL,
    rule               TEXT    NOT NULL,
    reason             TEXT    NOT NULL,
    who                TEXT    NOT NULL,
    verdict            TEXT    NOT NULL,
    alternatives       TEXT    NOT NULL,
    time_unix_ms       INTEGER NOT NULL,
    outcome            TEXT    NOT NULL DEFAULT '',
    peak_memory_bytes  INTEGER NOT NULL DEFAULT 0,
    memory_limit_bytes INTEGER NOT NULL DEFAULT 0,
    mean_cpu_fraction  REAL    NOT NULL DEFAULT 0,
    throttled_fraction REAL    NOT NULL DEFAULT 0,
    fitting_tier       TEXT    NOT NULL DEFAULT '',
    outcome_unix_ms    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX decisions_by_session ON decisions(session_id, ord);
CREATE INDEX decisions_by_agent ON decisions(agent, ord);
CREATE INDEX decisions_by_chooser ON decisions(chooser, ord);
CREATE INDEX decisions_by_tier ON decisions(chosen_tier, ord);
CREATE INDEX decisions_by_outcome ON decisions(outcome, ord);
)sql";

} // namespace paddock::store
