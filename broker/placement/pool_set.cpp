#include "broker/placement/pool_set.h"

#include "common/clock.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace paddock::placement {

PoolSet::~PoolSet()
{
    stopHealthChecks();
}

void PoolSet::add(std::unique_ptr<pool_client::PoolClient> client, bool local, std::string transport, bool token)
{
    m_entries.push_back({std::move(client), local, std::move(transport), token});
    std::lock_guard lock(m_mutex);
    m_states.resize(m_entries.size());
}

void PoolSet::startHealthChecks()
{
    if (m_checking.exchange(true))
        return;
    for (size_t i = 0; i < m_entries.size(); ++i)
        m_checkers.emplace_back([this, i] { checkerLoop(i); });
}

void PoolSet::stopHealthChecks()
{
    {
        std::lock_guard lock(m_stopMutex);
        m_checking = false;
    }
    m_stopWake.notify_all();
    for (auto &checker : m_checkers) {
        if (checker.joinable())
            checker.join();
    }
    m_checkers.clear();
}

void PoolSet::checkerLoop(size_t index)
{
    while (m_checking) {
        fetch(index);
        std::unique_lock lock(m_stopMutex);
        m_stopWake.wait_for(lock, std::chrono::milliseconds(m_options.healthIntervalMs), [&] { return !m_checking; });
    }
}

Result<pool_client::PoolStatus> PoolSet::fetch(size_t index) const
{
    const int64_t started = monotonicUs();
    auto status = m_entries.at(index).client->status();
    record(index, status, static_cast<double>(monotonicUs() - started) / 1000.0);
    return status;
}

void PoolSet::record(size_t index, const Result<pool_client::PoolStatus> &status, double latencyMs) const
{
    const pool_client::PoolClient &client = *m_entries.at(index).client;
    HealthSample sample;
    sample.timeUnixMs = nowUnixMs();
    sample.healthy = status.has_value();
    sample.latencyMs = latencyMs;
    if (status) {
        for (const auto &tier : status->tiers) {
            sample.warm += tier.warm;
            sample.claimed += tier.claimed;
            sample.max += tier.max;
        }
    } else {
        sample.error = status.error().message;
    }

    bool becameHealthy = false;
    bool becameUnhealthy = false;
    {
        std::lock_guard lock(m_mutex);
        State &state = m_states.at(index);
        const bool wasChecked = state.health.checked;
        const bool wasHealthy = state.health.healthy;
        state.fetchedAtUs = monotonicUs();
        state.status = status;
        m_recorded.notify_all();
        state.pendingClaims = 0;
        state.health.checked = true;
        state.health.healthy = sample.healthy;
        state.health.checkedUnixMs = sample.timeUnixMs;
        if (sample.healthy) {
            state.health.unhealthySinceUnixMs = 0;
            state.unhealthySinceUs = -1;
        } else {
            state.health.lastError = sample.error;
            if (state.unhealthySinceUs < 0) {
                state.unhealthySinceUs = state.fetchedAtUs;
                state.health.unhealthySinceUnixMs = sample.timeUnixMs;
            }
        }
        state.history.push_back(std::move(sample));
        while (state.history.size() > m_options.historySize)
            state.history.pop_front();
        becameHealthy = state.health.healthy && wasChecked && !wasHealthy;
        becameUnhealthy = !state.health.healthy && (!wasChecked || wasHealthy);
    }
    if (becameUnhealthy)
        spdlog::warn("pool '{}' at {} is unhealthy: {}", client.name(), client.endpoint(), status.error().message);
    else if (becameHealthy)
        spdlog::info("pool '{}' at {} is healthy again", client.name(), client.endpoint());
}

void PoolSet::markFailure(size_t index, const std::string &error) const
{
    const pool_client::PoolClient &client = *m_entries.at(index).client;
    bool becameUnhealthy = false;
    {
        std::lock_guard lock(m_mutex);
        State &state = m_states.at(index);
        becameUnhealthy = state.health.healthy || !state.health.checked;
        state.health.checked = true;
        state.health.healthy = false;
        state.health.lastError = error;
        state.health.checkedUnixMs = nowUnixMs();
        state.fetchedAtUs = monotonicUs();
        state.status = std::unexpected(Error{ErrorCode::Unavailable, error});
        if (state.unhealthySinceUs < 0) {
            state.unhealthySinceUs = state.fetchedAtUs;
            state.health.unhealthySinceUnixMs = state.health.checkedUnixMs;
        }
    }
    if (becameUnhealthy)
        spdlog::warn("pool '{}' at {} is unhealthy: {}", client.name(), client.endpoint(), error);
}

