#pragma once
// The pools a broker can place sandboxes on, and the (for now simple) placement rule.
//
// Threads: built once at start-up (add), then used from any thread: clients are thread-safe and the
// status cache has its own lock.

#include "broker/pools/pool_client.h"

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace paddock::pools {

class PoolSet {
public:
    void add(std::unique_ptr<PoolClient> client, bool local);

    PoolClient *find(const std::string &name) const;
    // The pool a new sandbox of `tier` goes to: the first pool, in configured order, that is
    // reachable and offers the tier. Unavailable (naming every pool tried and why) when none does.
    Result<PoolClient *> choose(const std::string &tier) const;

    struct Entry {
        std::unique_ptr<PoolClient> client;
        bool local = false;   // runs on the broker's own host
    };
    const std::vector<Entry> &entries() const { return m_entries; }
    bool anyLocal() const;
    // The tiers offered by the pools that answer; nullopt when none answers (nothing is known).
    std::optional<std::set<std::string>> offeredTiers() const;
    void cancelInFlight() const;

    // Entry `index`'s Status, at most kStatusMaxAgeMs old. Placement, submit-time tier checks and
    // ListPools all ask for it; without the cache every claim and every submit paid a round trip
    // to every pool (and a pool that does not answer, its whole deadline).
    Result<PoolStatus> statusOf(size_t index) const;
    static constexpr int64_t kStatusMaxAgeMs = 1000;

private:
    struct CachedStatus {
        int64_t fetchedAtUs = -1;
        Result<PoolStatus> status = std::unexpected(Error{});
    };

    std::vector<Entry> m_entries;
    mutable std::mutex m_cacheMutex;              // guards m_cache
    mutable std::vector<CachedStatus> m_cache;    // parallel to m_entries
};

} // namespace paddock::pools
