#pragma once
// The tiers' disk limit (disk_mb): one btrfs filesystem for all of a pool's sandbox directories,
// in a sparse image file under the state directory, loop-mounted on <state>/sandboxes. Each
// sandbox directory is a btrfs subvolume with its own qgroup whose referenced-bytes limit is the
// tier's disk_mb: a write past it fails inside the sandbox with EDQUOT ("Disk quota exceeded"),
// whatever the runtime, and whatever the writer's capabilities (qgroups have no root bypass).
//
// Why btrfs and not ext4/XFS project quotas: both need kernel options (CONFIG_QFMT_V2,
// CONFIG_XFS_QUOTA) that kernels built without disk quota formats lack (this build machine's
// among them), while btrfs qgroups are always built with btrfs. A subvolume also makes release
// cheap (one ioctl; the kernel drops the data and the qgroup in the background) and keeps a
// restore's staging directory, inside the sandbox directory, on the same filesystem (renames).
//
// Known limits: the limit counts the whole sandbox directory (the workspace plus a few KiB of the
// runtime's files: init socket, OCI bundle) and btrfs metadata; the image is sparse and sized for
// every tier's max_count x disk_mb, so a host disk smaller than that can still fill up.
//
// Threads: mount() and unmount() from one thread (the pool's create and shutdown); the other
// methods may be called from any thread concurrently (each is a few system calls, no state).

#include "common/result.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace paddock::pool {

class WorkspaceFs {
public:
    // Detaches whatever is mounted on mountPoint (a pool killed with kill -9 leaves its mount),
    // empties the directory, makes a fresh sparse image of imageBytes at image (mkfs.btrfs),
    // mounts it through a loop device (detached automatically at unmount) with quotas on.
    // FailedPrecondition naming what is missing (root, loop devices, btrfs, mkfs.btrfs) and the fix.
    static Result<std::unique_ptr<WorkspaceFs>> mount(const std::filesystem::path &image,
                                                      const std::filesystem::path &mountPoint, int64_t imageBytes);
    // Detaches every mount on mountPoint (MNT_DETACH: works while something still uses it); true
    // when there was one. For start-up (stale mounts) and tests.
    static bool detachStale(const std::filesystem::path &mountPoint);
    // For paddock-pool's main(), while it has one thread: moves the process into a private mount
    // namespace that still receives the host's mounts (MS_SLAVE), so the workspace filesystem
    // is visible only to the pool and its sandboxes and goes away with them, even after kill -9.
    // Outside, a sandbox directory is /proc/<pool pid>/root/<state dir>/sandboxes/<id>. Returns
    // "" or why not (then mounts go to the current namespace; the next start detaches them).
    static std::string enterPrivateMountNamespace();
    ~WorkspaceFs();
    WorkspaceFs(const WorkspaceFs &) = delete;
    WorkspaceFs &operator=(const WorkspaceFs &) = delete;

    // Unmounts (lazily if still busy) and deletes the image. Idempotent.
    void unmount();

    // Creates <mountPoint>/<name> as a subvolume whose data and metadata may not exceed
    // limitBytes. Returns its qgroup id (for usedBytes).
    Result<uint64_t> createLimited(const std::string &name, int64_t limitBytes);
    // Deletes the subvolume <mountPoint>/<name> and everything in it (nothing may run in it any
    // more). Falls back to a recursive delete. Never follows symlinks.
    void remove(const std::string &name);
    // What the subvolume's qgroup counts against its limit now (referenced bytes plus the
    // reservations of writes not yet committed), or -1 when unreadable.
    int64_t usedBytes(uint64_t qgroupId) const;

    // Commits the filesystem's running transaction and waits for it. Until then usedBytes still
    // counts files deleted since the last commit (btrfs commits every 30 s, and at once when a
    // write would cross a limit). A few ms on an idle filesystem.
    void commit() const;

    const std::filesystem::path &mountPoint() const { return m_mountPoint; }

private:
    WorkspaceFs(std::filesystem::path image, std::filesystem::path mountPoint, int rootFd, std::string sysQgroups);
    const std::filesystem::path m_image;
    const std::filesystem::path m_mountPoint;
    int m_rootFd = -1;                   // the mount's root directory, for the subvolume ioctls
    const std::string m_sysQgroups;      // /sys/fs/btrfs/<fsid>/qgroups
};

} // namespace paddock::pool
