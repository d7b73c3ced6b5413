// [otlp] in broker.toml: its keys, headers whose values come from a file or the environment (never
// a credential inline), and the endpoint rules.

#include "broker/config/broker_config.h"
#include "broker/config/config_check.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>

namespace paddock::broker_config {
namespace {

class OtlpConfigTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        std::string pattern = (std::filesystem::temp_directory_path() / "paddock-otlp-config-XXXXXX").string();
        m_dir = ::mkdtemp(pattern.data());
    }
    void TearDown() override { std::filesystem::remove_all(m_dir); }

    std::filesystem::path write(const std::string &name, const std::string &text, mode_t mode = 0600)
    {
        const auto path = m_dir / name;
        std::ofstream(path) << text;
        ::chmod(path.c_str(), mode);
        return path;
    }

    // The problems of a broker.toml with one local pool and `otlp` after it.
    std::string problems(const std::string &otlp)
    {
        ConfigProblems found;
        auto config = loadBrokerConfig(write("broker.toml", "allow_local_execution = true\n[[pool]]\nname = \"a\"\n"
                                                            "endpoint = \"127.0.0.1:7701\"\n" + otlp),
                                       defaultBrokerConfig(), found);
        validateBrokerConfig(config, found);
        std::string out;
        for (const auto &problem : found.all())
            out += problem.message + "\n";
        return out;
    }

    std::filesystem::path m_dir;
};

TEST_F(OtlpConfigTest, OffWithoutTheTable)
{
    EXPECT_FALSE(defaultBrokerConfig().otlp.enabled());
    EXPECT_EQ(problems(""), "");
}

TEST_F(OtlpConfigTest, EveryKeyIsRead)
{
    ConfigProblems found;
    auto config = loadBrokerConfig(write("broker.toml", R"(
[otlp]
endpoint = "https://cloud.langfuse.com/api/public/otel"
headers = { "x-scope-orgid" = "team-a" }
header_files = { Authorization = "langfuse.auth" }
header_env = { "X-Other" = "OTHER_HEADER" }
timeout_ms = 2000
batch_size = 64
interval_ms = 250
max_backoff_ms = 5000
metrics = false
service_name = "paddock-eu"
)"),
                                   defaultBrokerConfig(), found);
    ASSERT_TRUE(found.empty()) << found.joined().message;
    const OtlpConfig &otlp = config.otlp;
    EXPECT_TRUE(otlp.enabled());
    EXPECT_EQ(otlp.endpoint, "https://cloud.langfuse.com/api/public/otel");
    EXPECT_EQ(otlp.headers.at("x-scope-orgid"), "team-a");
    EXPECT_EQ(otlp.headerFiles.at("Authorization"), m_dir / "langfuse.auth") << "relative to broker.toml";
    EXPECT_EQ(otlp.headerEnv.at("X-Other"), "OTHER_HEADER");
    EXPECT_EQ(otlp.timeoutMs, 2000);
    EXPECT_EQ(otlp.batchSize, 64);
    EXPECT_EQ(otlp.intervalMs, 250);
    EXPECT_EQ(otlp.maxBackoffMs, 5000);
    EXPECT_FALSE(otlp.metrics);
    EXPECT_EQ(otlp.serviceName, "paddock-eu");
}

TEST_F(OtlpConfigTest, ACredentialIsNeverInline)
{
    const std::string found = problems("[otlp]\nendpoint = \"http://127.0.0.1:4318\"\n"
                                       "headers = { Authorization = \"Basic cGs6c2s=\" }\n");
    EXPECT_NE(found.find("headers.Authorization in [otlp] looks like a credential"), std::string::npos) << found;
    EXPECT_NE(found.find("header_files"), std::string::npos) << found;
    EXPECT_EQ(found.find("cGs6c2s="), std::string::npos) << "the value is never repeated: " << found;
    EXPECT_NE(problems("[otlp]\nendpoint = \"http://127.0.0.1:4318\"\nheaders = { \"x-api-key\" = \"k\" }\n")
                  .find("looks like a credential"),
              std::string::npos);
    EXPECT_NE(problems("[otlp]\nendpoint = \"https://u:secret@collector.example\"\n").find("USER:PASSWORD@"),
              std::string::npos);
}

