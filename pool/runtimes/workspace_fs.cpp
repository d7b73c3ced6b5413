#include "pool/runtimes/workspace_fs.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/loop.h>
#include <sched.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace paddock::pool {
namespace fs = std::filesystem;

namespace {

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd()
    {
        if (fd >= 0)
            ::close(fd);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    int release()
    {
        int f = fd;
        fd = -1;
        return f;
    }
};

std::unexpected<Error> unavailable(const std::string &what)
{
    return fail(ErrorCode::FailedPrecondition, what);
}

// Runs mkfs.btrfs on the image; "" or why it failed.
std::string makeFilesystem(const fs::path &image)
{
    const std::string imagePath = image.string();
    std::vector<const char *> argv = {"mkfs.btrfs", "-q", "-f", imagePath.c_str(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);   // its notes on defaults
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, "mkfs.btrfs", &actions, nullptr, const_cast<char *const *>(argv.data()), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0)
        return "mkfs.btrfs cannot be run (" + std::string(std::strerror(rc)) +
               "); install btrfs-progs (Debian/Ubuntu: apt-get install btrfs-progs, or scripts/setup-deps)";
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return "mkfs.btrfs " + imagePath + " failed (status " + std::to_string(status) + ")";
    return {};
}

struct Loop {
    std::string path;
    int fd = -1;   // keep it open until mounted: closing the last descriptor of an unmounted
                   // autoclear device detaches it at once
};

// Attaches image to a free loop device that detaches itself once unmounted, or says why not.
Result<Loop> attachLoop(int imageFd)
{
    Fd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
    if (control.fd < 0)
        return unavailable(std::string("cannot open /dev/loop-control: ") + std::strerror(errno) +
                           "; the pool needs root and loop devices (modprobe loop; in a container, pass the loop devices in)");
    // Another process may take the free device between the two calls: retry.
    for (int attempt = 0; attempt < 16; ++attempt) {
        const int n = ::ioctl(control.fd, LOOP_CTL_GET_FREE);
        if (n < 0)
            return unavailable(std::string("no free loop device: ") + std::strerror(errno));
        const std::string dev = "/dev/loop" + std::to_string(n);
        Fd loop(::open(dev.c_str(), O_RDWR | O_CLOEXEC));
        if (loop.fd < 0)
            return unavailable("cannot open " + dev + ": " + std::strerror(errno));
        loop_config config {};
        config.fd = static_cast<uint32_t>(imageFd);
        config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        if (::ioctl(loop.fd, LOOP_CONFIGURE, &config) == 0)
            return Loop{dev, loop.release()};
        if (errno != EBUSY)
            return unavailable("cannot attach the workspace image to " + dev + ": " + std::strerror(errno));
    }
    return unavailable("no free loop device after 16 attempts (others are taking them); retry");
}

std::string fsidText(const uint8_t *fsid)
{
    char out[40];
    std::snprintf(out, sizeof out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", fsid[0],
                  fsid[1], fsid[2], fsid[3], fsid[4], fsid[5], fsid[6], fsid[7], fsid[8], fsid[9], fsid[10], fsid[11],
                  fsid[12], fsid[13], fsid[14], fsid[15]);
    return out;
}

} // namespace

