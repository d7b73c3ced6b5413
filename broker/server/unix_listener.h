#pragma once
// The broker's unix socket, accepted by the broker itself rather than by gRPC, so that every
// connection's peer credentials (SO_PEERCRED) are read once, mapped to a principal and registered
// (caller.h) before the connection is handed to the gRPC server (grpc::AddInsecureChannelFromFd).
// gRPC 1.51 does not expose a unix peer's uid; this costs nothing per call (a map lookup by fd).
//
// Threads: listen() and stop() from the owner's thread; one accept thread in between.

#include "broker/auth/principals.h"
#include "common/result.h"

#include <grpcpp/server.h>

#include <filesystem>
#include <memory>
#include <thread>

namespace paddock::server {

class UnixListener {
public:
    // Binds and listens at path (which must not exist) with the given mode. Errors name the path.
    static Result<std::unique_ptr<UnixListener>> listen(const std::filesystem::path &path, mode_t mode);
    ~UnixListener();

    UnixListener(const UnixListener &) = delete;
    UnixListener &operator=(const UnixListener &) = delete;

    // Starts accepting into server (built and started, possibly with no port of its own).
    void start(grpc::Server *server, std::shared_ptr<const auth::PrincipalMap> principals);
    // Stops accepting (connections already handed over stay with the server). Idempotent.
    void stop();

private:
    UnixListener(int fd, int wakeFd, std::filesystem::path path);
    void acceptLoop();

    int m_fd = -1;
    int m_wakeFd = -1;   // eventfd: stop() wakes the accept loop
    std::filesystem::path m_path;
    grpc::Server *m_server = nullptr;
    std::shared_ptr<const auth::PrincipalMap> m_principals;
    std::thread m_thread;
};

} // namespace paddock::server
