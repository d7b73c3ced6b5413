// The broker's configuration: file keys, flags' shapes, and the local-execution rule.

#include "broker/config/broker_config.h"
#include "broker/config/config_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

namespace paddock::broker_config {
namespace {

class BrokerConfigTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = std::filesystem::temp_directory_path() / ("paddock-config-test-" + std::to_string(::getpid()));
        std::filesystem::create_directories(m_dir);
    }
    void TearDown() override { std::filesystem::remove_all(m_dir); }

    std::filesystem::path write(const std::string &text)
    {
        const auto path = m_dir / "broker.toml";
        std::ofstream(path) << text;
        return path;
    }

    std::filesystem::path m_dir;
};

TEST_F(BrokerConfigTest, EmbeddedDefaultIsOneLocalPoolWithLocalExecution)
{
    const BrokerConfig config = defaultBrokerConfig();
    ASSERT_EQ(config.pools.size(), 1u);
    EXPECT_EQ(config.pools[0].endpoint, "127.0.0.1:7701");
    EXPECT_TRUE(config.allowLocalExecution);
    EXPECT_TRUE(validateBrokerConfig(config).has_value());
}

TEST_F(BrokerConfigTest, FileSetsEveryKeyAndResolvesRelativePaths)
{
    auto config = loadBrokerConfig(write(R"(
data_dir = "data"
socket = "/run/x/broker.sock"
workers = 8
lease_ms = 5000
default_tier = "standard"
allow_local_execution = true
log_level = "debug"
[[pool]]
name = "east"
endpoint = "10.1.2.3:7701"
)"),
                                   defaultBrokerConfig());
    ASSERT_TRUE(config) << config.error().message;
    EXPECT_EQ(config->dataDir, m_dir / "data");
    EXPECT_EQ(config->socketPath, "/run/x/broker.sock");
    EXPECT_EQ(config->workers, 8);
    EXPECT_EQ(config->leaseMs, 5000);
    EXPECT_EQ(config->defaultTier, "standard");
    EXPECT_TRUE(config->allowLocalExecution);
    ASSERT_EQ(config->pools.size(), 1u);
    EXPECT_EQ(config->pools[0].name, "east");
}

TEST_F(BrokerConfigTest, AFileAsksForLocalExecutionExplicitly)
{
    auto config = loadBrokerConfig(write("[[pool]]\nname = \"here\"\nendpoint = \"127.0.0.1:7701\"\n"),
                                   defaultBrokerConfig());
    ASSERT_TRUE(config) << config.error().message;
    EXPECT_FALSE(config->allowLocalExecution);
    const auto valid = validateBrokerConfig(*config);
    ASSERT_FALSE(valid);
    EXPECT_EQ(valid.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(valid.error().message.find("allow_local_execution"), std::string::npos) << valid.error().message;
}

TEST_F(BrokerConfigTest, MistakesNameTheFileLineAndKey)
{
    auto unknown = loadBrokerConfig(write("workers = 2\nwokers = 3\n"), defaultBrokerConfig());
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("broker.toml:2"), std::string::npos) << unknown.error().message;
    EXPECT_NE(unknown.error().message.find("wokers"), std::string::npos);

    auto wrongType = loadBrokerConfig(write("workers = \"many\"\n"), defaultBrokerConfig());
    ASSERT_FALSE(wrongType);
    EXPECT_NE(wrongType.error().message.find("workers must be an integer"), std::string::npos);

    auto syntax = loadBrokerConfig(write("workers = = 2\n"), defaultBrokerConfig());
    ASSERT_FALSE(syntax);
    EXPECT_NE(syntax.error().message.find("TOML"), std::string::npos) << syntax.error().message;

    auto pool = loadBrokerConfig(write("[[pool]]\nname = \"x\"\n"), defaultBrokerConfig());
    ASSERT_FALSE(pool);
    EXPECT_NE(pool.error().message.find("endpoint"), std::string::npos);
}

