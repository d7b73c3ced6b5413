#include "pool/snapshot/workspace_files.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <random>
#include <unistd.h>

namespace paddock::pool {
namespace fs = std::filesystem;

uint32_t insideId(const OwnerMap &map, uint32_t hostId)
{
    if (map.count == 0)
        return 0;
    return hostId >= map.hostId && hostId - map.hostId < map.count ? hostId - map.hostId : kNobodyId;
}

uint32_t hostIdOf(const OwnerMap &map, int64_t inside, uint32_t poolId)
{
    if (map.count == 0)
        return poolId;
    if (inside >= 0 && inside < map.count)
        return map.hostId + static_cast<uint32_t>(inside);
    return map.hostId + (kNobodyId < map.count ? kNobodyId : 0);
}

void Fd::reset(int fd)
{
    if (m_fd >= 0)
        ::close(m_fd);
    m_fd = fd;
}

std::string sysError(const std::string &what)
{
    return what + ": " + std::strerror(errno);
}

std::string randomSuffix()
{
    thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
    return buf;
}

int openDirAt(int dirfd, const std::string &name)
{
    return ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

Fd openDirPath(int root, const std::string &rel)
{
    Fd current(::dup(root));
    size_t start = 0;
    while (current.valid() && start < rel.size()) {
        const size_t end = std::min(rel.find('/', start), rel.size());
        current = Fd(openDirAt(current.get(), rel.substr(start, end - start)));
        start = end + 1;
    }
    return current;
}

std::vector<std::string> listNames(int dirfd)
{
    std::vector<std::string> names;
    int dupfd = ::dup(dirfd);
    if (dupfd < 0)
        return names;
    DIR *d = ::fdopendir(dupfd);
    if (!d) {
        ::close(dupfd);
        return names;
    }
    ::rewinddir(d);
    while (dirent *e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0)
            continue;
        names.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

void removeAt(int dirfd, const std::string &name)
{
    if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT)
        return;
    Fd sub(openDirAt(dirfd, name));
    if (!sub.valid())
        return;
    for (const auto &child : listNames(sub.get()))
        removeAt(sub.get(), child);
    ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR);
}

void removeTree(const fs::path &path)
{
    Fd parent(::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (parent.valid())
        removeAt(parent.get(), path.filename().string());
}

Status swapWorkspace(const fs::path &workspaceDir, const fs::path &staging, const fs::path &scratchDir,
                     const std::string &what)
{
    std::error_code ec;
    Fd ws(::open(workspaceDir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    Fd st(::open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    const fs::path old = scratchDir / ("old-" + randomSuffix());
    fs::create_directory(old, ec);
    Fd od(::open(old.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!ws.valid() || !st.valid() || !od.valid())
        return fail(ErrorCode::FailedPrecondition, sysError("cannot open the workspace " + workspaceDir.string()));
    std::vector<std::string> movedOut, movedIn;
    auto rollback = [&](const std::string &why) -> Status {
        for (const auto &n : movedIn)
            ::renameat(ws.get(), n.c_str(), st.get(), n.c_str());
        for (const auto &n : movedOut)
            ::renameat(od.get(), n.c_str(), ws.get(), n.c_str());
        removeTree(old);
        return fail(ErrorCode::Internal, "restoring " + what + ": " + why + "; the workspace was put back as it was");
    };
    for (const auto &n : listNames(ws.get())) {
        if (::renameat(ws.get(), n.c_str(), od.get(), n.c_str()) != 0)
            return rollback(sysError("cannot move " + n + " aside"));
        movedOut.push_back(n);
    }
    for (const auto &n : listNames(st.get())) {
        if (::renameat(st.get(), n.c_str(), ws.get(), n.c_str()) != 0)
            return rollback(sysError("cannot move " + n + " in"));
        movedIn.push_back(n);
    }
    removeTree(old);
    return {};
}

} // namespace paddock::pool
