#pragma once
// Where a daemon serves /metrics, and the rule both daemons apply to it (docs/metrics.md): a
// loopback address may serve plain HTTP without a token, since only this host can reach it; any
// other address needs TLS and a bearer token, like the daemons' gRPC listeners over TCP. Each
// daemon's config check says how to give it those (their settings differ).
//
// Threads: pure functions.

#include "common/result.h"

#include <string>
#include <string_view>

namespace paddock::metrics {

struct ListenAddress {
    std::string host;   // without brackets: "127.0.0.1", "::1", "0.0.0.0", "metrics.example"
    int port = 0;       // 0: any free port (the server says which)
};

// "host:port" or "[ipv6]:port". Errors (InvalidArgument) name `setting` and give an example.
Result<ListenAddress> parseListenAddress(std::string_view listen, std::string_view setting);

// 127.0.0.0/8, ::1 (and ::ffff:127.x.y.z), or "localhost": only this host can connect.
bool isLoopbackHost(std::string_view host);

} // namespace paddock::metrics
