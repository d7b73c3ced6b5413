#include "broker/config/metrics_config.h"

#include "metrics/listen_address.h"

namespace paddock::broker_config {

const ConfigSection &metricsSection()
{
    static const ConfigSection section{"broker.toml", "[metrics]", {"listen", "tls_cert", "tls_key"}};
    return section;
}

MetricsConfig parseMetricsConfig(const std::filesystem::path &file, const toml::table &table, MetricsConfig config,
                                 ConfigProblems &problems)
{
    auto problem = [&](const toml::node &node, const std::string &message) {
        problems.add(ErrorCode::InvalidArgument,
                     file.string() + ":" + std::to_string(node.source().begin.line) + ": " + message);
    };
    auto resolve = [&](const std::string &path) {
        return std::filesystem::path(path).is_absolute() ? std::filesystem::path(path) : file.parent_path() / path;
    };
    config.where = file.string() + ":" + std::to_string(table.source().begin.line);
    for (const auto &[key, node] : table) {
        const std::string k(key.str());
        auto text = node.value<std::string>();
        if (!metricsSection().accepts(k))
            problem(node, "unknown key '" + k + "' in [metrics]; it takes " + metricsSection().keyList());
        else if (!text || text->empty())
            problem(node, k + " in [metrics] must be a non-empty string");
        else if (k == "listen")
            config.listen = *text;
        else if (k == "tls_cert")
            config.tlsCert = resolve(*text);
        else if (k == "tls_key")
            config.tlsKey = resolve(*text);
    }
    return config;
}

void validateMetricsConfig(const MetricsConfig &config, ConfigProblems &problems)
{
    const std::string at = config.where.empty() ? std::string() : config.where + ": ";
    if (!config.enabled()) {
        if (config.tls())
            problems.add(ErrorCode::InvalidArgument, at + "[metrics] sets tls_cert/tls_key but no listen: add listen = "
                                                          "\"HOST:PORT\", or remove them");
        return;
    }
    auto address = metrics::parseListenAddress(config.listen, "[metrics] listen");
    if (!address) {
        problems.add(ErrorCode::InvalidArgument, at + address.error().message);
        return;
    }
    if (config.tlsCert.empty() != config.tlsKey.empty())
        problems.add(ErrorCode::InvalidArgument, at + "[metrics] needs both tls_cert and tls_key (PEM files), or neither");
    else if (!config.tls() && !metrics::isLoopbackHost(address->host))
        problems.add(ErrorCode::InvalidArgument,
                     at + "[metrics] listen = \"" + config.listen + "\" is not a loopback address, and a scrape from "
                          "another host must use TLS and a bearer token, as listen_tcp does: set tls_cert and tls_key "
                          "in [metrics] (scrapes then need a token from `paddockctl tokens create`), or listen on "
                          "127.0.0.1 and scrape from this host");
}

} // namespace paddock::broker_config
