#pragma once
// The scan behind a checkpoint (workspace_checkpoint.h): a workspace read from the host as a
// checkpoint::Manifest, through directory descriptors opened with O_NOFOLLOW one component at a
// time, so a symlink the agent planted is recorded as a symlink and never followed. Owners are
// recorded as the sandbox sees them (OwnerMap); devices, fifos and sockets are skipped and
// counted, and so is what a manifest cannot hold (deeper than 256 levels, a path longer than
// checkpoint::kMaxPathBytes) or what cannot be opened.
//
// Each file's stat key (inode, size, mtime, ctime) is kept with the manifest. A scan given the
// manifest and keys of an earlier scan re-reads only the files whose key changed and takes the
// chunk hashes of the others from the earlier manifest: an unchanged workspace costs a listing
// and a stat per entry, and no file is opened. ctime is in the key because an agent can set a
// file's mtime back, but not its ctime.
//
// Racy keys (as git calls them): the kernel stamps times from a clock that ticks every few
// milliseconds, so a write in the same tick as the scan's stat can leave the key as it was. A file
// whose ctime is within racyMarginNs() of now is read last, once that margin has passed since its
// ctime: a write after that stat lands in a later tick, so its key can be trusted. (A file written
// again meanwhile is read, and its key not kept: it is read again next time.) Only scans that meet
// files changed in the last few milliseconds wait, at most a margin. Assumes the workspace's
// filesystem keeps times to the millisecond or finer (ext4, xfs, btrfs and tmpfs keep
// nanoseconds). A write through a shared mapping to pages already dirty does not update the times
// at all, and is not seen until the file's times change.
//
// A file is read once, at most up to the size it had when opened: every chunk read goes to the
// caller's visitor as it is hashed. A file written to while it is read may be recorded half old,
// half new; its key is the one taken before the read, so the next scan reads it again.
//
// Threads: plain functions; one scan runs on the calling thread.

#include "checkpoint/manifest.h"
#include "common/result.h"
#include "pool/snapshot/workspace_files.h"

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace paddock::pool {

// What says a file is unchanged since it was last read, in nanoseconds where it is a time.
struct StatKey {
    uint64_t inode = 0;
    int64_t size = 0;
    int64_t mtimeNs = 0;
    int64_t ctimeNs = 0;

    bool operator==(const StatKey &) const = default;
};

StatKey statKey(const struct stat &st);

// A file's stat key by its manifest path.
using StatKeys = std::unordered_map<std::string, StatKey>;

// One tick of the clock file times are stamped from (CLOCK_REALTIME_COARSE) and a millisecond,
// between 2 and 20 ms.
int64_t racyMarginNs();
// The wall clock now, less racyMarginNs(): a key with a ctime from then on may be racy.
int64_t racyFromNs();
// Sleeps until a ctime of ctimeNs is no longer racy, at most racyMarginNs().
void waitPastRacy(int64_t ctimeNs);
// Drops the keys whose ctime is at or after fromNs.
void dropRacyKeys(StatKeys &keys, int64_t fromNs);

// Called for every chunk of every file read, in order; an error ends the scan with it.
using ChunkVisitor = std::function<Status(const std::string &hash, std::string_view data)>;

struct WorkspaceScan {
    checkpoint::Manifest manifest;   // sorted
    StatKeys keys;                   // every file of the manifest whose key is not racy
    int64_t filesScanned = 0;        // regular files seen
    int64_t filesHashed = 0;         // of those, read
    int64_t bytesHashed = 0;
    int64_t skipped = 0;             // devices, fifos, sockets, what a manifest cannot hold or could not be opened
};

// Scans workspaceDir. With an earlier manifest and its keys, a file whose key is unchanged keeps
// that manifest's chunks and is not read; without them (null), every file is read.
// FailedPrecondition when the workspace cannot be opened or holds more than
// checkpoint::kMaxEntries entries; Internal when a file cannot be read.
Result<WorkspaceScan> scanWorkspace(const std::filesystem::path &workspaceDir, const OwnerMap &owners,
                                    const checkpoint::Manifest *earlier, const StatKeys *earlierKeys,
                                    const ChunkVisitor &visit);

} // namespace paddock::pool
