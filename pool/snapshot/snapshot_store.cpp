#include "pool/snapshot/snapshot_store.h"

#include "common/clock.h"
#include "common/paths.h"

#include <archive.h>
#include <archive_entry.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace paddock::pool {
namespace fs = std::filesystem;

namespace {

constexpr int kMaxDepth = 256;
constexpr size_t kCopyBuffer = 256 * 1024;
const char *kArchiveSuffix = ".tar.zst";
const char *kMetaSuffix = ".meta";

struct ArchiveSink {
    int fd = -1;
    uLong crc = crc32(0L, Z_NULL, 0);
    int64_t size = 0;
    bool failed = false;
};

la_ssize_t sinkWrite(struct archive *a, void *client, const void *buf, size_t n)
{
    auto *sink = static_cast<ArchiveSink *>(client);
    const char *p = static_cast<const char *>(buf);
    size_t left = n;
    while (left > 0) {
        ssize_t w = ::write(sink->fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            sink->failed = true;
            archive_set_error(a, errno, "write: %s", std::strerror(errno));
            return -1;
        }
        p += w;
        left -= static_cast<size_t>(w);
    }
    sink->crc = crc32(sink->crc, static_cast<const Bytef *>(buf), static_cast<uInt>(n));
    sink->size += static_cast<int64_t>(n);
    return static_cast<la_ssize_t>(n);
}

struct Walk {
    OwnerMap owners;
    struct archive *out = nullptr;
    int64_t files = 0;
    int64_t skipped = 0;
    std::string error;
    std::vector<char> buffer = std::vector<char>(kCopyBuffer);
};

bool writeHeader(Walk &w, archive_entry *entry)
{
    int rc = archive_write_header(w.out, entry);
    if (rc < ARCHIVE_WARN) {
        w.error = std::string("archive: ") + archive_error_string(w.out);
        return false;
    }
    return true;
}

bool walkDir(Walk &w, int dirfd, const std::string &rel, int depth)
{
    if (depth > kMaxDepth) {
        w.skipped++;
        return true;
    }
    for (const auto &name : listNames(dirfd)) {
        const std::string path = rel.empty() ? name : rel + "/" + name;
        struct stat st{};
        if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;   // gone meanwhile
        std::unique_ptr<archive_entry, void (*)(archive_entry *)> entry(archive_entry_new(), archive_entry_free);
        archive_entry_set_pathname(entry.get(), path.c_str());
        if (S_ISLNK(st.st_mode)) {
            std::string target(4096, '\0');
            ssize_t n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
            if (n < 0)
                continue;
            target.resize(static_cast<size_t>(n));
            archive_entry_copy_stat(entry.get(), &st);
            archive_entry_set_size(entry.get(), 0);
            archive_entry_set_symlink(entry.get(), target.c_str());
        } else if (S_ISDIR(st.st_mode)) {
            Fd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
            if (!sub.valid())
                continue;
            ::fstat(sub.get(), &st);
            archive_entry_copy_stat(entry.get(), &st);
            archive_entry_set_size(entry.get(), 0);
        } else if (S_ISREG(st.st_mode)) {
            Fd file(::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
            if (!file.valid())
                continue;
            ::fstat(file.get(), &st);
            if (!S_ISREG(st.st_mode))
                continue;   // swapped meanwhile
            archive_entry_copy_stat(entry.get(), &st);
            archive_entry_set_uid(entry.get(), insideId(w.owners, st.st_uid));
            archive_entry_set_gid(entry.get(), insideId(w.owners, st.st_gid));
            if (!writeHeader(w, entry.get()))
                return false;
            int64_t left = st.st_size;
            while (left > 0) {
                ssize_t n = ::read(file.get(), w.buffer.data(), static_cast<size_t>(std::min<int64_t>(left, kCopyBuffer)));
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0)
                    break;   // shrank meanwhile: libarchive pads the entry with zeros
                if (archive_write_data(w.out, w.buffer.data(), static_cast<size_t>(n)) < 0) {
                    w.error = std::string("archive: ") + archive_error_string(w.out);
                    return false;
                }
                left -= n;
            }
            w.files++;
            continue;
        } else {
            w.skipped++;   // device, fifo, socket
            continue;
        }
        archive_entry_set_uid(entry.get(), insideId(w.owners, st.st_uid));
        archive_entry_set_gid(entry.get(), insideId(w.owners, st.st_gid));
        if (!writeHeader(w, entry.get()))
            return false;
        w.files++;
        if (S_ISDIR(st.st_mode)) {
            Fd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
            if (sub.valid() && !walkDir(w, sub.get(), path, depth + 1))
                return false;
        }
    }
    return true;
}

std::string normalizeEntryPath(std::string p)
{
    while (p.rfind("./", 0) == 0)
        p.erase(0, 2);
    while (!p.empty() && p.back() == '/')
        p.pop_back();
    return p;
}

// Lexically resolves rel (relative, "/"-separated) under a root: false when it climbs out.
bool staysInside(const std::string &rel)
{
    int depth = 0;
    size_t i = 0;
    while (i <= rel.size()) {
        size_t j = rel.find('/', i);
        if (j == std::string::npos)
            j = rel.size();
        std::string part = rel.substr(i, j - i);
        if (part == "..") {
            if (--depth < 0)
                return false;
        } else if (!part.empty() && part != ".") {
            depth++;
        }
        i = j + 1;
    }
    return true;
}

bool hasDotDot(const std::string &rel)
{
    size_t i = 0;
    while (i <= rel.size()) {
        size_t j = rel.find('/', i);
        if (j == std::string::npos)
            j = rel.size();
        if (rel.compare(i, j - i, "..") == 0 && j - i == 2)
            return true;
        i = j + 1;
    }
    return false;
}

// Why an entry may not be restored, or "".
std::string refusal(const std::string &path, archive_entry *entry)
{
    if (path.empty())
        return "";
    if (path.front() == '/')
        return "absolute path '" + path + "'";
    if (hasDotDot(path))
        return "path '" + path + "' contains '..'";
    if (archive_entry_filetype(entry) == AE_IFLNK) {
        const char *target = archive_entry_symlink(entry);
        std::string t = target ? target : "";
        if (t.empty() || t.front() == '/')
            return "symlink '" + path + "' points to the absolute path '" + t + "', outside the workspace";
        const auto slash = path.rfind('/');
        const std::string base = slash == std::string::npos ? "" : path.substr(0, slash);
        if (!staysInside(base.empty() ? t : base + "/" + t))
            return "symlink '" + path + "' points outside the workspace ('" + t + "')";
    }
    if (const char *hl = archive_entry_hardlink(entry)) {
        std::string h = normalizeEntryPath(hl);
        if (h.empty() || h.front() == '/' || hasDotDot(h))
            return "hard link '" + path + "' points outside the workspace ('" + std::string(hl) + "')";
    }
    const auto type = archive_entry_filetype(entry);
    if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
        return "'" + path + "' is a device, fifo or socket";
    return "";
}

std::string damaged(const std::string &ref, const std::string &why)
{
    return "snapshot '" + ref + "' is damaged (" + why +
           "); take a new snapshot or use another ref (nothing was changed)";
}

// An entry's path as the snapshot names it ("" when it has none).
std::string entryPath(archive_entry *entry)
{
    return normalizeEntryPath(archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "");
}

// A path asked for inside a snapshot, named as its entries are: no leading "/".
std::string requestedEntryPath(std::string path)
{
    while (!path.empty() && path.front() == '/')
        path.erase(0, 1);
    return normalizeEntryPath(path);
}

// Reads one snapshot's archive: open(), then next() until it returns nullptr, at the end or at
// damage (failed()).
struct Reader {
    struct archive *a = archive_read_new();
    int lastRc = ARCHIVE_OK;
    Reader()
    {
        archive_read_support_filter_zstd(a);
        archive_read_support_format_tar(a);
    }
    ~Reader() { archive_read_free(a); }
    bool open(const fs::path &path) { return archive_read_open_filename(a, path.c_str(), kCopyBuffer) == ARCHIVE_OK; }
    archive_entry *next()
    {
        archive_entry *entry = nullptr;
        lastRc = archive_read_next_header(a, &entry);
        return lastRc == ARCHIVE_EOF || lastRc < ARCHIVE_WARN ? nullptr : entry;
    }
    bool failed() const { return lastRc < ARCHIVE_WARN; }
    std::string error() const
    {
        const char *e = archive_error_string(a);
        return e ? e : "unexpected end of archive";
    }
    // The archive of snapshot ref cannot be opened or read on.
    std::unexpected<Error> damage(const std::string &ref) const
    {
        return fail(ErrorCode::FailedPrecondition, damaged(ref, error()));
    }
};

// The meta file says what was written: a shorter file or other bytes fail here, before anything is
// extracted. Without a readable meta file there is nothing to check against.
Status checkAgainstMeta(const std::string &ref, const fs::path &archivePath, const fs::path &metaPath)
{
    std::ifstream metaIn(metaPath);
    nlohmann::json meta = nlohmann::json::parse(metaIn, nullptr, false);
    if (!meta.is_object())
        return {};
    Fd fd(::open(archivePath.c_str(), O_RDONLY | O_CLOEXEC));
    uLong crc = crc32(0L, Z_NULL, 0);
    int64_t size = 0;
    std::vector<char> buf(kCopyBuffer);
    ssize_t n;
    while (fd.valid() && (n = ::read(fd.get(), buf.data(), buf.size())) > 0) {
        crc = crc32(crc, reinterpret_cast<const Bytef *>(buf.data()), static_cast<uInt>(n));
        size += n;
    }
    const int64_t want = meta.value("size", int64_t{-1});
    if (size != want)
        return fail(ErrorCode::FailedPrecondition,
                    damaged(ref, "truncated or extended: " + std::to_string(size) + " bytes, written as " + std::to_string(want)));
    if (crc != meta.value("crc32", uint64_t{0}))
        return fail(ErrorCode::FailedPrecondition, damaged(ref, "checksum mismatch"));
    return {};
}

// Extracts the archive of snapshot ref into staging, an empty directory, with owners mapped as
// the restoring sandbox sees them. Returns the number of entries extracted.
Result<int64_t> extractArchive(const std::string &ref, const fs::path &archivePath, const fs::path &staging,
                               const OwnerMap &owners)
{
    Reader r;
    if (!r.open(archivePath))
        return r.damage(ref);
    struct archive *ext = archive_write_disk_new();
    std::unique_ptr<struct archive, int (*)(struct archive *)> extGuard(ext, archive_write_free);
    archive_write_disk_set_options(ext, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                            ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_NO_OVERWRITE |
                                            (owners.count ? ARCHIVE_EXTRACT_OWNER : 0));
    int64_t fileCount = 0;
    while (archive_entry *entry = r.next()) {
        const std::string name = entryPath(entry);
        if (name.empty() || name == ".")
            continue;
        if (auto why = refusal(name, entry); !why.empty())
            return fail(ErrorCode::FailedPrecondition, "snapshot '" + ref + "' cannot be restored: it holds " + why +
                                                           "; the workspace was not changed");
        // Names are checked above; libarchive's SECURE flags refuse extracting through a symlink
        // or with "..", on top. The staging path is absolute, so its own absolute-path check
        // cannot be used; the check above refuses absolute names instead.
        archive_entry_set_pathname(entry, (staging / name).c_str());
        if (const char *hl = archive_entry_hardlink(entry))
            archive_entry_set_hardlink(entry, (staging / normalizeEntryPath(hl)).c_str());
        archive_entry_set_perm(entry, archive_entry_perm(entry) & 01777);   // no setuid or setgid bits
        // An id inside the archive becomes the same id inside the restoring sandbox (hostIdOf).
        archive_entry_set_uid(entry, hostIdOf(owners, archive_entry_uid(entry), ::geteuid()));
        archive_entry_set_gid(entry, hostIdOf(owners, archive_entry_gid(entry), ::getegid()));
        if (archive_write_header(ext, entry) < ARCHIVE_WARN)
            return fail(ErrorCode::FailedPrecondition, "snapshot '" + ref + "' cannot be restored: " + name + ": " +
                                                           archive_error_string(ext) + "; the workspace was not changed");
        if (archive_entry_size(entry) > 0) {
            const void *block;
            size_t size;
            la_int64_t offset;
            for (;;) {
                int d = archive_read_data_block(r.a, &block, &size, &offset);
                if (d == ARCHIVE_EOF)
                    break;
                if (d < ARCHIVE_WARN)
                    return fail(ErrorCode::FailedPrecondition, damaged(ref, name + ": " + r.error()));
                if (archive_write_data_block(ext, block, size, offset) < ARCHIVE_WARN)
                    return fail(ErrorCode::Internal, "restoring snapshot '" + ref + "': " + name + ": " + archive_error_string(ext) +
                                                         "; check the space on the pool's state directory");
            }
        }
        if (archive_write_finish_entry(ext) < ARCHIVE_WARN)
            return fail(ErrorCode::Internal, "restoring snapshot '" + ref + "': " + name + ": " + archive_error_string(ext));
        fileCount++;
    }
    if (r.failed())
        return r.damage(ref);
    if (archive_write_close(ext) < ARCHIVE_WARN)
        return fail(ErrorCode::Internal, "restoring snapshot '" + ref + "': " + std::string(archive_error_string(ext)));
    return fileCount;
}

} // namespace

