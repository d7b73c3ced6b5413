// [store] in broker.toml (broker/config/store_config.h): a PostgreSQL url whose password comes from
// a file or an environment variable, never from the file itself; SQLite when the table is absent.
// The loader and --check-config name each problem with its fix.

#include "broker/config/broker_config.h"
#include "broker/config/config_check.h"
#include "broker/config/store_config.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

namespace paddock::broker_config {
namespace {

class StoreConfigTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = std::filesystem::temp_directory_path() / ("paddock-store-config-test-" + std::to_string(::getpid()));
        std::filesystem::create_directories(m_dir);
    }
    void TearDown() override { std::filesystem::remove_all(m_dir); }

    std::filesystem::path write(const std::string &name, const std::string &text, mode_t mode = 0600)
    {
        const auto path = m_dir / name;
        std::ofstream(path) << text;
        ::chmod(path.c_str(), mode);
        return path;
    }

    // The file's problems, one message a line ("" when it loads).
    std::string problemsOf(const std::string &toml)
    {
        ConfigProblems problems;
        loadBrokerConfig(write("broker.toml", toml), defaultBrokerConfig(), problems);
        return problems.empty() ? std::string() : problems.joined().message;
    }

    std::filesystem::path m_dir;
};

TEST_F(StoreConfigTest, NoTableIsSqliteInTheDataDirectory)
{
    auto config = loadBrokerConfig(write("broker.toml", "data_dir = \"data\"\n"), defaultBrokerConfig());
    ASSERT_TRUE(config) << config.error().message;
    EXPECT_FALSE(config->store.postgres());
    EXPECT_EQ(describeStore(config->store, config->dataDir), "SQLite at " + (m_dir / "data" / "broker.db").string());
}

TEST_F(StoreConfigTest, AUrlWithAPasswordFileIsAccepted)
{
    write("db.password", "s3cret\n");
    auto config = loadBrokerConfig(write("broker.toml", R"([store]
url = "postgresql://paddock@db.internal:5433/fleet?sslmode=verify-full&sslrootcert=/etc/paddock/db-ca.pem"
password_file = "db.password"
connect_wait_ms = 5000
)"),
                                   defaultBrokerConfig());
    ASSERT_TRUE(config) << config.error().message;
    EXPECT_TRUE(config->store.postgres());
    EXPECT_EQ(config->store.passwordFile, m_dir / "db.password") << "relative to the config file";
    EXPECT_EQ(config->store.connectWaitMs, 5000);
    EXPECT_EQ(describeStore(config->store, config->dataDir),
              "PostgreSQL at paddock@db.internal:5433/fleet (password from " + (m_dir / "db.password").string() + ")");

    auto conninfo = storeConnectionString(config->store);
    ASSERT_TRUE(conninfo) << conninfo.error().message;
    // The url's keys (TLS included) are kept, the password added as libpq takes it.
    EXPECT_NE(conninfo->find("host='db.internal'"), std::string::npos) << *conninfo;
    EXPECT_NE(conninfo->find("sslmode='verify-full'"), std::string::npos) << *conninfo;
    EXPECT_NE(conninfo->find("sslrootcert='/etc/paddock/db-ca.pem'"), std::string::npos) << *conninfo;
    EXPECT_NE(conninfo->find("password='s3cret'"), std::string::npos) << "the first line, without its newline";

    ConfigProblems problems;
    const std::string summary = checkBrokerConfig(*config, problems);
    EXPECT_NE(summary.find("store PostgreSQL at paddock@db.internal:5433/fleet"), std::string::npos) << summary;
    EXPECT_EQ(summary.find("s3cret"), std::string::npos) << summary;
}