Result<pool_client::PoolStatus> PoolSet::statusOf(size_t index) const
{
    const int64_t now = monotonicUs();
    {
        std::unique_lock lock(m_mutex);
        State &state = m_states.at(index);
        if (m_checking && state.fetchedAtUs < 0) {
            // The checker's first Status is on its way: a healthy pool answers it within
            // milliseconds. One that does not (it accepted the connection and went quiet) is
            // not waited for the whole deadline on a caller's thread (a submit, a claim), and
            // after one caller waited in vain nobody waits for it again.
            if (!state.firstCheckOverdue)
                m_recorded.wait_for(lock, std::chrono::milliseconds(kFirstCheckWaitMs),
                                    [&] { return state.fetchedAtUs >= 0; });
            state.firstCheckOverdue = state.fetchedAtUs < 0;
            if (state.fetchedAtUs < 0)
                return fail(ErrorCode::Unavailable, "pool '" + m_entries.at(index).client->name() + "' at "
                                + m_entries.at(index).client->endpoint() + " did not answer its first Status within "
                                + std::to_string(kFirstCheckWaitMs) + " ms; check that paddock-pool is running there");
        }
        // While the checker runs it keeps the status fresh; otherwise the cache has an age limit.
        const bool fresh = state.fetchedAtUs >= 0
            && (m_checking || now - state.fetchedAtUs < kStatusMaxAgeMs * 1000);
        if (fresh)
            return state.status;
    }
    // Not under the lock: a slow pool must not hold up the others. Two threads may both refresh.
    return fetch(index);
}

PoolHealth PoolSet::health(size_t index) const
{
    std::lock_guard lock(m_mutex);
    const State &state = m_states.at(index);
    PoolHealth out = state.health;
    out.history.assign(state.history.begin(), state.history.end());
    out.lost = state.unhealthySinceUs >= 0 && monotonicUs() - state.unhealthySinceUs >= m_options.lostAfterMs * 1000;
    return out;
}

void PoolSet::noteMovedAway(const std::string &name, const std::string &sessionId) const
{
    auto index = indexOf(name);
    if (!index)
        return;   // gone from the config: nobody lists it
    std::lock_guard lock(m_mutex);
    PoolHealth &health = m_states.at(*index).health;
    health.movedAway++;
    health.movedAwaySessions.push_back(sessionId);
    if (health.movedAwaySessions.size() > kMovedAwayKept)
        health.movedAwaySessions.erase(health.movedAwaySessions.begin());
}

std::optional<size_t> PoolSet::indexOf(const std::string &name) const
{
    for (size_t i = 0; i < m_entries.size(); ++i) {
        if (m_entries[i].client->name() == name)
            return i;
    }
    return std::nullopt;
}

void PoolSet::reportUnavailable(const std::string &name, const std::string &error) const
{
    if (auto index = indexOf(name))
        markFailure(*index, error);
}

bool PoolSet::isLost(const std::string &name) const
{
    auto index = indexOf(name);
    if (!index)
        return true;
    std::lock_guard lock(m_mutex);
    const State &state = m_states.at(*index);
    return state.unhealthySinceUs >= 0 && monotonicUs() - state.unhealthySinceUs >= m_options.lostAfterMs * 1000;
}

PoolSet::TierRoom PoolSet::room(const std::string &tier) const
{
    TierRoom room;
    for (size_t i = 0; i < m_entries.size(); ++i) {
        auto status = statusOf(i);
        if (!status)
            continue;
        auto offered = std::find_if(status->tiers.begin(), status->tiers.end(),
                                    [&](const pool_client::TierStatus &t) { return t.name == tier; });
        if (offered == status->tiers.end())
            continue;
        int pending = 0;
        {
            std::lock_guard lock(m_mutex);
            pending = m_states[i].pendingClaims;
        }
        const int claimed = offered->claimed + pending;
        ++room.pools;
        room.inUse += claimed;
        room.max += offered->max;
        room.free += offered->max > 0 ? std::max(0, offered->max - claimed) : 1;
    }
    return room;
}

