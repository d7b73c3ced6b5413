#pragma once
// The broker's own service, store and stream hub (what paddockd serves, without step workers) on a
// unix socket in a directory of the test's, inside the test's process. Tests and benchmarks append
// to the store directly, so they know exactly what a client must see.
//
// Threads: construct, start and stop on the test's thread; store() and the gRPC socket may be used
// from any thread while it runs.

#include "broker/auth/principals.h"
#include "broker/pools/pool_set.h"
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
    // dir holds broker.db and broker.sock; playbookDir is where "scripted" finds playbooks by name.
    explicit InProcessBroker(std::filesystem::path dir, std::filesystem::path playbookDir = {});
    ~InProcessBroker();

    InProcessBroker(const InProcessBroker &) = delete;
    InProcessBroker &operator=(const InProcessBroker &) = delete;

    // Opens the store if it is not open (a test may open it early to append while nothing serves).
    Status openStore();
    // Opens the store if needed and serves on the socket.
    Status start();
    // Like paddockd shutting down: streams end with UNAVAILABLE, the server stops, the store closes.
    void stop();

    std::string address() const;                   // unix:<dir>/broker.sock
    std::shared_ptr<grpc::Channel> newChannel() const;
    store::EventStore &store();                     // open after openStore() or start()
    pools::PoolSet &pools() { return m_pools; }     // add pools before start()
    // Who may call (before start()); default: this process's user is admin.
    void setPrincipals(std::shared_ptr<const auth::PrincipalMap> principals) { m_principals = std::move(principals); }
    int64_t streamCatchUps() const;                 // StreamHub::catchUps() of the running hub

private:
    struct Serving;
    std::filesystem::path m_dir;
    std::filesystem::path m_playbookDir;
    std::unique_ptr<store::EventStore> m_store;
    pools::PoolSet m_pools;
    std::shared_ptr<const auth::PrincipalMap> m_principals;
    std::unique_ptr<Serving> m_serving;
};

} // namespace paddock::test
