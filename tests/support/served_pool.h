#pragma once
// The real PoolService over an InProcessPool (started_pool.h) on an ephemeral loopback port, for
// the pool tests that go through gRPC (pool_sandbox_test, pool_cgroup_test,
// pool_post_mortem_test). It ends the three in the daemon's order: the gRPC server, then the pool,
// then the service's workers; the InProcessPool must outlive it (declare it first). Links
// paddock_pool_server. Threads: the test's main thread.

#include "pool/server/pool_service.h"
#include "rpc/limits.h"
#include "tests/support/started_pool.h"

#include "paddock/v1/pool.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

namespace paddock::test {

class ServedPool {
public:
    explicit ServedPool(InProcessPool &inProcess) : m_inProcess(inProcess)
    {
        m_service = std::make_unique<pool::PoolService>(inProcess.pool());
        grpc::ServerBuilder builder;
        builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &m_port);
        builder.SetMaxReceiveMessageSize(rpc::kMaxPoolMessageBytes);
        builder.RegisterService(m_service.get());
        m_server = builder.BuildAndStart();
    }
    ~ServedPool()
    {
        if (m_server)
            m_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
        m_inProcess.shutdown();
        m_service->stop();
    }
    ServedPool(const ServedPool &) = delete;
    ServedPool &operator=(const ServedPool &) = delete;

    grpc::Server *server() const { return m_server.get(); }   // null when it could not be built
    int port() const { return m_port; }                        // 0 when the server could not listen
    std::string address() const { return "127.0.0.1:" + std::to_string(m_port); }
    std::unique_ptr<v1::PoolService::Stub> stub() const
    {
        return v1::PoolService::NewStub(grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
    }

private:
    InProcessPool &m_inProcess;
    int m_port = 0;
    std::unique_ptr<pool::PoolService> m_service;
    std::unique_ptr<grpc::Server> m_server;
};

} // namespace paddock::test
