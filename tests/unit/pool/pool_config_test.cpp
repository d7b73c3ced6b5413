// pool.toml's loader names every problem with its line, and --check-config's checks beyond the keys
// (runtimes on PATH, the init, directories) without creating anything.

#include "pool/core/pool_check.h"
#include "pool/core/pool_config.h"
#include "pool/runtimes/minimal_etc.h"
#include "pool/runtimes/sandbox_identity.h"

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

TEST_F(PoolConfigTest, SandboxIdentityAndEtcExtraAreReadAndBadValuesNamed)
{
    const auto file = write("etc_extra = [\"/etc/hostname\", 7, \"relative/path\", \"/var/lib/x\"]\n"   // 1
                            "[sandbox_identity]\n"                                                        // 2
                            "first_id = 2000000000\n"                                                     // 3
                            "count = 131072\n"                                                            // 4
                            "ids_per_sandbox = 0\n"                                                       // 5
                            "colour = \"blue\"\n");                                                       // 6
    ConfigProblems problems;
    const PoolConfig config = loadPoolConfig(file, true, problems);
    const std::string all = problems.joined().message;
    EXPECT_EQ(config.identity.firstId, 2000000000u);
    EXPECT_EQ(config.identity.count, 131072u);
    EXPECT_EQ(config.identity.idsPerSandbox, 65536u) << "a refused value keeps the default";
    EXPECT_EQ(config.etcExtra, std::vector<std::string>{"/etc/hostname"});
    EXPECT_NE(all.find(at(1) + "every 'etc_extra' entry must be a string"), std::string::npos) << all;
    EXPECT_NE(all.find(at(1) + "etc_extra: 'relative/path' is not a path under /etc"), std::string::npos) << all;
    EXPECT_NE(all.find(at(1) + "etc_extra: '/var/lib/x' is not a path under /etc"), std::string::npos) << all;
    EXPECT_NE(all.find(at(5) + "'sandbox_identity.ids_per_sandbox' must be an integer between 1"), std::string::npos) << all;
    EXPECT_NE(all.find(at(6) + "unknown key 'colour' in [sandbox_identity]"), std::string::npos) << all;
}

TEST_F(PoolConfigTest, AFloatWhereAnIntegerGoesIsRefusedNotCast)
{
    // Found by fuzz_pool_config: 10e24 was cast to int64_t (undefined behaviour); 2.5 was cut to 2.
    const auto file = write("[sandbox_identity]\n"   // 1
                            "count = 10e24\n"        // 2
                            "ids_per_sandbox = 2.5\n");   // 3
    ConfigProblems problems;
    const PoolConfig config = loadPoolConfig(file, true, problems);
    const std::string all = problems.joined().message;
    EXPECT_EQ(config.identity.idsPerSandbox, 65536u) << "a refused value keeps the default";
    EXPECT_NE(all.find(at(2) + "'sandbox_identity.count' must be an integer between"), std::string::npos) << all;
    EXPECT_NE(all.find(at(3) + "'sandbox_identity.ids_per_sandbox' must be an integer between"), std::string::npos) << all;
}

TEST_F(PoolConfigTest, AnIdentityRangeOverRealUsersOrTooSmallIsRefusedWithTheFix)
{
    // Every host has root and daemon (uid 1) or the like: a range from 1 holds real users.
    IdentityRange overUsers;
    overUsers.firstId = 1;
    overUsers.count = 65536;
    auto problems = checkIdentityRange(overUsers, 1);
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(problems[0].find("[sandbox_identity] the range 1-65536 holds user '"), std::string::npos) << problems[0];
    EXPECT_NE(problems[0].find("move first_id past"), std::string::npos) << problems[0];

    IdentityRange small;   // the default start, room for 2 sandboxes
    small.count = 2 * 65536;
    problems = checkIdentityRange(small, 32);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("holds 2 sandboxes of ids_per_sandbox = 65536, but the tiers' max_count add up to 32; "
                               "raise count to at least 2097152"),
              std::string::npos)
        << problems[0];
    EXPECT_TRUE(checkIdentityRange(IdentityRange{}, 1024).empty()) << "the documented default is clear on this host";

    IdentityRange root;
    root.firstId = 0;
    EXPECT_NE(checkIdentityRange(root, 1).at(0).find("first_id is 0, host root"), std::string::npos);
}

TEST_F(PoolConfigTest, EtcExtraMissingIsAnErrorAndUnreadableAWarning)
{
    const EtcExtraCheck missing = checkEtcExtra("/etc/paddock-no-such-file-" + std::to_string(::getpid()));
    EXPECT_NE(missing.error.find("does not exist on this host; create it or remove it from etc_extra"), std::string::npos)
        << missing.error;
    EXPECT_TRUE(checkEtcExtra("/etc/hostname").error.empty());
    EXPECT_TRUE(checkEtcExtra("/etc/hostname").warning.empty());
    if (::geteuid() != 0)
        GTEST_SKIP() << "the unreadable case needs a root-owned 0600 file under /etc (root only)";
    const fs::path secret = "/etc/paddock-etc-extra-test-" + std::to_string(::getpid());
    std::ofstream(secret) << "x";
    fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write);
    const EtcExtraCheck unreadable = checkEtcExtra(secret.string());
    fs::remove(secret);
    EXPECT_TRUE(unreadable.error.empty()) << unreadable.error;
    EXPECT_NE(unreadable.warning.find("is not world-readable (mode 0600), yet every sandbox of this pool will read its copy"),
              std::string::npos)
        << unreadable.warning;
}

TEST_F(PoolConfigTest, CheckConfigRefusesABadRangeAndAMissingEtcPathAndSaysWhatSandboxesAre)
{
    PoolConfig config;
    config.stateDir = m_dir / "state";
    config.initPath = m_dir / "no-init";
    config.identity.firstId = 1;
    config.etcExtra = {"/etc/paddock-missing-" + std::to_string(::getpid())};
    applyPoolDefaults(config);
    ConfigProblems problems;
    const std::string summary = checkPoolConfig(config, problems);
    const std::string all = problems.joined().message;
    EXPECT_NE(all.find("etc_extra: /etc/paddock-missing-"), std::string::npos) << all;
    if (::geteuid() == 0) {
        EXPECT_NE(all.find("[sandbox_identity] the range 1-"), std::string::npos) << all;
        EXPECT_NE(summary.find("sandbox identity: uids and gids 1-"), std::string::npos) << summary;
    } else {
        EXPECT_NE(summary.find("sandbox identity: this user (uid " + std::to_string(::geteuid()) + ", not root)"),
                  std::string::npos)
            << summary;
    }
}

} // namespace
} // namespace paddock::pool