TEST_F(StoreConfigTest, AConninfoWithAUnixSocketAndAPasswordFromTheEnvironment)
{
    auto config = loadBrokerConfig(write("broker.toml", R"([store]
url = "host=/run/postgresql dbname=paddock user=broker"
password_env = "PADDOCK_TEST_DB_PASSWORD"
)"),
                                   defaultBrokerConfig());
    ASSERT_TRUE(config) << config.error().message;
    ::unsetenv("PADDOCK_TEST_DB_PASSWORD");
    auto unset = storeConnectionString(config->store);
    ASSERT_FALSE(unset);
    EXPECT_EQ(unset.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(unset.error().message.find("the environment variable PADDOCK_TEST_DB_PASSWORD (password_env in [store]) "
                                         "is not set"),
              std::string::npos)
        << unset.error().message;

    ::setenv("PADDOCK_TEST_DB_PASSWORD", "it's \\ quoted", 1);
    auto conninfo = storeConnectionString(config->store);
    ::unsetenv("PADDOCK_TEST_DB_PASSWORD");
    ASSERT_TRUE(conninfo) << conninfo.error().message;
    EXPECT_NE(conninfo->find("host='/run/postgresql'"), std::string::npos) << *conninfo;
    EXPECT_NE(conninfo->find(R"(password='it\'s \\ quoted')"), std::string::npos) << *conninfo;
}

TEST_F(StoreConfigTest, APasswordInTheUrlIsRefusedWithoutQuotingIt)
{
    for (const std::string url : {"postgresql://paddock:hunter2@db.internal/fleet", "host=db dbname=fleet password=hunter2"}) {
        const auto problems = problemsOf("[store]\nurl = \"" + url + "\"\n");
        EXPECT_NE(problems.find("broker.toml:2: the store url carries a password"), std::string::npos) << problems;
        EXPECT_NE(problems.find("password_file"), std::string::npos) << problems;
        EXPECT_NE(problems.find("password_env"), std::string::npos) << problems;
        EXPECT_EQ(problems.find("hunter2"), std::string::npos) << "the message must not repeat the password: " << problems;
    }
}

TEST_F(StoreConfigTest, BothPasswordSettingsAreRefused)
{
    write("db.password", "x\n");
    const auto problems = problemsOf("[store]\nurl = \"postgresql://paddock@db/fleet\"\npassword_file = \"db.password\"\n"
                                     "password_env = \"DB_PASSWORD\"\n");
    EXPECT_NE(problems.find("broker.toml:1: [store] sets both password_file and password_env"), std::string::npos)
        << problems;
}

TEST_F(StoreConfigTest, AMissingOrOpenPasswordFileIsNamed)
{
    auto config = loadBrokerConfig(write("broker.toml", "[store]\nurl = \"postgresql://paddock@db/fleet\"\n"
                                                        "password_file = \"missing.password\"\n"),
                                   defaultBrokerConfig());
    ASSERT_TRUE(config) << config.error().message;
    auto missing = storeConnectionString(config->store);
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(missing.error().message.find("cannot read the store's password_file " + (m_dir / "missing.password").string()),
              std::string::npos)
        << missing.error().message;

    // --check-config says the same, with the line of [store].
    ConfigProblems problems;
    checkBrokerConfig(*config, problems);
    ASSERT_FALSE(problems.empty());
    EXPECT_NE(problems.joined().message.find("broker.toml:1: cannot read the store's password_file"), std::string::npos)
        << problems.joined().message;

    config->store.passwordFile = write("open.password", "x\n", 0644);
    auto open = storeConnectionString(config->store);
    ASSERT_FALSE(open);
    EXPECT_NE(open.error().message.find("has mode 0644"), std::string::npos) << open.error().message;
    EXPECT_NE(open.error().message.find("chmod 600"), std::string::npos) << open.error().message;

    config->store.passwordFile = write("empty.password", "\n");
    auto empty = storeConnectionString(config->store);
    ASSERT_FALSE(empty);
    EXPECT_NE(empty.error().message.find("is empty"), std::string::npos) << empty.error().message;
}

TEST_F(StoreConfigTest, UnknownKeysWrongTypesAndBadUrlsAreReported)
{
    const auto problems = problemsOf("[store]\nurl = \"mysql://db/fleet\"\npasword_file = \"x\"\nconnect_wait_ms = -1\n");
    EXPECT_NE(problems.find("broker.toml:2: the store url is not a PostgreSQL connection string"), std::string::npos)
        << problems;
    EXPECT_NE(problems.find("broker.toml:3: unknown key 'pasword_file' in [store]; it takes url, password_file, "
                            "password_env and connect_wait_ms"),
              std::string::npos)
        << problems;
    EXPECT_NE(problems.find("broker.toml:4: connect_wait_ms must be an integer >= 0"), std::string::npos) << problems;
    EXPECT_NE(problemsOf("store = \"postgresql://db/fleet\"\n").find("store must be a table"), std::string::npos);
    EXPECT_NE(problemsOf("[store]\nurl = \"postgresql://db/fleet\"\nconnect_wait_ms = 2.5\n")
                  .find("broker.toml:3: connect_wait_ms must be an integer >= 0"),
              std::string::npos);
}

TEST_F(StoreConfigTest, APasswordWithoutAUrlIsAProblemOnceFlagsAreApplied)
{
    write("db.password", "x\n");
    auto config = loadBrokerConfig(write("broker.toml", "[store]\npassword_file = \"db.password\"\n"
                                                        "[[pool]]\nname = \"east\"\nendpoint = \"10.1.2.3:7701\"\n"),
                                   defaultBrokerConfig());
    ASSERT_TRUE(config) << config.error().message;
    auto valid = validateBrokerConfig(*config);
    ASSERT_FALSE(valid);
    EXPECT_NE(valid.error().message.find("[store] sets a password but no url"), std::string::npos)
        << valid.error().message;
    config->store.url = "postgresql://paddock@db/fleet";   // as --store gives it
    EXPECT_TRUE(validateBrokerConfig(*config)) << validateBrokerConfig(*config).error().message;
}

} // namespace
} // namespace paddock::broker_config
