#pragma once
// The OTLP exporter's cursor (broker/otlp/export_cursor.h, docs/observability.md): migration 6 of
// the SQLite store, 8 of the PostgreSQL store. Written in SQLite's dialect; the PostgreSQL store
// runs it through pg::translateDdl (INTEGER is BIGINT there).
//
// One row per session the exporter has seen. span_seq and metric_seq: every span (metric data
// point) that the session's events up to that seq complete has been acknowledged by the receiver.
// owner and lease_until_ms: which exporter (one per broker) sends the session's spans until when;
// an exporter claims a row only when it is free or its lease has run out, and advances a cursor
// only with a compare-and-set on the values it read, so two brokers on one PostgreSQL database
// never both send or both advance the same batch (docs/observability.md says what remains).
//
// Threads: a constant.

namespace paddock::store {

inline constexpr const char *kOtlpExportSql = R"sql(
CREATE TABLE otlp_export(
    session_id      TEXT    PRIMARY KEY,
    span_seq        INTEGER NOT NULL DEFAULT 0,
    metric_seq      INTEGER NOT NULL DEFAULT 0,
    owner           TEXT    NOT NULL DEFAULT '',
    lease_until_ms  INTEGER NOT NULL DEFAULT 0,
    updated_unix_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX otlp_export_by_owner ON otlp_export(owner);
)sql";

} // namespace paddock::store
