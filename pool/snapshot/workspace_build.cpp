#include "pool/snapshot/workspace_build.h"

#include "checkpoint/sha256.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace paddock::pool {
namespace fs = std::filesystem;
using checkpoint::Entry;
using checkpoint::EntryType;

namespace {

std::unexpected<Error> cannotWrite(const std::string &what, const std::string &path)
{
    return fail(ErrorCode::Internal, sysError("cannot " + what + " '" + path + "' in the restore's staging directory")
                                         + "; check the space of the sandbox's disk (while they are swapped, it holds "
                                           "the restored workspace beside the current one)");
}

// Both of a file's times set to its manifest mtime.
void mtimeOf(const Entry &e, timespec times[2])
{
    const int64_t secs = e.mtimeMs >= 0 ? e.mtimeMs / 1000 : -((-e.mtimeMs + 999) / 1000);
    times[0].tv_sec = static_cast<time_t>(secs);
    times[0].tv_nsec = static_cast<long>((e.mtimeMs - secs * 1000) * 1'000'000);
    times[1] = times[0];
}

Status writeAll(int fd, std::string_view data)
{
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return fail(ErrorCode::Internal, "write failed");
        data.remove_prefix(static_cast<size_t>(n));
    }
    return {};
}

// The bytes a file's chunk `index` has: kChunkBytes, but the last one holds the rest.
int64_t chunkSize(const Entry &e, size_t index)
{
    const int64_t before = static_cast<int64_t>(index) * checkpoint::kChunkBytes;
    return std::min(checkpoint::kChunkBytes, e.size - before);
}

class TreeBuilder {
public:
    TreeBuilder(int root, fs::path chunkDir, const OwnerMap &owners)
        : m_root(root), m_chunkDir(std::move(chunkDir)), m_owners(owners)
    {
    }

    Status add(const Entry &e);
    // Mode, owner and mtime of every directory created, deepest first.
    Status finishDirs();
    BuiltTree &result() { return m_result; }

private:
    // The directory an entry goes in (its name in `name`), opened one component at a time.
    Result<int> parentOf(const std::string &path, std::string &name);
    Result<Fd> openPath(const std::string &rel) const;
    Status writeFile(int parent, const std::string &name, const Entry &e);
    Status readChunk(const Entry &e, size_t index);
    Status setAttributes(int fd, const Entry &e) const;

    const int m_root;
    const fs::path m_chunkDir;
    const OwnerMap m_owners;
    std::string m_parentPath;   // the last parent opened, kept for its siblings
    Fd m_parent;
    std::string m_chunk;
    std::vector<const Entry *> m_dirs;
    BuiltTree m_result;
};

Result<Fd> TreeBuilder::openPath(const std::string &rel) const
{
    Fd dir = openDirPath(m_root, rel);
    if (!dir.valid())
        return cannotWrite("open the directory", rel);
    return dir;
}

Result<int> TreeBuilder::parentOf(const std::string &path, std::string &name)
{
    const auto slash = path.rfind('/');
    name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (slash == std::string::npos)
        return m_root;
    const std::string parent = path.substr(0, slash);
    if (!m_parent.valid() || parent != m_parentPath) {
        auto opened = openPath(parent);
        if (!opened)
            return std::unexpected(opened.error());
        m_parent = std::move(*opened);
        m_parentPath = parent;
    }
    return m_parent.get();
}

Status TreeBuilder::setAttributes(int fd, const Entry &e) const
{
    if (m_owners.count > 0
        && ::fchown(fd, hostIdOf(m_owners, e.uid, ::geteuid()), hostIdOf(m_owners, e.gid, ::getegid())) != 0)
        return cannotWrite("give an owner to", e.path);
    timespec times[2];
    mtimeOf(e, times);
    if (::fchmod(fd, e.mode & checkpoint::kModeMask) != 0 || ::futimens(fd, times) != 0)
        return cannotWrite("set the mode and mtime of", e.path);
    return {};
}

