#pragma once
// A real SandboxPool, started, in a temporary state directory of its own, for the tests that run
// real sandboxes tier by tier (pool_runtime_isolation_test, pool_host_isolation_test). The
// directory is 0711: a root pool's sandboxes are host uids of their own, which pass through it to
// their workspaces (the pool refuses a state_dir they cannot reach). The pool, its cgroups and the
// directory go with the object. Threads: the test's main thread.

#include "pool/core/sandbox_pool.h"
#include "tests/support/pool_cgroups.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <sys/stat.h>

namespace paddock::test {

class StartedPool {
public:
    // config's stateDir is set to <dir>/state. A pool that cannot be created aborts the test
    // binary with the pool's message (a fixture's constructor cannot fail a test).
    StartedPool(const std::string &prefix, pool::PoolConfig config)
    {
        std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
        if (!::mkdtemp(tmpl.data()))
            std::abort();
        ::chmod(tmpl.c_str(), 0711);
        m_dir = tmpl;
        config.stateDir = m_dir / "state";
        auto created = pool::SandboxPool::create(std::move(config));
        if (!created) {
            std::fprintf(stderr, "cannot create the pool: %s\n", created.error().message.c_str());
            std::abort();
        }
        m_pool = std::move(*created);
        m_pool->start();
    }
    ~StartedPool()
    {
        endPoolAndItsCgroups(m_pool);
        std::error_code ec;
        std::filesystem::remove_all(m_dir, ec);
    }
    StartedPool(const StartedPool &) = delete;
    StartedPool &operator=(const StartedPool &) = delete;

    pool::SandboxPool &pool() { return *m_pool; }
    // The host directory of a sandbox (its workspace is below it).
    std::filesystem::path sandboxDir(const std::string &id) const { return m_dir / "state" / "sandboxes" / id; }

private:
    std::filesystem::path m_dir;
    std::unique_ptr<pool::SandboxPool> m_pool;
};

} // namespace paddock::test
