#pragma once
// What both backends' group commits keep the same way while a group runs: each request's outcome,
// the sessions the group changed (in order, with the events for the commit notice), how a
// request's new events are numbered, stamped and folded, and how memory follows the database once
// the group committed. How the rows reach the database is the backend's. Private to broker/store.
//
// Threads: a store's writer thread only; nothing here is shared.

#include "broker/core/session_state.h"
#include "broker/store/append_queue.h"
#include "broker/store/event_index.h"
#include "common/clock.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace paddock::store {

// The fold state of every session that is not finished, kept by the writer: a compare-and-append
// is decided without reading the database.
using LiveSessions = std::unordered_map<std::string, core::SessionState>;

// Per session touched by a group: its state after the group's successful requests so far.
struct TouchedSession {
    core::SessionState state;
    bool created = false;
    // Status or needs_work differ from the stored row: the SQLite store's update rewrites those
    // columns (and their index entries) only then.
    bool indexedChanged = false;
    std::vector<core::Event> events;   // for the commit notice
};

// What one group commit did so far: each request's answer, the sessions it changed in order.
struct GroupProgress {
    explicit GroupProgress(size_t requests = 0) : outcomes(requests) {}

    // The session as this group sees it without asking the database: changed earlier in the group,
    // else live in memory. nullptr: neither (a finished session, or none).
    const core::SessionState *known(const std::string &sessionId, const LiveSessions &live) const;
    // A request appended stored to its session, which was before (nullptr: it created it) and is
    // next now: the group's view of the session follows, and the request's outcome is its result.
    void recordAppend(const std::string &sessionId, const core::SessionState *before, core::SessionState next,
                      std::vector<core::Event> stored, RequestOutcome &outcome);
    // The first request refused on its own merits: in an all-or-nothing group, its refusal is the
    // whole batch's.
    std::optional<Error> firstRefusal() const;

    std::vector<RequestOutcome> outcomes;   // one per request of the group
    std::unordered_map<std::string, TouchedSession> touched;
    std::vector<std::string> touchOrder;
};

// Splits a group commit's time between its phases, for the writer figures a store logs at close.
class PhaseTimer {
public:
    // Adds the time since the last lap (or since the timer started) to bucketUs.
    void lap(int64_t &bucketUs)
    {
        const int64_t nowUs = monotonicUs();
        bucketUs += nowUs - m_lastUs;
        m_lastUs = nowUs;
    }

private:
    int64_t m_lastUs = monotonicUs();
};

// The request's events as they are stored: numbered after next's tail, all stamped with one time
// (never before the session's last, whatever the wall clock does), each folded into next. The rows
// the event indexes derive from them are appended to indexRows. The request's kinds and payloads
// are moved out, unless keepRequest: a backend that may number the same request again (after a
// rolled-back pass) keeps it whole.
std::vector<core::Event> numberEvents(AppendRequest &request, int64_t nowMs, core::SessionState &next,
                                      const std::vector<std::unique_ptr<EventIndex>> &indexes,
                                      std::vector<SqlStatement> &indexRows, bool keepRequest = false);

// After the group committed: live follows the database (a finished session that needs no work
// leaves memory; a late event reads it back from the projection), and notice, when given, collects
// every changed session and its events for the commit listeners. Returns each changed session
// with whether it needs work now, for the leases.
std::vector<std::pair<std::string, bool>> settleCommitted(GroupProgress &progress, LiveSessions &live,
                                                          CommitNotice *notice);

} // namespace paddock::store
