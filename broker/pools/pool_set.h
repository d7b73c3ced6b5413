#pragma once
// The pools a broker can place sandboxes on, and the (for now simple) placement rule.
//
// Threads: built once at start-up, then read-only; clients are thread-safe, so any thread may use it.

#include "broker/pools/pool_client.h"

#include <memory>
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

private:
    std::vector<Entry> m_entries;
};

} // namespace paddock::pools
