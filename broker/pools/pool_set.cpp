#include "broker/pools/pool_set.h"

#include "common/clock.h"

#include <algorithm>

namespace paddock::pools {

void PoolSet::add(std::unique_ptr<PoolClient> client, bool local)
{
    m_entries.push_back({std::move(client), local});
    std::lock_guard lock(m_cacheMutex);
    m_cache.resize(m_entries.size());
}

Result<PoolStatus> PoolSet::statusOf(size_t index) const
{
    const int64_t now = monotonicUs();
    {
        std::lock_guard lock(m_cacheMutex);
        const CachedStatus &cached = m_cache.at(index);
        if (cached.fetchedAtUs >= 0 && now - cached.fetchedAtUs < kStatusMaxAgeMs * 1000)
            return cached.status;
    }
    // Not under the lock: a slow pool must not hold up the others. Two threads may both refresh.
    auto status = m_entries.at(index).client->status();
    std::lock_guard lock(m_cacheMutex);
    m_cache.at(index) = {monotonicUs(), status};
    return status;
}

PoolClient *PoolSet::find(const std::string &name) const
{
    for (const auto &entry : m_entries) {
        if (entry.client->name() == name)
            return entry.client.get();
    }
    return nullptr;
}

Result<PoolClient *> PoolSet::choose(const std::string &tier) const
{
    if (m_entries.empty())
        return fail(ErrorCode::FailedPrecondition,
                    "no pools are configured: add a [[pool]] to the broker config or pass --pool NAME=HOST:PORT");
    std::string tried;
    for (size_t i = 0; i < m_entries.size(); ++i) {
        const Entry &entry = m_entries[i];
        auto status = statusOf(i);
        if (!status) {
            tried += " " + entry.client->name() + " (" + status.error().message + ");";
            continue;
        }
        const bool offers = std::any_of(status->tiers.begin(), status->tiers.end(),
                                        [&](const TierStatus &t) { return t.name == tier; });
        if (offers)
            return entry.client.get();
        tried += " " + entry.client->name() + " (no tier '" + tier + "');";
    }
    return fail(ErrorCode::Unavailable, "no pool can take a sandbox of tier '" + tier + "':" + tried
                    + " start a pool offering it or pick another tier");
}

bool PoolSet::anyLocal() const
{
    return std::any_of(m_entries.begin(), m_entries.end(), [](const Entry &e) { return e.local; });
}

std::optional<std::set<std::string>> PoolSet::offeredTiers() const
{
    std::optional<std::set<std::string>> tiers;
    for (size_t i = 0; i < m_entries.size(); ++i) {
        auto status = statusOf(i);
        if (!status)
            continue;
        if (!tiers)
            tiers.emplace();
        for (const auto &tier : status->tiers)
            tiers->insert(tier.name);
    }
    return tiers;
}

void PoolSet::cancelInFlight() const
{
    for (const auto &entry : m_entries)
        entry.client->cancelInFlight();
}

} // namespace paddock::pools