TEST_F(OtlpConfigTest, EndpointRules)
{
    EXPECT_NE(problems("[otlp]\nbatch_size = 10\n").find("[otlp] has no endpoint"), std::string::npos);
    EXPECT_NE(problems("[otlp]\nendpoint = \"collector:4318\"\n").find("is not an http:// or https:// URL"),
              std::string::npos);
    EXPECT_NE(problems("[otlp]\nendpoint = \"http://127.0.0.1:4318/v1/traces\"\n").find("without /v1/traces"),
              std::string::npos);
    // Credentials travel over TLS, or stay on this host.
    const std::string plaintext = problems("[otlp]\nendpoint = \"http://collector.example:4318\"\n"
                                           "header_env = { Authorization = \"X\" }\n");
    EXPECT_NE(plaintext.find("in plaintext"), std::string::npos) << plaintext;
    EXPECT_EQ(problems("[otlp]\nendpoint = \"http://127.0.0.1:4318\"\nheader_env = { Authorization = \"X\" }\n"), "");
    EXPECT_EQ(problems("[otlp]\nendpoint = \"https://collector.example\"\nheader_env = { Authorization = \"X\" }\n"), "");
    EXPECT_NE(problems("[otlp]\nendpoint = \"http://127.0.0.1:4318\"\nbatch_size = 0\n").find("batch_size in [otlp]"),
              std::string::npos);
    EXPECT_NE(problems("[otlp]\nendpoint = \"http://127.0.0.1:4318\"\nfrobnicate = 1\n").find("unknown key 'frobnicate'"),
              std::string::npos);
    EXPECT_NE(problems("[otlp]\nendpoint = \"http://127.0.0.1:4318\"\nheader_files = { A = \"f\" }\n"
                       "header_env = { a = \"E\" }\n")
                  .find("more than once"),
              std::string::npos);
}

TEST_F(OtlpConfigTest, HeaderValuesComeFromAPrivateFileOrTheEnvironment)
{
    OtlpConfig config;
    config.endpoint = "http://127.0.0.1:4318";
    config.headers["x-scope-orgid"] = "team-a";
    config.headerFiles["Authorization"] = write("auth", "Basic cGs6c2s=\nsecond line ignored\n", 0644);
    auto headers = otlpHeaders(config);
    ASSERT_FALSE(headers);
    EXPECT_NE(headers.error().message.find("chmod 600"), std::string::npos) << headers.error().message;
    EXPECT_EQ(headers.error().message.find("cGs6c2s="), std::string::npos);

    ::chmod((m_dir / "auth").c_str(), 0600);
    config.headerEnv["X-Token"] = "PADDOCK_OTLP_TEST_TOKEN";
    ::unsetenv("PADDOCK_OTLP_TEST_TOKEN");
    headers = otlpHeaders(config);
    ASSERT_FALSE(headers);
    EXPECT_NE(headers.error().message.find("PADDOCK_OTLP_TEST_TOKEN"), std::string::npos);

    ::setenv("PADDOCK_OTLP_TEST_TOKEN", "t0k3n", 1);
    headers = otlpHeaders(config);
    ASSERT_TRUE(headers) << headers.error().message;
    const std::vector<std::pair<std::string, std::string>> expected{
        {"x-scope-orgid", "team-a"}, {"Authorization", "Basic cGs6c2s="}, {"X-Token", "t0k3n"}};
    EXPECT_EQ(*headers, expected);

    config.headerFiles["Authorization"] = m_dir / "missing";
    headers = otlpHeaders(config);
    ASSERT_FALSE(headers);
    EXPECT_NE(headers.error().message.find("header_files.Authorization"), std::string::npos);
}

TEST_F(OtlpConfigTest, CheckConfigReadsTheHeaderFilesAndSaysWhereSpansGo)
{
    write("auth", "Basic cGs6c2s=\n", 0644);
    ConfigProblems found;
    auto config = loadBrokerConfig(write("broker.toml", "allow_local_execution = true\n[[pool]]\nname = \"a\"\n"
                                                        "endpoint = \"127.0.0.1:7701\"\n[otlp]\n"
                                                        "endpoint = \"http://127.0.0.1:4318\"\n"
                                                        "header_files = { Authorization = \"auth\" }\n"),
                                   defaultBrokerConfig(), found);
    ASSERT_TRUE(found.empty()) << found.joined().message;
    config.dataDir = m_dir / "data";
    config.socketPath = m_dir / "run/broker.sock";
    config.models.playbookDir = m_dir;
    const std::string summary = checkBrokerConfig(config, found);
    EXPECT_NE(summary.find("OTLP export to http://127.0.0.1:4318 (traces, metrics)"), std::string::npos) << summary;
    bool named = false;
    for (const auto &problem : found.all())
        named = named || problem.message.find("chmod 600") != std::string::npos;
    EXPECT_TRUE(named) << found.joined().message;
}

} // namespace
} // namespace paddock::broker_config
