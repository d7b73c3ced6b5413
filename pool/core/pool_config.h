#pragma once
// paddock-pool's configuration: TOML ($XDG_CONFIG_HOME/paddock/pool.toml or --config), then
// command-line flags on top. docs/configuration.md lists every key with its default.
//
// Threads: a plain value, built once in main() and copied into the pool.

#include "common/config_problems.h"
#include "common/result.h"
#include "pool/runtimes/sandbox_identity.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace paddock::pool {

struct TierConfig {
    std::string name = "lite";
    std::string runtime = "bwrap";
    int warmCount = 2;
    int maxCount = 32;
    double cpu = 0.5;                        // cores: the cgroup's cpu quota
    int64_t memoryBytes = 512ll << 20;       // the cgroup's memory limit (OOM kill beyond it)
    int64_t pids = 512;                      // the cgroup's pids.max (processes and threads)
    int64_t diskBytes = 1ll << 30;           // the sandbox directory's btrfs qgroup limit (EDQUOT beyond); 0: none
    double pricePerHour = 0;                 // US dollars per sandbox-hour (cost and idle cost)
    // "none": no network at all; "allowlist": only through the pool's egress proxy, to the
    // hosts and ranges in `allowlist` (host, host:port, *.domain, or CIDR ranges).
    std::string network = "none";
    std::vector<std::string> allowlist;
};

struct PoolConfig {
    std::string poolId;                      // default: the host name
    std::string listen = "127.0.0.1:7701";
    std::filesystem::path stateDir;          // default: $XDG_DATA_HOME/paddock/pool
    std::filesystem::path initPath;          // default: <prefix>/libexec/paddock/ or next to paddock-pool
    std::string logLevel = "info";
    int64_t defaultExecTimeoutMs = 600000;   // when a request says 0
    int64_t maxExecTimeoutMs = 3600000;
    int64_t maxOutputBytes = 16ll << 20;     // per exec; beyond it output is dropped
    int execCachePerSandbox = 256;           // idempotency records kept per sandbox
    int64_t execCacheBytesPerSandbox = 64ll << 20;
    int drainTimeoutMs = 5000;               // SIGTERM: how long in-flight calls may take
    std::filesystem::path snapshotDir;       // workspace archives; default <state_dir>/snapshots
    int64_t postMortemRetentionHours = 72;   // post-mortems (and their snapshots) kept this long
    int postMortemMaxCount = 1000;           // and at most this many, oldest dropped first
    int64_t snapshotRetentionHours = 72;     // other snapshots (Snapshot RPC) are deleted after this; 0: never
    std::vector<TierConfig> tiers;           // default: one lite tier
    // [sandbox_identity]: the host uids and gids sandboxes get, a block each (root pools only).
    IdentityRange identity;
    // Host paths under /etc copied into every sandbox's /etc, beside the pool's own list.
    std::vector<std::string> etcExtra;
    // [metrics] listen: where /metrics is served for Prometheus ("127.0.0.1:9464"); empty: nowhere.
    // It takes the pool's TLS and token flags (pool/server/pool_metrics_endpoint.h).
    std::string metricsListen;
    // Not a pool.toml key: pool_exec_bench turns it off, in the same run, to measure what the
    // identity mapping, the minimal /etc and the seccomp filter cost.
    bool hardenSandboxes = true;

    TierConfig *findTier(const std::string &name);
};

// Reads a TOML file into a config that starts from the defaults. A missing file is fine when
// mustExist is false (the default location). Problems (syntax, unknown keys, types, ranges, an
// unknown runtime or network, a bad allowlist entry) name file:line, the key and the fix. The first
// form adds every problem and returns what it could read; the second joins them.
PoolConfig loadPoolConfig(const std::filesystem::path &file, bool mustExist, ConfigProblems &problems);
Result<PoolConfig> loadPoolConfig(const std::filesystem::path &file, bool mustExist);

// The tables of pool.toml and the keys the loader accepts (docs/configuration.md documents each).
const std::vector<ConfigSection> &poolConfigSections();

// Empty when `listen` is HOST:PORT (or unix:PATH); otherwise what is wrong and an example.
std::string checkListenAddress(const std::string &listen);

// Fills what is still empty: pool id, state dir, init path, and the lite tier.
void applyPoolDefaults(PoolConfig &config);

} // namespace paddock::pool
