#include "pool/core/pool_config.h"

#include "common/address_policy.h"
#include "common/install_paths.h"
#include "common/log.h"
#include "common/paths.h"
#include "pool/runtimes/minimal_etc.h"

#include <toml++/toml.h>

#include <climits>
#include <cmath>
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

const std::vector<ConfigSection> &poolConfigSections()
{
    static const std::vector<ConfigSection> sections = {
        {"pool.toml", "",
         {"pool_id", "listen", "state_dir", "init_path", "log_level", "exec_timeout_ms", "max_exec_timeout_ms",
          "max_output_bytes", "exec_cache_per_sandbox", "drain_timeout_ms", "snapshot_dir",
          "post_mortem_retention_hours", "post_mortem_max_count", "snapshot_retention_hours", "etc_extra",
          "sandbox_identity", "tier", "metrics"}},
        {"pool.toml", "[[tier]]",
         {"name", "runtime", "warm_count", "max_count", "cpu", "memory_mb", "pids", "disk_mb", "price_per_hour",
          "network", "allowlist"}},
        {"pool.toml", "[sandbox_identity]", {"first_id", "count", "ids_per_sandbox"}},
        {"pool.toml", "[metrics]", {"listen"}},
    };
    return sections;
}

namespace {

// Reads keys of one table, adding a problem (file:line, the key, what it must be) for each bad one.
class TableReader {
public:
    TableReader(const fs::path &file, const toml::table &table, std::string prefix, ConfigProblems &problems)
        : m_file(file), m_table(table), m_prefix(std::move(prefix)), m_problems(problems)
    {
    }

    std::string where(const toml::node &node) const
    {
        return m_file.string() + ":" + std::to_string(node.source().begin.line);
    }
    void problem(const toml::node &node, const std::string &message) const
    {
        m_problems.add(ErrorCode::InvalidArgument, where(node) + ": " + message);
    }
    std::string name(const std::string &key) const { return "'" + m_prefix + key + "'"; }

