#pragma once
// The broker's configuration: TOML in $XDG_CONFIG_HOME/paddock/broker.toml (or --config FILE),
// then command-line flags on top. With no file at all, the embedded default applies: one local pool
// on 127.0.0.1:7701 and allow_local_execution = true (a development mode the CLI and console name).
// docs/broker.md lists every key with its default.

#include "broker/model/model_registry.h"
#include "common/result.h"

#include <filesystem>
#include <string>
#include <vector>

namespace paddock::server {

struct PoolEndpoint {
    std::string name;
    std::string endpoint;     // host:port
};

struct BrokerConfig {
    std::filesystem::path configFile;     // empty when the embedded default is in effect
    std::filesystem::path dataDir;        // the database is dataDir/broker.db
    std::filesystem::path socketPath;
    int workers = 32;         // a worker is held for as long as a command runs
    int64_t leaseMs = 30000;
    std::string defaultTier = "lite";
    bool allowLocalExecution = false;
    std::vector<PoolEndpoint> pools;
    model::ModelsConfig models;
    std::string logLevel = "info";
};

// The embedded default, before any file or flag.
BrokerConfig defaultBrokerConfig();

// Reads a config file over `base`. Errors name the file, the key and the fix.
Result<BrokerConfig> loadBrokerConfig(const std::filesystem::path &file, BrokerConfig base);

// "name=host:port" from --pool.
Result<PoolEndpoint> parsePoolFlag(const std::string &flag);

// True when the endpoint's host is this machine (loopback or this host's name).
bool isLocalEndpoint(const std::string &endpoint);

// Checks the whole config: pools present, no local pool unless allowed, sane numbers.
Status validateBrokerConfig(const BrokerConfig &config);

} // namespace paddock::server
