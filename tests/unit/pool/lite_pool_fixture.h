#pragma once

// A real SandboxPool with one "lite" bwrap tier in a temporary state directory, for the tests that
// need real sandboxes and cgroups (pool_cgroup_test, pool_post_mortem_test). The test's SetUp
// decides what to skip, then calls createPool and starts the pool; serve() puts a PoolService on
// loopback when the test goes through gRPC. The pool, the directory and the service are
// tests/support's InProcessPool and ServedPool. Threads: the test's thread only.

#include "pool/core/sandbox_pool.h"
#include "tests/support/served_pool.h"
#include "tests/support/started_pool.h"

#include "paddock/v1/pool.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

namespace paddock {

class LitePoolTest : public ::testing::Test {
protected:
    // Creates (does not start) the pool: one lite bwrap tier, 1 warm of at most 8, one core, and
    // these limits; an empty poolId keeps the default. A fatal failure leaves m_pool null: call
    // it inside ASSERT_NO_FATAL_FAILURE.
    void createPool(int64_t memoryBytes, int64_t pids, std::string poolId = {})
    {
        const pool::TierConfig lite{"lite", "bwrap", 1, 8, 1.0, memoryBytes, pids};
        ASSERT_NO_FATAL_FAILURE(m_inProcess.create("paddock-lite-pool-test", test::testPoolConfig({lite}, std::move(poolId))));
        m_pool = &m_inProcess.pool();
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
        m_served = std::make_unique<test::ServedPool>(m_inProcess);
        m_server = m_served->server();
        EXPECT_NE(m_served->port(), 0);
        return m_served->stub();
    }

    // Ended in reverse: the server, the pool and the service's workers (ServedPool), then the
    // pool's object and its directory (InProcessPool).
    test::InProcessPool m_inProcess;
    pool::SandboxPool *m_pool = nullptr;
    std::unique_ptr<test::ServedPool> m_served;
    grpc::Server *m_server = nullptr;
};

} // namespace paddock
