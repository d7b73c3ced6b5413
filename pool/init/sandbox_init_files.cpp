// paddock-sandbox-init's file requests: read_file, write_file (only inside the workspace, every
// path step resolved beneath it inside the sandbox) and list_dir. Each answers on its connection.
//
// Threads: none; runs in a handler process (sandbox_init_handler.cpp).

#include "pool/init/sandbox_init_internal.h"

#include <algorithm>
#include <cerrno>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace paddock::pool::sandbox_init {

namespace {

constexpr int64_t kDefaultMaxReadBytes = 1ll << 20;

const char *codeForErrno(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        return "not_found";
    case EACCES:
    case EPERM:
    case EROFS:
    case EXDEV:
    case ELOOP:
        return "permission_denied";
    case EISDIR:
    case EINVAL:
        return "invalid_argument";
    case ENOSPC:
    case EDQUOT:
        return "resource_exhausted";
    default:
        return "internal";
    }
}

// Where openat2 is missing (gVisor's runsc): one component at a time with O_NOFOLLOW, refusing
// every symlink on the way (ELOOP) and "..": stricter than RESOLVE_BENEATH, which follows links
// that stay inside the workspace. A link swapped in between the check and the open still fails
// (O_NOFOLLOW), it is never followed.
int openNoSymlinks(int dirfd, const std::string &rel, int flags, mode_t mode)
{
    std::vector<std::string> parts;
    for (const auto &part : std::filesystem::path(rel))
        if (!part.empty() && part != "." && part != "/")
            parts.push_back(part.string());
    if (parts.empty()) {
        errno = EINVAL;
        return -1;
    }
    int cur = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    for (size_t i = 0; cur >= 0 && i < parts.size(); ++i) {
        struct stat st {};
        int next = -1;
        if (parts[i] == "..")
            errno = EXDEV;
        else if (::fstatat(cur, parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            errno = ELOOP;
        else if (i + 1 < parts.size())
            next = ::openat(cur, parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        else
            next = ::openat(cur, parts[i].c_str(), flags | O_NOFOLLOW, mode);
        const int err = errno;
        ::close(cur);
        cur = next;
        errno = err;
    }
    return cur;
}

int openBeneath(int dirfd, const std::string &rel, uint64_t flags, uint64_t mode = 0)
{
    // RESOLVE_BENEATH: every step, symlinks included, must stay under the workspace. The
    // resolution happens inside the sandbox, so an agent's symlink is judged by what it means
    // there, and an absolute or ../ link out of the workspace fails with EXDEV.
    open_how how {};
    how.flags = flags;
    how.mode = mode;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    int fd;
    do {
        fd = static_cast<int>(::syscall(SYS_openat2, dirfd, rel.c_str(), &how, sizeof how));
    } while (fd < 0 && errno == EAGAIN);
    if (fd < 0 && errno == ENOSYS)
        return openNoSymlinks(dirfd, rel, static_cast<int>(flags), static_cast<mode_t>(mode));
    return fd;
}

} // namespace

void handleReadFile(int conn, const json &header)
{
    const std::string path = sandboxPath(header.value("path", std::string{}));
    int64_t maxBytes = header.value("max_bytes", int64_t{0});
    if (maxBytes <= 0)
        maxBytes = kDefaultMaxReadBytes;
    maxBytes = std::min<int64_t>(maxBytes, proto::kMaxFrameBytes);

    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        const int e = errno;
        sendError(conn, codeForErrno(e), "cannot read '" + path + "' in the sandbox: " + errnoText(e));
        return;
    }
    struct stat st {};
    ::fstat(fd, &st);
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        sendError(conn, "invalid_argument", "'" + path + "' is a directory; use list_dir for directories");
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        sendError(conn, "invalid_argument", "'" + path + "' is not a regular file; read_file reads regular files only");
        return;
    }
    std::string content;
    content.resize(static_cast<size_t>(maxBytes) + 1);
    size_t got = 0;
    while (got < content.size()) {
        ssize_t n = ::read(fd, content.data() + got, content.size() - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += static_cast<size_t>(n);
    }
    ::close(fd);
    const bool truncated = got > static_cast<size_t>(maxBytes);
    content.resize(std::min(got, static_cast<size_t>(maxBytes)));
    proto::writeFrame(conn, proto::kOk,
                      dumpJson({{"size", std::max<int64_t>(st.st_size, static_cast<int64_t>(got))}, {"truncated", truncated}}));
    proto::writeFrame(conn, proto::kData, content);
}

void handleWriteFile(int conn, const json &header)
{
    const std::string given = header.value("path", std::string{});
    const auto mode = static_cast<mode_t>(header.value("mode", 0644u) & 07777);
    auto data = proto::readFrame(conn);
    if (!data || data->type != proto::kData) {
        sendError(conn, "invalid_argument", "write_file header must be followed by a data frame");
        return;
    }
    namespace fs = std::filesystem;
    fs::path norm = fs::path(sandboxPath(given)).lexically_normal();
    const fs::path ws = fs::path(g_workspace).lexically_normal();
    fs::path rel = norm.lexically_relative(ws);
    if (given.empty() || rel.empty() || rel == "." || *rel.begin() == "..") {
        sendError(conn, "permission_denied",
                  "'" + given + "' is not a file inside " + g_workspace + "; write_file only writes inside " + g_workspace);
        return;
    }
    const std::string escapeMsg = "'" + given + "' resolves outside " + g_workspace +
                                  " (through a symlink); write to a path inside " + g_workspace;

    int wsfd = ::open(g_workspace.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (wsfd < 0) {
        sendError(conn, "internal", "cannot open " + g_workspace + ": " + errnoText(errno));
        return;
    }
    // mkdir -p of the parents, one component at a time, each checked beneath the workspace.
    fs::path prefix;
    for (const auto &comp : rel.parent_path()) {
        fs::path next = prefix / comp;
        int d = openBeneath(wsfd, next.string(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (d < 0 && errno == ENOENT) {
            int parent = prefix.empty() ? ::dup(wsfd) : openBeneath(wsfd, prefix.string(), O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (parent >= 0) {
                ::mkdirat(parent, comp.c_str(), 0755);
                ::close(parent);
            }
            d = openBeneath(wsfd, next.string(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        }
        if (d < 0) {
            const int e = errno;
            ::close(wsfd);
            if (e == EXDEV || e == ELOOP)
                sendError(conn, "permission_denied", escapeMsg);
            else
                sendError(conn, codeForErrno(e), "cannot create directory '" + next.string() + "' in " + g_workspace + ": " + errnoText(e));
            return;
        }
        ::close(d);
        prefix = next;
    }
    int fd = openBeneath(wsfd, rel.string(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, mode);
    const int e = errno;
    ::close(wsfd);
    if (fd < 0) {
        if (e == EXDEV || e == ELOOP)
            sendError(conn, "permission_denied", escapeMsg);
        else
            sendError(conn, codeForErrno(e), "cannot write '" + given + "': " + errnoText(e));
        return;
    }
    ::fchmod(fd, mode & 0777);   // no setuid, setgid or sticky bits from a request
    const bool ok = proto::writeAll(fd, data->payload.data(), data->payload.size());
    const int we = errno;
    ::close(fd);
    if (!ok) {
        sendError(conn, codeForErrno(we), "cannot write '" + given + "': " + errnoText(we));
        return;
    }
    proto::writeFrame(conn, proto::kOk, dumpJson({{"size", data->payload.size()}}));
}

void handleListDir(int conn, const json &header)
{
    const std::string path = sandboxPath(header.value("path", std::string{}));
    DIR *dir = ::opendir(path.c_str());
    if (!dir) {
        const int e = errno;
        sendError(conn, codeForErrno(e), "cannot list '" + path + "' in the sandbox: " + errnoText(e));
        return;
    }
    json entries = json::array();
    std::vector<std::pair<std::string, json>> rows;
    while (dirent *de = ::readdir(dir)) {
        std::string name = de->d_name;
        if (name == "." || name == "..")
            continue;
        struct stat st {};
        if (::fstatat(::dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        rows.emplace_back(name, json{{"name", name},
                                     {"is_dir", S_ISDIR(st.st_mode)},
                                     {"size", static_cast<int64_t>(st.st_size)},
                                     {"mode", static_cast<uint32_t>(st.st_mode)},
                                     {"mtime_ms", static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000}});
    }
    ::closedir(dir);
    std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
    for (auto &r : rows)
        entries.push_back(std::move(r.second));
    proto::writeFrame(conn, proto::kOk, dumpJson({{"entries", entries}}));
}

} // namespace paddock::pool::sandbox_init
