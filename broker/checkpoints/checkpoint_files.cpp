#include "broker/checkpoints/checkpoint_files.h"

#include "checkpoint/sha256.h"

#include <algorithm>

namespace paddock::checkpoints {

namespace {

constexpr int64_t kDefaultReadBytes = 1 << 20;
constexpr int64_t kMaxReadBytes = 4 << 20;

std::string normalisedPrefix(std::string prefix)
{
    while (!prefix.empty() && prefix.front() == '/')
        prefix.erase(prefix.begin());
    while (!prefix.empty() && prefix.back() == '/')
        prefix.pop_back();
    return prefix;
}

} // namespace

std::string manifestOfRef(const std::string &ref)
{
    const std::string prefix = kCheckpointRefPrefix;
    if (!ref.starts_with(prefix))
        return {};
    const std::string id = ref.substr(prefix.size());
    return checkpoint::isSha256Hex(id) ? id : std::string();
}

Result<std::vector<SnapshotFile>> listCheckpointFiles(CheckpointStore &store, const std::string &manifestId,
                                                      const std::string &pathPrefix)
{
    auto manifest = store.getManifest(manifestId);
    if (!manifest)
        return std::unexpected(manifest.error());
    const std::string prefix = normalisedPrefix(pathPrefix);
    std::vector<SnapshotFile> out;
    for (const auto &e : manifest->entries) {
        if (!prefix.empty() && e.path != prefix && !e.path.starts_with(prefix + "/"))
            continue;
        out.push_back({e.path, e.type == checkpoint::EntryType::Dir, e.type == checkpoint::EntryType::Symlink, e.target,
                       e.size, e.mode, e.mtimeMs});
    }
    return out;
}

Result<SnapshotChunk> readCheckpointFile(CheckpointStore &store, const std::string &manifestId, const std::string &path,
                                         int64_t offset, int64_t maxBytes)
{
    if (offset < 0 || maxBytes < 0)
        return fail(ErrorCode::InvalidArgument, "offset and max_bytes must be 0 or more");
    auto manifest = store.getManifest(manifestId);
    if (!manifest)
        return std::unexpected(manifest.error());
    const std::string wanted = normalisedPrefix(path);
    auto it = std::find_if(manifest->entries.begin(), manifest->entries.end(),
                           [&](const checkpoint::Entry &e) { return e.path == wanted; });
    if (it == manifest->entries.end())
        return fail(ErrorCode::NotFound, "checkpoint " + manifestId.substr(0, 12) + " holds no '" + wanted + "'");
    if (it->type != checkpoint::EntryType::File)
        return fail(ErrorCode::InvalidArgument, "'" + wanted + "' is a " + checkpoint::entryTypeName(it->type)
                                                    + ", not a file");
    const int64_t want = std::min(maxBytes == 0 ? kDefaultReadBytes : maxBytes, kMaxReadBytes);
    SnapshotChunk out;
    out.offset = std::min(offset, it->size);
    out.size = it->size;
    int64_t at = out.offset;
    while (at < it->size && static_cast<int64_t>(out.content.size()) < want) {
        const auto index = static_cast<size_t>(at / checkpoint::kChunkBytes);
        auto chunk = store.getChunk(it->chunks[index]);
        if (!chunk)
            return std::unexpected(chunk.error());
        const int64_t within = at - static_cast<int64_t>(index) * checkpoint::kChunkBytes;
        const int64_t take = std::min<int64_t>(static_cast<int64_t>(chunk->size()) - within,
                                               want - static_cast<int64_t>(out.content.size()));
        if (take <= 0)
            return fail(ErrorCode::DataLoss, "chunk " + it->chunks[index] + " of '" + wanted + "' is shorter than its file says");
        out.content.append(*chunk, static_cast<size_t>(within), static_cast<size_t>(take));
        at += take;
    }
    out.eof = at >= it->size;
    return out;
}

} // namespace paddock::checkpoints