TEST_F(BrokerConfigTest, NoPoolsIsRefused)
{
    auto config = loadBrokerConfig(write("workers = 2\n"), defaultBrokerConfig());
    ASSERT_TRUE(config);
    const auto valid = validateBrokerConfig(*config);
    ASSERT_FALSE(valid);
    EXPECT_NE(valid.error().message.find("--pool"), std::string::npos);
}

TEST_F(BrokerConfigTest, CheckpointRetentionIsHoursAndZeroKeepsForever)
{
    EXPECT_EQ(defaultBrokerConfig().checkpoints.retentionHours, 168);
    const std::string pool = "[[pool]]\nname = \"p\"\nendpoint = \"10.0.0.1:7701\"\n";
    auto day = loadBrokerConfig(write(pool + "[checkpoints]\nretention_hours = 24\n"), defaultBrokerConfig());
    ASSERT_TRUE(day) << day.error().message;
    EXPECT_EQ(day->checkpoints.retentionHours, 24);
    auto forever = loadBrokerConfig(write(pool + "[checkpoints]\nretention_hours = 0\n"), defaultBrokerConfig());
    ASSERT_TRUE(forever) << forever.error().message;
    EXPECT_EQ(forever->checkpoints.retentionHours, 0);
    auto negative = loadBrokerConfig(write(pool + "[checkpoints]\nretention_hours = -1\n"), defaultBrokerConfig());
    ASSERT_FALSE(negative);
    EXPECT_NE(negative.error().message.find("broker.toml:5: retention_hours must be an integer >= 0"), std::string::npos)
        << negative.error().message;
}

TEST_F(BrokerConfigTest, MetricsAreOffByDefaultAndOffLoopbackNeedTls)
{
    EXPECT_FALSE(defaultBrokerConfig().metrics.enabled());
    const std::string pool = "[[pool]]\nname = \"p\"\nendpoint = \"10.0.0.1:7701\"\n";
    auto loopback = loadBrokerConfig(write(pool + "[metrics]\nlisten = \"127.0.0.1:9464\"\n"), defaultBrokerConfig());
    ASSERT_TRUE(loopback) << loopback.error().message;
    EXPECT_TRUE(validateBrokerConfig(*loopback).has_value());
    EXPECT_EQ(loopback->metrics.listen, "127.0.0.1:9464");
    EXPECT_FALSE(loopback->metrics.tls());

    auto tls = loadBrokerConfig(write(pool + "[metrics]\nlisten = \"0.0.0.0:9464\"\ntls_cert = \"m.pem\"\ntls_key = \"m.key\"\n"),
                                defaultBrokerConfig());
    ASSERT_TRUE(tls) << tls.error().message;
    EXPECT_TRUE(validateBrokerConfig(*tls).has_value());
    EXPECT_EQ(tls->metrics.tlsCert, m_dir / "m.pem");   // relative to the file

    auto open = loadBrokerConfig(write(pool + "[metrics]\nlisten = \"0.0.0.0:9464\"\n"), defaultBrokerConfig());
    ASSERT_TRUE(open) << open.error().message;
    auto refused = validateBrokerConfig(*open);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("broker.toml:4: [metrics] listen = \"0.0.0.0:9464\" is not a loopback address"),
              std::string::npos) << refused.error().message;
    EXPECT_NE(refused.error().message.find("set tls_cert and tls_key in [metrics]"), std::string::npos)
        << refused.error().message;

    auto halfTls = loadBrokerConfig(write(pool + "[metrics]\nlisten = \"127.0.0.1:9464\"\ntls_cert = \"m.pem\"\n"),
                                    defaultBrokerConfig());
    ASSERT_TRUE(halfTls);
    EXPECT_FALSE(validateBrokerConfig(*halfTls));
    auto unknown = loadBrokerConfig(write(pool + "[metrics]\nport = 9464\n"), defaultBrokerConfig());
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("broker.toml:5: unknown key 'port' in [metrics]"), std::string::npos)
        << unknown.error().message;
}

