#include "tests/support/in_process_broker.h"

#include "broker/pool_client/grpc_pool_client.h"
#include "broker/daemon/broker_wiring.h"
#include "broker/server/broker_api.h"
#include "broker/server/stream_hub.h"
#include "broker/server/unix_listener.h"
#include "broker/store/postgres_event_store.h"
#include "broker/store/sqlite_event_store.h"

#include <grpcpp/grpcpp.h>

#include <unistd.h>

namespace paddock::test {

struct InProcessBroker::Serving {
    std::unique_ptr<daemon::BrokerWiring> core;
    std::unique_ptr<grpc::Server> server;
    std::unique_ptr<server::UnixListener> listener;
};

InProcessBroker::InProcessBroker(std::filesystem::path dir, std::filesystem::path playbookDir)
    : m_dir(std::move(dir)), m_config(broker_config::defaultBrokerConfig())
{
    m_config.configFile = m_dir / "broker.toml";   // the secrets file is found next to it: in dir
    m_config.dataDir = m_dir;
    m_config.socketPath = m_dir / "broker.sock";
    m_config.models.playbookDir = std::move(playbookDir);
    m_config.pools.clear();
    m_config.workers = 4;
}

InProcessBroker::~InProcessBroker()
{
    stop();
}

Status InProcessBroker::openStore()
{
    if (m_store)
        return {};
    auto store = m_storeConninfo.empty() ? store::openSqliteEventStore(m_config.dataDir / "broker.db")
                                         : store::openPostgresEventStore(m_storeConninfo);
    if (!store)
        return std::unexpected(store.error());
    m_store = std::move(*store);
    return {};
}

void InProcessBroker::addPool(const std::string &name, const std::string &endpoint)
{
    m_pools.add(pool_client::makeGrpcPoolClient(name, endpoint), true);
}

Status InProcessBroker::start()
{
    if (m_serving)
        return {};
    if (auto opened = openStore(); !opened)
        return opened;
    auto serving = std::make_unique<Serving>();
    const auto principals = m_principals ? m_principals
                                         : std::make_shared<const auth::PrincipalMap>(
                                               auth::PrincipalMap::embeddedDefault(::getuid()));
    auto core = daemon::BrokerWiring::create(m_config, *m_store, m_pools, principals);
    if (!core)
        return std::unexpected(core.error());
    serving->core = std::move(*core);
    // Like paddockd: the broker accepts on the socket itself, so peer credentials name the caller.
    std::filesystem::remove(m_config.socketPath);
    auto listener = server::UnixListener::listen(m_config.socketPath, 0666);
    if (!listener)
        return std::unexpected(listener.error());
    serving->listener = std::move(*listener);
    grpc::ServerBuilder builder;
    serving->core->api().registerOn(builder);
    serving->server = builder.BuildAndStart();
    if (!serving->server)
        return fail(ErrorCode::Unavailable, "cannot start the gRPC server for " + address());
    server::BrokerApi::markServing(*serving->server);
    serving->listener->start(serving->server.get(), principals);
    if (m_runSteps)
        serving->core->startEngine();
    serving->core->startReviews();
    m_serving = std::move(serving);
    return {};
}

void InProcessBroker::stop()
{
    if (m_serving) {
        m_serving->listener->stop();
        m_serving->core->beginShutdown();
        m_serving->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
        m_serving->core->stop();
        m_serving.reset();
    }
    if (m_store) {
        m_store->close();
        m_store.reset();
    }
}

std::string InProcessBroker::address() const
{
    return "unix:" + m_config.socketPath.string();
}

std::shared_ptr<grpc::Channel> InProcessBroker::newChannel() const
{
    return grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
}

store::EventStore &InProcessBroker::store()
{
    return *m_store;
}

int64_t InProcessBroker::streamCatchUps() const
{
    return m_serving ? m_serving->core->hub().catchUps() : 0;
}

} // namespace paddock::test