    template <typename T>
    void integer(const char *key, T &out, int64_t min, int64_t max) const
    {
        const toml::node *node = m_table.get(key);
        if (!node)
            return;
        auto v = node->value_exact<int64_t>();
        if (!v || *v < min || *v > max)
            problem(*node, name(key) + " must be an integer between " + std::to_string(min) + " and " + std::to_string(max));
        else
            out = static_cast<T>(*v);
    }
    void string(const char *key, std::string &out) const
    {
        const toml::node *node = m_table.get(key);
        if (!node)
            return;
        auto v = node->value<std::string>();
        if (!v)
            problem(*node, name(key) + " must be a string");
        else
            out = *v;
    }
    void number(const char *key, double &out, bool zeroAllowed, const std::string &what) const
    {
        const toml::node *node = m_table.get(key);
        if (!node)
            return;
        auto v = node->value<double>();
        if (!v || *v < 0 || (!zeroAllowed && *v == 0) || !std::isfinite(*v))
            problem(*node, name(key) + " must be " + what);
        else
            out = *v;
    }
    void unknownKeys(const ConfigSection &section, const std::string &in) const
    {
        for (const auto &[key, node] : m_table) {
            if (!section.accepts(key.str()))
                problem(node, "unknown key '" + std::string(key.str()) + "' in " + in + "; it takes "
                                  + section.keyList() + " (docs/configuration.md)");
        }
    }

private:
    const fs::path &m_file;
    const toml::table &m_table;
    std::string m_prefix;
    ConfigProblems &m_problems;
};

void readTier(const fs::path &file, const toml::node &node, PoolConfig &config, ConfigProblems &problems)
{
    const toml::table *t = node.as_table();
    if (!t) {
        problems.add(ErrorCode::InvalidArgument, file.string() + ":" + std::to_string(node.source().begin.line)
                                                     + ": every [[tier]] entry must be a table");
        return;
    }
    TableReader r(file, *t, "tier.", problems);
    const size_t problemsBefore = problems.size();
    r.unknownKeys(poolConfigSections()[1], "[[tier]]");
    TierConfig tier;
    int64_t memoryMb = tier.memoryBytes >> 20;
    int64_t diskMb = tier.diskBytes >> 20;
    r.string("name", tier.name);
    r.string("runtime", tier.runtime);
    r.integer("warm_count", tier.warmCount, 0, 10000);
    r.integer("max_count", tier.maxCount, 1, 100000);
    r.integer("memory_mb", memoryMb, 1, 1ll << 30);
    r.integer("pids", tier.pids, 8, 1ll << 22);
    r.integer("disk_mb", diskMb, 0, 1ll << 30);
    r.string("network", tier.network);
    r.number("price_per_hour", tier.pricePerHour, true, "a number of US dollars, 0 or more");
    r.number("cpu", tier.cpu, false, "a positive number of cores");
    if (tier.runtime != "bwrap" && tier.runtime != "runsc" && tier.runtime != "crun")
        r.problem(*t->get("runtime"), "'tier.runtime' is \"" + tier.runtime
                                          + "\"; the runtimes are bwrap (lite), runsc (gVisor) and crun (OCI)");
    if (tier.network != "none" && tier.network != "allowlist")
        r.problem(*t->get("network"), "'tier.network' must be \"none\" or \"allowlist\", not \"" + tier.network + "\"");
    if (const toml::node *allow = t->get("allowlist")) {
        const toml::array *items = allow->as_array();
        if (!items)
            r.problem(*allow, "'tier.allowlist' must be an array of strings, e.g. [\"example.com:443\"]");
        static const toml::array kNone;   // iterated in place: a copy of a node loses its source lines
        for (const auto &item : items ? *items : kNone) {
            auto v = item.value<std::string>();
            if (!v || v->empty())
                r.problem(item, "every 'tier.allowlist' entry must be a non-empty string");
            else if (auto parsed = egress::Allowlist::parse({*v}); !parsed)
                r.problem(item, "'tier.allowlist': " + parsed.error().message);
            else
                tier.allowlist.push_back(*v);
        }
    }
    tier.memoryBytes = memoryMb << 20;
    tier.diskBytes = diskMb << 20;
    if (tier.name.empty() || !t->get("name")) {
        r.problem(node, "every [[tier]] needs a name, e.g. name = \"lite\"");
        return;
    }
    if (config.findTier(tier.name)) {
        r.problem(node, "tier '" + tier.name + "' is defined twice; give each [[tier]] its own name");
        return;
    }
    if (tier.warmCount > tier.maxCount)
        r.problem(node, "tier '" + tier.name + "' has warm_count above max_count; lower warm_count or raise max_count");
    if (problems.size() == problemsBefore)   // a tier with problems is left out, so each is named once
        config.tiers.push_back(tier);
}

} // namespace

