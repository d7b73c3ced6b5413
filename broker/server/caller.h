#pragma once
// Who is calling a broker method: the principal every audit record, review request and decision
// names, and the role that gates the call. One function answers it for every service, so that the
// way callers are identified (docs/permissions.md) lives in one place.
// Thread-safe: reads only the call's context.

#include <grpcpp/grpcpp.h>

#include <string>

namespace paddock::server {

struct Caller {
    std::string principal;   // e.g. an OS user mapped by peer credentials, or a token's principal
    std::string role;        // viewer, engineer, approver, operator, admin
    std::string via;         // unix or token
    std::string claimed;     // what the client says about itself ("paddock-user" metadata); unverified
};

Caller callerOf(const grpc::CallbackServerContext *context);

} // namespace paddock::server