double PoolSet::pricePerHour(const std::string &name, const std::string &tier) const
{
    auto index = indexOf(name);
    if (!index)
        return 0;
    auto status = statusOf(*index);
    if (!status)
        return 0;
    for (const auto &t : status->tiers) {
        if (t.name == tier)
            return t.pricePerHourUsd;
    }
    return 0;
}

void PoolSet::noteClaimed(const std::string &name) const
{
    if (auto index = indexOf(name)) {
        std::lock_guard lock(m_mutex);
        ++m_states.at(*index).pendingClaims;
    }
}

std::string PoolSet::names() const
{
    std::string out;
    for (const auto &e : m_entries)
        out += (out.empty() ? "" : ", ") + e.client->name();
    return out.empty() ? "(none)" : out;
}

pool_client::PoolClient *PoolSet::find(const std::string &name) const
{
    auto index = indexOf(name);
    return index ? m_entries[*index].client.get() : nullptr;
}

Result<pool_client::PoolClient *> PoolSet::choose(const std::string &tier) const
{
    if (m_entries.empty())
        return fail(ErrorCode::FailedPrecondition,
                    "no pools are configured: add a [[pool]] to the broker config or pass --pool NAME=HOST:PORT");
    struct Candidate {
        size_t index;
        bool warm;
        double load;
    };
    std::vector<Candidate> candidates;
    std::string passed;
    int unreachable = 0;
    int full = 0;
    for (size_t i = 0; i < m_entries.size(); ++i) {
        const Entry &entry = m_entries[i];
        auto status = statusOf(i);
        int pending = 0;
        {
            std::lock_guard lock(m_mutex);
            pending = m_states[i].pendingClaims;
        }
        if (!status) {
            ++unreachable;
            passed += " " + entry.client->name() + " (" + status.error().message + ");";
            continue;
        }
        auto offered = std::find_if(status->tiers.begin(), status->tiers.end(),
                                    [&](const pool_client::TierStatus &t) { return t.name == tier; });
        if (offered == status->tiers.end()) {
            passed += " " + entry.client->name() + " (no tier '" + tier + "');";
            continue;
        }
        const int claimed = offered->claimed + pending;
        const int warm = std::max(0, offered->warm - pending);
        if (offered->max > 0 && claimed >= offered->max && warm == 0) {
            ++full;
            passed += " " + entry.client->name() + " (tier '" + tier + "' full: " + std::to_string(claimed) + " of "
                + std::to_string(offered->max) + " claimed);";
            continue;
        }
        const double load = offered->max > 0 ? static_cast<double>(claimed) / offered->max : 0.0;
        candidates.push_back({i, warm > 0, load});
    }
    if (!candidates.empty()) {
        // stable: equal candidates keep the configured order.
        std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate &a, const Candidate &b) {
            if (a.warm != b.warm)
                return a.warm;
            return a.load < b.load;
        });
        return m_entries[candidates.front().index].client.get();
    }
    if (full > 0)
        return fail(ErrorCode::ResourceExhausted, "every pool offering tier '" + tier + "' is at its capacity:" + passed
                        + " the session waits until a sandbox is released; add a pool or raise the tier's max_count");
    if (unreachable > 0)
        return fail(ErrorCode::Unavailable, "no pool can take a sandbox of tier '" + tier + "' now:" + passed
                        + " the session waits until one is healthy; start a pool offering it or fix the errors above");
    return fail(ErrorCode::NotFound, "no pool offers tier '" + tier + "':" + passed
                    + " pick another tier or start a pool offering it");
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

std::vector<pool_client::TierStatus> PoolSet::tierCatalogue() const
{
    std::vector<pool_client::TierStatus> out;
    for (size_t i = 0; i < m_entries.size(); ++i) {
        auto status = statusOf(i);
        if (!status)
            continue;
        for (const auto &tier : status->tiers) {
            if (std::none_of(out.begin(), out.end(), [&](const pool_client::TierStatus &t) { return t.name == tier.name; }))
                out.push_back(tier);
        }
    }
    return out;
}

void PoolSet::cancelInFlight() const
{
    for (const auto &entry : m_entries)
        entry.client->cancelInFlight();
}

} // namespace paddock::placement
