#pragma once
// [metrics] in broker.toml: where paddockd serves /metrics for Prometheus (docs/metrics.md). Off
// without the table.
//
//   [metrics]
//   listen = "127.0.0.1:9464"      # loopback: plain HTTP, no token
//
//   [metrics]
//   listen = "0.0.0.0:9464"        # any other address: TLS, and every scrape a bearer token
//   tls_cert = "metrics.pem"       # of a principal (paddockctl tokens create), as on listen_tcp
//   tls_key = "metrics.key"
//
// Threads: plain values and pure functions.

#include "common/config_problems.h"

#include <toml++/toml.h>

#include <filesystem>
#include <string>

namespace paddock::broker_config {

struct MetricsConfig {
    std::string listen;                 // empty: no /metrics
    std::filesystem::path tlsCert;      // both set: HTTPS, and a bearer token on every scrape
    std::filesystem::path tlsKey;
    std::string where;                  // "file:line" of [metrics], for messages

    bool enabled() const { return !listen.empty(); }
    bool tls() const { return !tlsCert.empty(); }
};

// The [metrics] table's keys.
const ConfigSection &metricsSection();

// Reads [metrics] over `config`; paths relative to the file's folder. Problems name file:line.
MetricsConfig parseMetricsConfig(const std::filesystem::path &file, const toml::table &table, MetricsConfig config,
                                 ConfigProblems &problems);

// The rule of every listener (metrics/listen_address.h): the address parses; tls_cert and tls_key
// come together and only with listen; an address other than loopback has TLS.
void validateMetricsConfig(const MetricsConfig &config, ConfigProblems &problems);

} // namespace paddock::broker_config
