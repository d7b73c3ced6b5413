#pragma once
// The cost ledger's index: one cost_entries row per `cost` event (agent, tier, model and kind from
// its payload), written in the append's transaction, and the sums the API answers from it without
// reading the log.
//
// Threads: CostQueries may be called from any thread (one read connection under a mutex).

#include "broker/store/event_index.h"

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace paddock::store {

// With its statements prepared on the writer's connection.
Result<std::unique_ptr<EventIndex>> makeCostIndex(sqlite::Database &writer);

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
    // Opens a read-only connection to the broker's database (the store creates its tables).
    static Result<std::unique_ptr<CostQueries>> open(const std::filesystem::path &dbPath);

    // InvalidArgument for an unknown group_by or a negative bucket.
    Result<CostSums> sums(const CostQuery &query);
    // Per agent: the cost of its sessions' events at or after sinceUnixMs.
    Result<std::map<std::string, int64_t>> spentByAgentSince(int64_t sinceUnixMs);

private:
    explicit CostQueries(sqlite::Database db) : m_db(std::move(db)) {}
    std::mutex m_mutex;
    sqlite::Database m_db;
};

} // namespace paddock::store
