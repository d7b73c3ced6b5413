// Idempotent submits: the row written with a new session, and the lookup of an earlier one
// (submit_requests.h).

#include "broker/store/submit_requests.h"

#include "broker/store/sql_values.h"

namespace paddock::store {

SqlStatement submitRequestInsert(const SubmitRequestRecord &record)
{
    return {"INSERT INTO submit_requests(principal, request_id, session_id, fingerprint, created_unix_ms) "
            "VALUES(?1, ?2, ?3, ?4, ?5)",
            {record.principal, record.requestId, record.sessionId, record.fingerprint, record.createdUnixMs}};
}

Result<std::optional<SubmitRequestRecord>> findSubmitRequest(EventStore &store, const std::string &principal,
                                                             const std::string &requestId)
{
    auto rows = store.query({"SELECT session_id, fingerprint, created_unix_ms FROM submit_requests "
                             "WHERE principal = ?1 AND request_id = ?2",
                             {principal, requestId}});
    if (!rows)
        return std::unexpected(rows.error());
    if (rows->empty())
        return std::optional<SubmitRequestRecord>();
    const SqlRow &row = rows->front();
    return SubmitRequestRecord{principal, requestId, textAt(row, 0), textAt(row, 1), intAt(row, 2)};
}

} // namespace paddock::store
