#include "broker/checkpoints/checkpoint_store.h"

#include "checkpoint/sha256.h"

namespace paddock::checkpoints {

CheckpointStore::CheckpointStore(std::unique_ptr<BlobStore> blobs, std::string kind)
    : m_blobs(std::move(blobs)), m_kind(std::move(kind))
{
}

std::string CheckpointStore::chunkKey(const std::string &hash)
{
    return "chunks/" + hash.substr(0, 2) + "/" + hash;
}

std::string CheckpointStore::manifestKey(const std::string &id)
{
    return "manifests/" + id;
}

Result<bool> CheckpointStore::putChunk(const std::string &hash, std::string_view data, bool knownAbsent)
{
    if (!checkpoint::isSha256Hex(hash))
        return fail(ErrorCode::InvalidArgument, "a chunk name is not SHA-256 hex");
    if (checkpoint::sha256Hex(data) != hash)
        return fail(ErrorCode::DataLoss, "chunk " + hash + " arrived damaged: its " + std::to_string(data.size())
                                             + " bytes do not hash to its name");
    if (!knownAbsent) {
        auto have = m_blobs->exists(chunkKey(hash));
        if (!have)
            return std::unexpected(have.error());
        if (*have)
            return false;
    }
    if (auto stored = m_blobs->put(chunkKey(hash), data); !stored)
        return std::unexpected(stored.error());
    return true;
}

Result<bool> CheckpointStore::hasChunk(const std::string &hash)
{
    if (!checkpoint::isSha256Hex(hash))
        return fail(ErrorCode::InvalidArgument, "a chunk name is not SHA-256 hex");
    return m_blobs->exists(chunkKey(hash));
}

Result<std::string> CheckpointStore::getChunk(const std::string &hash)
{
    if (!checkpoint::isSha256Hex(hash))
        return fail(ErrorCode::InvalidArgument, "a chunk name is not SHA-256 hex");
    auto data = m_blobs->get(chunkKey(hash));
    if (!data) {
        if (data.error().code == ErrorCode::NotFound)
            return fail(ErrorCode::DataLoss, "chunk " + hash + " is missing from " + describe());
        return std::unexpected(data.error());
    }
    if (checkpoint::sha256Hex(*data) != hash)
        return fail(ErrorCode::DataLoss, "chunk " + hash + " in " + describe() + " is damaged (" +
                                             std::to_string(data->size()) + " bytes that do not hash to its name)");
    return data;
}

Status CheckpointStore::putManifest(const std::string &id, const std::string &json, const checkpoint::Manifest &manifest)
{
    if (auto stored = m_blobs->put(manifestKey(id), json); !stored)
        return stored;
    remember(id, manifest);
    return {};
}

Result<checkpoint::Manifest> CheckpointStore::getManifest(const std::string &id)
{
    if (!checkpoint::isSha256Hex(id))
        return fail(ErrorCode::InvalidArgument, "'" + id + "' is not a checkpoint manifest id");
    {
        std::lock_guard lock(m_cacheMutex);
        if (auto it = m_cache.find(id); it != m_cache.end()) {
            m_cacheOrder.splice(m_cacheOrder.begin(), m_cacheOrder, it->second.second);
            return it->second.first;
        }
    }
    auto json = m_blobs->get(manifestKey(id));
    if (!json) {
        if (json.error().code == ErrorCode::NotFound)
            return fail(ErrorCode::NotFound, "checkpoint manifest " + id + " is not in " + describe());
        return std::unexpected(json.error());
    }
    if (checkpoint::sha256Hex(*json) != id)
        return fail(ErrorCode::DataLoss, "checkpoint manifest " + id + " in " + describe() + " is damaged");
    auto manifest = checkpoint::Manifest::parse(*json);
    if (!manifest)
        return fail(ErrorCode::DataLoss, "checkpoint manifest " + id + " in " + describe() + " cannot be read: "
                                             + manifest.error().message);
    remember(id, *manifest);
    return manifest;
}

void CheckpointStore::remember(const std::string &id, const checkpoint::Manifest &manifest)
{
    std::lock_guard lock(m_cacheMutex);
    if (auto it = m_cache.find(id); it != m_cache.end()) {
        m_cacheOrder.splice(m_cacheOrder.begin(), m_cacheOrder, it->second.second);
        return;
    }
    m_cacheOrder.push_front(id);
    m_cache.emplace(id, std::make_pair(manifest, m_cacheOrder.begin()));
    while (m_cache.size() > kCachedManifests) {
        m_cache.erase(m_cacheOrder.back());
        m_cacheOrder.pop_back();
    }
}

} // namespace paddock::checkpoints