Status TreeBuilder::readChunk(const Entry &e, size_t index)
{
    const std::string &hash = e.chunks[index];
    Fd in(::open((m_chunkDir / hash).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!in.valid())
        return fail(ErrorCode::DataLoss, "chunk " + hash + " of '" + e.path + "' is not on the pool; send it with "
                                             "PutRestoreChunks, then finish the restore again");
    m_chunk.resize(static_cast<size_t>(checkpoint::kChunkBytes) + 1);
    size_t got = 0;
    while (got < m_chunk.size()) {
        const ssize_t n = ::read(in.get(), m_chunk.data() + got, m_chunk.size() - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += static_cast<size_t>(n);
    }
    m_chunk.resize(got);
    if (static_cast<int64_t>(got) != chunkSize(e, index) || checkpoint::sha256Hex(m_chunk) != hash)
        return fail(ErrorCode::DataLoss, "chunk " + hash + " of '" + e.path + "' is damaged on the pool (its bytes do not "
                                             "match its hash or the file's size); send it again with PutRestoreChunks");
    return {};
}

Status TreeBuilder::writeFile(int parent, const std::string &name, const Entry &e)
{
    Fd out(::openat(parent, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out.valid())
        return cannotWrite("create", e.path);
    for (size_t i = 0; i < e.chunks.size(); ++i) {
        if (auto read = readChunk(e, i); !read)
            return read;
        if (!writeAll(out.get(), m_chunk))
            return cannotWrite("write", e.path);
    }
    if (auto set = setAttributes(out.get(), e); !set)
        return set;
    struct stat st{};
    if (::fstat(out.get(), &st) != 0)
        return cannotWrite("stat", e.path);
    m_result.keys.emplace(e.path, statKey(st));
    m_result.bytes += e.size;
    return {};
}

Status TreeBuilder::add(const Entry &e)
{
    std::string name;
    auto parent = parentOf(e.path, name);
    if (!parent)
        return std::unexpected(parent.error());
    m_result.entries++;
    switch (e.type) {
    case EntryType::Dir:
        if (::mkdirat(*parent, name.c_str(), 0700) != 0)
            return cannotWrite("create the directory", e.path);
        m_dirs.push_back(&e);
        return {};
    case EntryType::Symlink: {
        if (::symlinkat(e.target.c_str(), *parent, name.c_str()) != 0)
            return cannotWrite("create the symlink", e.path);
        timespec times[2];
        mtimeOf(e, times);
        if (m_owners.count > 0
            && ::fchownat(*parent, name.c_str(), hostIdOf(m_owners, e.uid, ::geteuid()), hostIdOf(m_owners, e.gid, ::getegid()),
                          AT_SYMLINK_NOFOLLOW) != 0)
            return cannotWrite("give an owner to", e.path);
        if (::utimensat(*parent, name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
            return cannotWrite("set the mtime of", e.path);
        return {};
    }
    case EntryType::File:
        return writeFile(*parent, name, e);
    }
    return {};
}

Status TreeBuilder::finishDirs()
{
    m_parent.reset();   // its mtime is set below; nothing more is created
    for (auto it = m_dirs.rbegin(); it != m_dirs.rend(); ++it) {
        auto dir = openPath((*it)->path);
        if (!dir)
            return std::unexpected(dir.error());
        if (auto set = setAttributes(dir->get(), **it); !set)
            return set;
    }
    return {};
}

} // namespace

Result<BuiltTree> buildTree(const checkpoint::Manifest &manifest, const fs::path &staging, const fs::path &chunkDir,
                            const OwnerMap &owners)
{
    Fd root(::open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!root.valid())
        return cannotWrite("open", staging.string());
    TreeBuilder builder(root.get(), chunkDir, owners);
    for (const auto &e : manifest.entries)
        if (auto added = builder.add(e); !added)
            return std::unexpected(added.error());
    if (auto finished = builder.finishDirs(); !finished)
        return std::unexpected(finished.error());
    return std::move(builder.result());
}

} // namespace paddock::pool
