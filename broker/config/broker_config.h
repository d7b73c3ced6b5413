#pragma once
// The broker's configuration: TOML in $XDG_CONFIG_HOME/paddock/broker.toml (or --config FILE),
// then command-line flags on top. With no file at all, the embedded default applies: one local pool
// on 127.0.0.1:7701 and allow_local_execution = true (a development mode the CLI and console name).
// docs/configuration.md lists every key with its default.

#include "broker/auth/principals.h"
#include "broker/config/checkpoints_config.h"
#include "broker/config/metrics_config.h"
#include "broker/config/otlp_config.h"
#include "broker/config/store_config.h"
#include "broker/cost/prices.h"
#include "broker/llm/model_registry.h"
#include "broker/pool_client/grpc_pool_client.h"
#include "common/config_problems.h"
#include "common/result.h"

#include <filesystem>
#include <string>
#include <vector>

namespace paddock::broker_config {

struct PoolEndpoint {
    std::string name;
    std::string endpoint;     // host:port, or unix:/path
    // TLS when tlsCa is set; tlsCert and tlsKey (both or neither) add a client certificate.
    std::filesystem::path tlsCa;
    std::filesystem::path tlsCert;
    std::filesystem::path tlsKey;
    std::string tlsServerName;         // the name checked in the pool's certificate, if not the host
    std::filesystem::path tokenFile;   // holds the bearer token; the token itself is never logged
    std::string where;                 // "file:line" of its [[pool]] entry; empty for --pool and the default
};

struct BrokerConfig {
    std::filesystem::path configFile;     // empty when the embedded default is in effect
    std::filesystem::path dataDir;        // the SQLite database is dataDir/broker.db (when store is not PostgreSQL)
    std::filesystem::path socketPath;
    int workers = 0;          // step threads (decide, append); 0: two per core. Commands hold none
    int64_t leaseMs = 30000;
    std::string defaultTier = "lite";
    bool allowLocalExecution = false;
    std::vector<PoolEndpoint> pools;
    int64_t poolHealthIntervalMs = 1000;   // each pool's Status is checked this often
    int64_t poolLostAfterMs = 5000;        // unhealthy this long: its sessions move to another pool
    int64_t debugShellIdleTimeoutMs = 600000;   // a debug shell unused this long is closed
    int64_t sandboxIdleReleaseMs = 60000;       // a paused session's sandbox is given back after this long
    llm::ModelsConfig models;
    std::string logLevel = "info";
    // Permissions (docs/permissions.md). No principals: this process's user is admin on the socket.
    std::vector<auth::PrincipalConfig> principals;
    // A TCP listener ("host:port") for remote consoles and CLIs; needs tlsCert and tlsKey, and every
    // call on it a bearer token.
    std::string listenTcp;
    std::filesystem::path tlsCert;
    std::filesystem::path tlsKey;
    std::filesystem::path policyFile;     // TOML policy ([review], [[tier_rule]]); empty: built-in defaults
    std::string policyFileWhere;          // "file:line" of policy_file, for messages about it
    cost::PriceTable prices = cost::defaultPriceTable();   // [prices]: model tokens and snapshot storage
    CheckpointsConfig checkpoints;        // [checkpoints]: where workspace checkpoints are kept
    StoreConfig store;                    // [store]: SQLite in dataDir (the default) or PostgreSQL
    MetricsConfig metrics;                // [metrics]: /metrics for Prometheus; off by default
    OtlpConfig otlp;                      // [otlp]: sessions' traces to an OTLP/HTTP receiver; off by default
};

// The embedded default, before any file or flag.
BrokerConfig defaultBrokerConfig();

// Reads a config file over `base`. Problems name file:line, the key and the fix. The first form
// adds every problem to `problems` and returns what it could read; the second joins them (the
// first problem's code, one message a line).
BrokerConfig loadBrokerConfig(const std::filesystem::path &file, BrokerConfig base, ConfigProblems &problems);
Result<BrokerConfig> loadBrokerConfig(const std::filesystem::path &file, BrokerConfig base);

// Every table of broker.toml and the keys its loader accepts, [models] and [prices] included.
const std::vector<ConfigSection> &brokerConfigSections();

// "name=host:port" from --pool.
Result<PoolEndpoint> parsePoolFlag(const std::string &flag);

// True when the endpoint is on this machine: a unix socket, a loopback or unspecified address, or
// a name or address that resolves to one of this host's own addresses (in this network namespace).
bool isLocalEndpoint(const std::string &endpoint);

// The connection to one pool: reads its CA, client certificate, key and token files. Errors name
// the pool, the file and the fix; no error or log line contains the token.
Result<pool_client::PoolConnection> loadPoolConnection(const PoolEndpoint &pool);

// A PEM file of at most 1 MiB. owner names it in errors: "pool 'a'" or "the broker".
Result<std::string> readPemFile(const std::string &owner, const char *key, const std::filesystem::path &path);

// Checks the whole config: pools present, no local pool unless allowed, sane numbers. The first
// form adds every problem; the second joins them. config_check.h checks the files it names too.
void validateBrokerConfig(const BrokerConfig &config, ConfigProblems &problems);
Status validateBrokerConfig(const BrokerConfig &config);

} // namespace paddock::broker_config
