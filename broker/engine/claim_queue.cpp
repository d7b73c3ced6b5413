#include "broker/engine/claim_queue.h"

#include <algorithm>

namespace paddock::engine {

void ClaimQueue::dropStaleLocked(Line &line, int64_t nowMs)
{
    std::erase_if(line.waiters, [&](const Waiter &w) { return nowMs - w.lastAskMs > m_staleMs; });
}

std::vector<const ClaimQueue::Waiter *> ClaimQueue::fairOrderLocked(const Line &line) const
{
    // Each agent's sessions in arrival order; the agents ordered by when they were last served
    // (never first), then by their first session's arrival.
    std::map<std::string, std::vector<const Waiter *>> byAgent;
    for (const auto &w : line.waiters)
        byAgent[w.agent].push_back(&w);
    std::vector<const std::vector<const Waiter *> *> agents;
    for (const auto &[agent, sessions] : byAgent)
        agents.push_back(&sessions);
    auto served = [&](const std::vector<const Waiter *> *sessions) {
        auto it = line.servedTurn.find(sessions->front()->agent);
        return it == line.servedTurn.end() ? uint64_t{0} : it->second;
    };
    std::sort(agents.begin(), agents.end(), [&](const auto *a, const auto *b) {
        if (served(a) != served(b))
            return served(a) < served(b);
        return a->front()->arrival < b->front()->arrival;
    });
    std::vector<const Waiter *> order;
    order.reserve(line.waiters.size());
    for (size_t round = 0; order.size() < line.waiters.size(); ++round) {
        for (const auto *sessions : agents) {
            if (round < sessions->size())
                order.push_back((*sessions)[round]);
        }
    }
    return order;
}

ClaimQueue::Place ClaimQueue::ask(const std::string &tier, const std::string &sessionId, const std::string &agent,
                                  int freeSlots, int64_t nowMs)
{
    std::lock_guard lock(m_mutex);
    Line &line = m_lines[tier];
    dropStaleLocked(line, nowMs);
    auto it = std::find_if(line.waiters.begin(), line.waiters.end(),
                           [&](const Waiter &w) { return w.sessionId == sessionId; });
    if (it == line.waiters.end())
        line.waiters.push_back({sessionId, agent, m_nextArrival++, nowMs});
    else
        it->lastAskMs = nowMs;
    const auto order = fairOrderLocked(line);
    Place place;
    place.waiting = static_cast<int>(order.size());
    for (const Waiter *w : order) {
        if (w->sessionId == sessionId)
            break;
        ++place.ahead;
    }
    // The pools' counts may lag a release: the front may always try (the pool refuses if full).
    place.mayClaim = place.ahead < std::max(1, freeSlots);
    return place;
}

int ClaimQueue::waiting(const std::string &tier, int64_t nowMs)
{
    std::lock_guard lock(m_mutex);
    auto it = m_lines.find(tier);
    if (it == m_lines.end())
        return 0;
    dropStaleLocked(it->second, nowMs);
    return static_cast<int>(it->second.waiters.size());
}

void ClaimQueue::claimed(const std::string &tier, const std::string &sessionId, const std::string &agent, int64_t nowMs)
{
    std::lock_guard lock(m_mutex);
    auto it = m_lines.find(tier);
    if (it == m_lines.end())
        return;
    Line &line = it->second;
    std::erase_if(line.waiters, [&](const Waiter &w) { return w.sessionId == sessionId; });
    line.servedTurn[agent] = ++line.grants;
    dropStaleLocked(line, nowMs);
    if (line.waiters.empty())
        m_lines.erase(it);   // nobody waits: served turns start afresh next time
}

void ClaimQueue::leave(const std::string &sessionId)
{
    std::lock_guard lock(m_mutex);
    for (auto &[tier, line] : m_lines)
        std::erase_if(line.waiters, [&](const Waiter &w) { return w.sessionId == sessionId; });
}

} // namespace paddock::engine
