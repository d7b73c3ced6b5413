#include "broker/engine/fold_cache.h"

#include <climits>

namespace paddock::engine {

Result<std::unique_ptr<SessionFold>> FoldCache::take(store::EventStore &store, const std::string &sessionId)
{
    std::unique_ptr<SessionFold> fold;
    {
        std::lock_guard lock(m_mutex);
        if (auto it = m_entries.find(sessionId); it != m_entries.end()) {
            fold = std::move(it->second.fold);
            m_recent.erase(it->second.recent);
            m_entries.erase(it);
        }
    }
    bool full = !fold;
    if (!fold)
        fold = std::make_unique<SessionFold>();
    auto tail = store.readEvents(sessionId, fold->lastSeq() + 1, INT_MAX);
    if (!tail)
        return std::unexpected(tail.error());
    if (!tail->empty() && tail->front().seq != fold->lastSeq() + 1) {
        // Not the events right after the fold (cannot happen with an append-only log; never
        // guessed at): the whole log is folded again.
        fold = std::make_unique<SessionFold>();
        tail = store.readEvents(sessionId, 1, INT_MAX);
        if (!tail)
            return std::unexpected(tail.error());
        full = true;
    }
    fold->apply(*tail);
    std::lock_guard lock(m_mutex);
    ++(full ? m_fullFolds : m_tailFolds);
    return fold;
}

void FoldCache::put(const std::string &sessionId, std::unique_ptr<SessionFold> fold)
{
    std::lock_guard lock(m_mutex);
    if (auto it = m_entries.find(sessionId); it != m_entries.end()) {
        // A second take of the session put its fold back meanwhile: the longer one stays.
        if (it->second.fold->lastSeq() < fold->lastSeq())
            it->second.fold = std::move(fold);
        m_recent.splice(m_recent.begin(), m_recent, it->second.recent);
        return;
    }
    m_recent.push_front(sessionId);
    m_entries.emplace(sessionId, Entry{std::move(fold), m_recent.begin()});
    while (m_entries.size() > m_capacity) {
        m_entries.erase(m_recent.back());
        m_recent.pop_back();
    }
}

void FoldCache::forget(const std::string &sessionId)
{
    std::lock_guard lock(m_mutex);
    if (auto it = m_entries.find(sessionId); it != m_entries.end()) {
        m_recent.erase(it->second.recent);
        m_entries.erase(it);
    }
}

size_t FoldCache::size() const
{
    std::lock_guard lock(m_mutex);
    return m_entries.size();
}

int64_t FoldCache::fullFolds() const
{
    std::lock_guard lock(m_mutex);
    return m_fullFolds;
}

int64_t FoldCache::tailFolds() const
{
    std::lock_guard lock(m_mutex);
    return m_tailFolds;
}

} // namespace paddock::engine
