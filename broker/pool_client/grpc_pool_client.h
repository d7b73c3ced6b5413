#pragma once
// PoolClient over gRPC: the broker's connection to one paddock-pool, plaintext or TLS (optionally
// with a client certificate), with an optional bearer token on every call.
//
// Threads: every method may be called from any thread concurrently (one shared channel; each
// call blocks until it is done or its deadline passes).

#include "broker/pool_client/pool_client.h"

#include <memory>
#include <string>

namespace paddock::pool_client {

struct PoolConnection {
    std::string name;
    std::string endpoint;         // a gRPC target, e.g. "10.0.0.5:7701" or "unix:/path/pool.sock"
    // TLS when caPem is set: the pool's certificate must chain to it and name the endpoint's host
    // (or serverName when set).
    std::string caPem;
    std::string certPem;          // client certificate and key for mutual TLS (both or neither)
    std::string keyPem;
    std::string serverName;       // overrides the name checked in the pool's certificate
    std::string caFile;           // where caPem came from, for error messages
    std::string token;            // sent as "authorization: Bearer <token>"; never logged
};

// Connects lazily: an unreachable pool shows up as Unavailable on the first call. A TLS failure
// (wrong CA, wrong name) is Unavailable too, with a message naming the pool, the endpoint and the fix.
std::unique_ptr<PoolClient> makeGrpcPoolClient(PoolConnection connection);
std::unique_ptr<PoolClient> makeGrpcPoolClient(std::string name, std::string endpoint);

} // namespace paddock::pool_client
