#include "broker/server/caller.h"

#include <algorithm>
#include <charconv>
#include <mutex>
#include <unordered_map>

namespace paddock::server {

namespace {

struct UnixPeers {
    std::mutex mutex;
    std::unordered_map<int, Caller> byFd;
};

UnixPeers &unixPeers()
{
    static UnixPeers peers;
    return peers;
}

std::string firstProperty(const grpc::AuthContext &auth, const char *name)
{
    const auto values = auth.FindPropertyValues(name);
    return values.empty() ? std::string() : std::string(values.front().data(), values.front().size());
}

} // namespace

void registerUnixPeer(int fd, const Caller &caller)
{
    auto &peers = unixPeers();
    std::lock_guard lock(peers.mutex);
    peers.byFd.insert_or_assign(fd, caller);
}

Caller callerOf(const grpc::CallbackServerContext *context)
{
    Caller caller;
    // A connection the broker's unix listener accepted: gRPC names its peer "fd:N".
    const std::string peer = context->peer();
    int fd = -1;
    if (peer.starts_with("fd:")) {
        const auto [end, ec] = std::from_chars(peer.data() + 3, peer.data() + peer.size(), fd);
        if (ec != std::errc() || end != peer.data() + peer.size())
            fd = -1;
    }
    bool known = false;
    if (fd >= 0) {
        auto &peers = unixPeers();
        std::lock_guard lock(peers.mutex);
        if (auto it = peers.byFd.find(fd); it != peers.byFd.end()) {
            caller = it->second;
            known = true;
        }
    }
    if (!known) {
        if (const auto auth = context->auth_context(); auth && !firstProperty(*auth, kPrincipalProperty).empty()) {
            caller.principal = firstProperty(*auth, kPrincipalProperty);
            caller.role = firstProperty(*auth, kRoleProperty);
            caller.via = "token";
            known = true;
        }
    }
    if (!known) {
        caller.principal = "(unknown)";
        caller.unknownReason = "the call came from " + peer + ", neither through the broker's unix socket nor with a "
                               "bearer token over TLS; connect to the socket, or to listen_tcp with a token";
    }
    const auto &md = context->client_metadata();
    if (auto it = md.find("paddock-user"); it != md.end())
        caller.claimed.assign(it->second.data(), std::min<size_t>(it->second.size(), 64));
    return caller;
}

} // namespace paddock::server
