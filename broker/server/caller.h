#pragma once
// Who is calling a broker method: the principal every audit record, review request and decision
// names, and the role that gates the call. One function answers it for every service, so that the
// way callers are identified (docs/permissions.md) lives in one place:
// - on the unix socket, UnixListener accepted the connection, read the peer's uid (SO_PEERCRED)
//   and mapped it to a principal before gRPC saw the connection (registerUnixPeer);
// - over TCP, the bearer token was checked before the call reached any handler (access.h's
//   token processor) and its principal put in the call's auth context.
// Thread-safe: reads the call's context and a registry guarded by a mutex.

#include <grpcpp/grpcpp.h>

#include <string>

namespace paddock::server {

struct Caller {
    std::string principal;   // e.g. an OS user mapped by peer credentials, or a token's principal
    std::string role;        // viewer, engineer, approver, operator, admin; empty when unknown
    std::string via;         // unix or token
    std::string claimed;     // what the client says about itself ("paddock-user" metadata); unverified
    // Non-empty when the caller is not known (an OS user the config does not list, a connection
    // that came neither through the socket nor with a token): why, and what to do about it.
    std::string unknownReason;
};

Caller callerOf(const grpc::CallbackServerContext *context);

// The unix socket's connections: fd -> the principal its peer credentials map to (role empty and
// unknownReason set for a user the config does not list). Registered before the fd is handed to
// gRPC, so a call can never see the fd's previous owner: gRPC keeps the fd open while any call on
// that connection lives.
void registerUnixPeer(int fd, const Caller &caller);

// Auth context properties the token check sets (access.cpp) and callerOf reads.
inline constexpr char kPrincipalProperty[] = "paddock.principal";
inline constexpr char kRoleProperty[] = "paddock.role";

} // namespace paddock::server