bool WorkspaceFs::detachStale(const fs::path &mountPoint)
{
    bool any = false;
    // Several crashed runs may have stacked mounts: detach until it is a plain directory again
    // (EINVAL: not a mount point).
    for (int i = 0; i < 64 && ::umount2(mountPoint.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0; ++i)
        any = true;
    return any;
}

std::string WorkspaceFs::enterPrivateMountNamespace()
{
    if (::geteuid() != 0)
        return "not root";
    if (::unshare(CLONE_NEWNS) != 0)
        return std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
        return std::string("making / a slave mount: ") + std::strerror(errno);
    return {};
}

Result<std::unique_ptr<WorkspaceFs>> WorkspaceFs::mount(const fs::path &image, const fs::path &mountPoint,
                                                        int64_t imageBytes)
{
    if (::geteuid() != 0)
        return unavailable("the pool does not run as root, and mounting the workspace filesystem needs root");
    if (detachStale(mountPoint))
        spdlog::warn("detached the workspace filesystem a killed pool left mounted on {}", mountPoint.string());
    std::error_code ec;
    // Directories of a run from before disk limits (or of a failed mount) lie under the mount point.
    for (const auto &entry : fs::directory_iterator(mountPoint, ec))
        fs::remove_all(entry.path(), ec);
    fs::create_directories(mountPoint, ec);
    // A fresh image every start: what the last run left is to be deleted anyway, and mkfs is cheaper
    // than deleting a killed pool's workspaces one file at a time.
    fs::remove(image, ec);
    {
        Fd fd(::open(image.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
        if (fd.fd < 0 || ::ftruncate(fd.fd, imageBytes) != 0)
            return unavailable("cannot create the workspace image " + image.string() + ": " + std::strerror(errno));
    }
    if (auto err = makeFilesystem(image); !err.empty()) {
        fs::remove(image, ec);
        return unavailable(err);
    }
    Fd imageFd(::open(image.c_str(), O_RDWR | O_CLOEXEC));
    if (imageFd.fd < 0)
        return unavailable("cannot open " + image.string() + ": " + std::strerror(errno));
    auto loop = attachLoop(imageFd.fd);
    if (!loop) {
        fs::remove(image, ec);
        return std::unexpected(loop.error());
    }
    const std::string *dev = &loop->path;
    Fd loopFd(loop->fd);   // the mount holds the device from here; closing ours then is fine
    if (::mount(dev->c_str(), mountPoint.c_str(), "btrfs", MS_NOSUID | MS_NODEV, nullptr) != 0) {
        const int err = errno;
        // The device detaches when our descriptor closes (autoclear).
        fs::remove(image, ec);
        return unavailable("cannot mount the workspace image (" + *dev + ") on " + mountPoint.string() + " as btrfs: " +
                           std::strerror(err) + (err == ENODEV ? "; the kernel has no btrfs (modprobe btrfs)" : ""));
    }
    auto undo = [&] {
        ::umount2(mountPoint.c_str(), MNT_DETACH);
        fs::remove(image, ec);
    };
    Fd root(::open(mountPoint.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    btrfs_ioctl_quota_ctl_args quota {};
    quota.cmd = BTRFS_QUOTA_CTL_ENABLE;
    btrfs_ioctl_fs_info_args info {};
    if (root.fd < 0 || ::ioctl(root.fd, BTRFS_IOC_QUOTA_CTL, &quota) != 0 || ::ioctl(root.fd, BTRFS_IOC_FS_INFO, &info) != 0) {
        const std::string why = std::strerror(errno);
        undo();
        return unavailable("cannot enable quotas on the workspace filesystem: " + why);
    }
    ::fchmod(root.fd, 0700);
    const std::string sys = "/sys/fs/btrfs/" + fsidText(info.fsid) + "/qgroups";
    spdlog::info("workspace filesystem: btrfs with quotas, {} MiB sparse image {} on {} ({})", imageBytes >> 20,
                 image.string(), mountPoint.string(), *dev);
    return std::unique_ptr<WorkspaceFs>(new WorkspaceFs(image, mountPoint, root.release(), sys));
}

WorkspaceFs::WorkspaceFs(fs::path image, fs::path mountPoint, int rootFd, std::string sysQgroups)
    : m_image(std::move(image)), m_mountPoint(std::move(mountPoint)), m_rootFd(rootFd), m_sysQgroups(std::move(sysQgroups))
{
}

WorkspaceFs::~WorkspaceFs() { unmount(); }

void WorkspaceFs::unmount()
{
    if (m_rootFd < 0)
        return;
    ::close(m_rootFd);
    m_rootFd = -1;
    if (::umount2(m_mountPoint.c_str(), UMOUNT_NOFOLLOW) != 0) {
        spdlog::info("workspace filesystem on {} still busy ({}: exiting sandbox processes); detached lazily", m_mountPoint.string(), std::strerror(errno));
        ::umount2(m_mountPoint.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
    }
    std::error_code ec;
    fs::remove(m_image, ec);   // a lazily detached mount keeps the blocks until its last user goes
}

Result<uint64_t> WorkspaceFs::createLimited(const std::string &name, int64_t limitBytes)
{
    btrfs_ioctl_vol_args args {};
    if (name.empty() || name.size() >= sizeof args.name || name.find('/') != std::string::npos)
        return fail(ErrorCode::InvalidArgument, "bad sandbox directory name '" + name + "'");
    std::memcpy(args.name, name.data(), name.size());
    if (::ioctl(m_rootFd, BTRFS_IOC_SUBVOL_CREATE, &args) != 0)
        return fail(ErrorCode::FailedPrecondition, "cannot create the sandbox's subvolume " + (m_mountPoint / name).string() +
                                                       ": " + std::strerror(errno));
    auto undo = [&](const std::string &what) {
        const std::string why = std::strerror(errno);
        remove(name);
        return fail(ErrorCode::FailedPrecondition, what + " " + (m_mountPoint / name).string() + ": " + why);
    };
    Fd dir(::openat(m_rootFd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    btrfs_ioctl_ino_lookup_args lookup {};
    lookup.objectid = BTRFS_FIRST_FREE_OBJECTID;
    if (dir.fd < 0 || ::ioctl(dir.fd, BTRFS_IOC_INO_LOOKUP, &lookup) != 0)
        return undo("cannot read the subvolume id of");
    btrfs_ioctl_qgroup_limit_args limit {};
    limit.qgroupid = 0;   // the subvolume the descriptor is in
    limit.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
    limit.lim.max_rfer = static_cast<uint64_t>(limitBytes);
    if (::ioctl(dir.fd, BTRFS_IOC_QGROUP_LIMIT, &limit) != 0)
        return undo("cannot set the disk limit of");
    return lookup.treeid;
}

void WorkspaceFs::remove(const std::string &name)
{
    btrfs_ioctl_vol_args args {};
    if (!name.empty() && name.size() < sizeof args.name && name.find('/') == std::string::npos && m_rootFd >= 0) {
        std::memcpy(args.name, name.data(), name.size());
        if (::ioctl(m_rootFd, BTRFS_IOC_SNAP_DESTROY, &args) == 0 || errno == ENOENT)
            return;
        spdlog::debug("cannot delete subvolume {} ({}); deleting its files", name, std::strerror(errno));
    }
    std::error_code ec;
    fs::remove_all(m_mountPoint / name, ec);   // does not follow symlinks
    if (ec)
        spdlog::warn("could not delete {}: {}", (m_mountPoint / name).string(), ec.message());
}

void WorkspaceFs::commit() const
{
    // A transaction commit without a writeback of every file (unlike syncfs): what it settles
    // is the qgroup accounting of deletions and of fsynced writes.
    uint64_t transid = 0;
    if (m_rootFd >= 0 && ::ioctl(m_rootFd, BTRFS_IOC_START_SYNC, &transid) == 0)
        ::ioctl(m_rootFd, BTRFS_IOC_WAIT_SYNC, &transid);
}

int64_t WorkspaceFs::usedBytes(uint64_t qgroupId) const
{
    // What the kernel holds against the limit: committed bytes plus what writes since the last
    // transaction commit have reserved (fsync goes through the log tree, not a commit).
    const std::string dir = m_sysQgroups + "/0_" + std::to_string(qgroupId) + "/";
    int64_t total = 0;
    for (const char *name : {"referenced", "rsv_data", "rsv_meta_pertrans", "rsv_meta_prealloc"}) {
        std::ifstream in(dir + name);
        int64_t v = 0;
        if (!(in >> v))
            return -1;
        total += v;
    }
    return total;
}

} // namespace paddock::pool
