#pragma once
// Host-side file work on a sandbox's workspace, shared by snapshots (snapshot_store.h) and
// checkpoints (workspace_checkpoint.h): descriptors that close themselves, listings and recursive
// removal through directory descriptors opened with O_NOFOLLOW (a symlink the agent planted is
// removed or listed, never followed), the swap of a staged tree for the workspace's content, and
// the mapping of owners between host ids and the ids the sandbox sees.
//
// Threads: plain functions and values, free to call from any thread.

#include "common/result.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace paddock::pool {

// A sandbox's block of host ids (pool/runtimes/sandbox_identity.h): inside id i is host id
// hostId + i for i < count. count == 0: no mapping.
struct OwnerMap {
    uint32_t hostId = 0;
    uint32_t count = 0;
};

// Nobody, inside: what a file of a host id outside the sandbox's block is seen as.
inline constexpr uint32_t kNobodyId = 65534;

// The id a host id is inside the sandbox: 0 without a mapping, nobody outside its block.
uint32_t insideId(const OwnerMap &map, uint32_t hostId);
// The host id an id from inside becomes in the restoring sandbox: the same id inside, its nobody
// (or its root, for a block too small to have one) beyond its block, poolId without a mapping.
uint32_t hostIdOf(const OwnerMap &map, int64_t insideId, uint32_t poolId);

// A descriptor closed when the object goes.
class Fd {
public:
    explicit Fd(int fd = -1) : m_fd(fd) {}
    ~Fd() { reset(); }
    Fd(Fd &&other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
    Fd &operator=(Fd &&other) noexcept
    {
        if (this != &other) {
            reset();
            m_fd = std::exchange(other.m_fd, -1);
        }
        return *this;
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;

    int get() const { return m_fd; }
    bool valid() const { return m_fd >= 0; }
    void reset(int fd = -1);

private:
    int m_fd;
};

// "what: <strerror(errno)>".
std::string sysError(const std::string &what);
// 16 random hex digits, for names of temporary directories.
std::string randomSuffix();

// Opens name under dirfd as a directory, never following a symlink (-1 with errno set).
int openDirAt(int dirfd, const std::string &name);
// Opens rel ("a/b", "" for root itself) under root as a directory, one component at a time, never
// following a symlink (invalid with errno set).
Fd openDirPath(int root, const std::string &rel);
// Names in a directory, sorted, without "." and "..".
std::vector<std::string> listNames(int dirfd);
// Removes name under dirfd, recursively, never following a symlink.
void removeAt(int dirfd, const std::string &name);
void removeTree(const std::filesystem::path &path);

// Swaps workspaceDir's content for staging's: the old content moves aside into scratchDir (same
// filesystem: renames), the staged content moves in; a failure moves the old content back. `what`
// names the restore in messages ("snapshot 'x'").
Status swapWorkspace(const std::filesystem::path &workspaceDir, const std::filesystem::path &staging,
                     const std::filesystem::path &scratchDir, const std::string &what);

} // namespace paddock::pool
