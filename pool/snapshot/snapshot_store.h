#pragma once
// Workspace snapshots: a sandbox's /workspace as a pax tar archive, zstd-compressed, in an
// object-store directory (`snapshot_dir`, default <state_dir>/snapshots). Each archive is named by
// a ref, "<sandbox-id>-<n>", and stored as <dir>/<ref>.tar.zst with a <ref>.meta JSON beside it
// (size, crc32, file count). Written to a temporary file, then renamed, so a crash never leaves a
// half archive under a ref.
//
// The workspace is read and written from the host through directory descriptors opened with
// O_NOFOLLOW, one component at a time: a symlink the agent planted is archived as a symlink and
// never followed. Restore extracts into a staging directory first (every entry checked: no
// absolute paths, no "..", no symlink or hard link leading outside the workspace, libarchive's
// ARCHIVE_EXTRACT_SECURE_* flags on top), and only when the whole archive decoded cleanly swaps
// the staged content in; a corrupt or truncated archive leaves the workspace as it was.
//
// Owners: with an OwnerMap (a sandbox with host ids of its own), files are archived with the ids
// they have inside the sandbox and restored as the same ids inside the restoring sandbox, whatever
// its host ids; without one, owners are archived as 0 and restored as the pool's user.
//
// Known limits: devices, fifos and sockets in a workspace are skipped (counted in `skipped`);
// a restore into a sandbox whose processes are writing /workspace at that moment may interleave
// with their writes.
//
// Threads: all methods may be called from any thread; refs are allocated under a mutex.

#include "common/result.h"
#include "common/sandbox_values.h"
#include "pool/snapshot/workspace_files.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace paddock::pool {

struct SnapshotInfo {
    std::string ref;
    int64_t sizeBytes = 0;   // the compressed archive
    int64_t fileCount = 0;   // entries archived
    int64_t skipped = 0;     // special files left out
    double durationMs = 0;
};

// One file of a snapshot and a chunk of its content: the values the broker's pool client uses too
// (common/sandbox_values.h).
using paddock::SnapshotChunk;
using paddock::SnapshotFile;

class SnapshotStore {
public:
    static constexpr int64_t kMaxReadBytes = 4ll << 20;

    // Creates the directory (0700) if needed.
    static Result<std::unique_ptr<SnapshotStore>> open(std::filesystem::path dir);

    const std::filesystem::path &dir() const { return m_dir; }

    // Archives workspaceDir under a new ref "<refPrefix>-<n>".
    Result<SnapshotInfo> create(const std::filesystem::path &workspaceDir, const std::string &refPrefix, OwnerMap owners = {});
    // Replaces workspaceDir's content with the snapshot's. scratchDir (same filesystem as
    // workspaceDir, not visible inside the sandbox) holds the staging and the old content while
    // they are swapped. NotFound for an unknown ref; FailedPrecondition naming the ref for a
    // damaged archive or a refused entry (nothing in workspaceDir changed then).
    Result<SnapshotInfo> restore(const std::string &ref, const std::filesystem::path &workspaceDir,
                                 const std::filesystem::path &scratchDir, OwnerMap owners = {});
    Result<std::vector<SnapshotFile>> list(const std::string &ref, const std::string &pathPrefix);
    Result<SnapshotChunk> read(const std::string &ref, const std::string &path, int64_t offset, int64_t maxBytes);
    Result<int64_t> sizeOf(const std::string &ref) const;
    // Deletes the archive and its meta file; fine when it does not exist.
    void remove(const std::string &ref);
    // Deletes the archives last written before olderThanUnixMs, except those keep() names.
    // Returns how many went.
    size_t prune(int64_t olderThanUnixMs, const std::function<bool(const std::string &ref)> &keep);

    // A ref is [A-Za-z0-9._-]{1,200} not starting with '.'.
    static bool validRef(const std::string &ref);

private:
    explicit SnapshotStore(std::filesystem::path dir) : m_dir(std::move(dir)) {}
    Result<std::filesystem::path> archivePath(const std::string &ref) const;

    const std::filesystem::path m_dir;
    std::mutex m_mutex;   // ref allocation
};

} // namespace paddock::pool
