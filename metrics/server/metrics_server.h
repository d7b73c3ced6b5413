#pragma once
// GET /metrics over HTTP or HTTPS for Prometheus to scrape (docs/metrics.md): the page the process
// registry writes (metrics/registry.h), optionally behind a bearer token and TLS.
//
// Why cpp-httplib and not the gRPC server the daemons already run: Prometheus scrapes plain
// HTTP/1.1, which gRPC's server does not serve; Debian 12 has no prometheus-cpp, and packages
// cpp-httplib (libcpp-httplib-dev), which does TLS with OpenSSL (the daemons already link it) and
// which the tests already use as a fake model server. One small server, one route.
//
// The rule both daemons apply before they start one (listen_address.h, checked with their
// config): a loopback address may serve plain HTTP without a token (only this host reaches it);
// any other address needs TLS and a token, as their gRPC listeners do.
//
// Known limits: one route; HTTP/1.1 only; at most kThreads scrapes answered at once (the rest
// wait in the kernel's accept queue).
//
// Threads: start() and stop() from the owner's thread. Requests are answered on the server's own
// threads, which call checkToken and render (both must be safe to call from there, concurrently).

#include "common/result.h"
#include "metrics/listen_address.h"

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace paddock::metrics {

struct MetricsServerOptions {
    std::string listen;                  // "host:port"
    std::string setting;                 // how messages name the setting: "[metrics] listen in broker.toml"
    std::filesystem::path tlsCert;       // PEM chain; with tlsKey: HTTPS
    std::filesystem::path tlsKey;
    std::filesystem::path clientCa;      // HTTPS that also requires a client certificate from this CA
    // Set: every scrape must carry "Authorization: Bearer <token>"; called with the token, returns ""
    // to let it in or why not (the 401's body, which must not contain the token).
    std::function<std::string(std::string_view token)> checkToken;
    std::string tokenHint;               // added to the 401 of a scrape without a token: where one comes from
    // Called for every 401 with its reason and the token presented (empty when none parsed), e.g.
    // to audit it; never log the token itself.
    std::function<void(std::string_view why, std::string_view token)> onRefusal;
    std::function<std::string()> render; // the page; empty: registry().expose()
};

class MetricsServer {
public:
    static constexpr int kThreads = 2;

    // Binds and starts answering. Errors name the setting and the fix: InvalidArgument (address,
    // certificate and key not both given), FailedPrecondition (the certificate, key or CA cannot be
    // loaded), Unavailable (the address cannot be bound: the port is taken, or the address is not
    // this host's).
    static Result<std::unique_ptr<MetricsServer>> start(MetricsServerOptions options);
    ~MetricsServer();
    MetricsServer(const MetricsServer &) = delete;
    MetricsServer &operator=(const MetricsServer &) = delete;

    // Stops accepting and joins the server's threads. Idempotent.
    void stop();
    int port() const;
    // "http://127.0.0.1:9464/metrics" (https with TLS), for logs.
    std::string url() const;

private:
    struct Impl;
    explicit MetricsServer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

// The token of an "Authorization: Bearer <token>" value (scheme case-insensitive), or empty.
std::string_view bearerTokenOf(std::string_view authorization);

} // namespace paddock::metrics
