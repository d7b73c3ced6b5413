#include "broker/server/broker.h"

#include "broker/cost/budget_source.h"
#include "broker/engine/step_engine.h"
#include "broker/policy/policy_file.h"
#include "broker/review/review_desk.h"
#include "broker/pools/grpc_pool_client.h"
#include "broker/pools/pool_set.h"
#include "broker/secrets/secret_store.h"
#include "broker/server/broker_service.h"
#include "broker/server/stream_hub.h"
#include "broker/server/unix_listener.h"
#include "broker/store/sqlite_event_store.h"
#include "common/paths.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace paddock::server {

namespace {

// True when something accepts connections on the unix socket at path.
bool socketIsLive(const std::filesystem::path &path)
{
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    const bool live = ::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0;
    ::close(fd);
    return live;
}

} // namespace

struct Broker::Parts {
    std::unique_ptr<store::EventStore> store;
    pools::PoolSet pools;
    std::unique_ptr<model::ModelRegistry> models;
    std::unique_ptr<secrets::SecretStore> secrets;   // outlives the engine and the service that use it
    std::unique_ptr<store::AgentStore> agents;
    std::unique_ptr<store::DecisionStore> decisions;
    std::unique_ptr<engine::EnvironmentDecider> decider;
    std::unique_ptr<store::CostQueries> costs;        // these four outlive the engine and the service too
    std::unique_ptr<store::ReviewQueries> reviewQueries;
    std::unique_ptr<review::ReviewDesk> reviews;
    std::unique_ptr<cost::IndexedBudgets> budgets;
    std::unique_ptr<StreamHub> hub;
    std::unique_ptr<engine::StepEngine> engine;
    std::unique_ptr<BrokerService> service;
    std::unique_ptr<grpc::Server> server;
    std::unique_ptr<UnixListener> listener;
};

Broker::Broker(BrokerConfig config) : m_config(std::move(config)) {}

Broker::~Broker()
{
    stop();
}

