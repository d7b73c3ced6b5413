#include "broker/config/config_check.h"

#include "broker/auth/principals.h"
#include "broker/policy/policy_file.h"
#include "broker/policy/tier_rules.h"
#include "broker/review/review_policy.h"
#include "broker/secrets/secret_store.h"
#include "broker/store/store_url.h"
#include "common/paths.h"

#include <unistd.h>

namespace paddock::broker_config {

namespace {

std::string poolSummary(const PoolEndpoint &pool)
{
    std::string how = pool.tlsCa.empty() ? "plaintext" : pool.tlsCert.empty() ? "TLS" : "mutual TLS";
    if (!pool.tokenFile.empty())
        how += ", token";
    if (isLocalEndpoint(pool.endpoint))
        how += ", local execution";
    return pool.name + " at " + pool.endpoint + " (" + how + ")";
}

} // namespace

std::string checkBrokerConfig(const BrokerConfig &config, ConfigProblems &problems)
{
    validateBrokerConfig(config, problems);

    for (const auto &pool : config.pools) {
        if (auto connection = loadPoolConnection(pool); !connection)
            problems.add(connection.error().code, (pool.where.empty() ? std::string() : pool.where + ": ")
                                                      + connection.error().message);
    }
    if (!config.listenTcp.empty()) {
        if (!config.tlsCert.empty())
            problems.addIfFailed(readPemFile("the broker", "tls_cert", config.tlsCert));
        if (!config.tlsKey.empty())
            problems.addIfFailed(readPemFile("the broker", "tls_key", config.tlsKey));
    }
    if (config.metrics.tls() && !config.metrics.tlsKey.empty()) {
        problems.addIfFailed(readPemFile("[metrics]", "tls_cert", config.metrics.tlsCert));
        problems.addIfFailed(readPemFile("[metrics]", "tls_key", config.metrics.tlsKey));
    }

    problems.addIfFailed(auth::PrincipalMap::fromConfig(config.principals, ::getuid()));

    if (!config.policyFile.empty()) {
        auto policyFile = policy::loadPolicyFile(config.policyFile, config.policyFileWhere);
        if (!policyFile) {
            problems.add(policyFile.error());
        } else {
            review::parseReviewPolicy(*policyFile, problems);
            policy::parseTierPolicy(*policyFile, problems);
        }
    }

    const auto configDir = config.configFile.empty() ? defaultConfigDir() : config.configFile.parent_path();
    problems.addIfFailed(secrets::SecretStore::open(configDir / secrets::kSecretsFileName));

    std::error_code ec;
    if (!config.models.playbookDir.empty() && !std::filesystem::is_directory(config.models.playbookDir, ec))
        problems.add(ErrorCode::FailedPrecondition,
                     "the playbook directory " + config.models.playbookDir.string()
                         + " does not exist: set [models] playbook_dir (or pass --playbook-dir) to the directory that "
                           "holds the playbooks");
    // The store's password is read as a start would; the database itself is not contacted. (A url
    // that is refused was reported where it was read.)
    if (config.store.postgres() && store::checkPostgresUrl(config.store.url)) {
        if (auto conninfo = storeConnectionString(config.store); !conninfo)
            problems.add(conninfo.error().code, (config.store.where.empty() ? std::string() : config.store.where + ": ")
                                                    + conninfo.error().message);
    }
    // [otlp]'s header files and variables are read as a start would; the receiver is not contacted.
    if (config.otlp.enabled()) {
        if (auto headers = otlpHeaders(config.otlp); !headers)
            problems.add(headers.error().code, (config.otlp.where.empty() ? std::string() : config.otlp.where + ": ")
                                                   + headers.error().message);
    }
    checkCreatableDirectory("data_dir", config.dataDir, "set data_dir (or pass --data-dir) to a directory this user "
                                                        "may write", problems);
    checkCreatableDirectory("socket", config.socketPath.parent_path(), "set socket (or pass --socket) to a path in a "
                                                                       "directory this user may write", problems);

    std::string summary = config.configFile.empty() ? std::string("the embedded default") : config.configFile.string();
    summary += "; " + std::to_string(config.pools.size()) + (config.pools.size() == 1 ? " pool: " : " pools: ");
    for (size_t i = 0; i < config.pools.size(); ++i)
        summary += (i ? ", " : "") + poolSummary(config.pools[i]);
    summary += "; listeners: unix:" + config.socketPath.string();
    if (!config.listenTcp.empty())
        summary += ", " + config.listenTcp + " (TLS, bearer tokens)";
    if (config.metrics.enabled())
        summary += "; metrics on " + config.metrics.listen + (config.metrics.tls() ? " (TLS, bearer tokens)" : " (HTTP)");
    if (config.otlp.enabled())
        summary += "; OTLP export to " + config.otlp.endpoint + (config.otlp.metrics ? " (traces, metrics)" : " (traces)");
    summary += "; data dir " + config.dataDir.string();
    summary += "; store " + describeStore(config.store, config.dataDir);
    summary += "; policy " + (config.policyFile.empty() ? std::string("built-in defaults") : config.policyFile.string());
    summary += "; " + (config.principals.empty() ? std::string("no principals (this user is admin on the socket)")
                                                 : std::to_string(config.principals.size()) + " principals");
    return summary;
}

} // namespace paddock::broker_config
