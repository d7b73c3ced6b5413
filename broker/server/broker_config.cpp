#include "broker/server/broker_config.h"

#include "common/paths.h"

#include <toml++/toml.h>

#include <unistd.h>

namespace paddock::server {

namespace {

std::filesystem::path defaultPlaybookDir()
{
    // Installed: <prefix>/bin/paddockd -> <prefix>/share/paddock/playbooks. From the build tree, the
    // source tree's resources.
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const auto installed = exe.parent_path().parent_path() / "share/paddock/playbooks";
        if (std::filesystem::is_directory(installed))
            return installed;
    }
    return PADDOCK_SOURCE_PLAYBOOKS;
}

std::string where(const std::filesystem::path &file, const toml::node &node)
{
    return file.string() + ":" + std::to_string(node.source().begin.line);
}

} // namespace

BrokerConfig defaultBrokerConfig()
{
    BrokerConfig config;
    config.dataDir = defaultDataDir();
    config.socketPath = defaultBrokerSocketPath();
    config.allowLocalExecution = true;
    config.pools = {{"local", "127.0.0.1:7701"}};
    config.models.playbookDir = defaultPlaybookDir();
    return config;
}

Result<BrokerConfig> loadBrokerConfig(const std::filesystem::path &file, BrokerConfig config)
{
    toml::table table;
    try {
        table = toml::parse_file(file.string());
    } catch (const toml::parse_error &e) {
        return fail(ErrorCode::InvalidArgument, file.string() + ":" + std::to_string(e.source().begin.line) + ": "
                        + std::string(e.description()) + ": fix the TOML syntax there");
    }
    config.configFile = file;
    // A config file describes the deployment: local execution must be asked for explicitly.
    config.allowLocalExecution = false;
    config.pools.clear();

    static const std::vector<std::string> known = {"data_dir", "socket", "workers", "lease_ms", "default_tier",
                                                   "allow_local_execution", "log_level", "pool", "models"};
    for (const auto &[key, node] : table) {
        if (std::find(known.begin(), known.end(), std::string(key.str())) == known.end())
            return fail(ErrorCode::InvalidArgument, where(file, node) + ": unknown key '" + std::string(key.str())
                            + "'; docs/broker.md lists the keys");
    }

    auto stringKey = [&](const char *key, auto apply) -> Status {
        if (auto node = table.get(key)) {
            auto value = node->value<std::string>();
            if (!value)
                return fail(ErrorCode::InvalidArgument, where(file, *node) + ": " + key + " must be a string");
            apply(*value);
        }
        return {};
    };
    auto intKey = [&](const char *key, int64_t min, auto apply) -> Status {
        if (auto node = table.get(key)) {
            auto value = node->value<int64_t>();
            if (!value || *value < min)
                return fail(ErrorCode::InvalidArgument, where(file, *node) + ": " + key + " must be an integer >= "
                                + std::to_string(min));
            apply(*value);
        }
        return {};
    };
    const auto baseDir = file.parent_path();
    auto resolve = [&](const std::string &path) { return std::filesystem::path(path).is_absolute() ? std::filesystem::path(path) : baseDir / path; };

    if (auto s = stringKey("data_dir", [&](const std::string &v) { config.dataDir = resolve(v); }); !s) return std::unexpected(s.error());
    if (auto s = stringKey("socket", [&](const std::string &v) { config.socketPath = resolve(v); }); !s) return std::unexpected(s.error());
    if (auto s = stringKey("default_tier", [&](const std::string &v) { config.defaultTier = v; }); !s) return std::unexpected(s.error());
    if (auto s = stringKey("log_level", [&](const std::string &v) { config.logLevel = v; }); !s) return std::unexpected(s.error());
    if (auto s = intKey("workers", 1, [&](int64_t v) { config.workers = static_cast<int>(v); }); !s) return std::unexpected(s.error());
    if (auto s = intKey("lease_ms", 1000, [&](int64_t v) { config.leaseMs = v; }); !s) return std::unexpected(s.error());
    if (auto node = table.get("allow_local_execution")) {
        auto value = node->value<bool>();
        if (!value)
            return fail(ErrorCode::InvalidArgument, where(file, *node) + ": allow_local_execution must be true or false");
        config.allowLocalExecution = *value;
    }
    if (auto node = table.get("pool")) {
        auto *pools = node->as_array();
        if (!pools)
            return fail(ErrorCode::InvalidArgument, where(file, *node) + ": pool must be an array of tables: [[pool]]");
        for (const auto &entry : *pools) {
            auto *pool = entry.as_table();
            auto name = pool ? pool->get_as<std::string>("name") : nullptr;
            auto endpoint = pool ? pool->get_as<std::string>("endpoint") : nullptr;
            if (!name || !endpoint)
                return fail(ErrorCode::InvalidArgument, where(file, entry)
                                + ": each [[pool]] needs name = \"...\" and endpoint = \"host:port\"");
            config.pools.push_back({name->get(), endpoint->get()});
        }
    }
    toml::table empty;
    auto *models = table.get_as<toml::table>("models");
    auto parsed = model::parseModelsConfig(models ? *models : empty, file.string(), baseDir, config.models);
    if (!parsed)
        return std::unexpected(parsed.error());
    config.models = std::move(*parsed);
    return config;
}

Result<PoolEndpoint> parsePoolFlag(const std::string &flag)
{
    const auto eq = flag.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size() || flag.find(':', eq) == std::string::npos)
        return fail(ErrorCode::InvalidArgument,
                    "--pool '" + flag + "' is not NAME=HOST:PORT (for example --pool local=127.0.0.1:7701)");
    return PoolEndpoint{flag.substr(0, eq), flag.substr(eq + 1)};
}

bool isLocalEndpoint(const std::string &endpoint)
{
    std::string host = endpoint.substr(0, endpoint.rfind(':'));
    if (host.starts_with("[") && host.ends_with("]"))
        host = host.substr(1, host.size() - 2);
    if (host == "localhost" || host == "::1" || host.starts_with("127.") || host.starts_with("unix:"))
        return true;
    char name[256] = {};
    return gethostname(name, sizeof name - 1) == 0 && host == name;
}

Status validateBrokerConfig(const BrokerConfig &config)
{
    const std::string source = config.configFile.empty() ? std::string("the embedded default") : config.configFile.string();
    if (config.pools.empty())
        return fail(ErrorCode::InvalidArgument, source + " lists no pools: add a [[pool]] with name and endpoint, or pass "
                                                         "--pool NAME=HOST:PORT");
    for (const auto &pool : config.pools) {
        if (isLocalEndpoint(pool.endpoint) && !config.allowLocalExecution)
            return fail(ErrorCode::FailedPrecondition,
                        "pool '" + pool.name + "' at " + pool.endpoint + " runs on this machine, so agents' commands "
                            "would run here: point it at an execution host, or set allow_local_execution = true in "
                            + source + " (or pass --allow-local-execution) for development");
    }
    return {};
}

} // namespace paddock::server
