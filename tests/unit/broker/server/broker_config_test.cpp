// The broker's configuration: file keys, flags' shapes, and the local-execution rule.

#include "broker/server/broker_config.h"

#include <gtest/gtest.h>

#include <fstream>

namespace paddock::server {
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

} // namespace
} // namespace paddock::server
