#pragma once
// A temporary directory for a pool's state, for the pool tests (an in-process pool's through
// started_pool.h, a paddock-pool process's, a bare sandbox's). It is 0711: a root pool's
// sandboxes are host uids of their own, which pass through it to their workspaces (the pool
// refuses a state_dir they cannot reach). It goes, with everything below it, with the object.
// Threads: the test's main thread.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/stat.h>

namespace paddock::test {

// /tmp/<prefix>-XXXXXX, 0711, removed with everything below it when the object goes.
class PoolTempDir {
public:
    PoolTempDir() = default;
    ~PoolTempDir()
    {
        std::error_code ec;
        if (!m_path.empty())
            std::filesystem::remove_all(m_path, ec);
    }
    PoolTempDir(const PoolTempDir &) = delete;
    PoolTempDir &operator=(const PoolTempDir &) = delete;

    // A fatal failure leaves path() empty: call it inside ASSERT_NO_FATAL_FAILURE.
    void make(const std::string &prefix)
    {
        std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
        ::chmod(tmpl.c_str(), 0711);   // sandbox uids pass through to their workspaces
        m_path = tmpl;
    }

    const std::filesystem::path &path() const { return m_path; }

private:
    std::filesystem::path m_path;
};

} // namespace paddock::test
