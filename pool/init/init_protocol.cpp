#include "pool/init/init_protocol.h"

#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

namespace paddock::pool::init {

bool writeAll(int fd, const void *data, size_t size)
{
    auto *p = static_cast<const char *>(data);
    while (size > 0) {
        // MSG_NOSIGNAL: a vanished peer must be an error value, not a SIGPIPE. Falls back to
        // write() for pipes, where send() fails with ENOTSOCK.
        ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK)
            n = ::write(fd, p, size);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

bool readAll(int fd, void *data, size_t size)
{
    auto *p = static_cast<char *>(data);
    while (size > 0) {
        ssize_t n = ::read(fd, p, size);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        if (n == 0) {
            errno = 0;
            return false;
        }
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

bool writeFrame(int fd, char type, std::string_view payload)
{
    if (payload.size() > kMaxFrameBytes) {
        errno = EMSGSIZE;
        return false;
    }
    const auto len = static_cast<uint32_t>(payload.size());
    char header[5] = {type, static_cast<char>(len >> 24), static_cast<char>(len >> 16),
                      static_cast<char>(len >> 8), static_cast<char>(len)};
    // Small frames go out in one syscall: the exit frame ends every exec and sits on the
    // latency path.
    if (payload.size() <= 4096) {
        char buf[5 + 4096];
        std::copy(header, header + 5, buf);
        std::copy(payload.begin(), payload.end(), buf + 5);
        return writeAll(fd, buf, 5 + payload.size());
    }
    return writeAll(fd, header, sizeof header) && writeAll(fd, payload.data(), payload.size());
}

std::optional<Frame> readFrame(int fd)
{
    unsigned char header[5];
    if (!readAll(fd, header, sizeof header))
        return std::nullopt;
    const uint32_t len = (uint32_t{header[1]} << 24) | (uint32_t{header[2]} << 16) |
                         (uint32_t{header[3]} << 8) | uint32_t{header[4]};
    if (len > kMaxFrameBytes) {
        errno = EMSGSIZE;
        return std::nullopt;
    }
    Frame frame;
    frame.type = static_cast<char>(header[0]);
    frame.payload.resize(len);
    if (len > 0 && !readAll(fd, frame.payload.data(), len))
        return std::nullopt;
    return frame;
}

} // namespace paddock::pool::init
