#pragma once
// The audit log and the bearer tokens, beside the event log in the broker's database (schema
// version 2; docs/permissions.md). Writes are SqlStatements: an audit record rides in the same
// transaction as the change it records (AppendRequest::writes), or alone in a request with no
// session. Reads go through EventStore::query.
//
// Threads: free functions over values and the store; call from anywhere.

#include "broker/auth/tokens.h"
#include "broker/store/event_store.h"

#include <string>
#include <vector>

namespace paddock::store {

extern const char kAuthTablesSql[];

struct AuditEntry {
    int64_t id = 0;                // assigned by the store
    int64_t timeUnixMs = 0;
    std::string principal;
    std::string role;
    std::string method;
    std::string target;            // session id, review ids, token id, secret name, ...
    std::string result;            // OK, or the status code's name (PERMISSION_DENIED, ...)
    std::string detail;
};

SqlStatement auditInsert(const AuditEntry &entry);

struct AuditQuery {
    std::string principal;         // empty: any
    std::string method;            // empty: any
    int64_t fromUnixMs = 0;        // 0: from the start
    int pageSize = 100;            // newest first; at most 1000
    std::string pageToken;
};

struct AuditPage {
    std::vector<AuditEntry> entries;
    std::string nextPageToken;
};

Result<AuditPage> listAudit(EventStore &store, const AuditQuery &query);

SqlStatement tokenInsert(const auth::TokenRecord &record);
SqlStatement tokenRevoke(const std::string &id);
SqlStatement tokenTouch(const std::string &id, int64_t lastUsedUnixMs);
Result<std::vector<auth::TokenRecord>> loadTokens(EventStore &store);

} // namespace paddock::store