TEST(PoolFlag, ParsesNameAndEndpoint)
{
    auto pool = parsePoolFlag("east=10.0.0.5:7701");
    ASSERT_TRUE(pool);
    EXPECT_EQ(pool->name, "east");
    EXPECT_EQ(pool->endpoint, "10.0.0.5:7701");
    EXPECT_FALSE(parsePoolFlag("east"));
    EXPECT_FALSE(parsePoolFlag("=1.2.3.4:5"));
    EXPECT_FALSE(parsePoolFlag("east=host-without-port"));
}

TEST(LocalEndpoint, LoopbackAndThisHostAreLocal)
{
    EXPECT_TRUE(isLocalEndpoint("127.0.0.1:7701"));
    EXPECT_TRUE(isLocalEndpoint("127.3.4.5:7701"));
    EXPECT_TRUE(isLocalEndpoint("localhost:7701"));
    EXPECT_TRUE(isLocalEndpoint("[::1]:7701"));
    EXPECT_FALSE(isLocalEndpoint("10.0.0.5:7701"));
    EXPECT_FALSE(isLocalEndpoint("pool-east.example:7701"));
}

TEST(LocalEndpoint, UnixSocketsUnspecifiedAndOwnAddressesAreLocal)
{
    EXPECT_TRUE(isLocalEndpoint("unix:/run/paddock/pool.sock"));
    EXPECT_TRUE(isLocalEndpoint("0.0.0.0:7701"));
    EXPECT_TRUE(isLocalEndpoint("[::ffff:127.0.0.1]:7701"));
    EXPECT_TRUE(isLocalEndpoint("dns:///127.0.0.1:7701"));
    // Whatever this host's own addresses are, each one is local.
    ifaddrs *own = nullptr;
    ASSERT_EQ(getifaddrs(&own), 0);
    int checked = 0;
    for (ifaddrs *ifa = own; ifa; ifa = ifa->ifa_next) {
        if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET)
            continue;
        char text[INET_ADDRSTRLEN] = {};
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in *>(ifa->ifa_addr)->sin_addr, text, sizeof text);
        EXPECT_TRUE(isLocalEndpoint(std::string(text) + ":7701")) << text;
        ++checked;
    }
    freeifaddrs(own);
    EXPECT_GT(checked, 0);
}

TEST_F(BrokerConfigTest, PoolsTakeTlsAndTokenFilesRelativeToTheConfig)
{
    auto config = loadBrokerConfig(write(R"(
pool_health_interval_ms = 250
pool_lost_after_ms = 3000
debug_shell_idle_timeout_ms = 45000
[[pool]]
name = "east"
endpoint = "10.250.0.2:7701"
tls_ca = "pki/ca.pem"
tls_cert = "pki/broker.pem"
tls_key = "pki/broker.key"
tls_server_name = "east.pools.example"
token_file = "east.token"
)"), defaultBrokerConfig());
    ASSERT_TRUE(config) << config.error().message;
    EXPECT_EQ(config->debugShellIdleTimeoutMs, 45000);
    EXPECT_EQ(defaultBrokerConfig().debugShellIdleTimeoutMs, 600000);
    ASSERT_EQ(config->pools.size(), 1u);
    const PoolEndpoint &pool = config->pools[0];
    EXPECT_EQ(pool.tlsCa, m_dir / "pki/ca.pem");
    EXPECT_EQ(pool.tlsCert, m_dir / "pki/broker.pem");
    EXPECT_EQ(pool.tlsKey, m_dir / "pki/broker.key");
    EXPECT_EQ(pool.tlsServerName, "east.pools.example");
    EXPECT_EQ(pool.tokenFile, m_dir / "east.token");
    EXPECT_EQ(config->poolHealthIntervalMs, 250);
    EXPECT_EQ(config->poolLostAfterMs, 3000);

    // The files are read when the broker connects; a missing one names the pool, key and fix.
    auto missing = loadPoolConnection(pool);
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("pool 'east': cannot read tls_ca"), std::string::npos) << missing.error().message;

    std::filesystem::create_directories(m_dir / "pki");
    std::ofstream(m_dir / "pki/ca.pem") << "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n";
    std::ofstream(m_dir / "pki/broker.pem") << "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n";
    std::ofstream(m_dir / "pki/broker.key") << "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n";
    std::ofstream(m_dir / "east.token") << "tok-123\n";
    auto connection = loadPoolConnection(pool);
    ASSERT_TRUE(connection) << connection.error().message;
    EXPECT_EQ(connection->token, "tok-123") << "one line, without its newline";
    EXPECT_EQ(connection->serverName, "east.pools.example");
    EXPECT_FALSE(connection->caPem.empty());

    std::ofstream(m_dir / "east.token") << "two words\n";
    auto bad = loadPoolConnection(pool);
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().message.find("two words"), std::string::npos) << "a token is never echoed";
}

