#include "pool/core/pool_config.h"

#include "common/install_paths.h"
#include "common/paths.h"

#include <toml++/toml.h>

#include <climits>
#include <sstream>
#include <unistd.h>

namespace paddock::pool {
namespace fs = std::filesystem;

TierConfig *PoolConfig::findTier(const std::string &name)
{
    for (auto &t : tiers)
        if (t.name == name)
            return &t;
    return nullptr;
}

namespace {

template <typename T>
Status readInt(const toml::node_view<const toml::node> &node, const fs::path &file, const std::string &key, T &out,
               int64_t min, int64_t max)
{
    if (!node)
        return {};
    auto v = node.value<int64_t>();
    if (!v || *v < min || *v > max) {
        return fail(ErrorCode::InvalidArgument, file.string() + ": '" + key + "' must be an integer between " +
                                                    std::to_string(min) + " and " + std::to_string(max));
    }
    out = static_cast<T>(*v);
    return {};
}

Status readString(const toml::node_view<const toml::node> &node, const fs::path &file, const std::string &key, std::string &out)
{
    if (!node)
        return {};
    auto v = node.value<std::string>();
    if (!v)
        return fail(ErrorCode::InvalidArgument, file.string() + ": '" + key + "' must be a string");
    out = *v;
    return {};
}

} // namespace

Result<PoolConfig> loadPoolConfig(const fs::path &file, bool mustExist)
{
    PoolConfig config;
    std::error_code ec;
    if (!fs::exists(file, ec)) {
        if (mustExist)
            return fail(ErrorCode::NotFound, "config file " + file.string() + " does not exist; pass an existing file to --config");
        return config;
    }
    toml::table root;
    try {
        root = toml::parse_file(file.string());
    } catch (const toml::parse_error &e) {
        std::ostringstream msg;
        msg << file.string() << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
            << e.description() << "; fix the file or pass another with --config";
        return fail(ErrorCode::InvalidArgument, msg.str());
    }
    const toml::node_view<const toml::node> r{static_cast<const toml::node &>(root)};
    std::string stateDir, initPath, snapshotDir;
    Status st;
    if (!(st = readString(r["pool_id"], file, "pool_id", config.poolId)) ||
        !(st = readString(r["listen"], file, "listen", config.listen)) ||
        !(st = readString(r["state_dir"], file, "state_dir", stateDir)) ||
        !(st = readString(r["init_path"], file, "init_path", initPath)) ||
        !(st = readString(r["log_level"], file, "log_level", config.logLevel)) ||
        !(st = readInt(r["exec_timeout_ms"], file, "exec_timeout_ms", config.defaultExecTimeoutMs, 1, INT64_MAX / 2)) ||
        !(st = readInt(r["max_exec_timeout_ms"], file, "max_exec_timeout_ms", config.maxExecTimeoutMs, 1, INT64_MAX / 2)) ||
        !(st = readInt(r["max_output_bytes"], file, "max_output_bytes", config.maxOutputBytes, 1, 1ll << 40)) ||
        !(st = readInt(r["exec_cache_per_sandbox"], file, "exec_cache_per_sandbox", config.execCachePerSandbox, 0, 1 << 20)) ||
        !(st = readInt(r["drain_timeout_ms"], file, "drain_timeout_ms", config.drainTimeoutMs, 0, 3600000)) ||
        !(st = readString(r["snapshot_dir"], file, "snapshot_dir", snapshotDir)) ||
        !(st = readInt(r["post_mortem_retention_hours"], file, "post_mortem_retention_hours", config.postMortemRetentionHours, 0, 24 * 3650)) ||
        !(st = readInt(r["post_mortem_max_count"], file, "post_mortem_max_count", config.postMortemMaxCount, 0, 1000000)) ||
        !(st = readInt(r["snapshot_retention_hours"], file, "snapshot_retention_hours", config.snapshotRetentionHours, 0, 24 * 3650)))
        return std::unexpected(st.error());
    if (!stateDir.empty())
        config.stateDir = stateDir;
    if (!snapshotDir.empty())
        config.snapshotDir = snapshotDir;
    if (!initPath.empty())
        config.initPath = initPath;

    if (auto tiers = root["tier"]; tiers) {
        const toml::array *arr = tiers.as_array();
        if (!arr)
            return fail(ErrorCode::InvalidArgument, file.string() + ": 'tier' must be an array of tables ([[tier]])");
        for (const auto &node : *arr) {
            const toml::table *t = node.as_table();
            if (!t)
                return fail(ErrorCode::InvalidArgument, file.string() + ": every [[tier]] entry must be a table");
            const toml::node_view<const toml::node> tv{static_cast<const toml::node &>(*t)};
            TierConfig tier;
            int64_t memoryMb = tier.memoryBytes >> 20;
            int64_t diskMb = tier.diskBytes >> 20;
            if (!(st = readString(tv["name"], file, "tier.name", tier.name)) ||
                !(st = readString(tv["runtime"], file, "tier.runtime", tier.runtime)) ||
                !(st = readInt(tv["warm_count"], file, "tier.warm_count", tier.warmCount, 0, 10000)) ||
                !(st = readInt(tv["max_count"], file, "tier.max_count", tier.maxCount, 1, 100000)) ||
                !(st = readInt(tv["memory_mb"], file, "tier.memory_mb", memoryMb, 1, 1ll << 30)) ||
                !(st = readInt(tv["pids"], file, "tier.pids", tier.pids, 8, 1ll << 22)) ||
                !(st = readInt(tv["disk_mb"], file, "tier.disk_mb", diskMb, 0, 1ll << 30)) ||
                !(st = readString(tv["network"], file, "tier.network", tier.network)))
                return std::unexpected(st.error());
            if (tier.network != "none" && tier.network != "allowlist")
                return fail(ErrorCode::InvalidArgument, file.string() + ": 'tier.network' must be \"none\" or \"allowlist\", not \"" +
                                                            tier.network + "\"");
            if (auto allow = tv["allowlist"]; allow) {
                const toml::array *items = allow.as_array();
                if (!items)
                    return fail(ErrorCode::InvalidArgument, file.string() + ": 'tier.allowlist' must be an array of strings, e.g. [\"example.com:443\"]");
                for (const auto &item : *items) {
                    auto v = item.value<std::string>();
                    if (!v || v->empty())
                        return fail(ErrorCode::InvalidArgument, file.string() + ": every 'tier.allowlist' entry must be a non-empty string");
                    tier.allowlist.push_back(*v);
                }
            }
            if (auto price = tv["price_per_hour"]; price) {
                auto v = price.value<double>();
                if (!v || *v < 0)
                    return fail(ErrorCode::InvalidArgument, file.string() + ": 'tier.price_per_hour' must be a number of US dollars, 0 or more");
                tier.pricePerHour = *v;
            }
            if (auto cpu = tv["cpu"]; cpu) {
                auto v = cpu.value<double>();
                if (!v || *v <= 0)
                    return fail(ErrorCode::InvalidArgument, file.string() + ": 'tier.cpu' must be a positive number of cores");
                tier.cpu = *v;
            }
            tier.memoryBytes = memoryMb << 20;
            tier.diskBytes = diskMb << 20;
            if (tier.name.empty() || !tv["name"])
                return fail(ErrorCode::InvalidArgument, file.string() + ": every [[tier]] needs a name, e.g. name = \"lite\"");
            if (config.findTier(tier.name))
                return fail(ErrorCode::InvalidArgument, file.string() + ": tier '" + tier.name + "' is defined twice");
            if (tier.warmCount > tier.maxCount)
                return fail(ErrorCode::InvalidArgument, file.string() + ": tier '" + tier.name +
                                                            "' has warm_count above max_count; lower warm_count or raise max_count");
            config.tiers.push_back(tier);
        }
    }
    return config;
}

void applyPoolDefaults(PoolConfig &config)
{
    if (config.poolId.empty()) {
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        config.poolId = host[0] ? host : "pool";
    }
    if (config.stateDir.empty())
        config.stateDir = defaultDataDir() / "pool";
    if (config.snapshotDir.empty())
        config.snapshotDir = config.stateDir / "snapshots";
    if (config.initPath.empty())
        config.initPath = findHelperProgram(currentExecutable(), "paddock-sandbox-init");
    if (config.tiers.empty())
        config.tiers.push_back(TierConfig{});
}

} // namespace paddock::pool
