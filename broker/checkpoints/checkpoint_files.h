#pragma once
// Reading a checkpoint's files without a sandbox: the operators' snapshot browser for a sandbox
// whose host is gone (operator_desk.h). Listings come from the manifest, content from its chunks,
// each checked against its name.
//
// Threads: free functions; safe from any thread (the store is).

#include "broker/checkpoints/checkpoint_store.h"
#include "common/sandbox_values.h"

#include <string>
#include <vector>

namespace paddock::checkpoints {

// The prefix that marks a snapshot ref as a checkpoint of the store ("checkpoint:<manifest id>")
// rather than an archive on a pool.
inline constexpr const char *kCheckpointRefPrefix = "checkpoint:";

// The manifest id in "checkpoint:<id>", or "" when ref is not of that form.
std::string manifestOfRef(const std::string &ref);

// Entries under pathPrefix ("" or "/": all; "src": src and below), parents first.
Result<std::vector<SnapshotFile>> listCheckpointFiles(CheckpointStore &store, const std::string &manifestId,
                                                      const std::string &pathPrefix);
// Up to maxBytes (0: 1 MiB; at most 4 MiB) of a file from offset. NotFound for a path the
// checkpoint does not hold; InvalidArgument for a directory or symlink.
Result<SnapshotChunk> readCheckpointFile(CheckpointStore &store, const std::string &manifestId, const std::string &path,
                                         int64_t offset, int64_t maxBytes);

} // namespace paddock::checkpoints
