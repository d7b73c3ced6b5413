#include "broker/config/broker_config.h"

#include "common/install_paths.h"
#include "common/log.h"
#include "common/paths.h"

#include <toml++/toml.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

namespace paddock::broker_config {

namespace {

// Installed: <prefix>/share/paddock/playbooks. From the build tree: the source tree's resources.
std::filesystem::path defaultPlaybookDir()
{
    return findDataDir(currentExecutable(), "playbooks", PADDOCK_SOURCE_PLAYBOOKS);
}

std::string where(const std::filesystem::path &file, const toml::node &node)
{
    return file.string() + ":" + std::to_string(node.source().begin.line);
}

const ConfigSection &topSection() { return brokerConfigSections()[0]; }
const ConfigSection &poolSection() { return brokerConfigSections()[1]; }
const ConfigSection &principalSection() { return brokerConfigSections()[2]; }

// [[principal]] name, role, unix_users = ["alice"], uids = [1001].
std::vector<auth::PrincipalConfig> parsePrincipals(const std::filesystem::path &file, const toml::table &table,
                                                   ConfigProblems &problems)
{
    std::vector<auth::PrincipalConfig> out;
    auto problem = [&](const toml::node &node, const std::string &message) {
        problems.add(ErrorCode::InvalidArgument, where(file, node) + ": " + message);
    };
    auto node = table.get("principal");
    if (!node)
        return out;
    auto *entries = node->as_array();
    if (!entries) {
        problem(*node, "principal must be an array of tables: [[principal]]");
        return out;
    }
    for (const auto &entry : *entries) {
        auto *principal = entry.as_table();
        auto name = principal ? principal->get_as<std::string>("name") : nullptr;
        auto role = principal ? principal->get_as<std::string>("role") : nullptr;
        if (!name || !role || name->get().empty()) {
            problem(entry, "each [[principal]] needs name = \"...\" and role = \"viewer|engineer|approver|operator|admin\"");
            continue;
        }
        auth::PrincipalConfig config;
        config.name = name->get();
        config.where = where(file, entry);
        auto parsedRole = auth::parseRole(role->get());
        if (!parsedRole)
            problem(*role, "principal '" + config.name + "' has role '" + role->get() + "'; a role is one of "
                               + std::string(auth::roleNames()));
        else
            config.role = *parsedRole;
        for (const auto &[key, value] : *principal) {
            const std::string k(key.str());
            if (!principalSection().accepts(k)) {
                problem(value, "unknown key '" + k + "' in [[principal]] '" + config.name + "'; a principal takes "
                                   + principalSection().keyList());
                continue;
            }
            if (k == "name" || k == "role")
                continue;
            auto *list = value.as_array();
            if (!list) {
                problem(value, k + " in [[principal]] '" + config.name + "' must be a list, e.g. "
                                   + (k == "uids" ? "uids = [1001]" : "unix_users = [\"alice\"]"));
                continue;
            }
            for (const auto &item : *list) {
                if (k == "unix_users") {
                    auto user = item.value<std::string>();
                    if (!user || user->empty())
                        problem(item, "unix_users of '" + config.name + "' must hold user names (strings)");
                    else
                        config.unixUsers.push_back(*user);
                } else {
                    auto uid = item.value_exact<int64_t>();
                    if (!uid || *uid < 0 || *uid > 0xfffffffe)
                        problem(item, "uids of '" + config.name + "' must hold numeric uids (0 and up)");
                    else
                        config.uids.push_back(static_cast<uid_t>(*uid));
                }
            }
        }
        if (parsedRole)
            out.push_back(std::move(config));
    }
    return out;
}

// The top-level settings (paths relative to the file's folder), [[principal]] and [prices], in the
// order their problems are reported.
void parseBrokerSettings(const std::filesystem::path &file, const toml::table &table, BrokerConfig &config,
                         ConfigProblems &problems)
{
    auto problem = [&](const toml::node &node, const std::string &message) {
        problems.add(ErrorCode::InvalidArgument, where(file, node) + ": " + message);
    };
    auto stringKey = [&](const char *key, auto apply) {
        if (auto node = table.get(key)) {
            auto value = node->value<std::string>();
            if (!value)
                problem(*node, std::string(key) + " must be a string");
            else
                apply(*value, *node);
        }
    };
    auto intKey = [&](const char *key, int64_t min, auto apply) {
        if (auto node = table.get(key)) {
            auto value = node->value_exact<int64_t>();
            if (!value || *value < min)
                problem(*node, std::string(key) + " must be an integer >= " + std::to_string(min));
            else
                apply(*value);
        }
    };
    const auto baseDir = file.parent_path();
    auto resolve = [&](const std::string &path) { return std::filesystem::path(path).is_absolute() ? std::filesystem::path(path) : baseDir / path; };

    stringKey("data_dir", [&](const std::string &v, const toml::node &) { config.dataDir = resolve(v); });
    stringKey("socket", [&](const std::string &v, const toml::node &) { config.socketPath = resolve(v); });
    stringKey("default_tier", [&](const std::string &v, const toml::node &node) {
        if (v.empty())
            problem(node, "default_tier must name a tier the pools offer, e.g. default_tier = \"lite\"");
        else
            config.defaultTier = v;
    });
    stringKey("log_level", [&](const std::string &v, const toml::node &node) {
        if (!isLogLevel(v))
            problem(node, "log_level \"" + v + "\" is not a level: use trace, debug, info, warn or error");
        else
            config.logLevel = v;
    });
    stringKey("listen_tcp", [&](const std::string &v, const toml::node &) { config.listenTcp = v; });
    stringKey("tls_cert", [&](const std::string &v, const toml::node &) { config.tlsCert = resolve(v); });
    stringKey("tls_key", [&](const std::string &v, const toml::node &) { config.tlsKey = resolve(v); });
    config.principals = parsePrincipals(file, table, problems);
    stringKey("policy_file", [&](const std::string &v, const toml::node &node) {
        config.policyFile = resolve(v);
        config.policyFileWhere = where(file, node);
    });
    if (auto *node = table.get("prices")) {
        if (const auto *prices = node->as_table())
            config.prices = cost::parsePrices(*prices, file, config.prices, problems);
        else
            problem(*node, "prices must be a table: [prices]");
    }
    intKey("workers", 1, [&](int64_t v) { config.workers = static_cast<int>(v); });
    intKey("lease_ms", 1000, [&](int64_t v) { config.leaseMs = v; });
    intKey("pool_health_interval_ms", 100, [&](int64_t v) { config.poolHealthIntervalMs = v; });
    intKey("pool_lost_after_ms", 500, [&](int64_t v) { config.poolLostAfterMs = v; });
    intKey("debug_shell_idle_timeout_ms", 1000, [&](int64_t v) { config.debugShellIdleTimeoutMs = v; });
    intKey("sandbox_idle_release_ms", 0, [&](int64_t v) { config.sandboxIdleReleaseMs = v; });
    if (auto node = table.get("allow_local_execution")) {
        auto value = node->value<bool>();
        if (!value)
            problem(*node, "allow_local_execution must be true or false");
        else
            config.allowLocalExecution = *value;
    }
}

// One [[pool]] entry: name, endpoint and the TLS settings of the broker's connection to it.
// nullopt (with the problem) when it lacks a name or an endpoint.
std::optional<PoolEndpoint> parsePool(const std::filesystem::path &file, const toml::node &entry,
                                      ConfigProblems &problems)
{
    auto problem = [&](const toml::node &node, const std::string &message) {
        problems.add(ErrorCode::InvalidArgument, where(file, node) + ": " + message);
    };
    const auto baseDir = file.parent_path();
    auto resolve = [&](const std::string &path) { return std::filesystem::path(path).is_absolute() ? std::filesystem::path(path) : baseDir / path; };

    auto *pool = entry.as_table();
    auto name = pool ? pool->get_as<std::string>("name") : nullptr;
    auto endpoint = pool ? pool->get_as<std::string>("endpoint") : nullptr;
    if (!name || !endpoint || name->get().empty() || endpoint->get().empty()) {
        problem(entry, "each [[pool]] needs name = \"...\" and endpoint = \"host:port\"");
        return std::nullopt;
    }
    PoolEndpoint out{name->get(), endpoint->get()};
    out.where = where(file, entry);
    for (const auto &[key, value] : *pool) {
        const std::string k(key.str());
        if (!poolSection().accepts(k)) {
            problem(value, "unknown key '" + k + "' in [[pool]] '" + out.name + "'; a pool takes "
                               + poolSection().keyList());
            continue;
        }
        if (k == "name" || k == "endpoint")
            continue;
        auto text = value.value<std::string>();
        if (!text || text->empty()) {
            problem(value, k + " in [[pool]] '" + out.name + "' must be a non-empty string");
            continue;
        }
        if (k == "tls_ca") out.tlsCa = resolve(*text);
        else if (k == "tls_cert") out.tlsCert = resolve(*text);
        else if (k == "tls_key") out.tlsKey = resolve(*text);
        else if (k == "tls_server_name") out.tlsServerName = *text;
        else if (k == "token_file") out.tokenFile = resolve(*text);
    }
    if (out.tlsCert.empty() != out.tlsKey.empty())
        problem(entry, "[[pool]] '" + out.name
                           + "' sets only one of tls_cert and tls_key: a client certificate needs both (or neither)");
    if (!out.tlsCert.empty() && out.tlsCa.empty())
        problem(entry, "[[pool]] '" + out.name + "' has a client certificate but no tls_ca: set tls_ca to the CA "
                           "that signed the pool's certificate");
    return out;
}

// [[pool]]: each entry that names a pool, appended to pools in the order of the file.
void parsePools(const std::filesystem::path &file, const toml::table &table, std::vector<PoolEndpoint> &pools,
                ConfigProblems &problems)
{
    if (auto node = table.get("pool")) {
        auto *array = node->as_array();
        if (!array)
            problems.add(ErrorCode::InvalidArgument,
                         where(file, *node) + ": " + "pool must be an array of tables: [[pool]]");
        // Iterated in place: a copy of a toml node loses the source lines the messages quote.
        static const toml::array kNone;
        for (const auto &entry : array ? *array : kNone) {
            if (auto pool = parsePool(file, entry, problems))
                pools.push_back(std::move(*pool));
        }
    }
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

const std::vector<ConfigSection> &brokerConfigSections()
{
    static const std::vector<ConfigSection> sections = [] {
        std::vector<ConfigSection> out = {
            {"broker.toml", "",
             {"data_dir", "socket", "workers", "lease_ms", "default_tier", "allow_local_execution", "log_level",
              "pool_health_interval_ms", "pool_lost_after_ms", "debug_shell_idle_timeout_ms",
              "sandbox_idle_release_ms", "listen_tcp", "tls_cert", "tls_key", "policy_file", "pool", "principal",
              "models", "prices", "checkpoints", "store", "metrics", "otlp"}},
            {"broker.toml", "[[pool]]", {"name", "endpoint", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "token_file"}},
            {"broker.toml", "[[principal]]", {"name", "role", "unix_users", "uids"}},
        };
        for (const auto &section : llm::modelSections())
            out.push_back(section);
        for (const auto &section : cost::priceSections())
            out.push_back(section);
        out.push_back(checkpointsSection());
        out.push_back(storeSection());
        out.push_back(metricsSection());
        out.push_back(otlpSection());
        return out;
    }();
    return sections;
}

BrokerConfig loadBrokerConfig(const std::filesystem::path &file, BrokerConfig config, ConfigProblems &problems)
{
    toml::table table;
    try {
        table = toml::parse_file(file.string());
    } catch (const toml::parse_error &e) {
        problems.add(ErrorCode::InvalidArgument, file.string() + ":" + std::to_string(e.source().begin.line) + ": "
                         + std::string(e.description()) + ": fix the TOML syntax there");
        return config;
    }
    config.configFile = file;
    // A config file describes the deployment: local execution must be asked for explicitly.
    config.allowLocalExecution = false;
    config.pools.clear();
    auto problem = [&](const toml::node &node, const std::string &message) {
        problems.add(ErrorCode::InvalidArgument, where(file, node) + ": " + message);
    };

    for (const auto &[key, node] : table) {
        if (!topSection().accepts(key.str()))
            problem(node, "unknown key '" + std::string(key.str()) + "'; docs/configuration.md lists the keys");
    }

    parseBrokerSettings(file, table, config, problems);
    parsePools(file, table, config.pools, problems);
    const auto baseDir = file.parent_path();
    toml::table empty;
    auto *models = table.get_as<toml::table>("models");
    if (auto *node = table.get("models"); node && !models)
        problem(*node, "models must be a table: [models]");
    config.models = llm::parseModelsConfig(models ? *models : empty, file.string(), baseDir, config.models, problems);
    auto *checkpoints = table.get_as<toml::table>("checkpoints");
    if (auto *node = table.get("checkpoints"); node && !checkpoints)
        problem(*node, "checkpoints must be a table: [checkpoints]");
    if (checkpoints)
        config.checkpoints = parseCheckpointsConfig(file, *checkpoints, config.checkpoints, problems);
    auto *store = table.get_as<toml::table>("store");
    if (auto *node = table.get("store"); node && !store)
        problem(*node, "store must be a table: [store] with url = \"postgresql://USER@HOST/DATABASE\"");
    if (store)
        config.store = parseStoreConfig(file, *store, config.store, problems);
    auto *metrics = table.get_as<toml::table>("metrics");
    if (auto *node = table.get("metrics"); node && !metrics)
        problem(*node, "metrics must be a table: [metrics] with listen = \"127.0.0.1:9464\"");
    if (metrics)
        config.metrics = parseMetricsConfig(file, *metrics, config.metrics, problems);
    auto *otlp = table.get_as<toml::table>("otlp");
    if (auto *node = table.get("otlp"); node && !otlp)
        problem(*node, "otlp must be a table: [otlp] with endpoint = \"http://127.0.0.1:4318\"");
    if (otlp)
        config.otlp = parseOtlpConfig(file, *otlp, config.otlp, problems);
    return config;
}

Result<BrokerConfig> loadBrokerConfig(const std::filesystem::path &file, BrokerConfig base)
{
    ConfigProblems problems;
    auto config = loadBrokerConfig(file, std::move(base), problems);
    if (!problems.empty())
        return std::unexpected(problems.joined());
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

namespace {

bool isLoopbackOrAny(const sockaddr *addr)
{
    if (addr->sa_family == AF_INET) {
        const uint32_t a = ntohl(reinterpret_cast<const sockaddr_in *>(addr)->sin_addr.s_addr);
        return (a >> 24) == 127 || a == INADDR_ANY;
    }
    if (addr->sa_family == AF_INET6) {
        const in6_addr &a = reinterpret_cast<const sockaddr_in6 *>(addr)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(&a) || IN6_IS_ADDR_UNSPECIFIED(&a))
            return true;
        if (IN6_IS_ADDR_V4MAPPED(&a))
            return a.s6_addr[12] == 127 || (a.s6_addr[12] | a.s6_addr[13] | a.s6_addr[14] | a.s6_addr[15]) == 0;
    }
    return false;
}

bool sameAddress(const sockaddr *a, const sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return false;
    if (a->sa_family == AF_INET)
        return reinterpret_cast<const sockaddr_in *>(a)->sin_addr.s_addr
            == reinterpret_cast<const sockaddr_in *>(b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return std::memcmp(&reinterpret_cast<const sockaddr_in6 *>(a)->sin6_addr,
                           &reinterpret_cast<const sockaddr_in6 *>(b)->sin6_addr, sizeof(in6_addr)) == 0;
    return false;
}

} // namespace

bool isLocalEndpoint(const std::string &endpoint)
{
    if (endpoint.starts_with("unix:") || endpoint.starts_with("unix-abstract:"))
        return true;
    std::string target = endpoint;
    if (const auto scheme = target.find("://"); scheme != std::string::npos)
        target = target.substr(target.find_first_not_of('/', scheme + 3));   // dns:///host:port
    else if (target.starts_with("ipv4:") || target.starts_with("ipv6:"))
        target = target.substr(5);
    const auto colon = target.rfind(':');
    std::string host = colon == std::string::npos ? target : target.substr(0, colon);
    if (host.starts_with("[") && host.ends_with("]"))
        host = host.substr(1, host.size() - 2);
    if (host.empty() || host == "localhost" || host.ends_with(".localhost"))
        return true;
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0 && host == name)
        return true;

    // Every address the name resolves to, against loopback and this host's own addresses. A name
    // that does not resolve is not known to be local; connecting to it will say what is wrong.
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *resolved = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &resolved) != 0)
        return false;
    ifaddrs *own = nullptr;
    if (getifaddrs(&own) != 0)
        own = nullptr;
    bool local = false;
    for (addrinfo *ai = resolved; ai && !local; ai = ai->ai_next) {
        if (isLoopbackOrAny(ai->ai_addr)) {
            local = true;
            break;
        }
        for (ifaddrs *ifa = own; ifa && !local; ifa = ifa->ifa_next)
            local = ifa->ifa_addr && sameAddress(ai->ai_addr, ifa->ifa_addr);
    }
    if (own)
        freeifaddrs(own);
    freeaddrinfo(resolved);
    return local;
}

namespace {

// owner names whose file it is in messages: "pool 'a'" (its [[pool]] entry) or "the broker".
Result<std::string> readSmallFile(const std::string &owner, const char *key, const std::filesystem::path &path)
{
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    const std::string entry = owner.starts_with("pool") ? "its [[pool]] entry" : "the broker's config";
    if (ec)
        return fail(ErrorCode::FailedPrecondition, owner + ": cannot read " + key + " " + path.string()
                        + " (" + ec.message() + "): fix the path in " + entry);
    if (size > (1 << 20))
        return fail(ErrorCode::FailedPrecondition, owner + ": " + key + " " + path.string()
                        + " is larger than 1 MiB; point " + key + " at the right file");
    std::FILE *f = std::fopen(path.c_str(), "rb");
    if (!f)
        return fail(ErrorCode::FailedPrecondition, owner + ": cannot open " + key + " " + path.string()
                        + " (" + std::strerror(errno) + "): check its permissions");
    std::string data(size, '\0');
    const size_t got = std::fread(data.data(), 1, data.size(), f);
    std::fclose(f);
    data.resize(got);
    return data;
}

} // namespace

Result<std::string> readPemFile(const std::string &owner, const char *key, const std::filesystem::path &path)
{
    auto data = readSmallFile(owner, key, path);
    if (data && data->find("-----BEGIN ") == std::string::npos)
        return fail(ErrorCode::FailedPrecondition, owner + ": " + key + " " + path.string()
                        + " holds no PEM block (-----BEGIN ...): point it at a PEM file");
    return data;
}

Result<pool_client::PoolConnection> loadPoolConnection(const PoolEndpoint &pool)
{
    pool_client::PoolConnection out;
    out.name = pool.name;
    out.endpoint = pool.endpoint;
    out.serverName = pool.tlsServerName;
    out.caFile = pool.tlsCa.string();
    auto pem = [&](const char *key, const std::filesystem::path &path, std::string *into) -> Status {
        if (path.empty())
            return {};
        auto data = readPemFile("pool '" + pool.name + "'", key, path);
        if (!data)
            return std::unexpected(data.error());
        *into = std::move(*data);
        return {};
    };
    if (auto s = pem("tls_ca", pool.tlsCa, &out.caPem); !s) return std::unexpected(s.error());
    if (auto s = pem("tls_cert", pool.tlsCert, &out.certPem); !s) return std::unexpected(s.error());
    if (auto s = pem("tls_key", pool.tlsKey, &out.keyPem); !s) return std::unexpected(s.error());
    if (!pool.tokenFile.empty()) {
        auto token = readSmallFile("pool '" + pool.name + "'", "token_file", pool.tokenFile);
        if (!token)
            return std::unexpected(token.error());
        while (!token->empty() && std::isspace(static_cast<unsigned char>(token->back())))
            token->pop_back();
        const bool printable = std::all_of(token->begin(), token->end(),
                                           [](char c) { return c > ' ' && c < 127; });
        if (token->empty() || !printable)
            return fail(ErrorCode::FailedPrecondition, "pool '" + pool.name + "': token_file " + pool.tokenFile.string()
                            + " must hold one line with the token (printable ASCII, no spaces)");
        out.token = std::move(*token);
    }
    return out;
}

void validateBrokerConfig(const BrokerConfig &config, ConfigProblems &problems)
{
    const std::string source = config.configFile.empty() ? std::string("the embedded default") : config.configFile.string();
    auto problem = [&](ErrorCode code, const std::string &message) { problems.add(code, message); };
    if (config.pools.empty())
        problem(ErrorCode::InvalidArgument, source + " lists no pools: add a [[pool]] with name and endpoint, or pass "
                                                     "--pool NAME=HOST:PORT");
    for (size_t i = 0; i < config.pools.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
            if (config.pools[i].name == config.pools[j].name) {
                problem(ErrorCode::InvalidArgument, (config.pools[i].where.empty() ? source : config.pools[i].where)
                            + " names two pools '" + config.pools[i].name + "': give each [[pool]] its own name");
                break;
            }
        }
    }
    if (!config.listenTcp.empty() && (config.tlsCert.empty() || config.tlsKey.empty()))
        problem(ErrorCode::InvalidArgument, source + " sets listen_tcp = \"" + config.listenTcp
                    + "\" without TLS: a TCP listener carries bearer tokens, which must not travel in plaintext. "
                      "Set tls_cert and tls_key (PEM files), or remove listen_tcp");
    if (config.listenTcp.empty() && (!config.tlsCert.empty() || !config.tlsKey.empty()))
        problem(ErrorCode::InvalidArgument, source + " sets tls_cert/tls_key but no listen_tcp: add listen_tcp = "
                                                     "\"host:port\", or remove them");
    if (!config.listenTcp.empty() && config.listenTcp.rfind(':') == std::string::npos)
        problem(ErrorCode::InvalidArgument, source + ": listen_tcp \"" + config.listenTcp
                    + "\" is not host:port (for example \"0.0.0.0:7700\")");
    validateStoreConfig(config.store, problems);
    validateMetricsConfig(config.metrics, problems);
    validateOtlpConfig(config.otlp, problems);
    for (const auto &pool : config.pools) {
        if (isLocalEndpoint(pool.endpoint) && !config.allowLocalExecution)
            problem(ErrorCode::FailedPrecondition,
                    (pool.where.empty() ? std::string() : pool.where + ": ") + "pool '" + pool.name + "' at "
                        + pool.endpoint + " runs on this machine (a unix socket, a loopback address or one of this "
                        "host's own addresses), so agents' commands would run here: point it at an execution host, "
                        "or set allow_local_execution = true in " + source
                        + " (or pass --allow-local-execution) for development");
    }
}

Status validateBrokerConfig(const BrokerConfig &config)
{
    ConfigProblems problems;
    validateBrokerConfig(config, problems);
    if (!problems.empty())
        return std::unexpected(problems.joined());
    return {};
}

} // namespace paddock::broker_config
