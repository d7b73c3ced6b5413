#include "pool/snapshot/workspace_checkpoint.h"

#include "checkpoint/sha256.h"
#include "common/clock.h"
#include "common/paths.h"
#include "pool/snapshot/workspace_build.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>

namespace paddock::pool {
namespace fs = std::filesystem;
using checkpoint::EntryType;

struct WorkspaceCheckpoints::Base {
    std::string id;
    checkpoint::Manifest manifest;
    StatKeys keys;
    std::unordered_set<std::string> chunks;
};

struct WorkspaceCheckpoints::Take {
    std::string token;
    fs::path dir;                  // its spool; made at the first pending chunk
    bool unchanged = false;        // the base's manifest, so nothing below is kept
    checkpoint::Manifest manifest;
    StatKeys keys;
    std::unordered_set<std::string> seen;                 // new chunks, inline or pending
    std::unordered_map<std::string, int64_t> pending;     // hash -> size, in dir
    int64_t inlineBytes = 0;
};

struct WorkspaceCheckpoints::Restore {
    std::string token;
    std::string manifestId;
    checkpoint::Manifest manifest;
    fs::path dir;                                 // the chunks put, by hash
    std::unordered_set<std::string> needed;
    std::unordered_set<std::string> received;
    int64_t startedUs = 0;
};

namespace {

std::string newToken()
{
    return randomSuffix() + randomSuffix();
}

double msSince(int64_t startUs)
{
    return static_cast<double>(monotonicUs() - startUs) / 1000.0;
}

// Writes data as dir/name through a temporary name, so a name only ever holds whole content.
Status writeSpoolFile(const fs::path &dir, const std::string &name, std::string_view data)
{
    if (auto err = ensurePrivateDirectory(dir, 0700); !err.empty())
        return fail(ErrorCode::Internal, err + "; check the pool's state directory");
    const fs::path tmp = dir / (".tmp-" + randomSuffix());
    Fd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    bool ok = out.valid();
    while (ok && !data.empty()) {
        const ssize_t n = ::write(out.get(), data.data(), data.size());
        if (n < 0 && errno == EINTR)
            continue;
        ok = n > 0;
        if (ok)
            data.remove_prefix(static_cast<size_t>(n));
    }
    if (!ok || ::rename(tmp.c_str(), (dir / name).c_str()) != 0) {
        const std::string why = sysError("cannot write " + (dir / name).string());
        ::unlink(tmp.c_str());
        return fail(ErrorCode::Internal, why + "; free space on the pool's state directory");
    }
    return {};
}

std::unexpected<Error> noTake(const std::string &token)
{
    return fail(ErrorCode::NotFound, "no pending checkpoint '" + token + "' on this sandbox (it was committed, or a newer "
                                     "TakeCheckpoint replaced it); take a new checkpoint");
}

std::unexpected<Error> noRestore(const std::string &token)
{
    return fail(ErrorCode::NotFound, "no restore '" + token + "' on this sandbox (it finished, or a newer BeginRestore "
                                     "replaced it); begin the restore again");
}

} // namespace

WorkspaceCheckpoints::WorkspaceCheckpoints(CheckpointPaths paths, OwnerMap owners)
    : m_paths(std::move(paths)), m_owners(owners)
{
}

WorkspaceCheckpoints::~WorkspaceCheckpoints()
{
    removeTree(m_paths.spool);
}

std::string WorkspaceCheckpoints::baseId() const
{
    std::lock_guard lock(m_mutex);
    return m_base ? m_base->id : std::string();
}

void WorkspaceCheckpoints::dropTakeLocked()
{
    if (m_take)
        removeTree(m_take->dir);
    m_take.reset();
}

void WorkspaceCheckpoints::dropRestoreLocked()
{
    if (m_restore)
        removeTree(m_restore->dir);
    m_restore.reset();
}

Status WorkspaceCheckpoints::keepChunk(Take &take, const Base *base, TakenCheckpoint &out, const std::string &hash,
                                       std::string_view data)
{
    if ((base && base->chunks.contains(hash)) || !take.seen.insert(hash).second)
        return {};   // the broker has it, or this checkpoint sends it already
    const auto size = static_cast<int64_t>(data.size());
    if (size <= kInlineChunkBytes && take.inlineBytes + size <= kInlineTotalBytes) {
        take.inlineBytes += size;
        out.chunks.push_back({hash, std::string(data)});
        return {};
    }
    if (auto written = writeSpoolFile(take.dir, hash, data); !written)
        return written;
    take.pending.emplace(hash, size);
    out.pending.push_back({hash, size});
    return {};
}

Result<TakenCheckpoint> WorkspaceCheckpoints::take(const std::string &baseManifest)
{
    std::lock_guard lock(m_mutex);
    const int64_t t0 = monotonicUs();
    dropTakeLocked();
    const Base *base = m_base && !baseManifest.empty() && baseManifest == m_base->id ? m_base.get() : nullptr;
    auto take = std::make_unique<Take>();
    take->token = newToken();
    take->dir = m_paths.spool / ("take-" + take->token);
    TakenCheckpoint out;
    auto scanned = scanWorkspace(m_paths.workspace, m_owners, base ? &base->manifest : nullptr, base ? &base->keys : nullptr,
                                 [&](const std::string &hash, std::string_view data) {
                                     return keepChunk(*take, base, out, hash, data);
                                 });
    if (!scanned) {
        removeTree(take->dir);
        return std::unexpected(scanned.error());
    }
    checkpoint::Delta delta = checkpoint::diff(base ? base->manifest : checkpoint::Manifest{}, scanned->manifest);
    delta.base = base ? base->id : std::string();
    out.token = take->token;
    out.base = delta.base;
    out.unchanged = base && delta.empty();
    out.delta = delta.toJson();
    out.filesScanned = scanned->filesScanned;
    out.filesHashed = scanned->filesHashed;
    out.bytesHashed = scanned->bytesHashed;
    out.skipped = scanned->skipped;
    take->unchanged = out.unchanged;
    if (out.unchanged) {
        // The same manifest: the newer keys spare the next scan the files it read again.
        m_base->keys = std::move(scanned->keys);
    } else {
        take->manifest = std::move(scanned->manifest);
        take->keys = std::move(scanned->keys);
    }
    m_take = std::move(take);
    out.scanMs = msSince(t0);
    return out;
}

Result<std::string> WorkspaceCheckpoints::readPending(const Take &take, const std::string &hash, int64_t size) const
{
    Fd in(::open((take.dir / hash).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    std::string data(static_cast<size_t>(size), '\0');
    size_t got = 0;
    while (in.valid() && got < data.size()) {
        const ssize_t n = ::read(in.get(), data.data() + got, data.size() - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += static_cast<size_t>(n);
    }
    if (got != data.size())
        return fail(ErrorCode::DataLoss, "pending chunk " + hash + " of checkpoint '" + take.token
                                             + "' is missing or short in the pool's spool; take a new checkpoint");
    return data;
}

Result<std::vector<CheckpointChunkData>> WorkspaceCheckpoints::readChunks(const std::string &token,
                                                                          const std::vector<std::string> &hashes)
{
    std::lock_guard lock(m_mutex);
    if (!m_take || m_take->token != token)
        return noTake(token);
    if (hashes.empty())
        return fail(ErrorCode::InvalidArgument, "name the chunks to read: the hashes TakeCheckpoint listed in pending");
    std::vector<CheckpointChunkData> out;
    int64_t total = 0;
    for (const auto &hash : hashes) {
        auto it = m_take->pending.find(hash);
        if (it == m_take->pending.end())
            return fail(ErrorCode::NotFound, "chunk " + hash + " is not pending in checkpoint '" + token
                                                 + "'; ask only for the hashes its TakeCheckpoint listed in pending");
        if (!out.empty() && total + it->second > kReadChunksBytes)
            break;
        auto data = readPending(*m_take, hash, it->second);
        if (!data)
            return std::unexpected(data.error());
        total += it->second;
        out.push_back({hash, std::move(*data)});
    }
    return out;
}

Status WorkspaceCheckpoints::commit(const std::string &token, const std::string &manifestId)
{
    std::lock_guard lock(m_mutex);
    if (!m_take || m_take->token != token) {
        if (m_base && m_base->id == manifestId && m_lastCommitToken == token && !token.empty())
            return {};   // a repeat whose first answer was lost
        return noTake(token);
    }
    if (m_take->unchanged) {
        if (manifestId != m_base->id)
            return fail(ErrorCode::InvalidArgument, "checkpoint '" + token + "' is unchanged since " + m_base->id + ", not "
                                                        + manifestId + "; commit it as its base, or take a new checkpoint");
    } else {
        // The id costs a serialisation: paid here, when something changed, not on every scan.
        const std::string id = m_take->manifest.id();
        if (id != manifestId)
            return fail(ErrorCode::InvalidArgument, "manifest_id " + manifestId + " is not checkpoint '" + token
                                                        + "' (the pool scanned " + id + "); apply its delta to the base "
                                                        "it names, or take a new checkpoint. The pool keeps its base");
        auto base = std::make_unique<Base>();
        base->id = manifestId;
        base->manifest = std::move(m_take->manifest);
        base->keys = std::move(m_take->keys);
        for (const auto &hash : base->manifest.chunkHashes())
            base->chunks.insert(hash);
        m_base = std::move(base);
    }
    m_lastCommitToken = token;
    dropTakeLocked();
    return {};
}

Result<RestoreBegun> WorkspaceCheckpoints::beginRestore(const std::string &manifestId, std::string_view manifestJson)
{
    const int64_t t0 = monotonicUs();
    if (!checkpoint::isSha256Hex(manifestId))
        return fail(ErrorCode::InvalidArgument, "manifest_id '" + manifestId + "' is not a manifest id (64 lowercase hex digits)");
    auto manifest = checkpoint::Manifest::parse(manifestJson);
    if (!manifest)
        return fail(ErrorCode::InvalidArgument, "the manifest cannot be restored: " + manifest.error().message);
    if (const std::string id = manifest->id(); id != manifestId)
        return fail(ErrorCode::InvalidArgument, "the manifest sent is " + id + ", not manifest_id " + manifestId
                                                    + "; send the manifest stored under that id");
    auto restore = std::make_unique<Restore>();
    restore->token = newToken();
    restore->manifestId = manifestId;
    restore->dir = m_paths.spool / ("restore-" + restore->token);
    restore->startedUs = t0;
    RestoreBegun begun{restore->token, manifest->chunkHashes()};
    restore->needed.insert(begun.missing.begin(), begun.missing.end());
    restore->manifest = std::move(*manifest);
    std::lock_guard lock(m_mutex);
    dropRestoreLocked();
    m_restore = std::move(restore);
    return begun;
}

Status WorkspaceCheckpoints::putRestoreChunks(const std::string &token, std::span<const CheckpointChunkView> chunks)
{
    std::lock_guard lock(m_mutex);
    if (!m_restore || m_restore->token != token)
        return noRestore(token);
    for (const auto &chunk : chunks) {
        const std::string hash(chunk.hash);
        if (!m_restore->needed.contains(hash))
            return fail(ErrorCode::InvalidArgument, "chunk '" + hash + "' is not in manifest " + m_restore->manifestId
                                                        + "; send only the chunks BeginRestore listed");
        if (static_cast<int64_t>(chunk.data.size()) > checkpoint::kChunkBytes || checkpoint::sha256Hex(chunk.data) != hash)
            return fail(ErrorCode::DataLoss, "chunk " + hash + " does not match its hash (" + std::to_string(chunk.data.size())
                                                 + " bytes): it was damaged on the way or in the checkpoint store; send "
                                                   "it again from a good copy");
        if (auto written = writeSpoolFile(m_restore->dir, hash, chunk.data); !written)
            return written;
        m_restore->received.insert(hash);
    }
    return {};
}

Status WorkspaceCheckpoints::checkAllPut(const Restore &restore) const
{
    for (const auto &e : restore.manifest.entries)
        for (const auto &hash : e.chunks)
            if (!restore.received.contains(hash))
                return fail(ErrorCode::FailedPrecondition, "chunk " + hash + " of '" + e.path + "' has not been put; send it "
                                                           "with PutRestoreChunks, then finish the restore again (the "
                                                           "workspace was not changed)");
    return {};
}

Result<RestoreDone> WorkspaceCheckpoints::finishRestore(const std::string &token)
{
    std::lock_guard lock(m_mutex);
    if (!m_restore || m_restore->token != token)
        return noRestore(token);
    if (auto all = checkAllPut(*m_restore); !all)
        return std::unexpected(all.error());
    std::error_code ec;
    fs::create_directories(m_paths.scratch, ec);
    const fs::path staging = m_paths.scratch / ("checkpoint-" + randomSuffix());
    if (::mkdir(staging.c_str(), 0700) != 0)
        return fail(ErrorCode::Internal, sysError("cannot create " + staging.string()) + "; check the sandbox's disk");
    struct Cleanup {
        fs::path path;
        ~Cleanup() { removeTree(path); }
    } cleanup{staging};
    auto built = buildTree(m_restore->manifest, staging, m_restore->dir, m_owners);
    if (!built)
        return fail(built.error().code, "restoring checkpoint " + m_restore->manifestId + ": " + built.error().message
                                            + " (the workspace was not changed)");
    // The files' ctimes a tick behind before the sandbox can see them: a write of its own then
    // gets a later ctime, so the keys can be trusted and the next checkpoint reads nothing.
    int64_t latestCtimeNs = 0;
    for (const auto &[path, key] : built->keys)
        latestCtimeNs = std::max(latestCtimeNs, key.ctimeNs);
    waitPastRacy(latestCtimeNs);
    const int64_t racyFrom = racyFromNs();
    if (auto swapped = swapWorkspace(m_paths.workspace, staging, m_paths.scratch, "checkpoint " + m_restore->manifestId);
        !swapped)
        return std::unexpected(swapped.error());
    dropRacyKeys(built->keys, racyFrom);
    auto base = std::make_unique<Base>();
    base->id = m_restore->manifestId;
    base->manifest = std::move(m_restore->manifest);
    base->keys = std::move(built->keys);
    base->chunks = std::move(m_restore->needed);
    m_base = std::move(base);
    const RestoreDone done{built->entries, built->bytes, msSince(m_restore->startedUs)};
    dropTakeLocked();   // scanned from the workspace the restore replaced
    dropRestoreLocked();
    return done;
}

} // namespace paddock::pool
