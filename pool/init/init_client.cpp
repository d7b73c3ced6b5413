#include "pool/init/init_client.h"

#include "common/json_fields.h"
#include "pool/init/init_protocol.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

namespace paddock::pool {
namespace {

using nlohmann::json;
namespace proto = init;

constexpr int64_t kFileOpTimeoutMs = 30000;
constexpr int64_t kExecGraceMs = 10000;   // beyond the command's own timeout, for the init to report

class Fd {
public:
    explicit Fd(int fd) : m_fd(fd) {}
    ~Fd() { if (m_fd >= 0) ::close(m_fd); }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    int get() const { return m_fd; }
private:
    int m_fd;
};

ErrorCode codeFromInit(const std::string &code)
{
    if (code == "invalid_argument") return ErrorCode::InvalidArgument;
    if (code == "not_found") return ErrorCode::NotFound;
    if (code == "permission_denied") return ErrorCode::PermissionDenied;
    if (code == "resource_exhausted") return ErrorCode::ResourceExhausted;
    if (code == "failed_precondition") return ErrorCode::FailedPrecondition;
    return ErrorCode::Internal;
}

std::string dumpJson(const json &j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::unexpected<Error> lostInit(int err)
{
    if (err == EAGAIN || err == EWOULDBLOCK)
        return fail(ErrorCode::DeadlineExceeded, "the sandbox init did not answer in time; the sandbox may be overloaded or hung — release it and claim a new one");
    return fail(ErrorCode::Unavailable, std::string("the sandbox init closed the connection (") +
                                            (err ? std::strerror(err) : "end of stream") +
                                            "); the sandbox has probably died — release it and claim a new one");
}

// Parses a reply frame that is either kOk (JSON) or kError.
Result<json> okOrError(const std::optional<proto::Frame> &frame)
{
    if (!frame)
        return lostInit(errno);
    json j = json::parse(frame->payload, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return fail(ErrorCode::Internal, "the sandbox init sent a malformed reply; this is a bug in paddock-sandbox-init");
    if (frame->type == proto::kError)
        return fail(codeFromInit(j.value("code", std::string{})), j.value("message", std::string{"sandbox init error"}));
    if (frame->type != proto::kOk)
        return fail(ErrorCode::Internal, std::string("unexpected frame '") + frame->type + "' from the sandbox init");
    return j;
}

} // namespace

namespace detail {

Result<int> connectInit(const std::filesystem::path &socketPath, bool nonBlocking)
{
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonBlocking ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return fail(ErrorCode::ResourceExhausted, std::string("cannot create a socket: ") + std::strerror(errno));
    sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    std::string path = socketPath.string();
    int dirFd = -1;
    if (path.size() >= sizeof addr.sun_path) {
        // Deep state directories exceed sun_path's 108 bytes: go through the directory's fd.
        dirFd = ::open(socketPath.parent_path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        path = "/proc/self/fd/" + std::to_string(dirFd) + "/" + socketPath.filename().string();
    }
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    int rc;
    do {
        rc = ::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
    } while (rc != 0 && errno == EINTR);
    const int err = errno;
    if (dirFd >= 0)
        ::close(dirFd);
    if (rc != 0) {
        ::close(fd);
        if (nonBlocking && err == EAGAIN) {
            errno = EAGAIN;
            return -1;
        }
        return fail(ErrorCode::Unavailable, "cannot reach the sandbox init at " + socketPath.string() + ": " +
                                                std::strerror(err) + "; the sandbox has probably died — release it and claim a new one");
    }
    return fd;
}

std::string execRequestFrames(const InitExecRequest &request)
{
    json header = {{"argv", request.argv},
                   {"env", request.env},
                   {"cwd", request.cwd},
                   {"timeout_ms", request.timeoutMs},
                   {"max_output_bytes", request.maxOutputBytes}};
    std::string out;
    auto frame = [&out](char type, std::string_view payload) {
        const auto len = static_cast<uint32_t>(payload.size());
        out.push_back(type);
        for (int shift : {24, 16, 8, 0})
            out.push_back(static_cast<char>(len >> shift));
        out.append(payload);
    };
    const std::string h = dumpJson(header);
    out.reserve(10 + h.size() + request.stdinData.size());
    frame(proto::kExec, h);
    frame(proto::kStdin, request.stdinData);
    return out;
}

Result<InitExecResult> parseExitRecord(std::string_view payload)
{
    json j = json::parse(payload, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return fail(ErrorCode::Internal, "the sandbox init sent a malformed exit record");
    // The init shares its sandbox with the agent's code: a field of the wrong type is an error
    // named here, never an exception or a cast of 1e47 to int.
    InitExecResult r;
    try {
        r.exitCode = integerField<int>(j, "exit_code", -1);
        r.signal = integerField<int>(j, "signal", 0);
        r.durationMs = j.value("duration_ms", 0.0);
        r.startedUnixUs = integerField<int64_t>(j, "started_unix_us", int64_t{0});
        r.timedOut = j.value("timed_out", false);
        r.truncated = j.value("truncated", false);
    } catch (const std::exception &e) {
        return fail(ErrorCode::Internal, std::string("the sandbox init sent a malformed exit record: ") + e.what());
    }
    return r;
}

Error unexpectedExecFrame(char type, std::string_view payload)
{
    auto err = okOrError(proto::Frame{type, std::string(payload)});
    if (!err)
        return err.error();
    return Error{ErrorCode::Internal, "the sandbox init answered an exec without an exit record"};
}

Error lostInitError(int err) { return lostInit(err).error(); }

} // namespace detail

Result<int> InitClient::connect(int64_t ioTimeoutMs) const
{
    auto connected = detail::connectInit(m_socketPath, false);
    if (!connected)
        return connected;
    const int fd = *connected;
    timeval tv {};
    tv.tv_sec = ioTimeoutMs / 1000;
    tv.tv_usec = (ioTimeoutMs % 1000) * 1000;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

Result<InitExecResult> InitClient::exec(const InitExecRequest &request, const ChunkSink &sink) const
{
    const int64_t ioTimeout = (request.timeoutMs > 0 ? request.timeoutMs : 24 * 3600 * 1000ll) + kExecGraceMs;
    auto fd = connect(ioTimeout);
    if (!fd)
        return std::unexpected(fd.error());
    Fd conn(*fd);
    if (request.stdinData.size() > proto::kMaxFrameBytes)
        return fail(ErrorCode::InvalidArgument, "stdin of " + std::to_string(request.stdinData.size()) +
                                                    " bytes exceeds the 64 MiB limit of an exec");
    // Header and stdin in one write: one wake-up of the init's handler instead of two.
    const std::string frames = detail::execRequestFrames(request);
    if (!proto::writeAll(conn.get(), frames.data(), frames.size()))
        return lostInit(errno);
    for (;;) {
        auto frame = proto::readFrame(conn.get());
        if (!frame)
            return lostInit(errno);
        switch (frame->type) {
        case proto::kStdout:
        case proto::kStderr:
            if (sink)
                sink(frame->type == proto::kStdout ? 1 : 2, frame->payload);
            break;
        case proto::kExit:
            return detail::parseExitRecord(frame->payload);
        default:
            return std::unexpected(detail::unexpectedExecFrame(frame->type, frame->payload));
        }
    }
}

Result<InitFile> InitClient::readFile(const std::string &path, int64_t maxBytes) const
{
    auto fd = connect(kFileOpTimeoutMs);
    if (!fd)
        return std::unexpected(fd.error());
    Fd conn(*fd);
    if (!proto::writeFrame(conn.get(), proto::kReadFile, dumpJson({{"path", path}, {"max_bytes", maxBytes}})))
        return lostInit(errno);
    auto head = okOrError(proto::readFrame(conn.get()));
    if (!head)
        return std::unexpected(head.error());
    auto data = proto::readFrame(conn.get());
    if (!data || data->type != proto::kData)
        return lostInit(errno);
    InitFile file;
    file.content = std::move(data->payload);
    file.truncated = head->value("truncated", false);
    file.size = head->value("size", int64_t{0});
    return file;
}

Result<int64_t> InitClient::writeFile(const std::string &path, std::string_view content, uint32_t mode) const
{
    auto fd = connect(kFileOpTimeoutMs);
    if (!fd)
        return std::unexpected(fd.error());
    Fd conn(*fd);
    if (content.size() > proto::kMaxFrameBytes)
        return fail(ErrorCode::InvalidArgument, "file content of " + std::to_string(content.size()) +
                                                    " bytes exceeds the 64 MiB limit of write_file; split it or copy it with a command");
    if (!proto::writeFrame(conn.get(), proto::kWriteFile, dumpJson({{"path", path}, {"mode", mode}})) ||
        !proto::writeFrame(conn.get(), proto::kData, content))
        return lostInit(errno);
    auto head = okOrError(proto::readFrame(conn.get()));
    if (!head)
        return std::unexpected(head.error());
    return head->value("size", int64_t{0});
}

Result<std::vector<InitDirEntry>> InitClient::listDir(const std::string &path) const
{
    auto fd = connect(kFileOpTimeoutMs);
    if (!fd)
        return std::unexpected(fd.error());
    Fd conn(*fd);
    if (!proto::writeFrame(conn.get(), proto::kListDir, dumpJson({{"path", path}})))
        return lostInit(errno);
    auto head = okOrError(proto::readFrame(conn.get()));
    if (!head)
        return std::unexpected(head.error());
    std::vector<InitDirEntry> entries;
    if (head->contains("entries") && (*head)["entries"].is_array()) {
        try {
            for (const auto &e : (*head)["entries"]) {
                InitDirEntry d;
                d.name = e.value("name", std::string{});
                d.isDir = e.value("is_dir", false);
                d.size = integerField<int64_t>(e, "size", int64_t{0});
                d.mode = integerField<uint32_t>(e, "mode", 0u);
                d.mtimeUnixMs = integerField<int64_t>(e, "mtime_ms", int64_t{0});
                entries.push_back(std::move(d));
            }
        } catch (const std::exception &e) {
            return fail(ErrorCode::Internal, std::string("the sandbox init sent a malformed directory list: ") + e.what());
        }
    }
    return entries;
}

Status InitClient::ping() const
{
    auto fd = connect(kFileOpTimeoutMs);
    if (!fd)
        return std::unexpected(fd.error());
    Fd conn(*fd);
    if (!proto::writeFrame(conn.get(), proto::kPing, ""))
        return lostInit(errno);
    auto head = okOrError(proto::readFrame(conn.get()));
    if (!head)
        return std::unexpected(head.error());
    return {};
}

} // namespace paddock::pool
