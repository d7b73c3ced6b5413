#pragma once
// The in-memory table of which sessions need work and which worker holds each one's lease.
//
// Known limits: it lives in the one broker process that owns the database (the lock file makes sure
// there is only one), so a restart voids every lease; that is safe because a worker holds nothing
// between steps. Choosing a session scans the sessions that need work or are leased: O(n) per
// acquire, fine for the thousands of live sessions one broker runs.
//
// Threads: every method may be called from any thread; one mutex guards the table and acquire
// waits on a condition variable.

#include "broker/store/event_store.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace paddock::store {

class LeaseTable {
public:
    // After a commit: whether each changed session now needs work. Wakes waiting workers when a
    // session becomes available. A leased session keeps its lease whatever the commit says.
    void update(const std::vector<std::pair<std::string, bool>> &needsWork);

    std::optional<Lease> acquire(const std::string &workerId, int64_t leaseMs, int64_t waitMs);
    bool renew(const Lease &lease, int64_t leaseMs);
    void release(const Lease &lease, int64_t retryAfterMs);
    // Whether token is the session's current grant (AppendRequest::leaseToken): not released, and
    // not granted to anyone since, even if it has expired.
    bool holds(const std::string &sessionId, uint64_t token) const;

    // Wakes every waiter; acquire returns nullopt from now on.
    void close();

    size_t needingWorkForTest() const;

private:
    struct Entry {
        bool needsWork = false;
        uint64_t order = 0;          // lower goes first; a grant moves the session to the back
        uint64_t token = 0;          // 0: not leased
        std::string workerId;
        int64_t expiresAtUs = 0;
        int64_t retryAfterUs = 0;    // not leased again before this (monotonic)
    };

    bool removableLocked(const Entry &entry) const;

    mutable std::mutex m_mutex;
    std::condition_variable m_available;
    std::unordered_map<std::string, Entry> m_entries;   // sessions that need work, are leased or back off
    uint64_t m_nextOrder = 1;
    uint64_t m_nextToken = 1;
    bool m_closed = false;
};

} // namespace paddock::store
