#pragma once
// The checkpoint store's blobs as the broker uses them: any BlobStore behind one that remembers
// which keys a checkpoint relied on lately, so that collection (checkpoint_collector.h) never
// deletes what a checkpoint in progress counts on.
//
// Why: a checkpoint stores only the chunks the store lacks. One that finds a chunk already there
// relies on it staying until its manifest is stored and its event appended, maybe minutes later.
// That chunk may be old and, at that moment, named by no kept manifest (the session that stored it
// has expired): its age in the store says nothing of the new use. So put() and exists() note
// their key with the time before they reach the backend, and removeUnlessUsedSince() deletes a key
// only when no use was noted since a given time. A put() or exists() of a key being deleted waits
// for the delete to finish (and then finds the key gone, so the checkpoint stores it again).
// get() is not noted: reading a key is not relying on it to stay (the collector reads manifests).
//
// Known limits: uses are remembered by this process only, so a second broker writing to the same
// bucket is not seen (one broker per checkpoint store); forgetUsesBefore() bounds the memory, one
// entry per key used since (the collector calls it every pass).
//
// Threads: every method may be called from any thread concurrently.

#include "broker/checkpoints/blob_store.h"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace paddock::checkpoints {

class GuardedBlobStore final : public BlobStore {
public:
    // clock: the wall clock in Unix ms (tests pass their own).
    explicit GuardedBlobStore(std::unique_ptr<BlobStore> inner, std::function<int64_t()> clock = {});

    std::string describe() const override { return m_inner->describe(); }
    Status put(const std::string &key, std::string_view bytes) override;
    Result<std::string> get(const std::string &key) override { return m_inner->get(key); }
    Result<bool> exists(const std::string &key) override;
    Result<std::vector<BlobInfo>> list(const std::string &prefix) override { return m_inner->list(prefix); }
    // Unconditional, like the backend's.
    Status remove(const std::string &key) override { return m_inner->remove(key); }

    // Deletes key unless put() or exists() used it at or after sinceUnixMs. true: deleted (or it
    // was not there); false: kept for that use.
    Result<bool> removeUnlessUsedSince(const std::string &key, int64_t sinceUnixMs);
    // When put() or exists() last used key; 0 for never (or forgotten).
    int64_t lastUsedUnixMs(const std::string &key) const;
    // Forgets the uses before unixMs.
    void forgetUsesBefore(int64_t unixMs);

private:
    // Records a use of key now, after any delete of it in progress.
    void noteUse(const std::string &key);

    const std::unique_ptr<BlobStore> m_inner;
    const std::function<int64_t()> m_clock;

    mutable std::mutex m_mutex;
    std::condition_variable m_deleteDone;
    std::unordered_map<std::string, int64_t> m_lastUsed;   // guarded by m_mutex
    std::unordered_set<std::string> m_deleting;            // guarded by m_mutex
};

} // namespace paddock::checkpoints
