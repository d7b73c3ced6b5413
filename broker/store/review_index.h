#pragma once
// The review queue's index: one review_items row per approval.requested event, updated by its
// approval.decided, and one review_fetches row per principal that fetched an item's full change
// (approval.fetched), all written in the append's transaction.
//
// Threads: ReviewQueries may be called from any thread (it reads through EventStore::query, on
// either backend).

#include "broker/store/event_index.h"

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace paddock::store {

struct ReviewRow {
    std::string id;
    std::string sessionId;
    int64_t seq = 0;                 // of the approval.requested event
    std::string kind;
    std::string state;               // pending, approved, rejected, expired
    std::string risk;
    std::string requester;
    std::string agent;
    int64_t createdUnixMs = 0;
    int64_t expiresUnixMs = 0;
    std::string changeHash;
    std::string decider;
    std::string decisionReason;
    int64_t decidedUnixMs = 0;
    std::string payload;             // the approval.requested payload (JSON)
    int64_t ord = 0;                 // order of arrival (page tokens)
};

struct ReviewListQuery {
    std::string state = "pending";   // "all" for every state
    std::string kind;
    std::string sessionId;
    int pageSize = 100;
    std::string pageToken;
};

struct ReviewPage {
    std::vector<ReviewRow> items;    // oldest first
    std::string nextPageToken;
};

struct ApproverRow {
    std::string principal;
    int64_t approved = 0;
    int64_t rejected = 0;
    std::vector<int64_t> decideMs;   // creation to decision, per item, ascending
};

class ReviewQueries {
public:
    // Reads the review tables of store, which must outlive it.
    static Result<std::unique_ptr<ReviewQueries>> open(EventStore &store);

    Result<ReviewPage> list(const ReviewListQuery &query);
    // NotFound naming the id.
    Result<ReviewRow> get(const std::string &id);
    Result<bool> fetched(const std::string &id, const std::string &principal);
    // Pending items whose expiry is before nowUnixMs.
    Result<std::vector<ReviewRow>> duePending(int64_t nowUnixMs);
    // Items decided by a principal (expiries have no decider).
    Result<std::vector<ApproverRow>> approvers();
    // Pending budget_extension items per agent.
    Result<std::vector<std::pair<std::string, int64_t>>> pendingBudgetExtensions();

private:
    explicit ReviewQueries(EventStore &store) : m_store(store) {}
    Result<std::vector<ReviewRow>> rows(const std::string &sql, const std::vector<std::string> &texts);
    EventStore &m_store;
};

} // namespace paddock::store
