#include "broker/daemon/broker.h"

#include "broker/pool_client/grpc_pool_client.h"
#include "broker/placement/pool_set.h"
#include "broker/daemon/broker_metrics_endpoint.h"
#include "broker/daemon/broker_roster.h"
#include "broker/daemon/broker_wiring.h"
#include "broker/engine/step_engine.h"
#include "broker/server/broker_api.h"
#include "broker/server/unix_listener.h"
#include "common/paths.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace paddock::daemon {

using server::UnixListener;
using broker_config::isLocalEndpoint;
using broker_config::readPemFile;
using broker_config::validateBrokerConfig;

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

// Each configured pool, connected with its TLS and token files, added to pools.
Status addPools(const BrokerConfig &config, placement::PoolSet &pools)
{
    for (const auto &pool : config.pools) {
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
        pools.add(pool_client::makeGrpcPoolClient(std::move(*connection)), local, transport, token);
    }
    return {};
}

} // namespace

struct Broker::Parts {
    std::unique_ptr<store::EventStore> store;
    placement::PoolSet pools;
    std::unique_ptr<BrokerWiring> core;   // uses the store and the pools
    std::unique_ptr<grpc::Server> server;
    std::unique_ptr<UnixListener> listener;
    std::unique_ptr<BrokerMetricsEndpoint> metrics;   // [metrics]; null when off
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
    // On PostgreSQL, other brokers may share the database: this one joins them only with the same
    // shared configuration (broker_roster.h).
    const std::string instance = newBrokerInstance();
    auto store = openBrokerStore(m_config, m_startWait, brokerApplicationName(instance));
    if (!store)
        return std::unexpected(store.error());
    parts->store = std::move(*store);
    if (m_config.store.postgres()) {
        auto sections = sharedConfigSections(m_config);
        if (!sections)
            return std::unexpected(sections.error());
        if (auto joined = joinBrokerRoster(*parts->store, instance, *sections); !joined)
            return joined;
    }

    placement::PoolSetOptions poolOptions;
    poolOptions.healthIntervalMs = m_config.poolHealthIntervalMs;
    poolOptions.lostAfterMs = m_config.poolLostAfterMs;
    parts->pools.setOptions(poolOptions);
    if (auto added = addPools(m_config, parts->pools); !added)
        return added;
    if (parts->pools.anyLocal())
        spdlog::warn("local execution: agents' commands run on this machine (allow_local_execution = true)");
    parts->pools.startHealthChecks();

    auto principals = auth::PrincipalMap::fromConfig(m_config.principals, ::getuid());
    if (!principals)
        return std::unexpected(principals.error());
    const auto principalMap = std::make_shared<const auth::PrincipalMap>(std::move(*principals));
    auto core = BrokerWiring::create(m_config, *parts->store, parts->pools, principalMap);
    if (!core)
        return std::unexpected(core.error());
    parts->core = std::move(*core);
    if (m_config.metrics.enabled()) {
        auto metrics = BrokerMetricsEndpoint::start(m_config.metrics, *parts->store, parts->pools, parts->core->api().access());
        if (!metrics)
            return std::unexpected(metrics.error());
        parts->metrics = std::move(*metrics);
        spdlog::info("metrics at {} ({})", parts->metrics->url(), m_config.metrics.tls()
                         ? "TLS; every scrape needs a bearer token" : "plain HTTP on loopback; no token");
    }

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
    const bool shared = principalMap->configured();
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
        credentials->SetAuthMetadataProcessor(parts->core->api().access().tokenProcessor());
        builder.AddListeningPort(m_config.listenTcp, credentials, &tcpPort);
    }
    parts->core->api().registerOn(builder);
    parts->server = builder.BuildAndStart();
    if (!parts->server || (!m_config.listenTcp.empty() && tcpPort == 0))
        return fail(ErrorCode::Unavailable, m_config.listenTcp.empty()
                        ? "could not start the gRPC server"
                        : "could not listen on " + m_config.listenTcp + " (listen_tcp): is the port in use? Pick another");
    server::BrokerApi::markServing(*parts->server);
    parts->listener->start(parts->server.get(), principalMap);
    m_tcpPort = tcpPort;
    if (!m_config.listenTcp.empty())
        spdlog::info("listening on {} (port {}; TLS, every call needs a bearer token)", m_config.listenTcp, tcpPort);
    if (principalMap->configured())
        spdlog::info("{} principals from {}", principalMap->all().size(), m_config.configFile.string());
    else
        spdlog::info("no [[principal]] configured: {} (this process's user) is admin on the socket, nobody else is "
                     "let in", principalMap->all().front().principal);

    parts->core->startEngine();
    parts->core->startReviews();
    m_parts = std::move(parts);
    spdlog::info("broker listening on unix:{} with {} step threads, store {}", m_config.socketPath.string(),
                 m_config.workers > 0 ? m_config.workers : engine::defaultStepWorkers(),
                 broker_config::describeStore(m_config.store, m_config.dataDir));
    return {};
}

void Broker::stop()
{
    if (!m_parts)
        return;
    auto parts = std::move(m_parts);
    if (parts->metrics)
        parts->metrics->stop();
    parts->listener->stop();
    parts->core->beginShutdown();
    parts->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    parts->core->stop();
    parts->store->close();
    std::error_code ec;
    std::filesystem::remove(m_config.socketPath, ec);
    spdlog::info("broker stopped; the store is committed and checkpointed");
}

} // namespace paddock::daemon
