#pragma once
// The cost ledger's index: one cost_entries row per `cost` event (agent, tier, model and kind from
// its payload), written in the append's transaction, and the sums the API answers from it without
// reading the log.
//
// Threads: CostQueries may be called from any thread (it reads through EventStore::query, on either
// backend).

#include "broker/store/event_index.h"

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace paddock::store {

struct CostQuery {
    std::string groupBy = "session";   // session, agent, tier, model, day, kind
    int64_t fromUnixMs = 0;            // inclusive; 0: from the start
    int64_t toUnixMs = 0;              // exclusive; 0: until now
    std::string sessionId;             // filters; empty: any
    std::string agent;
    int64_t bucketMs = 0;              // > 0: one line per key and bucket
};

struct CostSumLine {
    std::string key;
    int64_t costMicros = 0;
    int64_t bucketStartUnixMs = 0;
};

struct CostSums {
    std::vector<CostSumLine> lines;    // by bucket, then by cost descending
    int64_t totalMicros = 0;
};

class CostQueries {
public:
    // Reads the cost_entries table of store (which creates it), which must outlive it.
    static Result<std::unique_ptr<CostQueries>> open(EventStore &store);

    // InvalidArgument for an unknown group_by or a negative bucket.
    Result<CostSums> sums(const CostQuery &query);
    // Per agent: the cost of its sessions' events at or after sinceUnixMs.
    Result<std::map<std::string, int64_t>> spentByAgentSince(int64_t sinceUnixMs);

private:
    explicit CostQueries(EventStore &store) : m_store(store) {}
    EventStore &m_store;
};

} // namespace paddock::store
