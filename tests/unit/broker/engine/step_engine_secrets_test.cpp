// The step engine with secrets: granted values reach the command's environment and nothing else,
// and every recorded payload is redacted (the real store, the real scripted model, a fake pool).

#include "tests/support/engine_fixture.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <mutex>

namespace paddock::engine {
namespace {

using nlohmann::json;

const std::string kValue = "s3cret-Value-0123";

// Answers every command with output that holds the value of $TOKEN (when it got one) where the
// engine's clipping cuts the output in two.
class EnvPool final : public pool_client::PoolClient {
public:
    std::string name() const override { return "fake"; }
    std::string endpoint() const override { return "fake:0"; }
    Result<pool_client::ClaimedSandbox> claim(const std::string &tier, const std::string &, const std::string &) override
    {
        return pool_client::ClaimedSandbox{"sb-1", tier, "fake", "host", true, 0.1};
    }
    Result<pool_client::ExecOutcome> exec(const pool_client::ExecSpec &spec, const pool_client::OutputSink &) override
    {
        std::lock_guard lock(m_mutex);
        envs.push_back(spec.env);
        pool_client::ExecOutcome outcome;
        const std::string token = spec.env.contains("TOKEN") ? spec.env.at("TOKEN") : std::string("none");
        // The recorded head is kMaxRecordedOutputBytes / 8: put the value across that edge.
        const size_t head = kMaxRecordedOutputBytes / 8;
        outcome.stdoutData = std::string(head - 5, 'a') + token + std::string(kMaxRecordedOutputBytes * 2, 'b');
        outcome.stderrData = "error: bad token " + token + "\n";
        return outcome;
    }
    Result<std::string> readFile(const std::string &, const std::string &, int64_t) override { return "file " + kValue; }
    Status writeFile(const std::string &, const std::string &, const std::string &, uint32_t) override { return {}; }
    Result<std::vector<pool_client::DirEntry>> listDir(const std::string &, const std::string &) override { return {}; }
    Status release(const std::string &) override { return {}; }
    void cancelInFlight() override {}
    Result<pool_client::PoolStatus> status() override
    {
        pool_client::PoolStatus status;
        status.tiers.push_back({"lite", "fake", 1, 0, 4, 1.0, 0});
        return status;
    }

    std::mutex m_mutex;
    std::vector<std::map<std::string, std::string>> envs;
};

constexpr const char *kPlaybook = R"(
goal = "use a token"
[[step]]
tool = "run_command"
command = "use-token"
expect_exit = 0
[[step]]
tool = "read_file"
path = "f.txt"
)";

class StepEngineSecretsTest : public test::EngineFixture {
protected:
    void SetUp() override
    {
        EngineFixture::SetUp();
        auto secrets = secrets::SecretStore::open(m_dir / "config" / "secrets.toml");
        ASSERT_TRUE(secrets) << secrets.error().message;
        m_secrets = std::move(*secrets);
        ASSERT_TRUE(m_secrets->set("TOKEN", kValue));
        ASSERT_TRUE(m_secrets->set("OTHER", "other-value-never-granted"));
        auto pool = std::make_unique<EnvPool>();
        m_pool = pool.get();
        m_pools.add(std::move(pool), false);
    }

    std::string submit(const json &grants) { return EngineFixture::submit(kPlaybook, {{"secrets", grants}}); }

    void runToEnd()
    {
        EngineOptions options;
        options.secrets = m_secrets.get();
        auto engine = makeEngine(options);
        runUntilIdle(engine);
    }

    // The whole log as text, one "kind payload" line an event.
    std::string log(const std::string &id)
    {
        std::string all;
        for (const auto &event : events(id))
            all += event.kind + " " + event.payload + "\n";
        return all;
    }

    std::unique_ptr<secrets::SecretStore> m_secrets;
    EnvPool *m_pool = nullptr;
};

TEST_F(StepEngineSecretsTest, GrantedValuesReachTheCommandOnlyAndTheLogIsRedactedAcrossTheClip)
{
    const std::string id = submit(json::array({"TOKEN"}));
    runToEnd();
    ASSERT_EQ(m_pool->envs.size(), 1u);
    EXPECT_EQ(m_pool->envs[0], (std::map<std::string, std::string>{{"TOKEN", kValue}}));   // not OTHER
    const std::string recorded = log(id);
    EXPECT_EQ(recorded.find(kValue), std::string::npos);
    // Not even the part the clip left in the head, nor the part in the tail.
    EXPECT_EQ(recorded.find(kValue.substr(0, 5)), std::string::npos);
    EXPECT_EQ(recorded.find(kValue.substr(5)), std::string::npos);
    EXPECT_NE(recorded.find("error: bad token [REDACTED:TOKEN]"), std::string::npos);
    EXPECT_NE(recorded.find("\"content\":\"file [REDACTED:TOKEN]\""), std::string::npos) << recorded.substr(0, 2000);
    EXPECT_NE(recorded.find("succeeded"), std::string::npos);
}

TEST_F(StepEngineSecretsTest, ASessionWithoutAGrantGetsNoValueButItsOutputIsStillRedacted)
{
    const std::string id = submit(json::array());
    runToEnd();
    ASSERT_EQ(m_pool->envs.size(), 1u);
    EXPECT_TRUE(m_pool->envs[0].empty());
    // read_file returns the value although it was not granted: redacted all the same.
    EXPECT_EQ(log(id).find(kValue), std::string::npos);
}

TEST_F(StepEngineSecretsTest, ASecretRemovedAfterTheGrantStopsTheCommandWithItsName)
{
    const std::string id = submit(json::array({"TOKEN"}));
    ASSERT_TRUE(m_secrets->remove("TOKEN"));
    runToEnd();
    EXPECT_TRUE(m_pool->envs.empty()) << "the command ran without its secret";
    const std::string recorded = log(id);
    EXPECT_NE(recorded.find("secret(s) TOKEN granted to this session no longer exist"), std::string::npos) << recorded;
    EXPECT_NE(recorded.find("paddockctl secrets set NAME"), std::string::npos);
}

} // namespace
} // namespace paddock::engine
