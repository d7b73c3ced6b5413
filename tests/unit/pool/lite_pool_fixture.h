#pragma once

// A real SandboxPool with one "lite" bwrap tier in a temporary state directory, for the tests that
// need real sandboxes and cgroups (pool_cgroup_test, pool_post_mortem_test). The test's SetUp
// decides what to skip, then calls createPool and starts the pool; serve() puts a PoolService on
// loopback when the test goes through gRPC. Threads: the test's thread only.

#include "pool/core/sandbox_pool.h"
#include "pool/server/pool_service.h"

#include "paddock/v1/pool.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <stdlib.h>
#include <sys/stat.h>

namespace paddock {

class LitePoolTest : public ::testing::Test {
protected:
    // Creates (does not start) a pool from config, whose stateDir and initPath it sets. A fatal
    // failure leaves m_pool null: call it inside ASSERT_NO_FATAL_FAILURE.
    void createPool(pool::PoolConfig config)
    {
        char tmpl[] = "/tmp/paddock-lite-pool-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        ::chmod(tmpl, 0711);   // sandbox uids pass through to their workspaces
        m_dir = tmpl;
        config.stateDir = m_dir / "state";
        config.initPath = PADDOCK_SANDBOX_INIT;
        auto created = pool::SandboxPool::create(std::move(config));
        ASSERT_TRUE(created) << created.error().message;
        m_pool = std::move(*created);
    }

    void TearDown() override
    {
        if (m_server)
            m_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
        if (m_pool)
            m_pool->shutdown();
        if (m_service)
            m_service->stop();
        std::error_code ec;
        if (!m_dir.empty())
            std::filesystem::remove_all(m_dir, ec);
    }

    std::string claim(const std::string &session = "lite-session")
    {
        auto c = m_pool->claim("lite", session, "");
        EXPECT_TRUE(c) << (c ? "" : c.error().message);
        return c ? c->sandboxId : std::string();
    }

    pool::ExecResult run(const std::string &id, std::vector<std::string> argv, int64_t timeoutMs = 120000,
                         std::string *out = nullptr)
    {
        pool::ExecRequest req;
        req.sandboxId = id;
        req.argv = std::move(argv);
        req.timeoutMs = timeoutMs;
        auto r = m_pool->exec(req, [&](int, std::string_view chunk) {
            if (out)
                out->append(chunk);
        });
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        return r ? *r : pool::ExecResult{};
    }

    // A PoolService over m_pool on an ephemeral loopback port, and a stub talking to it.
    std::unique_ptr<v1::PoolService::Stub> serve()
    {
        m_service = std::make_unique<pool::PoolService>(*m_pool);
        grpc::ServerBuilder builder;
        int port = 0;
        builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
        builder.RegisterService(m_service.get());
        m_server = builder.BuildAndStart();
        EXPECT_NE(port, 0);
        return v1::PoolService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
    }

    std::filesystem::path m_dir;
    std::unique_ptr<pool::SandboxPool> m_pool;
    std::unique_ptr<pool::PoolService> m_service;
    std::unique_ptr<grpc::Server> m_server;
};

} // namespace paddock