PoolConfig loadPoolConfig(const fs::path &file, bool mustExist, ConfigProblems &problems)
{
    PoolConfig config;
    std::error_code ec;
    if (!fs::exists(file, ec)) {
        if (mustExist)
            problems.add(ErrorCode::NotFound, "config file " + file.string() + " does not exist; pass an existing file to --config");
        return config;
    }
    toml::table root;
    try {
        root = toml::parse_file(file.string());
    } catch (const toml::parse_error &e) {
        std::ostringstream msg;
        msg << file.string() << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
            << e.description() << "; fix the file or pass another with --config";
        problems.add(ErrorCode::InvalidArgument, msg.str());
        return config;
    }
    TableReader r(file, root, "", problems);
    r.unknownKeys(poolConfigSections()[0], "the top level");
    std::string stateDir, initPath, snapshotDir;
    r.string("pool_id", config.poolId);
    r.string("listen", config.listen);
    r.string("state_dir", stateDir);
    r.string("init_path", initPath);
    r.string("log_level", config.logLevel);
    r.integer("exec_timeout_ms", config.defaultExecTimeoutMs, 1, INT64_MAX / 2);
    r.integer("max_exec_timeout_ms", config.maxExecTimeoutMs, 1, INT64_MAX / 2);
    r.integer("max_output_bytes", config.maxOutputBytes, 1, 1ll << 40);
    r.integer("exec_cache_per_sandbox", config.execCachePerSandbox, 0, 1 << 20);
    r.integer("drain_timeout_ms", config.drainTimeoutMs, 0, 3600000);
    r.string("snapshot_dir", snapshotDir);
    r.integer("post_mortem_retention_hours", config.postMortemRetentionHours, 0, 24 * 3650);
    r.integer("post_mortem_max_count", config.postMortemMaxCount, 0, 1000000);
    r.integer("snapshot_retention_hours", config.snapshotRetentionHours, 0, 24 * 3650);
    if (!isLogLevel(config.logLevel))
        r.problem(*root.get("log_level"), "'log_level' \"" + config.logLevel
                                              + "\" is not a level: use trace, debug, info, warn or error");
    if (auto *listenNode = root.get("listen"); listenNode && !checkListenAddress(config.listen).empty())
        r.problem(*listenNode, checkListenAddress(config.listen));
    if (!stateDir.empty())
        config.stateDir = stateDir;
    if (!snapshotDir.empty())
        config.snapshotDir = snapshotDir;
    if (!initPath.empty())
        config.initPath = initPath;

    if (const toml::node *extra = root.get("etc_extra")) {
        const toml::array *items = extra->as_array();
        if (!items)
            r.problem(*extra, "'etc_extra' must be an array of host paths under /etc, e.g. [\"/etc/gitconfig\"]");
        static const toml::array kNone;
        for (const auto &item : items ? *items : kNone) {
            auto v = item.value<std::string>();
            if (!v)
                r.problem(item, "every 'etc_extra' entry must be a string naming a host path under /etc");
            else if (auto check = checkEtcExtra(*v); !check.error.empty())
                r.problem(item, check.error);
            else
                config.etcExtra.push_back(*v);
        }
    }
    if (const toml::node *identity = root.get("sandbox_identity")) {
        if (const toml::table *t = identity->as_table()) {
            TableReader ir(file, *t, "sandbox_identity.", problems);
            ir.unknownKeys(poolConfigSections()[2], "[sandbox_identity]");
            ir.integer("first_id", config.identity.firstId, 1, 4294967294ll);
            ir.integer("count", config.identity.count, 1, 4294967294ll);
            ir.integer("ids_per_sandbox", config.identity.idsPerSandbox, 1, 4294967294ll);
        } else {
            r.problem(*identity, "'sandbox_identity' must be a table: [sandbox_identity] with first_id, count, ids_per_sandbox");
        }
    }

    if (const toml::node *metrics = root.get("metrics")) {
        if (const toml::table *t = metrics->as_table()) {
            TableReader mr(file, *t, "metrics.", problems);
            mr.unknownKeys(poolConfigSections()[3], "[metrics]");
            mr.string("listen", config.metricsListen);
        } else {
            r.problem(*metrics, "'metrics' must be a table: [metrics] with listen = \"127.0.0.1:9464\"");
        }
    }

    if (const toml::node *tiers = root.get("tier")) {
        const toml::array *arr = tiers->as_array();
        if (!arr)
            r.problem(*tiers, "'tier' must be an array of tables ([[tier]])");
        static const toml::array kNone;
        for (const auto &node : arr ? *arr : kNone)
            readTier(file, node, config, problems);
    }
    return config;
}

Result<PoolConfig> loadPoolConfig(const fs::path &file, bool mustExist)
{
    ConfigProblems problems;
    auto config = loadPoolConfig(file, mustExist, problems);
    if (!problems.empty())
        return std::unexpected(problems.joined());
    return config;
}

std::string checkListenAddress(const std::string &listen)
{
    if (listen.starts_with("unix:"))
        return listen.size() > 5 ? std::string() : "'listen' \"unix:\" names no socket path: write unix:/path/to/pool.sock";
    const auto colon = listen.rfind(':');
    const std::string example = " (for example \"127.0.0.1:7701\", \"0.0.0.0:7701\" or \"[::]:7701\")";
    if (colon == std::string::npos || colon == 0)
        return "'listen' \"" + listen + "\" is not HOST:PORT" + example;
    const std::string port = listen.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos
        || std::stoi(port) > 65535)
        return "'listen' \"" + listen + "\" has no port from 0 to 65535 after the last ':'" + example;
    return {};
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
