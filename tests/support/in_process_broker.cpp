#include "tests/support/in_process_broker.h"

#include "broker/cost/budget_source.h"
#include "broker/model/model_registry.h"
#include "broker/review/review_desk.h"
#include "broker/server/broker_service.h"
#include "broker/server/stream_hub.h"
#include "broker/server/unix_listener.h"
#include "broker/store/sqlite_event_store.h"

#include <grpcpp/grpcpp.h>

#include <unistd.h>

namespace paddock::test {

struct InProcessBroker::Serving {
    // The cost ledger and the review queue, as paddockd has them (no expiry timer: items expire on read).
    std::unique_ptr<store::CostQueries> costs;
    std::unique_ptr<store::ReviewQueries> reviewQueries;
    std::unique_ptr<review::ReviewDesk> reviews;
    std::unique_ptr<cost::IndexedBudgets> budgets;
    std::unique_ptr<server::StreamHub> hub;
    std::unique_ptr<model::ModelRegistry> models;
    std::unique_ptr<server::BrokerService> service;
    std::unique_ptr<grpc::Server> server;
    std::unique_ptr<server::UnixListener> listener;
};

InProcessBroker::InProcessBroker(std::filesystem::path dir, std::filesystem::path playbookDir)
    : m_dir(std::move(dir)), m_playbookDir(std::move(playbookDir))
{
}

InProcessBroker::~InProcessBroker()
{
    stop();
}

Status InProcessBroker::openStore()
{
    if (m_store)
        return {};
    auto store = store::openSqliteEventStore(m_dir / "broker.db");
    if (!store)
        return std::unexpected(store.error());
    m_store = std::move(*store);
    return {};
}

Status InProcessBroker::start()
{
    if (m_serving)
        return {};
    if (auto opened = openStore(); !opened)
        return opened;
    auto serving = std::make_unique<Serving>();
    auto costs = store::CostQueries::open(m_dir / "broker.db");
    if (!costs)
        return std::unexpected(costs.error());
    serving->costs = std::move(*costs);
    auto reviewQueries = store::ReviewQueries::open(m_dir / "broker.db");
    if (!reviewQueries)
        return std::unexpected(reviewQueries.error());
    serving->reviewQueries = std::move(*reviewQueries);
    serving->reviews = std::make_unique<review::ReviewDesk>(*m_store, *serving->reviewQueries, review::ReviewPolicy{});
    serving->budgets = std::make_unique<cost::IndexedBudgets>(*serving->costs, cost::AgentBudgetLookup{});
    serving->hub = std::make_unique<server::StreamHub>(*m_store);
    serving->hub->start();
    model::ModelsConfig models;
    models.playbookDir = m_playbookDir;
    serving->models = std::make_unique<model::ModelRegistry>(models);
    server::BrokerServiceOptions options;
    options.playbookDir = m_playbookDir;
    options.modelNames = serving->models->names();
    options.principals = m_principals;
    options.costs = serving->costs.get();
    options.reviews = serving->reviews.get();
    options.budgets = serving->budgets.get();
    model::ModelRegistry *registry = serving->models.get();
    serving->service = std::make_unique<server::BrokerService>(
        *m_store, *serving->hub, m_pools, [registry](const std::string &name) { return registry->find(name); },
        options);
    // Like paddockd: the broker accepts on the socket itself, so peer credentials name the caller.
    std::filesystem::remove(m_dir / "broker.sock");
    auto listener = server::UnixListener::listen(m_dir / "broker.sock", 0666);
    if (!listener)
        return std::unexpected(listener.error());
    serving->listener = std::move(*listener);
    grpc::ServerBuilder builder;
    builder.RegisterService(serving->service.get());
    serving->server = builder.BuildAndStart();
    if (!serving->server)
        return fail(ErrorCode::Unavailable, "cannot start the gRPC server for " + address());
    serving->listener->start(serving->server.get(),
                             m_principals ? m_principals
                                          : std::make_shared<const auth::PrincipalMap>(
                                                auth::PrincipalMap::embeddedDefault(::getuid())));
    m_serving = std::move(serving);
    return {};
}

void InProcessBroker::stop()
{
    if (m_serving) {
        m_serving->listener->stop();
        m_serving->hub->beginShutdown();
        m_serving->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
        m_serving->hub->stop();
        m_serving.reset();
    }
    if (m_store) {
        m_store->close();
        m_store.reset();
    }
}

std::string InProcessBroker::address() const
{
    return "unix:" + (m_dir / "broker.sock").string();
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
    return m_serving ? m_serving->hub->catchUps() : 0;
}

} // namespace paddock::test
