#pragma once
// Checkpoints as stored: content-addressed chunks and the manifests that name them, kept in a
// BlobStore (blob_store.h) under
//     chunks/<first two hex digits>/<sha256>      a chunk's bytes
//     manifests/<sha256 of the manifest JSON>     a checkpoint::Manifest
// Equal content is stored once, across checkpoints and sessions. Every read is checked against its
// name: bytes that do not hash to their key are DataLoss naming the key, never handed on.
//
// Threads: every method may be called from any thread concurrently (the blob store is; the
// manifest cache has its own mutex).

#include "broker/checkpoints/blob_store.h"
#include "checkpoint/manifest.h"

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace paddock::checkpoints {

class CheckpointStore {
public:
    explicit CheckpointStore(std::unique_ptr<BlobStore> blobs, std::string kind);

    BlobStore &blobs() { return *m_blobs; }
    // "broker" (the data directory) or "s3": what checkpoint events name as their store.
    const std::string &kind() const { return m_kind; }
    std::string describe() const { return m_blobs->describe(); }

    static std::string chunkKey(const std::string &hash);
    static std::string manifestKey(const std::string &id);

    // Stores a chunk after checking that its bytes hash to `hash` (DataLoss otherwise). true when it
    // was new, false when the store had it.
    // knownAbsent: the caller has just asked hasChunk (skips a second existence check, a HEAD on S3).
    Result<bool> putChunk(const std::string &hash, std::string_view data, bool knownAbsent = false);
    Result<bool> hasChunk(const std::string &hash);
    Result<std::string> getChunk(const std::string &hash);

    // Stores a manifest under its id (the SHA-256 of json, which must be manifest.toJson()).
    Status putManifest(const std::string &id, const std::string &json, const checkpoint::Manifest &manifest);
    // NotFound when absent; DataLoss when damaged.
    Result<checkpoint::Manifest> getManifest(const std::string &id);

private:
    void remember(const std::string &id, const checkpoint::Manifest &manifest);

    std::unique_ptr<BlobStore> m_blobs;
    const std::string m_kind;

    // The manifests used last (a session's next checkpoint applies its delta to the one before).
    static constexpr size_t kCachedManifests = 256;
    std::mutex m_cacheMutex;
    std::list<std::string> m_cacheOrder;   // most recent first
    std::unordered_map<std::string, std::pair<checkpoint::Manifest, std::list<std::string>::iterator>> m_cache;
};

} // namespace paddock::checkpoints
