// pool.toml's loader names every problem with its line, and --check-config's checks beyond the keys
// (runtimes on PATH, the init, directories) without creating anything.

#include "pool/core/pool_check.h"
#include "pool/core/pool_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <unistd.h>

namespace paddock::pool {
namespace {

namespace fs = std::filesystem;

class PoolConfigTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = fs::temp_directory_path() / ("paddock-pool-config-test-" + std::to_string(::getpid()));
        fs::create_directories(m_dir);
    }
    void TearDown() override { fs::remove_all(m_dir); }

    fs::path write(const std::string &text)
    {
        const auto path = m_dir / "pool.toml";
        std::ofstream(path) << text;
        return path;
    }
    std::string at(int line) const { return (m_dir / "pool.toml").string() + ":" + std::to_string(line) + ": "; }

    fs::path m_dir;
};

TEST_F(PoolConfigTest, EveryProblemIsNamedWithItsLineInOneRun)
{
    const auto file = write("listen = \"nowhere\"\n"          // 1
                            "warm = 3\n"                      // 2
                            "log_level = \"loud\"\n"          // 3
                            "drain_timeout_ms = 1000\n"       // 4: fine
                            "[[tier]]\n"                      // 5
                            "name = \"lite\"\n"
                            "runtime = \"docker\"\n"          // 7
                            "memory_mb = 0\n"                 // 8
                            "[[tier]]\n"                      // 9
                            "name = \"net\"\n"
                            "network = \"allowlist\"\n"
                            "allowlist = [\"exa mple\"]\n"    // 12
                            "[[tier]]\n"                      // 13: fine
                            "name = \"ok\"\n"
                            "warm_count = 1\n");
    ConfigProblems problems;
    const PoolConfig config = loadPoolConfig(file, true, problems);
    const std::string all = problems.joined().message;
    for (const auto &[line, what] : std::vector<std::pair<int, std::string>>{
             {1, "'listen' \"nowhere\" is not HOST:PORT"}, {2, "unknown key 'warm'"}, {3, "'log_level'"},
             {7, "'tier.runtime' is \"docker\""}, {8, "'tier.memory_mb'"}, {12, "'tier.allowlist'"}})
        EXPECT_NE(all.find(at(line) + what), std::string::npos) << "line " << line << ": " << all;
    EXPECT_EQ(problems.size(), 6u) << all;
    EXPECT_EQ(config.drainTimeoutMs, 1000);
    ASSERT_EQ(config.tiers.size(), 1u) << "a tier with problems is left out";
    EXPECT_EQ(config.tiers[0].name, "ok");

    auto joined = loadPoolConfig(file, true);
    ASSERT_FALSE(joined);
    EXPECT_EQ(joined.error().message, all);
}

TEST_F(PoolConfigTest, ListenAddressesTakeAPort)
{
    EXPECT_EQ(checkListenAddress("127.0.0.1:7701"), "");
    EXPECT_EQ(checkListenAddress("[::]:0"), "");
    EXPECT_EQ(checkListenAddress("unix:/run/pool.sock"), "");
    EXPECT_NE(checkListenAddress("127.0.0.1"), "");
    EXPECT_NE(checkListenAddress("127.0.0.1:99999"), "");
    EXPECT_NE(checkListenAddress("host:http"), "");
    EXPECT_NE(checkListenAddress("unix:"), "");
}

TEST_F(PoolConfigTest, CheckFindsAMissingRuntimeAndInitAndCreatesNothing)
{
    PoolConfig config;
    config.stateDir = m_dir / "state";
    config.initPath = m_dir / "no-init";
    config.tiers = {TierConfig{}};
    config.tiers[0].name = "gvisor";
    config.tiers[0].runtime = "runsc";
    applyPoolDefaults(config);

    const char *oldPath = std::getenv("PATH");
    const std::string saved = oldPath ? oldPath : "";
    ::setenv("PATH", m_dir.c_str(), 1);   // nothing on PATH: runsc is missing
    ConfigProblems problems;
    const std::string summary = checkPoolConfig(config, problems);
    ::setenv("PATH", saved.c_str(), 1);
    const std::string all = problems.joined().message;
    EXPECT_NE(all.find("tier 'gvisor': runsc (gVisor) is not installed or not on PATH"), std::string::npos) << all;
    EXPECT_NE(all.find("the sandbox init is not at " + (m_dir / "no-init").string()), std::string::npos) << all;
    EXPECT_EQ(problems.size(), 2u) << all;
    EXPECT_NE(summary.find("gvisor (runsc"), std::string::npos) << summary;
    EXPECT_NE(summary.find("cgroups "), std::string::npos) << summary;
    EXPECT_FALSE(fs::exists(m_dir / "state")) << "a check creates nothing";

    // A state directory under a file cannot be created.
    std::ofstream(m_dir / "file") << "x";
    config.stateDir = m_dir / "file" / "state";
    config.snapshotDir = m_dir / "snapshots";
    ConfigProblems blocked;
    checkPoolConfig(config, blocked);
    EXPECT_NE(blocked.joined().message.find("state_dir " + config.stateDir.string()), std::string::npos)
        << blocked.joined().message;
}

} // namespace
} // namespace paddock::pool
