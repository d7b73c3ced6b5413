#pragma once
// What both backends check the same way, so that neither can drift: a request's shape before it
// is queued, its expected tail against the session when the writer reaches it, the paging of
// listSessions, and the errors both say alike. Private to broker/store.
//
// Threads: free functions over values; call from anywhere.

#include "broker/core/session_state.h"
#include "broker/store/event_store.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace paddock::store {

inline constexpr int kMaxSessionPageSize = 1000;

// InvalidArgument for an empty or malformed request (checked before it is queued).
Status validateAppend(const AppendRequest &request);

// Whether the request's expectedLastSeq fits the session (nullptr: there is none): 0 creates one
// that does not exist yet, kAnySeq appends to one that does, any other seq appends at that tail
// only. The refusal (NotFound, AlreadyExists, Aborted) when it does not fit.
std::optional<Error> expectedTailRefusal(const AppendRequest &request, const core::SessionState *current);

// The refusal of an append whose lease (AppendRequest::leaseToken) is no longer the session's.
Error leaseLostRefusal(const AppendRequest &request);

// NotFound for a session id that names none (an append, readEvents, getSession).
Error noSuchSession(const std::string &sessionId);

// listSessions' page: its size (clamped to 1..kMaxSessionPageSize) and the creation order its rows
// come before (the page token decoded; nullopt: the first page). InvalidArgument for a token this
// broker did not issue. A backend reads pageSize + 1 rows: the extra one says a next page exists.
struct SessionPaging {
    int pageSize = 0;
    std::optional<int64_t> before;
};
Result<SessionPaging> sessionPaging(const SessionQuery &query);

// listSessions' page tokens: opaque to clients, inside the last row's creation order.
std::string encodeSessionPageToken(int64_t ord);
std::optional<int64_t> decodeSessionPageToken(std::string_view token);

} // namespace paddock::store
