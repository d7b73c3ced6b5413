#include "pool/init/egress_forwarder.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

namespace paddock::pool::init {
namespace {

constexpr size_t kBufferBytes = 64 * 1024;

struct Pair {
    int tcp = -1;
    int uds = -1;
    std::string t2u, u2t;   // pending bytes, each at most kBufferBytes
    bool tcpEof = false, udsEof = false, tcpShut = false, udsShut = false;
    bool dead = false;
};

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

int connectProxy(const char *path)
{
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0) {
        if (fd >= 0)
            ::close(fd);
        return -1;
    }
    setNonBlocking(fd);
    return fd;
}

// Reads what fits into `into`; false on EOF or error.
bool readInto(int fd, std::string &into)
{
    char buf[16 * 1024];
    const size_t room = kBufferBytes - into.size();
    ssize_t n = ::read(fd, buf, std::min(room, sizeof buf));
    if (n > 0) {
        into.append(buf, static_cast<size_t>(n));
        return true;
    }
    return n < 0 && (errno == EAGAIN || errno == EINTR);
}

// Writes what it can from `from`; false on error.
bool writeFrom(int fd, std::string &from)
{
    ssize_t n = ::send(fd, from.data(), from.size(), MSG_NOSIGNAL);
    if (n > 0) {
        from.erase(0, static_cast<size_t>(n));
        return true;
    }
    return n < 0 && (errno == EAGAIN || errno == EINTR);
}

} // namespace

int runEgressForwarder(const char *socketPath, int port)
{
    int listenFd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    ::setsockopt(listenFd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (listenFd < 0 || ::bind(listenFd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
        ::listen(listenFd, 128) != 0) {
        std::fprintf(stderr, "paddock-sandbox-init: egress forwarder cannot listen on 127.0.0.1:%d: %s\n", port,
                     std::strerror(errno));
        return 1;
    }
    std::vector<Pair> pairs;
    std::vector<pollfd> fds;
    for (;;) {
        fds.clear();
        fds.push_back({listenFd, POLLIN, 0});
        for (auto &p : pairs) {
            short te = 0, ue = 0;
            if (!p.tcpEof && p.t2u.size() < kBufferBytes)
                te |= POLLIN;
            if (!p.u2t.empty())
                te |= POLLOUT;
            if (!p.udsEof && p.u2t.size() < kBufferBytes)
                ue |= POLLIN;
            if (!p.t2u.empty())
                ue |= POLLOUT;
            fds.push_back({p.tcp, te, 0});
            fds.push_back({p.uds, ue, 0});
        }
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        for (size_t i = 0; i < pairs.size(); ++i) {
            Pair &p = pairs[i];
            const short tr = fds[1 + 2 * i].revents, ur = fds[2 + 2 * i].revents;
            if ((tr & (POLLIN | POLLHUP | POLLERR)) && !p.tcpEof && p.t2u.size() < kBufferBytes && !readInto(p.tcp, p.t2u))
                p.tcpEof = true;
            if ((ur & (POLLIN | POLLHUP | POLLERR)) && !p.udsEof && p.u2t.size() < kBufferBytes && !readInto(p.uds, p.u2t))
                p.udsEof = true;
            if (!p.t2u.empty() && !writeFrom(p.uds, p.t2u))
                p.dead = true;
            if (!p.u2t.empty() && !writeFrom(p.tcp, p.u2t))
                p.dead = true;
            if (p.tcpEof && p.t2u.empty() && !p.udsShut) {
                ::shutdown(p.uds, SHUT_WR);
                p.udsShut = true;
            }
            if (p.udsEof && p.u2t.empty() && !p.tcpShut) {
                ::shutdown(p.tcp, SHUT_WR);
                p.tcpShut = true;
            }
            if (p.tcpShut && p.udsShut)
                p.dead = true;
        }
        for (auto it = pairs.begin(); it != pairs.end();) {
            if (it->dead) {
                ::close(it->tcp);
                ::close(it->uds);
                it = pairs.erase(it);
            } else {
                ++it;
            }
        }
        if (fds[0].revents & POLLIN) {
            for (;;) {
                int c = ::accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (c < 0)
                    break;
                int u = pairs.size() < static_cast<size_t>(kEgressMaxConnections) ? connectProxy(socketPath) : -1;
                if (u < 0) {
                    static const char kBusy[] = "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 59\r\n\r\n"
                                                "paddock egress forwarder: the pool's proxy is unreachable\r\n";
                    (void)!::send(c, kBusy, sizeof kBusy - 1, MSG_NOSIGNAL);
                    ::close(c);
                    continue;
                }
                Pair p;
                p.tcp = c;
                p.uds = u;
                pairs.push_back(std::move(p));
            }
        }
    }
}

} // namespace paddock::pool::init