TEST_F(BrokerConfigTest, PoolKeyMistakesAreNamed)
{
    auto onlyCert = loadBrokerConfig(write(R"(
[[pool]]
name = "east"
endpoint = "10.250.0.2:7701"
tls_ca = "ca.pem"
tls_cert = "broker.pem"
)"), defaultBrokerConfig());
    ASSERT_FALSE(onlyCert);
    EXPECT_NE(onlyCert.error().message.find("only one of tls_cert and tls_key"), std::string::npos);

    auto unknown = loadBrokerConfig(write(R"(
[[pool]]
name = "east"
endpoint = "10.250.0.2:7701"
token = "inline-token"
)"), defaultBrokerConfig());
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("unknown key 'token'"), std::string::npos) << unknown.error().message;
    EXPECT_NE(unknown.error().message.find("token_file"), std::string::npos);

    BrokerConfig twice = defaultBrokerConfig();
    twice.pools.push_back(twice.pools[0]);
    EXPECT_FALSE(validateBrokerConfig(twice));

    BrokerConfig unixPool = defaultBrokerConfig();
    unixPool.allowLocalExecution = false;
    unixPool.pools = {{"sock", "unix:/run/paddock/pool.sock"}};
    auto refused = validateBrokerConfig(unixPool);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("allow_local_execution = true"), std::string::npos);
}

