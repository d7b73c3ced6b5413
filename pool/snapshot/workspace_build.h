#pragma once
// A checkpoint's tree built from its manifest and its chunks (workspace_checkpoint.h's restore):
// into an empty staging directory the sandbox cannot see, on the workspace's filesystem, so the
// result can be swapped in whole (swapWorkspace). Every entry is created through directory
// descriptors opened with O_NOFOLLOW, with the *at calls that do not follow a final symlink:
// symlinks are created as symlinks and never followed, whatever they point to. Modes keep
// checkpoint::kModeMask; owners are the manifest's inside ids mapped to the restoring sandbox's
// host ids (hostIdOf); mtimes are the manifest's. Directories get their mode, owner and mtime
// last, deepest first, so creating their content neither changes their mtime nor needs them
// writable.
//
// Each chunk is read from <chunkDir>/<hash> and checked against its hash and the size the file
// needs before it is written, so a chunk damaged on the pool's disk is named, not restored.
//
// Threads: plain functions, on the calling thread.

#include "checkpoint/manifest.h"
#include "common/result.h"
#include "pool/snapshot/workspace_files.h"
#include "pool/snapshot/workspace_scan.h"

#include <cstdint>
#include <filesystem>

namespace paddock::pool {

struct BuiltTree {
    int64_t entries = 0;   // files, directories and symlinks created
    int64_t bytes = 0;     // file content written
    StatKeys keys;         // every file's stat key as built; the caller drops the racy ones once it is in place
};

// Builds manifest (parsed and valid: parents before children, no "..") under staging, an empty
// directory. DataLoss naming the chunk and the file when a chunk is missing, damaged or of the
// wrong size; Internal when the staging filesystem refuses a write.
Result<BuiltTree> buildTree(const checkpoint::Manifest &manifest, const std::filesystem::path &staging,
                            const std::filesystem::path &chunkDir, const OwnerMap &owners);

} // namespace paddock::pool
