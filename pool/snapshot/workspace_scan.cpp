#include "pool/snapshot/workspace_scan.h"

#include "checkpoint/sha256.h"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <ctime>
#include <fcntl.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace paddock::pool {
namespace fs = std::filesystem;
using checkpoint::Entry;
using checkpoint::EntryType;

namespace {

constexpr int kMaxDepth = 256;
constexpr int64_t kMaxRacyMarginNs = 20'000'000;

int64_t nanoseconds(const timespec &t)
{
    return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

int64_t milliseconds(const timespec &t)
{
    return static_cast<int64_t>(t.tv_sec) * 1000 + t.tv_nsec / 1'000'000;
}

// Up to `want` bytes; fewer only at the end of the file.
Result<size_t> readFull(int fd, char *out, size_t want)
{
    size_t got = 0;
    while (got < want) {
        const ssize_t n = ::read(fd, out + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return fail(ErrorCode::Internal, sysError("read"));
        if (n == 0)
            break;
        got += static_cast<size_t>(n);
    }
    return got;
}

// One scan's walk: the entries found so far and what they cost.
class Scanner {
public:
    Scanner(const OwnerMap &owners, const checkpoint::Manifest *earlier, const StatKeys *earlierKeys,
            const ChunkVisitor &visit)
        : m_owners(owners), m_earlier(earlier), m_earlierKeys(earlierKeys), m_visit(visit)
    {
    }

    Status walk(int dirfd, const std::string &rel, int depth);
    // The files put off for being racy, read now that they are not.
    Status readDeferred(int root);
    WorkspaceScan finish();

private:
    Status visitName(int dirfd, const std::string &name, const std::string &path, int depth);
    Status addDir(int dirfd, const std::string &name, const std::string &path, int depth);
    void addSymlink(int dirfd, const std::string &name, const std::string &path, const struct stat &st);
    Status addFile(int dirfd, const std::string &name, const std::string &path, const struct stat &st);
    // Reads the file open as fd (-1: it could not be opened) into the manifest's entry `index`,
    // keeping its key unless racy.
    Status readFile(int fd, const std::string &path, size_t index);
    Status readChunks(int fd, int64_t size, Entry &entry);
    Entry entryOf(const std::string &path, EntryType type, const struct stat &st) const;
    // The earlier manifest's entry of a file whose key has not changed since, or null.
    const Entry *unchangedFile(const std::string &path, const StatKey &key) const;

    const OwnerMap m_owners;
    const checkpoint::Manifest *m_earlier;
    const StatKeys *m_earlierKeys;
    const ChunkVisitor &m_visit;
    int64_t m_racyFromNs = racyFromNs();
    WorkspaceScan m_scan;
    std::string m_buffer;             // a chunk being read; allocated at the first read
    std::vector<size_t> m_deferred;   // entries of racy files, read last
    int64_t m_latestDeferredCtimeNs = 0;
};

Status Scanner::walk(int dirfd, const std::string &rel, int depth)
{
    for (const auto &name : listNames(dirfd)) {
        const std::string path = rel.empty() ? name : rel + "/" + name;
        if (auto visited = visitName(dirfd, name, path, depth); !visited)
            return visited;
    }
    return {};
}

Status Scanner::visitName(int dirfd, const std::string &name, const std::string &path, int depth)
{
    struct stat st{};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return {};   // gone meanwhile
    if (depth > kMaxDepth || path.size() > checkpoint::kMaxPathBytes) {
        m_scan.skipped++;
        return {};
    }
    if (m_scan.manifest.entries.size() >= checkpoint::kMaxEntries)
        return fail(ErrorCode::FailedPrecondition,
                    "the workspace holds more than " + std::to_string(checkpoint::kMaxEntries)
                        + " files, directories and symlinks, more than a checkpoint keeps; remove what the session no longer needs");
    if (S_ISDIR(st.st_mode))
        return addDir(dirfd, name, path, depth);
    if (S_ISREG(st.st_mode))
        return addFile(dirfd, name, path, st);
    if (S_ISLNK(st.st_mode))
        addSymlink(dirfd, name, path, st);
    else
        m_scan.skipped++;   // device, fifo, socket
    return {};
}

Entry Scanner::entryOf(const std::string &path, EntryType type, const struct stat &st) const
{
    Entry e;
    e.path = path;
    e.type = type;
    e.mode = st.st_mode & checkpoint::kModeMask;
    e.uid = insideId(m_owners, st.st_uid);
    e.gid = insideId(m_owners, st.st_gid);
    e.mtimeMs = milliseconds(st.st_mtim);
    return e;
}

Status Scanner::addDir(int dirfd, const std::string &name, const std::string &path, int depth)
{
    Fd sub(openDirAt(dirfd, name));
    struct stat st{};
    if (!sub.valid() || ::fstat(sub.get(), &st) != 0) {
        if (errno != ENOENT)
            m_scan.skipped++;   // unreadable: its content cannot be kept
        return {};
    }
    m_scan.manifest.entries.push_back(entryOf(path, EntryType::Dir, st));
    return walk(sub.get(), path, depth + 1);
}

void Scanner::addSymlink(int dirfd, const std::string &name, const std::string &path, const struct stat &st)
{
    std::string target(checkpoint::kMaxPathBytes + 1, '\0');
    const ssize_t n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
    if (n < 0)
        return;   // gone meanwhile
    if (n == 0 || static_cast<size_t>(n) > checkpoint::kMaxPathBytes) {
        m_scan.skipped++;
        return;
    }
    target.resize(static_cast<size_t>(n));
    Entry e = entryOf(path, EntryType::Symlink, st);
    e.target = std::move(target);
    m_scan.manifest.entries.push_back(std::move(e));
}

const Entry *Scanner::unchangedFile(const std::string &path, const StatKey &key) const
{
    if (!m_earlier || !m_earlierKeys)
        return nullptr;
    auto known = m_earlierKeys->find(path);
    if (known == m_earlierKeys->end() || !(known->second == key))
        return nullptr;
    const auto &entries = m_earlier->entries;
    auto it = std::lower_bound(entries.begin(), entries.end(), path,
                               [](const Entry &e, const std::string &p) { return e.path < p; });
    if (it == entries.end() || it->path != path || it->type != EntryType::File || it->size != key.size)
        return nullptr;
    return &*it;
}

Status Scanner::addFile(int dirfd, const std::string &name, const std::string &path, const struct stat &listed)
{
    m_scan.filesScanned++;
    const StatKey listedKey = statKey(listed);
    auto &entries = m_scan.manifest.entries;
    if (const Entry *known = unchangedFile(path, listedKey)) {
        Entry e = entryOf(path, EntryType::File, listed);
        e.size = known->size;
        e.chunks = known->chunks;
        entries.push_back(std::move(e));
        m_scan.keys.emplace(path, listedKey);   // it matched a key that was not racy: neither is it
        return {};
    }
    entries.push_back(entryOf(path, EntryType::File, listed));
    if (listedKey.ctimeNs >= m_racyFromNs) {
        m_deferred.push_back(entries.size() - 1);
        m_latestDeferredCtimeNs = std::max(m_latestDeferredCtimeNs, listedKey.ctimeNs);
        return {};
    }
    // O_NONBLOCK: a fifo swapped in since the listing does not hang the scan.
    Fd file(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    return readFile(file.get(), path, entries.size() - 1);
}

Status Scanner::readFile(int fd, const std::string &path, size_t index)
{
    Entry &e = m_scan.manifest.entries[index];
    struct stat st{};
    if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd < 0 && errno != ENOENT)
            m_scan.skipped++;   // unreadable
        e.path.clear();         // gone or swapped meanwhile: finish() drops it
        return {};
    }
    e = entryOf(path, EntryType::File, st);
    if (auto read = readChunks(fd, st.st_size, e); !read)
        return fail(read.error().code, "cannot checkpoint '" + path + "': " + read.error().message
                                           + "; check the pool host's disk");
    m_scan.filesHashed++;
    // The key from before the read: a write during it shows next time.
    if (const StatKey key = statKey(st); key.ctimeNs < m_racyFromNs)
        m_scan.keys.emplace(path, key);
    return {};
}

Status Scanner::readDeferred(int root)
{
    if (m_deferred.empty())
        return {};
    waitPastRacy(m_latestDeferredCtimeNs);
    m_racyFromNs = racyFromNs();
    std::string parentPath;
    Fd parent;
    for (const size_t index : m_deferred) {
        const std::string path = m_scan.manifest.entries[index].path;
        const auto slash = path.rfind('/');
        const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash);
        if (!parent.valid() || dir != parentPath) {
            parent = openDirPath(root, dir);
            parentPath = dir;
        }
        const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
        errno = ENOENT;   // a parent gone meanwhile: the file is gone too
        Fd file(parent.valid() ? ::openat(parent.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
                               : -1);
        if (auto read = readFile(file.get(), path, index); !read)
            return read;
    }
    return {};
}

Status Scanner::readChunks(int fd, int64_t size, Entry &entry)
{
    if (m_buffer.empty() && size > 0)
        m_buffer.resize(static_cast<size_t>(checkpoint::kChunkBytes));
    int64_t total = 0;
    while (total < size) {
        const auto want = static_cast<size_t>(std::min<int64_t>(checkpoint::kChunkBytes, size - total));
        auto got = readFull(fd, m_buffer.data(), want);
        if (!got)
            return std::unexpected(got.error());
        if (*got == 0)
            break;   // shrank meanwhile
        const std::string_view data(m_buffer.data(), *got);
        std::string hash = checkpoint::sha256Hex(data);
        if (auto visited = m_visit(hash, data); !visited)
            return visited;
        entry.chunks.push_back(std::move(hash));
        total += static_cast<int64_t>(*got);
        m_scan.bytesHashed += static_cast<int64_t>(*got);
        if (*got < want)
            break;
    }
    entry.size = total;   // what was read: the chunks add up to it
    return {};
}

WorkspaceScan Scanner::finish()
{
    auto &entries = m_scan.manifest.entries;
    std::erase_if(entries, [](const Entry &e) { return e.path.empty(); });
    // A walk lists "a", "a/b", "a-b"; a manifest sorts by the whole path ("a-b" before "a/b").
    std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) { return a.path < b.path; });
    return std::move(m_scan);
}

} // namespace

