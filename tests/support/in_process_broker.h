#pragma once
// The broker paddockd runs (broker/daemon/broker_wiring.h: store, agents, decisions, policy, cost,
// reviews, models, secrets, stream hub, step engine and service) on a unix socket in a directory of
// the test's, inside the test's process. Its store is SQLite in that directory, or PostgreSQL
// (useStore), which several of them may share like brokers of a team.
//
// By default its step workers do not run: sessions stay queued and tests append to the store
// directly, so they know exactly what a client must see. A test that wants sessions to run adds a
// real pool (addPool, e.g. a paddock-pool started with tests/integration/harness) and calls
// runSteps(true) before start().
//
// Threads: construct, configure, start and stop on the test's thread; store() and the gRPC socket
// may be used from any thread while it runs.

#include "broker/auth/principals.h"
#include "broker/placement/pool_set.h"
#include "broker/config/broker_config.h"
#include "broker/store/event_store.h"
#include "common/result.h"

#include <filesystem>
#include <memory>
#include <string>

namespace grpc {
class Channel;
}

namespace paddock::test {

class InProcessBroker {
public:
    // dir holds broker.db, broker.sock and the secrets file; playbookDir is where "scripted" finds
    // playbooks by name.
    explicit InProcessBroker(std::filesystem::path dir, std::filesystem::path playbookDir = {});
    ~InProcessBroker();

    InProcessBroker(const InProcessBroker &) = delete;
    InProcessBroker &operator=(const InProcessBroker &) = delete;

    // The store on PostgreSQL (a libpq connection string, e.g. StartedPostgres::connectionString)
    // instead of broker.db in dir; before openStore() or start(). Several brokers may share one.
    void useStore(std::string conninfo) { m_storeConninfo = std::move(conninfo); }
    // Opens the store if it is not open (a test may open it early to append while nothing serves).
    Status openStore();
    // Opens the store if needed and serves on the socket.
    Status start();
    // Like paddockd shutting down: streams end with UNAVAILABLE, the server stops, workers finish
    // their step, the store closes.
    void stop();

    std::string address() const;                   // unix:<dir>/broker.sock
    std::shared_ptr<grpc::Channel> newChannel() const;
    store::EventStore &store();                     // open after openStore() or start()
    placement::PoolSet &pools() { return m_pools; }     // add pools before start()
    // A paddock-pool listening on endpoint (host:port, plaintext), before start().
    void addPool(const std::string &name, const std::string &endpoint);
    // paddockd's configuration of this broker, to change before start() (default tier, policy_file,
    // workers, prices...); dataDir, socket and playbook directory are the test's.
    broker_config::BrokerConfig &config() { return m_config; }
    // Step workers take the sessions (before start()); give it a pool with their tiers.
    void runSteps(bool run) { m_runSteps = run; }
    // Who may call (before start()); default: this process's user is admin.
    void setPrincipals(std::shared_ptr<const auth::PrincipalMap> principals) { m_principals = std::move(principals); }
    int64_t streamCatchUps() const;                 // StreamHub::catchUps() of the running hub

private:
    struct Serving;
    std::filesystem::path m_dir;
    broker_config::BrokerConfig m_config;
    bool m_runSteps = false;
    std::string m_storeConninfo;   // empty: SQLite in m_dir
    std::unique_ptr<store::EventStore> m_store;
    placement::PoolSet m_pools;
    std::shared_ptr<const auth::PrincipalMap> m_principals;
    std::unique_ptr<Serving> m_serving;
};

} // namespace paddock::test
