#pragma once
// The broker's gRPC API: its four services (proto/paddock/v1) over one shared context, made and
// registered together, so paddockd, the in-process broker of the tests and the benchmarks serve
// exactly the same thing.
//   SessionService     sessions and their logs          session_service.h
//   GovernanceService  agents, decisions, reviews, cost governance_service.h
//   OperationsService  pools, post-mortems, shells      operations_service.h
//   AccessService      who am I, tokens, audit, secrets access_service.h
//
// Threads: built, registered and destroyed on the owner's thread, before the server starts and
// after it has shut down; the services run on gRPC's callback threads.

#include "broker/server/access_service.h"
#include "broker/server/governance_service.h"
#include "broker/server/operations_service.h"
#include "broker/server/service_context.h"
#include "broker/server/session_service.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

namespace paddock::server {

class BrokerApi {
public:
    BrokerApi(store::EventStore &store, StreamHub &hub, const placement::PoolSet &pools, engine::ModelLookup models,
              ServiceOptions options)
        : m_context(store, hub, pools, std::move(models), std::move(options)), m_sessions(m_context),
          m_governance(m_context), m_operations(m_context), m_access(m_context)
    {
    }

    BrokerApi(const BrokerApi &) = delete;
    BrokerApi &operator=(const BrokerApi &) = delete;

    // Adds the four services to the server being built (health and reflection list each of them).
    void registerOn(grpc::ServerBuilder &builder)
    {
        builder.RegisterService(&m_sessions);
        builder.RegisterService(&m_governance);
        builder.RegisterService(&m_operations);
        builder.RegisterService(&m_access);
    }

    // Once the server runs: grpc.health.v1 answers SERVING for each of the four services by name
    // (the server as a whole, "", is SERVING already).
    static void markServing(grpc::Server &server)
    {
        if (auto *health = server.GetHealthCheckService()) {
            for (const char *name : {v1::SessionService::service_full_name(), v1::GovernanceService::service_full_name(),
                                     v1::OperationsService::service_full_name(), v1::AccessService::service_full_name()})
                health->SetServingStatus(name, true);
        }
    }

    // The permission checks and the audit log; the TCP listener's token check comes from here.
    Access &access() { return m_context.access; }

private:
    ServiceContext m_context;
    SessionService m_sessions;
    GovernanceService m_governance;
    OperationsService m_operations;
    AccessService m_access;
};

} // namespace paddock::server
