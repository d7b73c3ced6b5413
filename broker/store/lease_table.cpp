#include "broker/store/lease_table.h"

#include "common/clock.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace paddock::store {

namespace {

// A lease shorter than this would expire before the worker could use it.
constexpr int64_t kMinLeaseMs = 1;

} // namespace

bool LeaseTable::removableLocked(const Entry &entry) const
{
    // A backoff only matters while the session needs work; forgetting it afterwards keeps the
    // table as small as the set of live sessions.
    return !entry.needsWork && entry.token == 0;
}

void LeaseTable::update(const std::vector<std::pair<std::string, bool>> &needsWork)
{
    bool wake = false;
    {
        std::lock_guard lock(m_mutex);
        const int64_t nowUs = monotonicUs();
        for (const auto &[sessionId, needs] : needsWork) {
            auto it = m_entries.find(sessionId);
            if (it == m_entries.end()) {
                if (!needs)
                    continue;
                it = m_entries.emplace(sessionId, Entry{}).first;
                it->second.order = m_nextOrder++;
            }
            Entry &entry = it->second;
            if (needs && !entry.needsWork && (entry.token == 0 || entry.expiresAtUs <= nowUs))
                wake = true;
            entry.needsWork = needs;
            if (removableLocked(entry))
                m_entries.erase(it);
        }
    }
    if (wake)
        m_available.notify_all();
}

std::optional<Lease> LeaseTable::acquire(const std::string &workerId, int64_t leaseMs, int64_t waitMs)
{
    leaseMs = std::max(leaseMs, kMinLeaseMs);
    std::unique_lock lock(m_mutex);
    const int64_t deadlineUs = monotonicUs() + std::max<int64_t>(waitMs, 0) * 1000;
    for (;;) {
        if (m_closed)
            return std::nullopt;
        const int64_t nowUs = monotonicUs();
        Entry *best = nullptr;
        const std::string *bestId = nullptr;
        int64_t nextChangeUs = std::numeric_limits<int64_t>::max();
        for (auto &[sessionId, entry] : m_entries) {
            if (!entry.needsWork)
                continue;
            const bool leased = entry.token != 0 && entry.expiresAtUs > nowUs;
            if (leased) {
                nextChangeUs = std::min(nextChangeUs, entry.expiresAtUs);
                continue;
            }
            if (entry.retryAfterUs > nowUs) {
                nextChangeUs = std::min(nextChangeUs, entry.retryAfterUs);
                continue;
            }
            if (!best || entry.order < best->order) {
                best = &entry;
                bestId = &sessionId;
            }
        }
        if (best) {
            // A grant replaces an expired lease: the old holder's token no longer renews or releases.
            best->token = m_nextToken++;
            best->workerId = workerId;
            best->expiresAtUs = nowUs + leaseMs * 1000;
            best->retryAfterUs = 0;
            best->order = m_nextOrder++;
            return Lease{*bestId, workerId, best->token, best->expiresAtUs};
        }
        if (nowUs >= deadlineUs)
            return std::nullopt;
        const int64_t wakeUs = std::min(deadlineUs, nextChangeUs);
        m_available.wait_for(lock, std::chrono::microseconds(std::max<int64_t>(wakeUs - nowUs, 1)));
    }
}

bool LeaseTable::renew(const Lease &lease, int64_t leaseMs)
{
    leaseMs = std::max(leaseMs, kMinLeaseMs);
    std::lock_guard lock(m_mutex);
    auto it = m_entries.find(lease.sessionId);
    if (it == m_entries.end() || it->second.token != lease.token)
        return false;
    const int64_t nowUs = monotonicUs();
    if (it->second.expiresAtUs <= nowUs)
        return false;
    it->second.expiresAtUs = nowUs + leaseMs * 1000;
    return true;
}

void LeaseTable::release(const Lease &lease, int64_t retryAfterMs)
{
    bool wake = false;
    {
        std::lock_guard lock(m_mutex);
        auto it = m_entries.find(lease.sessionId);
        if (it == m_entries.end() || it->second.token != lease.token)
            return;
        Entry &entry = it->second;
        const int64_t nowUs = monotonicUs();
        entry.token = 0;
        entry.workerId.clear();
        entry.expiresAtUs = 0;
        entry.retryAfterUs = retryAfterMs > 0 ? nowUs + retryAfterMs * 1000 : 0;
        // Waiters also need waking for a backoff: they recompute when to look again.
        wake = entry.needsWork;
        if (removableLocked(entry))
            m_entries.erase(it);
    }
    if (wake)
        m_available.notify_all();
}

bool LeaseTable::holds(const std::string &sessionId, uint64_t token) const
{
    std::lock_guard lock(m_mutex);
    auto it = m_entries.find(sessionId);
    // Expired but not granted again still holds: nobody else may have written since.
    return it != m_entries.end() && it->second.token == token;
}

void LeaseTable::close()
{
    {
        std::lock_guard lock(m_mutex);
        m_closed = true;
    }
    m_available.notify_all();
}

size_t LeaseTable::needingWorkForTest() const
{
    std::lock_guard lock(m_mutex);
    return static_cast<size_t>(std::count_if(m_entries.begin(), m_entries.end(),
                                             [](const auto &item) { return item.second.needsWork; }));
}

} // namespace paddock::store
