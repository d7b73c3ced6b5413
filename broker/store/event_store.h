#pragma once
// The broker's durable store: every session's append-only event log, and the session projection
// (the fold of each log, see broker/core/session_state.h) kept in the same transactions.
//
// SQLite implements it for one broker (sqlite_event_store.h), PostgreSQL for one or several brokers
// sharing a database (postgres_event_store.h: leases with FOR UPDATE SKIP LOCKED, other brokers'
// commits heard through LISTEN/NOTIFY).
//
// Threads: every method may be called from any thread. Appends are executed by the store's own
// writer thread, which groups concurrent appends into one transaction; commit listeners and
// appendThen's callbacks run on that writer thread and must only enqueue.

#include "broker/core/event.h"
#include "broker/core/session_state.h"
#include "common/result.h"

#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace paddock::store {

// A value bound to a statement's parameter (?1, ?2, ...), or read from a row: NULL, an integer, text
// or a floating-point number (REAL in SQLite, double precision in PostgreSQL).
using SqlValue = std::variant<std::monostate, int64_t, std::string, double>;

// One statement on a table beside the event log (audit records, tokens, indexes derived from
// events). Portable SQL: the same text runs on SQLite and later on PostgreSQL.
struct SqlStatement {
    std::string sql;
    std::vector<SqlValue> params;
};

using SqlRow = std::vector<SqlValue>;

// Append to a session's log, compare-and-append style.
struct AppendRequest {
    std::string sessionId;
    // The seq the session's log must end at for the append to happen: 0 creates a new session
    // (its first event must be session.created). kAnySeq appends at whatever the tail is.
    int64_t expectedLastSeq = kAnySeq;
    std::vector<core::NewEvent> events;
    // Commit with synchronous=FULL before acknowledging (approval decisions). Otherwise the commit
    // survives a crash of the process (WAL, synchronous=NORMAL) but not necessarily of the machine.
    bool fullSync = false;
    // Statements run in the same transaction as the events (after them): an audit record of the
    // call that appends, an index row. One that fails (a constraint, a trigger) fails this request
    // and writes none of it. A request with an empty sessionId and no events carries only these.
    std::vector<SqlStatement> writes;
    // The lease the appending worker holds (Lease::token), or 0 for none. Non-zero: the append
    // commits only while that grant is the session's current one (not released, and not granted to
    // another worker since, expired or not), so a worker that paused past its lease cannot write
    // after the worker that took the session next (fencing); refused with FailedPrecondition
    // otherwise.
    uint64_t leaseToken = 0;

    static constexpr int64_t kAnySeq = -1;
};

struct AppendResult {
    std::vector<core::Event> events;   // as stored, with seq and time
    core::SessionState state;          // the session after the append
};

struct SessionQuery {
    std::vector<core::SessionStatus> statuses;   // empty: any
    std::string agent;                           // empty: any
    std::string text;                            // substring of id, goal or playbook; empty: any
    int pageSize = 100;
    std::string pageToken;                       // from SessionPage::nextPageToken
};

struct SessionPage {
    std::vector<core::SessionState> sessions;    // newest first
    std::string nextPageToken;                   // empty on the last page
};

// A worker's exclusive right to take one step of one session until expiresAtUs (monotonic clock).
struct Lease {
    std::string sessionId;
    std::string workerId;
    uint64_t token = 0;          // distinguishes this grant from earlier ones of the same session
    int64_t expiresAtUs = 0;
};

// What the writer thread reports after each commit. A commit of another broker on the same
// database arrives (from the store's own thread) with its sessions' new states and no events: a
// listener that needs the events reads them.
struct CommitNotice {
    std::vector<core::Event> events;               // every event committed, grouped by session in seq order
    std::vector<core::SessionState> sessions;      // every session those events changed, after the commit
};

class EventStore {
public:
    virtual ~EventStore() = default;

    // Compare-and-append. Fails with Aborted when the log's tail is not expectedLastSeq (re-read and
    // decide again), NotFound when the session does not exist, AlreadyExists when creating one that
    // does, InvalidArgument for an empty or malformed request. The future resolves after the commit.
    virtual std::future<Result<AppendResult>> append(AppendRequest request) = 0;
    Result<AppendResult> appendSync(AppendRequest request) { return append(std::move(request)).get(); }
    // append() for a caller that must not hold a thread while the commit happens (a gRPC handler):
    // done gets the answer instead of a future. It runs on the writer thread after the commit (after
    // the commit listeners), or on the caller's thread before appendThen returns when the request is
    // refused without being queued. Like a listener, done must only enqueue: every later commit
    // waits while it runs. Blocks the caller, like append(), only while the queue is full.
    using AppendCallback = std::function<void(Result<AppendResult>)>;
    virtual void appendThen(AppendRequest request, AppendCallback done) = 0;
    // All or nothing: the requests (to one or several sessions) commit in one transaction, or none
    // does and the error is the first refusal (the same rules as append). With any request's
    // fullSync the transaction commits with synchronous=FULL. Blocks until the commit.
    virtual Result<std::vector<AppendResult>> appendAll(std::vector<AppendRequest> requests) = 0;

    // Events with seq >= fromSeq, at most limit of them, in seq order. NotFound for an unknown session.
    virtual Result<std::vector<core::Event>> readEvents(const std::string &sessionId, int64_t fromSeq,
                                                        int limit) = 0;
    virtual Result<core::SessionState> getSession(const std::string &sessionId) = 0;
    virtual Result<SessionPage> listSessions(const SessionQuery &query) = 0;
    // Rows of a read-only statement on a read connection (the tables beside the log).
    virtual Result<std::vector<SqlRow>> query(const SqlStatement &statement) = 0;

    // Leases a session that needs work (SessionState::needsWork) and is not leased by anyone else,
    // waiting up to waitMs for one to become available. nullopt when none did.
    virtual std::optional<Lease> acquireLease(const std::string &workerId, int64_t leaseMs, int64_t waitMs) = 0;
    // Extends a lease that is still held. False when it expired and may have gone to another worker.
    virtual bool renewLease(const Lease &lease, int64_t leaseMs) = 0;
    // Gives the lease back. retryAfterMs > 0 keeps the session from being leased again for that long
    // (a pool was unavailable, say); 0 makes it available at once if it still needs work.
    virtual void releaseLease(const Lease &lease, int64_t retryAfterMs = 0) = 0;

    // listener runs on the writer thread after every commit, and on the store's feed thread for
    // other brokers' commits (never two at once). Returns an id for removeCommitListener.
    virtual int addCommitListener(std::function<void(const CommitNotice &)> listener) = 0;
    virtual void removeCommitListener(int id) = 0;

    // Stops taking appends, commits what is queued, checkpoints the WAL and closes. Idempotent.
    virtual void close() = 0;
};

} // namespace paddock::store
