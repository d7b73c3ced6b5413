#include "broker/checkpoints/guarded_blob_store.h"

#include "common/clock.h"

namespace paddock::checkpoints {

GuardedBlobStore::GuardedBlobStore(std::unique_ptr<BlobStore> inner, std::function<int64_t()> clock)
    : m_inner(std::move(inner)), m_clock(clock ? std::move(clock) : std::function<int64_t()>(nowUnixMs))
{
}

void GuardedBlobStore::noteUse(const std::string &key)
{
    std::unique_lock lock(m_mutex);
    m_deleteDone.wait(lock, [&] { return !m_deleting.contains(key); });
    m_lastUsed[key] = m_clock();
}

Status GuardedBlobStore::put(const std::string &key, std::string_view bytes)
{
    noteUse(key);
    return m_inner->put(key, bytes);
}

Result<bool> GuardedBlobStore::exists(const std::string &key)
{
    noteUse(key);
    return m_inner->exists(key);
}

Result<bool> GuardedBlobStore::removeUnlessUsedSince(const std::string &key, int64_t sinceUnixMs)
{
    {
        std::lock_guard lock(m_mutex);
        if (auto it = m_lastUsed.find(key); it != m_lastUsed.end() && it->second >= sinceUnixMs)
            return false;
        if (!m_deleting.insert(key).second)
            return false;   // another delete of it is under way
    }
    Status removed = m_inner->remove(key);
    {
        std::lock_guard lock(m_mutex);
        m_deleting.erase(key);
    }
    m_deleteDone.notify_all();
    if (!removed)
        return std::unexpected(removed.error());
    return true;
}

int64_t GuardedBlobStore::lastUsedUnixMs(const std::string &key) const
{
    std::lock_guard lock(m_mutex);
    auto it = m_lastUsed.find(key);
    return it == m_lastUsed.end() ? 0 : it->second;
}

void GuardedBlobStore::forgetUsesBefore(int64_t unixMs)
{
    std::lock_guard lock(m_mutex);
    std::erase_if(m_lastUsed, [&](const auto &entry) { return entry.second < unixMs; });
}

} // namespace paddock::checkpoints
