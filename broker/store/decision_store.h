#pragma once
// Reads the decisions table (decision_index.h writes it with the events): ListDecisions and
// GetDecisionStats, through EventStore::query (either backend).
//
// Threads: every method may be called from any thread.

#include "broker/store/event_store.h"
#include "common/result.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace paddock::store {

struct DecisionRecord {
    std::string id, sessionId, agent, trigger, requestedTier, chosenTier, chooser, rule, reason, who, verdict;
    std::string alternativesJson;   // [{tier, estimated_cost_micros, note}]
    int64_t seq = 0;
    int64_t timeUnixMs = 0;
    std::string outcome;            // "" while the tier is held; "refused"/"needs_review" for requests not granted
    int64_t peakMemoryBytes = 0;
    int64_t memoryLimitBytes = 0;
    double meanCpuFraction = 0;
    double throttledFraction = 0;
    std::string fittingTier;
    int64_t outcomeUnixMs = 0;
};

struct DecisionQuery {
    std::string sessionId, agent, chooser, tier, outcome;   // empty: any ("pending": no outcome yet)
    int pageSize = 100;
    std::string pageToken;
};

struct DecisionPage {
    std::vector<DecisionRecord> decisions;   // newest first
    std::string nextPageToken;
};

struct DecisionStatsLine {
    std::string key;
    int64_t total = 0, pending = 0, ok = 0, oom = 0, timeout = 0, overAllocated = 0, underAllocated = 0;
};

class DecisionStore {
public:
    // Reads the decisions table of store, which must outlive it.
    static Result<std::unique_ptr<DecisionStore>> open(EventStore &store);
    ~DecisionStore();

    // InvalidArgument for a page token this store did not hand out.
    Result<DecisionPage> list(const DecisionQuery &query);
    Result<DecisionRecord> get(const std::string &id);
    // groupBy: tier (the chosen tier), agent or chooser; InvalidArgument otherwise.
    Result<std::vector<DecisionStatsLine>> stats(const std::string &groupBy);

private:
    explicit DecisionStore(EventStore &store);
    EventStore &m_store;
};

} // namespace paddock::store
