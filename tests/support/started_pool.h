#pragma once
// A real SandboxPool in a temporary state directory of its own, for every test that runs real
// sandboxes in its own process (pool_sandbox_test, pool_cgroup_test, pool_post_mortem_test,
// pool_runtime_isolation_test, pool_host_isolation_test). The directory is a PoolTempDir (0711;
// pool_temp_dir.h says why). The pool, and the directory after it, go with the object; the
// pool's cgroup directories too when its id is the test's alone.
//   testPoolConfig a PoolConfig of these tiers with the test binary's sandbox init
//   InProcessPool  the directory and a pool created in it; the test starts it
//   StartedPool    an InProcessPool created and started at once, for a suite's harness
// Needs PADDOCK_SANDBOX_INIT (the test target's compile definition). Threads: the test's main
// thread.

#include "pool/core/sandbox_pool.h"
#include "tests/support/pool_cgroups.h"
#include "tests/support/pool_temp_dir.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace paddock::test {

// These tiers, with the sandbox init the test binary was built with. An empty poolId keeps the
// default (the host name); one that names the test's pid lets PoolCgroupDirs::Remove clear the
// pool's cgroup directories at the end.
inline pool::PoolConfig testPoolConfig(std::vector<pool::TierConfig> tiers, std::string poolId = {})
{
    pool::PoolConfig config;
    config.initPath = PADDOCK_SANDBOX_INIT;
    config.poolId = std::move(poolId);
    config.tiers = std::move(tiers);
    return config;
}

// Whether the pool's cgroup directories go with it: only for a pool id that is the test's alone
// (pools with the same id share them; pool_cgroups.h).
enum class PoolCgroupDirs { Keep, Remove };

class InProcessPool {
public:
    explicit InProcessPool(PoolCgroupDirs cgroupDirs = PoolCgroupDirs::Keep) : m_cgroupDirs(cgroupDirs) {}
    ~InProcessPool() { end(); }
    InProcessPool(const InProcessPool &) = delete;
    InProcessPool &operator=(const InProcessPool &) = delete;

    // Makes the directory and creates (does not start) a pool from config, whose stateDir is set
    // to <dir>/state. A fatal failure leaves created() false: call it inside
    // ASSERT_NO_FATAL_FAILURE.
    void create(const std::string &prefix, pool::PoolConfig config)
    {
        ASSERT_NO_FATAL_FAILURE(m_dir.make(prefix));
        config.stateDir = m_dir.path() / "state";
        auto created = pool::SandboxPool::create(std::move(config));
        if (!created)
            m_problem = created.error().message;
        ASSERT_TRUE(created) << created.error().message;
        m_pool = std::move(*created);
    }
    // For a suite's harness, whose constructor cannot fail a test: a pool that cannot be created
    // aborts the test binary with the pool's message.
    void createOrAbort(const std::string &prefix, pool::PoolConfig config)
    {
        create(prefix, std::move(config));
        if (!m_pool) {
            std::fprintf(stderr, "cannot create the pool: %s\n", m_problem.c_str());
            std::abort();
        }
    }

    bool created() const { return m_pool != nullptr; }
    pool::SandboxPool &pool() { return *m_pool; }
    // Shuts the pool down, keeping the object (and the directory) until the end: a PoolService
    // over it stops its workers after this.
    void shutdown()
    {
        if (m_pool)
            m_pool->shutdown();
    }
    // The pool goes (with its cgroup directories when they are the test's alone); the directory
    // goes with this object.
    void end()
    {
        if (m_cgroupDirs == PoolCgroupDirs::Remove)
            endPoolAndItsCgroups(m_pool);
        else
            m_pool.reset();
    }

    const std::filesystem::path &dir() const { return m_dir.path(); }
    // The host directory of a sandbox (its workspace is below it).
    std::filesystem::path sandboxDir(const std::string &id) const { return m_dir.path() / "state" / "sandboxes" / id; }

private:
    PoolCgroupDirs m_cgroupDirs;
    PoolTempDir m_dir;   // before the pool: it goes after it
    std::unique_ptr<pool::SandboxPool> m_pool;
    std::string m_problem;
};

// Created and started at once, or the test binary aborts; for a pool whose id is the test's
// alone (its cgroup directories go with it).
class StartedPool {
public:
    StartedPool(const std::string &prefix, pool::PoolConfig config) : m_inProcess(PoolCgroupDirs::Remove)
    {
        m_inProcess.createOrAbort(prefix, std::move(config));
        m_inProcess.pool().start();
    }

    pool::SandboxPool &pool() { return m_inProcess.pool(); }
    std::filesystem::path sandboxDir(const std::string &id) const { return m_inProcess.sandboxDir(id); }

private:
    InProcessPool m_inProcess;
};

} // namespace paddock::test
