#include "broker/llm/model_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace paddock::llm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

Result<ModelsConfig> parse(std::string_view text, ModelsConfig defaults = {})
{
    const toml::table root = toml::parse(text, std::string_view("broker.toml"));
    // Pass the parsed table itself: a copy would lose the source lines that error messages quote.
    const toml::table empty;
    const toml::table *models = root["models"].as_table();
    return parseModelsConfig(models != nullptr ? *models : empty, "broker.toml", "/etc/paddock",
                             std::move(defaults));
}

TEST(ModelRegistryTest, DefaultsRegisterScriptedAndOpenAi)
{
    ModelsConfig defaults;
    defaults.playbookDir = "/usr/share/paddock/playbooks";
    auto config = parse("", defaults);
    ASSERT_TRUE(config) << config.error().message;
    EXPECT_EQ(config->playbookDir, "/usr/share/paddock/playbooks");
    ASSERT_EQ(config->openai.size(), 1u);
    EXPECT_EQ(config->openai.at("openai").baseUrl, "https://api.openai.com/v1");
    EXPECT_EQ(config->openai.at("openai").apiKeyEnv, "OPENAI_API_KEY");

    ASSERT_EQ(config->anthropic.size(), 1u);
    EXPECT_EQ(config->anthropic.at("anthropic").baseUrl, "https://api.anthropic.com");
    EXPECT_EQ(config->anthropic.at("anthropic").apiKeyEnv, "ANTHROPIC_API_KEY");
    EXPECT_EQ(config->anthropic.at("anthropic").anthropicVersion, "2023-06-01");

    ModelRegistry registry(*config);
    EXPECT_EQ(registry.names(), (std::vector<std::string>{"anthropic", "openai", "scripted"}));
    ASSERT_NE(registry.find("scripted"), nullptr);
    EXPECT_EQ(registry.find("scripted")->name(), "scripted");
    EXPECT_EQ(registry.find("nope"), nullptr);
}

TEST(ModelRegistryTest, ProfilesInheritFromTheOpenAiSection)
{
    auto config = parse(R"(
[models]
playbook_dir = "playbooks"

[models.openai]
model = "gpt-4o-mini"
api_key_env = "MY_KEY"
max_retries = 2
timeout_ms = 30000
initial_backoff_ms = 100

[models.openai.local]
base_url = "http://127.0.0.1:8080/v1"
model = "qwen2.5-coder"
api_key_env = ""
)");
    ASSERT_TRUE(config) << config.error().message;
    EXPECT_EQ(config->playbookDir, std::filesystem::path("/etc/paddock/playbooks"));
    const OpenAiConfig &base = config->openai.at("openai");
    EXPECT_EQ(base.model, "gpt-4o-mini");
    EXPECT_EQ(base.apiKeyEnv, "MY_KEY");
    EXPECT_EQ(base.maxRetries, 2);
    EXPECT_EQ(base.timeoutMs, 30000);
    EXPECT_EQ(base.initialBackoffMs, 100);
    const OpenAiConfig &local = config->openai.at("openai:local");
    EXPECT_EQ(local.baseUrl, "http://127.0.0.1:8080/v1");
    EXPECT_EQ(local.model, "qwen2.5-coder");
    EXPECT_EQ(local.apiKeyEnv, "");
    EXPECT_EQ(local.maxRetries, 2);   // inherited

    ModelRegistry registry(*config);
    EXPECT_EQ(registry.names(), (std::vector<std::string>{"anthropic", "openai", "openai:local", "scripted"}));
    ASSERT_NE(registry.find("openai:local"), nullptr);
    EXPECT_EQ(registry.find("openai:local")->name(), "openai:local");
}

TEST(ModelRegistryTest, AnthropicModelsAndProfiles)
{
    auto config = parse(R"(
[models.anthropic]
model = "claude-sonnet-4-5"
api_key_file = "keys/anthropic.key"
max_tokens = 4096
prompt_caching = false
max_retries = 2

[models.anthropic.fast]
model = "claude-haiku-4-5"
api_key_file = "/etc/paddock/haiku.key"
anthropic_version = "2023-01-01"
)");
    ASSERT_TRUE(config) << config.error().message;
    const AnthropicConfig &base = config->anthropic.at("anthropic");
    EXPECT_EQ(base.model, "claude-sonnet-4-5");
    EXPECT_EQ(base.apiKeyFile, std::filesystem::path("/etc/paddock/keys/anthropic.key")) << "relative to the config";
    EXPECT_EQ(base.maxTokens, 4096);
    EXPECT_FALSE(base.promptCaching);
    EXPECT_EQ(base.maxRetries, 2);
    const AnthropicConfig &fast = config->anthropic.at("anthropic:fast");
    EXPECT_EQ(fast.model, "claude-haiku-4-5");
    EXPECT_EQ(fast.apiKeyFile, std::filesystem::path("/etc/paddock/haiku.key"));
    EXPECT_EQ(fast.anthropicVersion, "2023-01-01");
    EXPECT_EQ(fast.maxTokens, 4096);   // inherited
    EXPECT_FALSE(fast.promptCaching);

    ModelRegistry registry(*config);
    ASSERT_NE(registry.find("anthropic:fast"), nullptr);
    EXPECT_EQ(registry.find("anthropic:fast")->name(), "anthropic:fast");

    auto keyInFile = parse("[models.anthropic]\napi_key = \"sk-ant-...\"\n");
    ASSERT_FALSE(keyInFile);
    EXPECT_THAT(keyInFile.error().message, AllOf(HasSubstr("broker.toml:2"), HasSubstr("models.anthropic.api_key"),
                                                 HasSubstr("never goes in broker.toml"), HasSubstr("api_key_file")));
    auto badCaching = parse("[models.anthropic]\nprompt_caching = \"yes\"\n");
    ASSERT_FALSE(badCaching);
    EXPECT_THAT(badCaching.error().message, HasSubstr("models.anthropic.prompt_caching is not a boolean"));
    auto badTokens = parse("[models.anthropic.fast]\nmax_tokens = 0\n");
    ASSERT_FALSE(badTokens);
    EXPECT_THAT(badTokens.error().message, HasSubstr("models.anthropic.fast.max_tokens must be an integer of at least 1"));
    auto notATable = parse("[models]\nanthropic = \"claude\"\n");
    ASSERT_FALSE(notATable);
    EXPECT_THAT(notATable.error().message, HasSubstr("Write it as a [models.anthropic] section"));
}

TEST(ModelRegistryTest, RejectsBadConfig)
{
    auto unknown = parse("[models]\nplaybooks = \"x\"\n");
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(unknown.error().message, AllOf(HasSubstr("broker.toml:2"), HasSubstr("models.playbooks")));

    auto badUrl = parse("[models.openai]\nbase_url = \"api.openai.com\"\n");
    ASSERT_FALSE(badUrl);
    EXPECT_THAT(badUrl.error().message, AllOf(HasSubstr("models.openai.base_url"), HasSubstr("not an http(s) URL")));

    auto badType = parse("[models.openai.local]\nmax_retries = \"3\"\n");
    ASSERT_FALSE(badType);
    EXPECT_THAT(badType.error().message, HasSubstr("models.openai.local.max_retries must be an integer"));

    auto badKey = parse("[models.openai]\napi_key = \"sk-...\"\n");
    ASSERT_FALSE(badKey);
    EXPECT_THAT(badKey.error().message, AllOf(HasSubstr("models.openai.api_key"), HasSubstr("api_key_env")));
}

} // namespace
} // namespace paddock::llm
