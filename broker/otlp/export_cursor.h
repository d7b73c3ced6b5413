#pragma once
// The OTLP export cursor in the store (the otlp_export table, broker/store/otlp_export_schema.h):
// for each session, how far its spans and its metric points have been acknowledged by the receiver,
// and which exporter holds the session until when. Portable SQL through EventStore::append (its
// writes, alone in a request) and EventStore::query, so both backends run the same statements.
//
// The rules that keep two brokers on one PostgreSQL database from both exporting a session:
// - claim: a session's row is taken only when it is free (no owner), its lease has run out, or it
//   is already this exporter's; whoever's write lands first holds it, the other reads that it does
//   not (owned() after the write);
// - advance: a compare-and-set on the cursor values read and on the owner, so an exporter that lost
//   its lease cannot move a cursor another has moved, nor past spans that one has not sent;
// - renew: every pass extends the leases this exporter holds; a lease is longer than a post can
//   take, so while it holds a session nobody else sends that session's spans.
//
// Threads: free functions over the store; the exporter's thread calls them.

#include "broker/store/event_store.h"
#include "common/result.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace paddock::otlp {

struct CursorRow {
    std::string sessionId;
    int64_t spanSeq = 0;
    int64_t metricSeq = 0;
    int64_t lastSeq = 0;     // the session's last seq (ownedRows only)

    bool operator==(const CursorRow &other) const
    {
        return sessionId == other.sessionId && spanSeq == other.spanSeq && metricSeq == other.metricSeq;
    }
};

// A session with events past its cursor (or none yet), free for this exporter to claim.
struct Candidate {
    int64_t ord = 0;             // the sessions table's creation order: a pass goes on from here
    std::string sessionId;
    int64_t lastSeq = 0;
};

// Up to limit sessions after creation order afterOrd, oldest first, with events past either
// cursor (or no row yet) that no other exporter holds at nowMs.
Result<std::vector<Candidate>> exportCandidates(store::EventStore &store, const std::string &owner, int64_t afterOrd,
                                                int64_t nowMs, int limit);

// The statement that renews every lease owner holds to leaseUntilMs.
store::SqlStatement renewStatement(const std::string &owner, int64_t leaseUntilMs);
// The statements that claim the sessions given until leaseUntilMs: free or expired rows only, or
// any row when takeAny (no other exporter can be using the store).
std::vector<store::SqlStatement> claimStatements(const std::string &owner, const std::vector<std::string> &sessionIds,
                                                 int64_t nowMs, int64_t leaseUntilMs, bool takeAny);

// The rows owner holds now, by session id, with each session's last seq.
Result<std::map<std::string, CursorRow>> ownedRows(store::EventStore &store, const std::string &owner);

// Moves the session's cursors from `from` to `to` if the row still holds `from` and owner holds it;
// release gives the row up at the same time (the session's export is complete).
store::SqlStatement advanceStatement(const std::string &owner, const CursorRow &from, const CursorRow &to,
                                     bool release, int64_t nowMs);

// The row of one session; nullopt-like empty sessionId when there is none. owner is returned in *owner.
Result<CursorRow> cursorRow(store::EventStore &store, const std::string &sessionId, std::string *owner);

// Gives back every lease owner holds (a clean stop), so another broker need not wait them out.
store::SqlStatement releaseAllStatement(const std::string &owner);

// Runs statements as one transaction beside the log (a request with writes only).
Status runWrites(store::EventStore &store, std::vector<store::SqlStatement> statements);

} // namespace paddock::otlp
