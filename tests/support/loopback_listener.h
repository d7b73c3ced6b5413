#pragma once
// A TCP listener on the host's 127.0.0.1 at an ephemeral port, for the pool tests that check a
// sandbox cannot reach the host's loopback (pool_sandbox_test, pool_runtime_isolation_test).
// Threads: the test's main thread.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace paddock::test {

// The listening socket (the caller closes it), its port in port; -1 when it cannot listen.
inline int listenOnLoopback(int &port)
{
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0)
        return -1;
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
    port = ntohs(addr.sin_port);
    return fd;
}

} // namespace paddock::test
