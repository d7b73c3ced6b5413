#include "broker/checkpoints/local_blob_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace paddock::checkpoints {
namespace fs = std::filesystem;

namespace {

constexpr const char *kTempSuffix = ".tmp-";

std::string randomSuffix()
{
    thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
    return buf;
}

// Writes all of bytes to fd; false with errno set on failure.
bool writeAll(int fd, std::string_view bytes)
{
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

bool fsyncDir(const fs::path &dir)
{
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    const bool ok = ::fsync(fd) == 0;
    ::close(fd);
    return ok;
}

int64_t modifiedUnixMs(const struct stat &st)
{
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

} // namespace

Result<std::unique_ptr<LocalBlobStore>> LocalBlobStore::open(fs::path dir)
{
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
        return fail(ErrorCode::FailedPrecondition, "cannot create the checkpoint directory " + dir.string() + ": "
                                                       + ec.message() + "; make it writable by paddockd or set "
                                                       "[checkpoints] dir in broker.toml");
    ::chmod(dir.c_str(), 0700);
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        return fail(ErrorCode::FailedPrecondition, "the checkpoint directory " + dir.string() + " is not writable: "
                                                       + std::strerror(errno));
    return std::unique_ptr<LocalBlobStore>(new LocalBlobStore(std::move(dir)));
}

std::string LocalBlobStore::describe() const
{
    return "the broker's checkpoint directory " + m_dir.string();
}

Result<fs::path> LocalBlobStore::pathOf(const std::string &key) const
{
    if (std::string problem = blobKeyProblem(key); !problem.empty())
        return fail(ErrorCode::InvalidArgument, "checkpoint key '" + key + "' " + problem);
    return m_dir / key;
}

std::unexpected<Error> LocalBlobStore::ioError(const std::string &what, const std::string &key, int error) const
{
    const ErrorCode code = error == ENOSPC || error == EDQUOT ? ErrorCode::ResourceExhausted : ErrorCode::Unavailable;
    std::string message = what + " '" + key + "' in " + describe() + ": " + std::strerror(error);
    if (code == ErrorCode::ResourceExhausted)
        message += "; free space on that disk or let retention collect old checkpoints (paddockctl storage)";
    return fail(code, std::move(message));
}

Status LocalBlobStore::put(const std::string &key, std::string_view bytes)
{
    auto path = pathOf(key);
    if (!path)
        return std::unexpected(path.error());
    // Directories made for this key are made durable too (their entries in their parents), up to
    // the store's own directory: a fsynced file in a directory that vanishes at a power cut is lost.
    std::vector<fs::path> made;
    for (fs::path dir = path->parent_path(); dir != m_dir && !fs::exists(dir); dir = dir.parent_path())
        made.push_back(dir);
    std::error_code ec;
    fs::create_directories(path->parent_path(), ec);
    if (ec)
        return ioError("cannot make the directory of", key, ec.value());
    const fs::path temp = path->string() + kTempSuffix + randomSuffix();
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return ioError("cannot write", key, errno);
    const bool written = writeAll(fd, bytes) && ::fsync(fd) == 0;
    const int writeError = errno;
    ::close(fd);
    if (!written || ::rename(temp.c_str(), path->c_str()) != 0) {
        const int error = written ? errno : writeError;
        ::unlink(temp.c_str());
        return ioError("cannot write", key, error);
    }
    if (!fsyncDir(path->parent_path()))
        return ioError("cannot make durable", key, errno);
    for (const auto &dir : made)
        if (!fsyncDir(dir.parent_path()))
            return ioError("cannot make durable the directory of", key, errno);
    return {};
}

Result<std::string> LocalBlobStore::get(const std::string &key)
{
    auto path = pathOf(key);
    if (!path)
        return std::unexpected(path.error());
    const int fd = ::open(path->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT)
            return fail(ErrorCode::NotFound, "no '" + key + "' in " + describe());
        return ioError("cannot read", key, errno);
    }
    std::string out;
    struct stat st{};
    if (::fstat(fd, &st) == 0 && st.st_size > 0)
        out.reserve(static_cast<size_t>(st.st_size));
    char buffer[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            const int error = errno;
            ::close(fd);
            return ioError("cannot read", key, error);
        }
        if (n == 0)
            break;
        out.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
}

Result<bool> LocalBlobStore::exists(const std::string &key)
{
    auto path = pathOf(key);
    if (!path)
        return std::unexpected(path.error());
    struct stat st{};
    if (::lstat(path->c_str(), &st) == 0)
        return S_ISREG(st.st_mode);
    if (errno == ENOENT)
        return false;
    return ioError("cannot look up", key, errno);
}

Result<std::vector<BlobInfo>> LocalBlobStore::list(const std::string &prefix)
{
    std::vector<BlobInfo> out;
    std::error_code ec;
    // Walk only the directory the prefix reaches into: "chunks/ab" lists chunks/ab*, not everything.
    const auto slash = prefix.rfind('/');
    const fs::path start = slash == std::string::npos ? m_dir : m_dir / prefix.substr(0, slash);
    if (!fs::exists(start, ec))
        return out;
    for (auto it = fs::recursive_directory_iterator(start, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file(ec))
            continue;
        std::string key = fs::relative(it->path(), m_dir, ec).generic_string();
        if (!key.starts_with(prefix) || key.find(kTempSuffix) != std::string::npos)
            continue;
        struct stat st{};
        if (::lstat(it->path().c_str(), &st) != 0)
            continue;   // collected meanwhile
        out.push_back({std::move(key), st.st_size, modifiedUnixMs(st)});
    }
    if (ec)
        return ioError("cannot list", prefix, ec.value());
    std::sort(out.begin(), out.end(), [](const BlobInfo &a, const BlobInfo &b) { return a.key < b.key; });
    return out;
}

Status LocalBlobStore::remove(const std::string &key)
{
    auto path = pathOf(key);
    if (!path)
        return std::unexpected(path.error());
    if (::unlink(path->c_str()) != 0 && errno != ENOENT)
        return ioError("cannot delete", key, errno);
    return {};
}

} // namespace paddock::checkpoints