bool SnapshotStore::validRef(const std::string &ref)
{
    if (ref.empty() || ref.size() > 200 || ref.front() == '.')
        return false;
    return std::all_of(ref.begin(), ref.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    });
}

Result<std::unique_ptr<SnapshotStore>> SnapshotStore::open(fs::path dir)
{
    if (auto err = ensurePrivateDirectory(dir, 0700); !err.empty())
        return fail(ErrorCode::FailedPrecondition, err + "; set snapshot_dir in pool.toml to a writable directory");
    std::error_code ec;
    // Temporary files of a write that a crash interrupted.
    for (const auto &e : fs::directory_iterator(dir, ec))
        if (e.path().filename().string().rfind(".tmp-", 0) == 0)
            fs::remove(e.path(), ec);
    return std::unique_ptr<SnapshotStore>(new SnapshotStore(std::move(dir)));
}

Result<fs::path> SnapshotStore::archivePath(const std::string &ref) const
{
    if (!validRef(ref))
        return fail(ErrorCode::InvalidArgument, "'" + ref + "' is not a snapshot ref (letters, digits, '.', '_' and '-'); "
                                                "use a ref from Snapshot or from a post-mortem");
    fs::path p = m_dir / (ref + kArchiveSuffix);
    std::error_code ec;
    if (!fs::exists(p, ec))
        return fail(ErrorCode::NotFound, "no snapshot '" + ref + "' in this pool's snapshot directory; it may have expired "
                                         "with its post-mortem — list post-mortems for current refs");
    return p;
}

