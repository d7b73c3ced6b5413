#pragma once
// PoolClient over gRPC: the broker's connection to one paddock-pool.
//
// Threads: every method may be called from any thread concurrently (one shared channel; each
// call blocks until it is done or its deadline passes).

#include "broker/pools/pool_client.h"

#include <memory>
#include <string>

namespace paddock::pools {

// endpoint: a gRPC target, e.g. "127.0.0.1:7701" or "unix:/path/pool.sock". Connects lazily:
// an unreachable pool shows up as Unavailable on the first call.
std::unique_ptr<PoolClient> makeGrpcPoolClient(std::string name, std::string endpoint);

} // namespace paddock::pools