Status Broker::start()
{
    if (auto valid = validateBrokerConfig(m_config); !valid)
        return valid;
    auto parts = std::make_unique<Parts>();

    if (auto error = ensurePrivateDirectory(m_config.dataDir); !error.empty())
        return fail(ErrorCode::FailedPrecondition, error + ": pick another --data-dir");
    auto store = store::openSqliteEventStore(m_config.dataDir / "broker.db");
    if (!store)
        return std::unexpected(store.error());
    parts->store = std::move(*store);
    // Agents and decisions live in the same file, which the event store has just migrated.
    auto agentStore = store::AgentStore::open(m_config.dataDir / "broker.db");
    if (!agentStore)
        return std::unexpected(agentStore.error());
    parts->agents = std::move(*agentStore);
    auto decisionStore = store::DecisionStore::open(m_config.dataDir / "broker.db");
    if (!decisionStore)
        return std::unexpected(decisionStore.error());
    parts->decisions = std::move(*decisionStore);
    // The policy file is read once; each part takes its own tables from it.
    policy::PolicyFile policyFile;
    if (!m_config.policyFile.empty()) {
        auto loaded = policy::loadPolicyFile(m_config.policyFile);
        if (!loaded)
            return std::unexpected(loaded.error());
        policyFile = std::move(*loaded);
    }
    auto reviewPolicy = review::parseReviewPolicy(policyFile);
    if (!reviewPolicy)
        return std::unexpected(reviewPolicy.error());
    auto tierPolicy = policy::parseTierPolicy(policyFile);
    if (!tierPolicy)
        return std::unexpected(tierPolicy.error());
    spdlog::info("policy: {} ({} tier rules)", m_config.policyFile.empty() ? "built-in defaults" : m_config.policyFile.string(),
                 tierPolicy->rules.size());
    auto costs = store::CostQueries::open(m_config.dataDir / "broker.db");
    if (!costs)
        return std::unexpected(costs.error());
    parts->costs = std::move(*costs);
    auto reviewQueries = store::ReviewQueries::open(m_config.dataDir / "broker.db");
    if (!reviewQueries)
        return std::unexpected(reviewQueries.error());
    parts->reviewQueries = std::move(*reviewQueries);
    parts->reviews = std::make_unique<review::ReviewDesk>(*parts->store, *parts->reviewQueries, *reviewPolicy);
    // Agents' budgets come from the agents' store; an agent it does not know (the built-in default)
    // has none, and then only the session's own budget applies.
    store::AgentStore *agentsStore = parts->agents.get();
    parts->budgets = std::make_unique<cost::IndexedBudgets>(
        *parts->costs, [agentsStore](const std::string &name) {
            auto agent = agentsStore->get(name);
            return agent ? cost::AgentBudget{agent->budgetPerSessionMicros, agent->budgetPerDayMicros}
                         : cost::AgentBudget{};
        });

    pools::PoolSetOptions poolOptions;
    poolOptions.healthIntervalMs = m_config.poolHealthIntervalMs;
    poolOptions.lostAfterMs = m_config.poolLostAfterMs;
    parts->pools.setOptions(poolOptions);
    for (const auto &pool : m_config.pools) {
        auto connection = loadPoolConnection(pool);
        if (!connection)
            return std::unexpected(connection.error());
        const bool local = isLocalEndpoint(pool.endpoint);
        spdlog::info("pool '{}' at {}: {}{}{}", pool.name, pool.endpoint,
                     connection->caPem.empty() ? "plaintext" : connection->certPem.empty() ? "TLS" : "mutual TLS",
                     connection->token.empty() ? "" : ", bearer token from " + pool.tokenFile.string(),
                     local ? ", local execution" : "");
        if (connection->caPem.empty() && !connection->token.empty() && !local)
            spdlog::warn("pool '{}' at {}: the bearer token travels in plaintext; set tls_ca (and start the pool with "
                         "--tls-cert/--tls-key)", pool.name, pool.endpoint);
        const std::string transport = connection->caPem.empty() ? "plaintext" : connection->certPem.empty() ? "tls" : "mtls";
        const bool token = !connection->token.empty();
        parts->pools.add(pools::makeGrpcPoolClient(std::move(*connection)), local, transport, token);
    }
    if (parts->pools.anyLocal())
        spdlog::warn("local execution: agents' commands run on this machine (allow_local_execution = true)");
    parts->pools.startHealthChecks();

    parts->models = std::make_unique<model::ModelRegistry>(m_config.models);
    model::ModelRegistry *models = parts->models.get();
    engine::ModelLookup lookup = [models](const std::string &name) { return models->find(name); };

    // Secrets live next to the config file (or in the config directory for the embedded default);
    // a file others may read stops the broker here, before anything could use it.
    const auto secretsFile = (m_config.configFile.empty() ? defaultConfigDir() : m_config.configFile.parent_path())
        / secrets::kSecretsFileName;
    auto secretStore = secrets::SecretStore::open(secretsFile);
    if (!secretStore)
        return std::unexpected(secretStore.error());
    parts->secrets = std::move(*secretStore);
    spdlog::info("{} secrets in {}", parts->secrets->list().size(), secretsFile.string());

    parts->hub = std::make_unique<StreamHub>(*parts->store);
    parts->hub->start();

    parts->decider = std::make_unique<engine::EnvironmentDecider>(parts->agents.get(), parts->pools,
                                                                  std::move(*tierPolicy), m_config.defaultTier);

    engine::EngineOptions engineOptions;
    engineOptions.decider = parts->decider.get();
    engineOptions.workers = m_config.workers;
    engineOptions.leaseMs = m_config.leaseMs;
    engineOptions.secrets = parts->secrets.get();
    engineOptions.sandboxIdleReleaseMs = m_config.sandboxIdleReleaseMs;
    engineOptions.prices = m_config.prices;
    engineOptions.budgets = parts->budgets.get();
    // propose_change with records, within policy or approved: [{key, value}, ...] into the agent's
    // durable records (UpdateAgent's rule: records given are set, the others kept).
    engineOptions.writeRecords = [agentsStore](const std::string &name, const nlohmann::json &records) -> Status {
        auto agent = agentsStore->get(name);
        if (!agent)
            return std::unexpected(agent.error());
        if (!records.is_array())
            return fail(ErrorCode::InvalidArgument, "a record change is a JSON list of {\"key\", \"value\"} objects");
        agent->records.clear();
        for (const auto &record : records) {
            if (!record.is_object() || !record.contains("key") || !record["key"].is_string() || !record.contains("value"))
                return fail(ErrorCode::InvalidArgument, "each record is an object with a string \"key\" and a \"value\"");
            agent->records[record["key"].get<std::string>()] = record["value"].dump();
        }
        auto updated = agentsStore->update(*agent);
        return updated ? Status{} : Status{std::unexpected(updated.error())};
    };
    engineOptions.reviewPolicy = *reviewPolicy;
    parts->engine = std::make_unique<engine::StepEngine>(*parts->store, parts->pools, lookup, engineOptions);

    auto principals = auth::PrincipalMap::fromConfig(m_config.principals, ::getuid());
    if (!principals)
        return std::unexpected(principals.error());
    BrokerServiceOptions serviceOptions;
    serviceOptions.principals = std::make_shared<const auth::PrincipalMap>(std::move(*principals));
    serviceOptions.playbookDir = m_config.models.playbookDir;
    serviceOptions.defaultTier = m_config.defaultTier;
    serviceOptions.debugShellIdleTimeoutMs = m_config.debugShellIdleTimeoutMs;
    serviceOptions.modelNames = models->names();
    serviceOptions.secrets = parts->secrets.get();
    serviceOptions.decider = parts->decider.get();
    serviceOptions.decisions = parts->decisions.get();
    serviceOptions.costs = parts->costs.get();
    serviceOptions.reviews = parts->reviews.get();
    serviceOptions.budgets = parts->budgets.get();
    parts->service = std::make_unique<BrokerService>(*parts->store, *parts->hub, parts->pools, lookup, serviceOptions);

    // The socket's directory is private (0700) and the socket 0600: the peer's OS user is the principal.
    const auto socketDir = m_config.socketPath.parent_path();
    if (auto error = ensurePrivateDirectory(socketDir); !error.empty())
        return fail(ErrorCode::FailedPrecondition, error + ": pick another --socket");
    if (std::filesystem::exists(m_config.socketPath)) {
        if (socketIsLive(m_config.socketPath))
            return fail(ErrorCode::FailedPrecondition, "another broker is already listening on " + m_config.socketPath.string()
                            + ": stop it first, or pass --socket to use another path");
        std::filesystem::remove(m_config.socketPath);   // left behind by a broker that was killed
    }

    // The broker accepts on the socket itself, to read each peer's uid (unix_listener.h). With
    // principals configured, other OS users must reach the socket: the config decides who they are.
    const bool shared = serviceOptions.principals->configured();
    if (shared)
        ::chmod(socketDir.c_str(), 0711);
    auto listener = UnixListener::listen(m_config.socketPath, shared ? 0666 : 0600);
    if (!listener)
        return std::unexpected(listener.error());
    parts->listener = std::move(*listener);

    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    int tcpPort = 0;
    if (!m_config.listenTcp.empty()) {
        auto cert = readPemFile("the broker", "tls_cert", m_config.tlsCert);
        if (!cert)
            return std::unexpected(cert.error());
        auto key = readPemFile("the broker", "tls_key", m_config.tlsKey);
        if (!key)
            return std::unexpected(key.error());
        grpc::SslServerCredentialsOptions ssl;
        ssl.pem_key_cert_pairs.push_back({std::move(*key), std::move(*cert)});
        auto credentials = grpc::SslServerCredentials(ssl);
        credentials->SetAuthMetadataProcessor(parts->service->access().tokenProcessor());
        builder.AddListeningPort(m_config.listenTcp, credentials, &tcpPort);
    }
    builder.RegisterService(parts->service.get());
    parts->server = builder.BuildAndStart();
    if (!parts->server || (!m_config.listenTcp.empty() && tcpPort == 0))
        return fail(ErrorCode::Unavailable, m_config.listenTcp.empty()
                        ? "could not start the gRPC server"
                        : "could not listen on " + m_config.listenTcp + " (listen_tcp): is the port in use? Pick another");
    parts->listener->start(parts->server.get(), serviceOptions.principals);
    m_tcpPort = tcpPort;
    if (!m_config.listenTcp.empty())
        spdlog::info("listening on {} (port {}; TLS, every call needs a bearer token)", m_config.listenTcp, tcpPort);
    if (serviceOptions.principals->configured())
        spdlog::info("{} principals from {}", serviceOptions.principals->all().size(), m_config.configFile.string());
    else
        spdlog::info("no [[principal]] configured: {} (this process's user) is admin on the socket, nobody else is "
                     "let in", serviceOptions.principals->all().front().principal);

    parts->engine->start();
    parts->reviews->start();
    m_parts = std::move(parts);
    spdlog::info("broker listening on unix:{} with {} workers, database {}", m_config.socketPath.string(),
                 m_config.workers, (m_config.dataDir / "broker.db").string());
    return {};
}

void Broker::stop()
{
    if (!m_parts)
        return;
    auto parts = std::move(m_parts);
    parts->listener->stop();
    parts->hub->beginShutdown();
    parts->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    parts->reviews->stop();
    parts->engine->stop();
    parts->hub->stop();
    parts->store->close();
    std::error_code ec;
    std::filesystem::remove(m_config.socketPath, ec);
    spdlog::info("broker stopped; the store is committed and checkpointed");
}

} // namespace paddock::server