Result<int64_t> SnapshotStore::sizeOf(const std::string &ref) const
{
    auto p = archivePath(ref);
    if (!p)
        return std::unexpected(p.error());
    std::error_code ec;
    auto n = fs::file_size(*p, ec);
    if (ec)
        return fail(ErrorCode::Internal, "cannot stat " + p->string() + ": " + ec.message());
    return static_cast<int64_t>(n);
}

Result<SnapshotInfo> SnapshotStore::create(const fs::path &workspaceDir, const std::string &refPrefix, OwnerMap owners)
{
    const int64_t t0 = monotonicUs();
    Fd ws(::open(workspaceDir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!ws.valid())
        return fail(ErrorCode::FailedPrecondition, sysError("cannot open the workspace " + workspaceDir.string()));
    const fs::path tmp = m_dir / (".tmp-" + randomSuffix());
    ArchiveSink sink;
    sink.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (sink.fd < 0)
        return fail(ErrorCode::FailedPrecondition, sysError("cannot create " + tmp.string()) +
                                                       "; check that snapshot_dir is writable and has space");
    Walk w;
    w.owners = owners;
    w.out = archive_write_new();
    archive_write_add_filter_zstd(w.out);
    archive_write_set_format_pax_restricted(w.out);
    archive_write_set_bytes_in_last_block(w.out, 1);   // no padding to 10 KiB after the compressor
    bool ok = archive_write_open(w.out, &sink, nullptr, sinkWrite, nullptr) == ARCHIVE_OK;
    if (!ok)
        w.error = std::string("archive: ") + archive_error_string(w.out);
    ok = ok && walkDir(w, ws.get(), "", 0);
    if (archive_write_close(w.out) != ARCHIVE_OK && ok) {
        ok = false;
        w.error = std::string("archive: ") + archive_error_string(w.out);
    }
    archive_write_free(w.out);
    if (ok && ::fsync(sink.fd) != 0) {
        ok = false;
        w.error = sysError("fsync");
    }
    ::close(sink.fd);
    if (!ok || sink.failed) {
        ::unlink(tmp.c_str());
        return fail(ErrorCode::Internal, "snapshot of " + workspaceDir.string() + " failed: " + w.error +
                                             "; check the space in snapshot_dir");
    }

    SnapshotInfo info;
    info.sizeBytes = sink.size;
    info.fileCount = w.files;
    info.skipped = w.skipped;
    std::lock_guard lock(m_mutex);
    for (int n = 1;; ++n) {
        std::string ref = refPrefix + "-" + std::to_string(n);
        if (!validRef(ref)) {
            ::unlink(tmp.c_str());
            return fail(ErrorCode::InvalidArgument, "'" + refPrefix + "' cannot start a snapshot ref");
        }
        const fs::path final = m_dir / (ref + kArchiveSuffix);
        std::error_code ec;
        if (fs::exists(final, ec))
            continue;
        nlohmann::json meta = {{"ref", ref}, {"size", sink.size}, {"crc32", static_cast<uint64_t>(sink.crc)},
                               {"files", w.files}, {"created_unix_ms", nowUnixMs()}};
        const fs::path metaPath = m_dir / (ref + kMetaSuffix);
        {
            std::ofstream out(metaPath, std::ios::trunc);
            out << meta.dump();
        }
        if (::rename(tmp.c_str(), final.c_str()) != 0) {
            ::unlink(tmp.c_str());
            fs::remove(metaPath, ec);
            return fail(ErrorCode::Internal, sysError("cannot rename the snapshot into " + final.string()));
        }
        info.ref = ref;
        break;
    }
    info.durationMs = static_cast<double>(monotonicUs() - t0) / 1000.0;
    return info;
}

Result<SnapshotInfo> SnapshotStore::restore(const std::string &ref, const fs::path &workspaceDir, const fs::path &scratchDir,
                                            OwnerMap owners)
{
    const int64_t t0 = monotonicUs();
    auto path = archivePath(ref);
    if (!path)
        return std::unexpected(path.error());
    if (auto checked = checkAgainstMeta(ref, *path, m_dir / (ref + kMetaSuffix)); !checked)
        return std::unexpected(checked.error());

    std::error_code ec;
    fs::create_directories(scratchDir, ec);
    const fs::path staging = scratchDir / ("restore-" + randomSuffix());
    if (!fs::create_directory(staging, ec))
        return fail(ErrorCode::Internal, "cannot create " + staging.string() + ": " + ec.message());
    struct Cleanup {
        fs::path p;
        ~Cleanup()
        {
            if (!p.empty())
                removeTree(p);
        }
    } cleanup{staging};

    auto fileCount = extractArchive(ref, *path, staging, owners);
    if (!fileCount)
        return std::unexpected(fileCount.error());
    // The archive decoded to its end: swap.
    if (auto swapped = swapWorkspace(workspaceDir, staging, scratchDir, "snapshot '" + ref + "'"); !swapped)
        return std::unexpected(swapped.error());
    SnapshotInfo info;
    info.ref = ref;
    info.fileCount = *fileCount;
    info.sizeBytes = static_cast<int64_t>(fs::file_size(*path, ec));
    info.durationMs = static_cast<double>(monotonicUs() - t0) / 1000.0;
    return info;
}

Result<std::vector<SnapshotFile>> SnapshotStore::list(const std::string &ref, const std::string &pathPrefix)
{
    auto path = archivePath(ref);
    if (!path)
        return std::unexpected(path.error());
    const std::string prefix = requestedEntryPath(pathPrefix);
    Reader r;
    if (!r.open(*path))
        return r.damage(ref);
    std::vector<SnapshotFile> out;
    while (archive_entry *entry = r.next()) {
        SnapshotFile e;
        e.path = entryPath(entry);
        if (e.path.empty())
            continue;
        if (!prefix.empty() && e.path != prefix && e.path.rfind(prefix + "/", 0) != 0)
            continue;
        e.isDir = archive_entry_filetype(entry) == AE_IFDIR;
        e.isSymlink = archive_entry_filetype(entry) == AE_IFLNK;
        if (e.isSymlink && archive_entry_symlink(entry))
            e.symlinkTarget = archive_entry_symlink(entry);
        e.size = archive_entry_size(entry);
        e.mode = archive_entry_perm(entry);
        e.mtimeUnixMs = static_cast<int64_t>(archive_entry_mtime(entry)) * 1000 + archive_entry_mtime_nsec(entry) / 1000000;
        out.push_back(std::move(e));
    }
    if (r.failed())
        return r.damage(ref);
    if (!prefix.empty() && out.empty())
        return fail(ErrorCode::NotFound, "snapshot '" + ref + "' has no '" + prefix + "'; list it without a path to see what it holds");
    return out;
}

Result<SnapshotChunk> SnapshotStore::read(const std::string &ref, const std::string &pathIn, int64_t offset, int64_t maxBytes)
{
    auto path = archivePath(ref);
    if (!path)
        return std::unexpected(path.error());
    const std::string want = requestedEntryPath(pathIn);
    if (want.empty())
        return fail(ErrorCode::InvalidArgument, "name a file of the snapshot to read (ListSnapshotFiles lists them)");
    if (offset < 0)
        return fail(ErrorCode::InvalidArgument, "offset must be 0 or more");
    if (maxBytes <= 0)
        maxBytes = 1ll << 20;
    maxBytes = std::min(maxBytes, kMaxReadBytes);
    Reader r;
    if (!r.open(*path))
        return r.damage(ref);
    while (archive_entry *entry = r.next()) {
        if (entryPath(entry) != want)
            continue;
        if (archive_entry_filetype(entry) == AE_IFDIR)
            return fail(ErrorCode::FailedPrecondition, "'" + want + "' is a directory in snapshot '" + ref + "'; list it instead");
        if (archive_entry_filetype(entry) == AE_IFLNK)
            return fail(ErrorCode::FailedPrecondition, "'" + want + "' is a symlink to '" +
                                                           std::string(archive_entry_symlink(entry) ? archive_entry_symlink(entry) : "") +
                                                           "' in snapshot '" + ref + "'; read its target instead");
        SnapshotChunk chunk;
        chunk.size = archive_entry_size(entry);
        chunk.offset = std::min(offset, chunk.size);
        std::vector<char> buf(kCopyBuffer);
        int64_t pos = 0;
        while (pos < chunk.size && static_cast<int64_t>(chunk.content.size()) < maxBytes) {
            la_ssize_t n = archive_read_data(r.a, buf.data(), buf.size());
            if (n < 0)
                return fail(ErrorCode::FailedPrecondition, damaged(ref, want + ": " + r.error()));
            if (n == 0)
                break;
            const int64_t from = std::max<int64_t>(0, chunk.offset - pos);
            if (from < n) {
                const int64_t take = std::min<int64_t>(n - from, maxBytes - static_cast<int64_t>(chunk.content.size()));
                chunk.content.append(buf.data() + from, static_cast<size_t>(take));
            }
            pos += n;
        }
        chunk.eof = chunk.offset + static_cast<int64_t>(chunk.content.size()) >= chunk.size;
        return chunk;
    }
    if (r.failed())
        return r.damage(ref);
    return fail(ErrorCode::NotFound, "snapshot '" + ref + "' has no file '" + want + "'; list it to see what it holds");
}

void SnapshotStore::remove(const std::string &ref)
{
    if (!validRef(ref))
        return;
    std::error_code ec;
    fs::remove(m_dir / (ref + kArchiveSuffix), ec);
    fs::remove(m_dir / (ref + kMetaSuffix), ec);
}

size_t SnapshotStore::prune(int64_t olderThanUnixMs, const std::function<bool(const std::string &)> &keep)
{
    std::vector<std::string> old;
    std::error_code ec;
    const std::string suffix = kArchiveSuffix;
    for (const auto &entry : fs::directory_iterator(m_dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        struct stat st{};
        if (::stat(entry.path().c_str(), &st) != 0)
            continue;
        const int64_t mtimeMs = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
        const std::string ref = name.substr(0, name.size() - suffix.size());
        if (mtimeMs < olderThanUnixMs && !(keep && keep(ref)))
            old.push_back(ref);
    }
    for (const auto &ref : old)
        remove(ref);
    return old.size();
}

} // namespace paddock::pool
