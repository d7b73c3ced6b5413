#pragma once
// How a pool lets the broker in: TLS server credentials (optionally requiring a client certificate
// signed by a given CA) and a bearer token that every call must carry
// ("authorization: Bearer <token>"), compared in constant time. A call without it, or with
// another token, ends with UNAUTHENTICATED before it reaches any service (health and reflection
// included).
//
// A token needs TLS: over plaintext anyone on the path could read it and replay it.
//
// Threads: makePoolServerCredentials() on the main thread at start; gRPC calls the token check
// from its own threads (it only reads the immutable token).

#include "common/result.h"

#include <grpcpp/security/server_credentials.h>

#include <filesystem>
#include <memory>
#include <string_view>

namespace paddock::pool {

struct PoolTlsOptions {
    std::filesystem::path certFile;       // PEM certificate chain the pool presents
    std::filesystem::path keyFile;        // its private key
    std::filesystem::path clientCaFile;   // when set: clients must present a certificate from this CA
    std::filesystem::path tokenFile;      // when set: every call must carry this bearer token
};

// Insecure credentials when nothing is set. Errors (FailedPrecondition) name the flag, the file and
// the fix; none contains the token.
Result<std::shared_ptr<grpc::ServerCredentials>> makePoolServerCredentials(const PoolTlsOptions &options);

// The token in tokenFile (--token-file): its one line, printable ASCII without spaces. Errors name
// the flag, the file and the fix, never the token.
Result<std::string> readPoolToken(const std::filesystem::path &tokenFile);

// Equal length and bytes, in time that depends only on the lengths.
bool constantTimeEquals(std::string_view a, std::string_view b);

// The answer to a call's "authorization" metadata: OK, or UNAUTHENTICATED saying what is missing.
grpc::Status checkBearer(std::string_view authorization, bool present, std::string_view token);

} // namespace paddock::pool