// The loader reads on after a problem: one run names each, with its line, and keeps what was good.
TEST_F(BrokerConfigTest, EveryProblemIsNamedInOneRun)
{
    const auto file = write("workers = 0\n"                        // 1: below 1
                            "wokers = 3\n"                         // 2: unknown
                            "lease_ms = 5000\n"                    // 3: fine
                            "log_level = \"loud\"\n"             // 4: not a level
                            "[[pool]]\n"                           // 5: no endpoint
                            "name = \"a\"\n"
                            "[[pool]]\n"                           // 7: a cert without its key or a CA: two
                            "name = \"b\"\n"
                            "endpoint = \"192.0.2.1:7701\"\n"
                            "tls_cert = \"c.pem\"\n"
                            "[[principal]]\n"                      // 11
                            "name = \"p\"\n"
                            "role = \"boss\"\n"                  // 13: not a role
                            "[models.openai]\n"
                            "timeout_ms = 0\n"                     // 15: below 1
                            "[prices.models.x]\n"
                            "input = 1.0\n");                      // 17: unknown
    const auto at = [&](int n) { return file.string() + ":" + std::to_string(n); };
    ConfigProblems problems;
    const BrokerConfig config = loadBrokerConfig(file, defaultBrokerConfig(), problems);
    std::set<int> lines;
    const std::regex line(std::regex_replace(file.string(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)")
                          + ":([0-9]+): ");
    for (const auto &problem : problems.all()) {
        std::smatch match;
        ASSERT_TRUE(std::regex_search(problem.message, match, line)) << problem.message;
        lines.insert(std::stoi(match[1]));
    }
    EXPECT_EQ(lines, (std::set<int>{1, 2, 4, 5, 7, 13, 15, 17})) << problems.joined().message;
    EXPECT_EQ(problems.size(), 9u) << problems.joined().message;
    EXPECT_NE(problems.joined().message.find("models.openai.timeout_ms"), std::string::npos);
    EXPECT_NE(problems.joined().message.find(at(17) + ": unknown key 'input'"), std::string::npos);
    EXPECT_EQ(config.leaseMs, 5000);
    ASSERT_EQ(config.pools.size(), 1u);
    EXPECT_EQ(config.pools[0].name, "b");

    // The Result form joins them, one a line, with the first one's code.
    auto joined = loadBrokerConfig(file, defaultBrokerConfig());
    ASSERT_FALSE(joined);
    EXPECT_EQ(std::count(joined.error().message.begin(), joined.error().message.end(), '\n'), 8);
}

// --check-config's checks beyond the keys: the files a config names, and the policy file's own
// problems with their lines.
TEST_F(BrokerConfigTest, CheckNamesMissingFilesAndPolicyProblemsWithTheirLines)
{
    std::ofstream(m_dir / "policy.toml") << "[review]\nexpiry_seconds = 0\n[[tier_rule]]\nagent = \"x\"\n[budgets]\n";
    const auto file = write("policy_file = \"policy.toml\"\n"
                            "[[pool]]\nname = \"east\"\nendpoint = \"192.0.2.1:7701\"\ntls_ca = \"ca.pem\"\n"
                            "[models]\nplaybook_dir = \"no-playbooks\"\n");
    ConfigProblems loading;
    const BrokerConfig config = loadBrokerConfig(file, defaultBrokerConfig(), loading);
    ASSERT_TRUE(loading.empty()) << loading.joined().message;
    ConfigProblems problems;
    const std::string summary = checkBrokerConfig(config, problems);
    const std::string all = problems.joined().message;
    const std::string policy = (m_dir / "policy.toml").string();
    EXPECT_NE(all.find(file.string() + ":2: pool 'east': cannot read tls_ca"), std::string::npos) << all;
    EXPECT_NE(all.find("no-playbooks does not exist"), std::string::npos) << all;
    // An unknown table stops the policy file from loading: it is the one policy problem named.
    EXPECT_NE(all.find(policy + ":5: unknown table 'budgets'"), std::string::npos) << all;
    EXPECT_EQ(problems.size(), 3u) << all;

    // Without the unknown table the policy's own problems are each named.
    std::ofstream(m_dir / "policy.toml") << "[review]\nexpiry_seconds = 0\n[[tier_rule]]\nagent = \"x\"\n";
    ConfigProblems again;
    checkBrokerConfig(config, again);
    const std::string second = again.joined().message;
    EXPECT_NE(second.find(policy + ":2: review.expiry_seconds must be an integer >= 1"), std::string::npos) << second;
    EXPECT_NE(second.find(policy + ":3: [[tier_rule]] 'rule 1' gives no tier"), std::string::npos) << second;
    EXPECT_EQ(again.size(), 4u) << second;

    // A missing policy file names the line of policy_file.
    std::filesystem::remove(m_dir / "policy.toml");
    ConfigProblems missing;
    checkBrokerConfig(config, missing);
    EXPECT_NE(missing.joined().message.find(file.string() + ":1: policy file"), std::string::npos)
        << missing.joined().message;
}

TEST_F(BrokerConfigTest, CheckOfACleanConfigSummarisesIt)
{
    const auto file = write("allow_local_execution = true\n"
                            "[[pool]]\nname = \"local\"\nendpoint = \"127.0.0.1:7701\"\n");
    BrokerConfig base = defaultBrokerConfig();
    base.dataDir = m_dir / "data";
    base.socketPath = m_dir / "run" / "broker.sock";
    ConfigProblems problems;
    const BrokerConfig config = loadBrokerConfig(file, base, problems);
    const std::string summary = checkBrokerConfig(config, problems);
    EXPECT_TRUE(problems.empty()) << problems.joined().message;
    EXPECT_NE(summary.find("1 pool: local at 127.0.0.1:7701 (plaintext, local execution)"), std::string::npos) << summary;
    EXPECT_NE(summary.find("data dir " + (m_dir / "data").string()), std::string::npos) << summary;
    EXPECT_FALSE(std::filesystem::exists(m_dir / "data")) << "a check creates nothing";
}

} // namespace
} // namespace paddock::broker_config
