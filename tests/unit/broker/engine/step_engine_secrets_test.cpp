// The step engine with secrets: granted values reach the command's environment and nothing else,
// and every recorded payload is redacted (the real store, the real scripted model, a fake pool).

#include "tests/support/engine_fixture.h"
#include "tests/support/fake_pool_client.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>

namespace paddock::engine {
namespace {

using nlohmann::json;

const std::string kValue = "s3cret-Value-0123";

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
        auto pool = std::make_unique<test::FakePoolClient>("fake");
        m_pool = pool.get();
        m_pool->setTier("lite", 1, 0, 4);
        // Every command's output holds the value of $TOKEN (when it got one) where the engine's
        // clipping cuts the output in two.
        m_pool->setExecHook([](const pool_client::ExecSpec &spec,
                               const pool_client::OutputSink &) -> Result<pool_client::ExecOutcome> {
            pool_client::ExecOutcome outcome;
            const std::string token = spec.env.contains("TOKEN") ? spec.env.at("TOKEN") : std::string("none");
            // The recorded head is kMaxRecordedOutputBytes / 8: put the value across that edge.
            const size_t head = kMaxRecordedOutputBytes / 8;
            outcome.stdoutData = std::string(head - 5, 'a') + token + std::string(kMaxRecordedOutputBytes * 2, 'b');
            outcome.stderrData = "error: bad token " + token + "\n";
            return outcome;
        });
        m_pool->setReadFileHook(
            [](const std::string &, const std::string &) -> Result<std::string> { return "file " + kValue; });
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

    // The environment every command got, in order.
    std::vector<std::map<std::string, std::string>> envs() const
    {
        std::vector<std::map<std::string, std::string>> out;
        for (const auto &spec : m_pool->execs())
            out.push_back(spec.env);
        return out;
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
    test::FakePoolClient *m_pool = nullptr;
};

TEST_F(StepEngineSecretsTest, GrantedValuesReachTheCommandOnlyAndTheLogIsRedactedAcrossTheClip)
{
    const std::string id = submit(json::array({"TOKEN"}));
    runToEnd();
    ASSERT_EQ(envs().size(), 1u);
    EXPECT_EQ(envs()[0], (std::map<std::string, std::string>{{"TOKEN", kValue}}));   // not OTHER
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
    ASSERT_EQ(envs().size(), 1u);
    EXPECT_TRUE(envs()[0].empty());
    // read_file returns the value although it was not granted: redacted all the same.
    EXPECT_EQ(log(id).find(kValue), std::string::npos);
}

TEST_F(StepEngineSecretsTest, ASecretRemovedAfterTheGrantStopsTheCommandWithItsName)
{
    const std::string id = submit(json::array({"TOKEN"}));
    ASSERT_TRUE(m_secrets->remove("TOKEN"));
    runToEnd();
    EXPECT_TRUE(envs().empty()) << "the command ran without its secret";
    const std::string recorded = log(id);
    EXPECT_NE(recorded.find("secret(s) TOKEN granted to this session no longer exist"), std::string::npos) << recorded;
    EXPECT_NE(recorded.find("paddockctl secrets set NAME"), std::string::npos);
}

} // namespace
} // namespace paddock::engine
