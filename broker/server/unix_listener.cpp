#include "broker/server/unix_listener.h"

#include "broker/server/caller.h"

#include <grpcpp/server_posix.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace paddock::server {

Result<std::unique_ptr<UnixListener>> UnixListener::listen(const std::filesystem::path &path, mode_t mode)
{
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.string().size() >= sizeof addr.sun_path)
        return fail(ErrorCode::InvalidArgument, "the socket path " + path.string() + " is longer than "
                        + std::to_string(sizeof addr.sun_path - 1) + " bytes: pick a shorter --socket");
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return fail(ErrorCode::Unavailable, std::string("cannot create a unix socket: ") + std::strerror(errno));
    if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 || ::chmod(path.c_str(), mode) != 0
        || ::listen(fd, 128) != 0) {
        const int err = errno;
        ::close(fd);
        return fail(ErrorCode::Unavailable, "could not listen on " + path.string() + " (" + std::strerror(err)
                        + "): check that its directory is writable, or pass --socket");
    }
    const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake < 0) {
        ::close(fd);
        return fail(ErrorCode::Unavailable, std::string("cannot create an eventfd: ") + std::strerror(errno));
    }
    return std::unique_ptr<UnixListener>(new UnixListener(fd, wake, path));
}

UnixListener::UnixListener(int fd, int wakeFd, std::filesystem::path path)
    : m_fd(fd), m_wakeFd(wakeFd), m_path(std::move(path))
{
}

UnixListener::~UnixListener()
{
    stop();
    if (m_fd >= 0)
        ::close(m_fd);
    if (m_wakeFd >= 0)
        ::close(m_wakeFd);
}

void UnixListener::start(grpc::Server *server, std::shared_ptr<const auth::PrincipalMap> principals)
{
    m_server = server;
    m_principals = std::move(principals);
    m_thread = std::thread([this] { acceptLoop(); });
}

void UnixListener::stop()
{
    if (!m_thread.joinable())
        return;
    const uint64_t one = 1;
    (void)!::write(m_wakeFd, &one, sizeof one);
    m_thread.join();
}

void UnixListener::acceptLoop()
{
    for (;;) {
        pollfd fds[2] = {{m_fd, POLLIN, 0}, {m_wakeFd, POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            spdlog::error("unix listener {}: poll failed: {}", m_path.string(), std::strerror(errno));
            return;
        }
        if (fds[1].revents)
            return;
        const int conn = ::accept4(m_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (conn < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                spdlog::warn("unix listener {}: accept failed: {}", m_path.string(), std::strerror(errno));
            continue;
        }
        ucred cred{};
        socklen_t length = sizeof cred;
        Caller caller;
        caller.via = "unix";
        if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
            caller.principal = "(unknown)";
            caller.unknownReason = std::string("the broker could not read the peer's credentials: ") + std::strerror(errno);
        } else if (auto identity = m_principals->forUid(cred.uid)) {
            caller.principal = identity->principal;
            caller.role = std::string(auth::roleName(identity->role));
        } else {
            caller.principal = auth::userName(cred.uid);
            caller.unknownReason = identity.error().message;
        }
        registerUnixPeer(conn, caller);
        grpc::AddInsecureChannelFromFd(m_server, conn);
    }
}

} // namespace paddock::server
