#pragma once
// Reads a /proc file of another process, which may exit while it is read: empty on any error
// (ESRCH from a process that just died makes libstdc++'s stream iterators throw instead).
// Threads: any.

#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace paddock::test {

inline std::string readProcFile(const std::filesystem::path &path)
{
    std::string out;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return out;
    char buffer[4096];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        out.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
}

} // namespace paddock::test
