#include "broker/daemon/broker_roster.h"

#include "broker/auth/tokens.h"
#include "common/clock.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <toml++/toml.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

namespace paddock::daemon {

namespace {

using nlohmann::json;

// Keys of the host's own: they may differ between the brokers of one database.
const std::set<std::string, std::less<>> kOwnTopLevel{"data_dir", "socket", "workers", "log_level", "listen_tcp",
                                                      "tls_cert", "tls_key", "policy_file", "pool", "store", "metrics"};
const std::map<std::string, std::set<std::string>, std::less<>> kOwnInSection{{"checkpoints", {"credentials_file"}}};

std::string digest(const std::string &text)
{
    return auth::sha256Hex(text).substr(0, 16);
}

std::string canonical(const toml::node &node)
{
    std::ostringstream out;
    if (const auto *table = node.as_table())
        out << *table;
    else if (const auto *array = node.as_array())
        out << *array;
    else
        out << toml::table{{"value", node}};
    return out.str();
}

} // namespace

Result<ConfigSections> sharedConfigSections(const broker_config::BrokerConfig &config)
{
    ConfigSections sections;
    toml::table file;
    if (!config.configFile.empty()) {
        try {
            file = toml::parse_file(config.configFile.string());
        } catch (const toml::parse_error &e) {
            return fail(ErrorCode::FailedPrecondition, config.configFile.string() + ": " + std::string(e.description()));
        }
    }
    toml::table topLevel;
    for (const auto &[key, node] : file) {
        if (kOwnTopLevel.contains(key.str()))
            continue;
        if (const auto *table = node.as_table()) {
            toml::table shared = *table;
            if (auto own = kOwnInSection.find(key.str()); own != kOwnInSection.end()) {
                for (const auto &name : own->second)
                    shared.erase(name);
            }
            sections["[" + std::string(key.str()) + "]"] = digest(canonical(shared));
        } else if (node.is_array_of_tables()) {
            sections["[[" + std::string(key.str()) + "]]"] = digest(canonical(node));
        } else {
            topLevel.insert(key, node);
        }
    }
    sections["top level"] = digest(canonical(topLevel));

    std::vector<std::string> pools;
    for (const auto &pool : config.pools)
        pools.push_back(pool.name + "=" + pool.endpoint);
    std::sort(pools.begin(), pools.end());
    std::string poolText;
    for (const auto &pool : pools)
        poolText += pool + "\n";
    sections["[[pool]]"] = digest(poolText);

    std::string policy = "built-in";
    if (!config.policyFile.empty()) {
        std::ifstream in(config.policyFile, std::ios::binary);
        if (!in)
            return fail(ErrorCode::FailedPrecondition, "cannot read policy_file " + config.policyFile.string());
        std::ostringstream text;
        text << in.rdbuf();
        policy = text.str();
    }
    sections["policy file"] = digest(policy);
    return sections;
}

std::string newBrokerInstance()
{
    std::random_device random;
    std::uniform_int_distribution<uint64_t> any;
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(any(random)));
    return text;
}

std::string brokerApplicationName(const std::string &instance)
{
    return "paddockd " + instance;
}

Status joinBrokerRoster(store::EventStore &store, const std::string &instance, const ConfigSections &sections)
{
    auto running = store.query({"SELECT b.instance, b.host, b.pid, b.sections FROM brokers b WHERE EXISTS ("
                                "SELECT 1 FROM pg_stat_activity a WHERE a.application_name = 'paddockd ' || b.instance) "
                                "ORDER BY b.started_unix_ms",
                                {}});
    if (!running)
        return fail(running.error().code, "reading the brokers on this database: " + running.error().message);
    for (const auto &row : *running) {
        const auto &other = std::get<std::string>(row[0]);
        if (other == instance)
            continue;
        const json theirs = json::parse(std::get<std::string>(row[3]), nullptr, false);
        std::vector<std::string> differ;
        for (const auto &[name, mine] : sections) {
            if (!theirs.is_object() || theirs.value(name, std::string()) != mine)
                differ.push_back(name);
        }
        if (theirs.is_object()) {
            for (const auto &[name, value] : theirs.items()) {
                if (!sections.contains(name))
                    differ.push_back(name);
            }
        }
        if (differ.empty())
            continue;
        std::string names;
        for (const auto &name : differ)
            names += (names.empty() ? "" : ", ") + name;
        return fail(ErrorCode::FailedPrecondition,
                    "this broker's configuration differs from the one the broker on " + std::get<std::string>(row[1])
                        + " (pid " + std::to_string(std::get<int64_t>(row[2])) + ") runs with on the same database, in: "
                        + names + ". Every broker on one database steps every session, so they must share these "
                        "settings: start this one with the same broker.toml (only data_dir, socket, workers, log_level, "
                        "listen_tcp, tls_*, [store], [metrics] and credential files may differ), or stop every "
                        "broker and start them all on the new one");
    }

    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    store::AppendRequest join;
    // Rows of brokers that are gone, then this one's.
    join.writes.push_back({"DELETE FROM brokers WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a "
                           "WHERE a.application_name = 'paddockd ' || brokers.instance)",
                           {}});
    join.writes.push_back({"INSERT INTO brokers(instance, host, pid, started_unix_ms, sections) VALUES (?1, ?2, ?3, ?4, ?5)",
                           {instance, std::string(host), static_cast<int64_t>(::getpid()), nowUnixMs(),
                            json(sections).dump()}});
    auto joined = store.appendSync(std::move(join));
    if (!joined)
        return fail(joined.error().code, "joining the brokers on this database: " + joined.error().message);
    spdlog::info("store: joined {} other running broker(s) on this database", running->size());
    return {};
}

} // namespace paddock::daemon