StatKey statKey(const struct stat &st)
{
    return StatKey{static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size), nanoseconds(st.st_mtim),
                   nanoseconds(st.st_ctim)};
}

int64_t racyMarginNs()
{
    static const int64_t margin = [] {
        timespec tick{};
        if (::clock_getres(CLOCK_REALTIME_COARSE, &tick) != 0)
            return kMaxRacyMarginNs;
        return std::clamp<int64_t>(nanoseconds(tick) + 1'000'000, 2'000'000, kMaxRacyMarginNs);
    }();
    return margin;
}

int64_t racyFromNs()
{
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    return nanoseconds(now) - racyMarginNs();
}

void waitPastRacy(int64_t ctimeNs)
{
    // At most a margin: a ctime ahead of the clock (the clock was set back) stays racy instead.
    const int64_t waitNs = std::min(ctimeNs - racyFromNs() + 1, racyMarginNs());
    if (waitNs > 0)
        std::this_thread::sleep_for(std::chrono::nanoseconds(waitNs));
}

void dropRacyKeys(StatKeys &keys, int64_t fromNs)
{
    std::erase_if(keys, [fromNs](const auto &item) { return item.second.ctimeNs >= fromNs; });
}

Result<WorkspaceScan> scanWorkspace(const fs::path &workspaceDir, const OwnerMap &owners, const checkpoint::Manifest *earlier,
                                    const StatKeys *earlierKeys, const ChunkVisitor &visit)
{
    Fd root(::open(workspaceDir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!root.valid())
        return fail(ErrorCode::FailedPrecondition, sysError("cannot open the workspace " + workspaceDir.string())
                                                       + "; the sandbox may have been released");
    Scanner scanner(owners, earlier, earlierKeys, visit);
    if (auto walked = scanner.walk(root.get(), "", 0); !walked)
        return std::unexpected(walked.error());
    if (auto read = scanner.readDeferred(root.get()); !read)
        return std::unexpected(read.error());
    return scanner.finish();
}

} // namespace paddock::pool
