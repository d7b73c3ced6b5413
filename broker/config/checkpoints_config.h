#pragma once
// [checkpoints] in broker.toml: where the broker keeps workspace checkpoints (docs/checkpoints.md).
//
//   [checkpoints]
//   store = "broker"                  # the default: files under dir
//   dir = "/var/lib/paddock/checkpoints"   # default <data_dir>/checkpoints
//   retention_hours = 168             # ended sessions' checkpoints kept this long; 0: forever
//
//   [checkpoints]
//   store = "s3"
//   endpoint = "https://s3.eu-west-1.amazonaws.com"
//   bucket = "team-checkpoints"
//   region = "eu-west-1"
//   prefix = "paddock/"              # optional
//   path_style = false                # virtual-host style (bucket.host); true for most self-hosted stores
//   credentials_file = "s3.credentials"   # AWS shared-credentials format, mode 0600
//   timeout_ms = 30000
//
// Threads: plain values and pure functions.

#include "common/config_problems.h"

#include <toml++/toml.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace paddock::broker_config {

struct CheckpointsConfig {
    std::string store = "broker";             // "broker" or "s3"
    std::filesystem::path dir;                // store = "broker"; empty: <data_dir>/checkpoints
    std::string endpoint;                     // store = "s3"
    std::string bucket;
    std::string region = "us-east-1";
    std::string prefix;
    bool pathStyle = true;
    std::filesystem::path credentialsFile;
    int64_t timeoutMs = 30000;
    // Checkpoints of a session that ended (its last event) this long ago are collected; 0: never
    // (broker/checkpoints/checkpoint_collector.h).
    int64_t retentionHours = 168;
};

// The [checkpoints] table's keys.
const ConfigSection &checkpointsSection();

// Reads [checkpoints] over `config`; paths relative to the file's folder. Problems name file:line.
CheckpointsConfig parseCheckpointsConfig(const std::filesystem::path &file, const toml::table &table,
                                         CheckpointsConfig config, ConfigProblems &problems);

} // namespace paddock::broker_config
