#include "broker/config/checkpoints_config.h"

namespace paddock::broker_config {

const ConfigSection &checkpointsSection()
{
    static const ConfigSection section{"broker.toml", "[checkpoints]",
                                       {"store", "dir", "endpoint", "bucket", "region", "prefix", "path_style",
                                        "credentials_file", "timeout_ms", "retention_hours"}};
    return section;
}

CheckpointsConfig parseCheckpointsConfig(const std::filesystem::path &file, const toml::table &table,
                                         CheckpointsConfig config, ConfigProblems &problems)
{
    auto problem = [&](const toml::node &node, const std::string &message) {
        problems.add(ErrorCode::InvalidArgument,
                     file.string() + ":" + std::to_string(node.source().begin.line) + ": " + message);
    };
    auto resolve = [&](const std::string &path) {
        return std::filesystem::path(path).is_absolute() ? std::filesystem::path(path) : file.parent_path() / path;
    };
    for (const auto &[key, node] : table) {
        const std::string k(key.str());
        if (!checkpointsSection().accepts(k)) {
            problem(node, "unknown key '" + k + "' in [checkpoints]; it takes " + checkpointsSection().keyList());
        } else if (k == "path_style") {
            if (auto v = node.value<bool>())
                config.pathStyle = *v;
            else
                problem(node, "path_style must be true or false");
        } else if (k == "timeout_ms") {
            if (auto v = node.value_exact<int64_t>(); v && *v >= 100)
                config.timeoutMs = *v;
            else
                problem(node, "timeout_ms must be an integer >= 100");
        } else if (k == "retention_hours") {
            if (auto v = node.value_exact<int64_t>(); v && *v >= 0)
                config.retentionHours = *v;
            else
                problem(node, "retention_hours must be an integer >= 0 (hours an ended session's checkpoints are "
                              "kept; 0 keeps them forever)");
        } else if (auto text = node.value<std::string>(); !text || text->empty()) {
            problem(node, k + " in [checkpoints] must be a non-empty string");
        } else if (k == "store") {
            if (*text != "broker" && *text != "s3")
                problem(node, "store = \"" + *text + "\" is not a checkpoint store: use \"broker\" (files in the "
                                  "broker's data directory) or \"s3\" (an S3-compatible bucket)");
            else
                config.store = *text;
        } else if (k == "dir") {
            config.dir = resolve(*text);
        } else if (k == "credentials_file") {
            config.credentialsFile = resolve(*text);
        } else if (k == "endpoint") {
            config.endpoint = *text;
        } else if (k == "bucket") {
            config.bucket = *text;
        } else if (k == "region") {
            config.region = *text;
        } else if (k == "prefix") {
            config.prefix = *text;
        }
    }
    if (config.store == "s3") {
        for (const auto &[key, value] : {std::pair<const char *, bool>{"endpoint", config.endpoint.empty()},
                                         {"bucket", config.bucket.empty()},
                                         {"credentials_file", config.credentialsFile.empty()}})
            if (value)
                problem(table, "[checkpoints] store = \"s3\" needs " + std::string(key)
                                   + " (docs/checkpoints.md shows a complete table)");
    }
    return config;
}

} // namespace paddock::broker_config
