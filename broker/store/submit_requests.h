#pragma once
// Idempotent submits (docs/store.md, "Submit request ids"): which session each request_id of
// SubmitSession made, per principal. The row rides in the transaction that creates the session
// (AppendRequest::writes), so a session and its request id commit together or not at all. The
// primary key (principal, request_id) makes two submits of one id create one session, whether they
// race on one broker or on several brokers sharing a PostgreSQL database: the later one's write
// fails, nothing of it is recorded, and the caller reads the row that won (findSubmitRequest).
// Schema: migration 5 of the SQLite store, 6 of the PostgreSQL store.
//
// Known limits: the rows are kept as long as the sessions they name (nothing deletes either).
//
// Threads: free functions over values and the store; call from anywhere.

#include "broker/store/event_store.h"

#include <cstdint>
#include <optional>
#include <string>

namespace paddock::store {

// Migration SQL, in SQLite's dialect (the PostgreSQL store runs it through pg::translateDdl).
inline constexpr const char *kSubmitRequestsSql = R"sql(
CREATE TABLE submit_requests(
    principal       TEXT    NOT NULL,
    request_id      TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    fingerprint     TEXT    NOT NULL,
    created_unix_ms INTEGER NOT NULL,
    PRIMARY KEY (principal, request_id)
);
)sql";

struct SubmitRequestRecord {
    std::string principal;     // who submitted: request ids are scoped per principal
    std::string requestId;
    std::string sessionId;     // the session the first submit with this id made
    std::string fingerprint;   // of the request as submitted (the session service computes it)
    int64_t createdUnixMs = 0;
};

// The row, for AppendRequest::writes of the append that creates record.sessionId.
SqlStatement submitRequestInsert(const SubmitRequestRecord &record);

// The row of (principal, requestId), or nullopt when no committed submit used it.
Result<std::optional<SubmitRequestRecord>> findSubmitRequest(EventStore &store, const std::string &principal,
                                                             const std::string &requestId);

} // namespace paddock::store
