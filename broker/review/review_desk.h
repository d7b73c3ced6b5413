#pragma once
// The approvers' side of the review queue: list, fetch (recorded), decide one or many items of
// one kind atomically, expire, and per-approver stats. Every rule of docs/governance.md
// ("Review queue") is checked here, before anything is appended:
// - a reason to reject and to approve a high-risk item;
// - nobody approves their own request (PermissionDenied);
// - a high-risk item is approved only by a principal who fetched its full change first;
// - every approval names the change_hash it saw; a mismatch or an item no longer pending refuses
//   the whole request (no replay);
// - all decisions commit in one transaction with synchronous=FULL, or none does.
//
// Threads: every method may be called from any thread. start() runs one expiry thread; stop()
// (or the destructor) joins it.

#include "broker/review/review_policy.h"
#include "broker/store/event_store.h"
#include "broker/store/review_index.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace paddock::review {

struct DecideRequest {
    std::vector<std::string> ids;
    bool approve = false;
    std::string reason;
    std::map<std::string, std::string> changeHashes;   // id -> change_hash the decider saw
    std::string decider;
    // Committed in the decision's own transaction (the decision's audit record): if they cannot be
    // written, nothing is decided.
    std::vector<store::SqlStatement> writes;
};

struct ApproverStat {
    std::string principal;
    int64_t decided = 0;
    int64_t approved = 0;
    int64_t rejected = 0;
    double approvalRate = 0;
    int64_t medianDecideMs = 0;
};

// Called inside nothing: after the decisions are committed, with the items as they are now. The
// audit log (docs/permissions.md) can index approval.decided events in the append's transaction
// instead; this hook is for what must follow a commit.
using DecidedHook = std::function<void(const std::vector<store::ReviewRow> &)>;

class ReviewDesk {
public:
    ReviewDesk(store::EventStore &store, store::ReviewQueries &queries, ReviewPolicy policy);
    ~ReviewDesk();
    ReviewDesk(const ReviewDesk &) = delete;
    ReviewDesk &operator=(const ReviewDesk &) = delete;

    // Expires due items every periodMs until stop().
    void start(int64_t periodMs = 1000);
    void stop();

    const ReviewPolicy &policy() const { return m_policy; }

    Result<store::ReviewPage> list(const store::ReviewListQuery &query);
    // The item with its full change; records (approval.fetched in its session's log) that
    // `principal` fetched it.
    Result<store::ReviewRow> fetch(const std::string &id, const std::string &principal);
    Result<bool> fetchedBy(const std::string &id, const std::string &principal);
    Result<std::vector<store::ReviewRow>> decide(const DecideRequest &request);
    // Appends approval.decided {approved: false, reason: "expired"} for every pending item past
    // its expiry. Returns how many expired.
    int expireDue(int64_t nowUnixMs);
    Result<std::vector<ApproverStat>> approverStats();

private:
    Result<std::vector<store::ReviewRow>> decideOnce(const DecideRequest &request, std::vector<std::string> &ids);
    void expiryLoop(int64_t periodMs);

    store::EventStore &m_store;
    store::ReviewQueries &m_queries;
    ReviewPolicy m_policy;

    std::mutex m_stopMutex;
    std::condition_variable m_stopWake;
    bool m_stopping = false;
    std::thread m_expirer;
};

} // namespace paddock::review
