// The anthropic adapter against a fake Messages API on 127.0.0.1 (fake_anthropic_server.h) that
// refuses what the real API refuses: every request the adapter makes must pass its checks, and the
// checks themselves are tested here first, so that a passing adapter test means something. Backoff
// waits go through a hook that records them and waits none.

#include "broker/llm/anthropic_model.h"
#include "broker/llm/tool_catalogue.h"
#include "tests/unit/broker/llm/fake_anthropic_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

namespace paddock::llm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;
using test::CannedResponse;
using test::FakeAnthropicServer;

constexpr const char *kKeyVariable = "PADDOCK_TEST_ANTHROPIC_KEY";

std::string writeFileResponse()
{
    return FakeAnthropicServer::messageBody(
        json::array({FakeAnthropicServer::text("Writing the file."),
                     FakeAnthropicServer::toolUse("toolu_01A", "write_file",
                                                  {{"path", "hello.c"}, {"content", "int main(void) { return 0; }\n"}})}),
        "tool_use",
        {{"input_tokens", 50}, {"output_tokens", 30}, {"cache_creation_input_tokens", 200},
         {"cache_read_input_tokens", 1000}},
        "claude-fake-2");
}

class AnthropicModelTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ::setenv(kKeyVariable, m_server.apiKey().c_str(), 1);
        m_config.baseUrl = m_server.baseUrl();
        m_config.model = "claude-test";
        m_config.apiKeyEnv = kKeyVariable;
        m_config.maxTokens = 1024;
        m_config.timeoutMs = 10000;
        m_config.maxRetries = 3;
        m_config.initialBackoffMs = 8;
        m_config.maxBackoffMs = 5000;

        m_context.sessionId = "s-1";
        m_context.goal = "Compile hello.c";
        m_context.idempotencyKey = "s-1:7";
    }

    void TearDown() override
    {
        ::unsetenv(kKeyVariable);
        std::error_code ignored;
        if (!m_keyFile.empty())
            std::filesystem::remove(m_keyFile, ignored);
        // Whatever the adapter sent was a request the real API takes, unless a test said otherwise.
        if (m_expectNoRefusals) {
            EXPECT_THAT(m_server.refusals(), ::testing::IsEmpty());
        }
    }

    AnthropicModel makeModel()
    {
        return AnthropicModel("anthropic", m_config, [this](std::chrono::milliseconds delay) {
            std::lock_guard lock(m_backoffsMutex);
            m_backoffs.push_back(delay);
            return std::chrono::milliseconds(0);
        });
    }

    std::vector<std::chrono::milliseconds> backoffs()
    {
        std::lock_guard lock(m_backoffsMutex);
        return m_backoffs;
    }

    std::filesystem::path writeKeyFile(const std::string &text, mode_t mode)
    {
        m_keyFile = std::filesystem::temp_directory_path()
            / ("paddock-anthropic-key-" + std::to_string(::getpid()) + "-"
               + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::ofstream(m_keyFile) << text;
        ::chmod(m_keyFile.c_str(), mode);
        return m_keyFile;
    }

    // One earlier exchange, as the engine rebuilds it from the log: text and a run_command.
    void addCommandExchange()
    {
        ModelTurn earlier;
        earlier.text = "Let me look first.";
        earlier.toolCalls.push_back(ToolCall{"toolu_00", "run_command", json{{"command", "ls"}}});
        m_context.history.push_back(Exchange{earlier, {json{{"exit_code", 0}, {"stdout", "README\n"}, {"stderr", ""},
                                                            {"duration_ms", 2}, {"timed_out", false}}}});
    }

    FakeAnthropicServer m_server;
    std::mutex m_backoffsMutex;
    std::vector<std::chrono::milliseconds> m_backoffs;   // guarded by m_backoffsMutex
    AnthropicConfig m_config;
    ModelContext m_context;
    std::filesystem::path m_keyFile;
    bool m_expectNoRefusals = true;
};

// The fake's own checks, on bodies the real API refuses: the adapter tests below lean on them.
TEST(FakeAnthropicServerTest, RefusesWhatTheRealApiRefuses)
{
    const json valid = json::parse(R"({
        "model": "m", "max_tokens": 10,
        "tools": [{"name": "run_command", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "run_command",
                                               "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
        ]})");
    EXPECT_EQ(FakeAnthropicServer::invalidBody(valid), std::nullopt);

    auto refusal = [&](const std::function<void(json &)> &change) {
        json body = valid;
        change(body);
        return FakeAnthropicServer::invalidBody(body).value_or("(accepted)");
    };
    EXPECT_THAT(refusal([](json &b) { b.erase("max_tokens"); }), HasSubstr("max_tokens"));
    EXPECT_THAT(refusal([](json &b) { b["temperture"] = 1; }), HasSubstr("Extra inputs are not permitted"));
    // Roles that do not alternate.
    EXPECT_THAT(refusal([](json &b) { b["messages"].push_back({{"role", "user"}, {"content", "again"}}); }),
                HasSubstr("roles must alternate"));
    EXPECT_THAT(refusal([](json &b) { b["messages"].erase(b["messages"].begin()); }),
                HasSubstr("first message must use the \"user\" role"));
    // A tool_use without its tool_result right after it.
    EXPECT_THAT(refusal([](json &b) { b["messages"][2]["content"] = "done"; }),
                HasSubstr("without `tool_result` blocks immediately after: toolu_1"));
    EXPECT_THAT(refusal([](json &b) { b["messages"].erase(2); }), HasSubstr("without `tool_result`"));
    // A tool_result that follows no tool_use, or that comes after text.
    EXPECT_THAT(refusal([](json &b) { b["messages"][2]["content"][0]["tool_use_id"] = "toolu_9"; }),
                HasSubstr("unexpected `tool_use_id`"));
    EXPECT_THAT(refusal([](json &b) {
                    json &content = b["messages"][2]["content"];
                    content.insert(content.begin(), json{{"type", "text"}, {"text", "here"}});
                }),
                HasSubstr("must come first"));
    EXPECT_THAT(refusal([](json &b) { b["messages"][1]["content"][0]["id"] = "s-1:7"; }), HasSubstr("pattern"));
    EXPECT_THAT(refusal([](json &b) { b["messages"][0]["content"] = json::array({json{{"type", "text"}, {"text", " "}}}); }),
                HasSubstr("non-whitespace"));
    EXPECT_THAT(refusal([](json &b) { b.erase("tools"); }), HasSubstr("must define tools"));
    EXPECT_THAT(refusal([](json &b) { b["tools"][0]["parameters"] = json::object(); }), HasSubstr("tools.0.parameters"));
}

TEST(FakeAnthropicServerTest, RefusesAMissingVersionOrKey)
{
    FakeAnthropicServer server;
    server.respond({{200, FakeAnthropicServer::messageBody(json::array({FakeAnthropicServer::text("hi")}), "end_turn"),
                     {}}});
    httplib::Client client(server.baseUrl());
    const std::string body = R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})";
    auto noVersion = client.Post("/v1/messages", {{"x-api-key", server.apiKey()}}, body, "application/json");
    ASSERT_TRUE(noVersion);
    EXPECT_EQ(noVersion->status, 400);
    EXPECT_THAT(noVersion->body, HasSubstr("anthropic-version: header is required"));
    auto noKey = client.Post("/v1/messages", {{"anthropic-version", "2023-06-01"}}, body, "application/json");
    ASSERT_TRUE(noKey);
    EXPECT_EQ(noKey->status, 401);
    EXPECT_THAT(noKey->body, HasSubstr("authentication_error"));
    auto good = client.Post("/v1/messages", {{"x-api-key", server.apiKey()}, {"anthropic-version", "2023-06-01"}}, body,
                            "application/json");
    ASSERT_TRUE(good);
    EXPECT_EQ(good->status, 200);
}

TEST_F(AnthropicModelTest, ToolUseRoundTrip)
{
    addCommandExchange();
    m_server.respond({{200, writeFileResponse(), {}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_TRUE(turn) << turn.error().message;

    EXPECT_EQ(turn->text, "Writing the file.");
    ASSERT_EQ(turn->toolCalls.size(), 1u);
    EXPECT_EQ(turn->toolCalls[0].id, "toolu_01A");
    EXPECT_EQ(turn->toolCalls[0].name, "write_file");
    EXPECT_EQ(turn->toolCalls[0].arguments, (json{{"path", "hello.c"}, {"content", "int main(void) { return 0; }\n"}}));
    EXPECT_EQ(turn->stopReason, "tool_use");
    EXPECT_EQ(turn->model, "claude-fake-2");
    // Every input token counted once, cache reads and writes apart.
    EXPECT_EQ(turn->usage.inputTokens, 50 + 200 + 1000);
    EXPECT_EQ(turn->usage.cachedTokens, 1000);
    EXPECT_EQ(turn->usage.cacheWriteTokens, 200);
    EXPECT_EQ(turn->usage.outputTokens, 30);
    EXPECT_EQ(turn->attempts, 1);

    const auto received = m_server.requests();
    ASSERT_EQ(received.size(), 1u);
    EXPECT_EQ(received[0].path, "/v1/messages");
    EXPECT_EQ(received[0].apiKey, m_server.apiKey());
    EXPECT_EQ(received[0].version, "2023-06-01");
    EXPECT_EQ(received[0].idempotencyKey, "s-1:7");
    const json &body = received[0].body;
    EXPECT_EQ(body["model"], "claude-test");
    EXPECT_EQ(body["max_tokens"], 1024);
    ASSERT_TRUE(body["system"].is_array());
    EXPECT_THAT(body["system"][0]["text"].get<std::string>(), HasSubstr("finish"));
    EXPECT_EQ(body["system"][0]["cache_control"], (json{{"type", "ephemeral"}}));
    const json &messages = body["messages"];
    ASSERT_EQ(messages.size(), 3u);
    EXPECT_EQ(messages[0]["role"], "user");
    EXPECT_EQ(messages[0]["content"][0]["text"], "Compile hello.c");
    EXPECT_EQ(messages[1]["role"], "assistant");
    EXPECT_EQ(messages[1]["content"][0], (json{{"type", "text"}, {"text", "Let me look first."}}));
    EXPECT_EQ(messages[1]["content"][1],
              (json{{"type", "tool_use"}, {"id", "toolu_00"}, {"name", "run_command"}, {"input", {{"command", "ls"}}}}));
    EXPECT_EQ(messages[2]["role"], "user");
    const json &result = messages[2]["content"][0];
    EXPECT_EQ(result["type"], "tool_result");
    EXPECT_EQ(result["tool_use_id"], "toolu_00");
    EXPECT_EQ(json::parse(result["content"].get<std::string>())["stdout"], "README\n");
    EXPECT_FALSE(result.contains("is_error"));
    EXPECT_EQ(result["cache_control"], (json{{"type", "ephemeral"}})) << "the conversation so far is cached";

    // Every tool of the catalogue, with its schema.
    ASSERT_EQ(body["tools"].size(), toolCatalogue().size());
    for (size_t i = 0; i < toolCatalogue().size(); ++i) {
        EXPECT_EQ(body["tools"][i]["name"], toolCatalogue()[i].name);
        EXPECT_EQ(body["tools"][i]["input_schema"], toolCatalogue()[i].inputSchema());
    }
}

// A long history with what the API is fussy about: empty and blank text, a turn without a tool
// call, several calls in one turn, a failed one, a missing result, ids the API's pattern refuses.
TEST_F(AnthropicModelTest, EveryHistoryMakesARequestTheApiTakes)
{
    ModelTurn blank;
    blank.text = "  \n";
    blank.toolCalls.push_back(ToolCall{"call-s-1:3-0", "read_file", json{{"path", "missing.txt"}}});
    blank.toolCalls.push_back(ToolCall{"call-s-1:3-1", "run_command", json{{"command", "true"}}});
    m_context.history.push_back(Exchange{blank, {json{{"error", "no such file"}}}});   // the second result is missing
    ModelTurn talk;
    talk.text = "Thinking aloud, no tool.";
    m_context.history.push_back(Exchange{talk, {}});
    ModelTurn empty;
    empty.toolCalls.push_back(ToolCall{"toolu_05", "read_records", json{{"prefix", "repos/"}}});
    m_context.history.push_back(Exchange{empty, {json{{"records", json::object()}, {"count", 0}}}});
    m_server.respond({{200, writeFileResponse(), {}}});

    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_TRUE(turn) << turn.error().message;
    const json messages = m_server.requests().at(0).body["messages"];
    ASSERT_EQ(messages.size(), 7u);
    const json &failed = messages[2]["content"];
    EXPECT_EQ(failed[0]["tool_use_id"], "call-s-1_3-0");
    EXPECT_EQ(failed[0]["is_error"], true);
    EXPECT_EQ(failed[1]["tool_use_id"], "call-s-1_3-1");
    EXPECT_THAT(failed[1]["content"].get<std::string>(), HasSubstr("no result was recorded"));
}

TEST_F(AnthropicModelTest, AnswerWithoutToolsEndsTheTurn)
{
    m_server.respond({{200, FakeAnthropicServer::messageBody(json::array({FakeAnthropicServer::text("All done.")}),
                                                             "end_turn"),
                       {}},
                      {200, FakeAnthropicServer::messageBody(json::array({FakeAnthropicServer::text("Stop.")}),
                                                             "stop_sequence"),
                       {}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_TRUE(turn) << turn.error().message;
    EXPECT_EQ(turn->text, "All done.");
    EXPECT_TRUE(turn->toolCalls.empty());
    EXPECT_EQ(turn->stopReason, "end_turn");
    turn = model.next(m_context);
    ASSERT_TRUE(turn) << turn.error().message;
    EXPECT_EQ(turn->stopReason, "stop_sequence");
}

TEST_F(AnthropicModelTest, MaxTokensNamesTheSetting)
{
    m_server.respond({{200, FakeAnthropicServer::messageBody(
                                json::array({FakeAnthropicServer::toolUse("toolu_1", "write_file", {{"path", "a"}})}),
                                "max_tokens"),
                       {}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("max_tokens (1024)"), HasSubstr("tool 'write_file'"),
                                            HasSubstr("Raise max_tokens")));
}

TEST_F(AnthropicModelTest, ARefusalIsNotAskedAgain)
{
    m_server.respond({{200, FakeAnthropicServer::messageBody(json::array({FakeAnthropicServer::text("I can't help.")}),
                                                             "refusal"),
                       {}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::FailedPrecondition);   // the engine fails the session at once
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("refused"), HasSubstr("I can't help.")));
    EXPECT_EQ(m_server.requests().size(), 1u);
}

TEST_F(AnthropicModelTest, ToolUseStopWithoutABlockIsMalformed)
{
    m_server.respond({{200, FakeAnthropicServer::messageBody(json::array({FakeAnthropicServer::text("Calling.")}),
                                                             "tool_use"),
                       {}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_THAT(turn.error().message, HasSubstr("stop_reason is tool_use but the content has no tool_use block"));
}

TEST_F(AnthropicModelTest, ToolUseInputThatIsNotAnObjectIsNamed)
{
    m_server.respond({{200, FakeAnthropicServer::messageBody(
                                json::array({FakeAnthropicServer::toolUse("toolu_7", "run_command", "ls -l")}), "tool_use"),
                       {}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("input of tool_use 'run_command' (toolu_7)"),
                                            HasSubstr("not a JSON object"), HasSubstr("ls -l")));
}

TEST_F(AnthropicModelTest, ABodyThatIsNotJsonIsNamed)
{
    m_server.respond({{200, "<html>502 Bad Gateway</html>", {}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr(m_server.messagesUrl()), HasSubstr("not JSON"),
                                            HasSubstr("<html>502 Bad Gateway</html>"), HasSubstr("base_url")));
    EXPECT_EQ(m_server.requests().size(), 1u);   // not retried
}

TEST_F(AnthropicModelTest, A401NamesTheKeySetting)
{
    ::setenv(kKeyVariable, "sk-ant-wrong", 1);
    m_expectNoRefusals = false;
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::PermissionDenied);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("HTTP 401"), HasSubstr("authentication_error: invalid x-api-key"),
                                            HasSubstr(kKeyVariable), HasSubstr("api_key_env")));
    EXPECT_EQ(m_server.requests().size(), 1u);   // not retried
}

TEST_F(AnthropicModelTest, RetriesA429HonouringRetryAfter)
{
    m_server.respond({{429, FakeAnthropicServer::errorBody("rate_limit_error", "Number of request tokens has exceeded"),
                       {{"retry-after", "3"}}},
                      {200, writeFileResponse(), {}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_TRUE(turn) << turn.error().message;
    EXPECT_EQ(turn->attempts, 2);
    EXPECT_EQ(backoffs(), (std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(3000)}));
    const auto received = m_server.requests();
    ASSERT_EQ(received.size(), 2u);
    EXPECT_EQ(received[0].body, received[1].body);   // the same request, the same key
    EXPECT_EQ(received[1].idempotencyKey, "s-1:7");
}

TEST_F(AnthropicModelTest, RetriesA500WithBackoff)
{
    m_server.respond({{500, FakeAnthropicServer::errorBody("api_error", "Internal server error"), {}},
                      {200, writeFileResponse(), {}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_TRUE(turn) << turn.error().message;
    EXPECT_EQ(turn->attempts, 2);
    const auto waits = backoffs();
    ASSERT_EQ(waits.size(), 1u);
    EXPECT_GE(waits[0].count(), m_config.initialBackoffMs / 2);
    EXPECT_LE(waits[0].count(), m_config.initialBackoffMs);
}

TEST_F(AnthropicModelTest, OverloadedIsRetriedThenNamed)
{
    m_server.respond({{529, FakeAnthropicServer::errorBody("overloaded_error", "Overloaded"), {}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::Unavailable);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("4 attempt(s)"), HasSubstr("HTTP 529 overloaded_error: Overloaded"),
                                            HasSubstr("overloaded for everyone"), HasSubstr("max_retries")));
    EXPECT_EQ(m_server.requests().size(), 4u);
    EXPECT_EQ(backoffs().size(), 3u);
}

TEST_F(AnthropicModelTest, ARateLimitThatLastsIsNamed)
{
    m_config.maxRetries = 1;
    m_server.respond({{429, FakeAnthropicServer::errorBody("rate_limit_error", "Too many requests"),
                       {{"retry-after", "1"}}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::Unavailable);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("2 attempt(s)"), HasSubstr("HTTP 429 rate_limit_error"),
                                            HasSubstr("retry-after")));
    EXPECT_EQ(backoffs(), (std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(1000)}));
}

TEST_F(AnthropicModelTest, KeyFromAFileOfMode0600)
{
    m_config.apiKeyEnv = "PADDOCK_TEST_ANTHROPIC_UNSET";
    m_config.apiKeyFile = writeKeyFile(m_server.apiKey() + "\n", 0600);
    m_server.respond({{200, writeFileResponse(), {}}});
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_TRUE(turn) << turn.error().message;
    EXPECT_EQ(m_server.requests().at(0).apiKey, m_server.apiKey());
}

TEST_F(AnthropicModelTest, AKeyFileOthersMayReadIsRefused)
{
    m_config.apiKeyFile = writeKeyFile(m_server.apiKey() + "\n", 0644);
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::FailedPrecondition);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("mode 0644"), HasSubstr("chmod 600")));
    EXPECT_TRUE(m_server.requests().empty());
}

TEST_F(AnthropicModelTest, AMissingKeyVariableIsAFailedPrecondition)
{
    ::unsetenv(kKeyVariable);
    AnthropicModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::FailedPrecondition);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr(kKeyVariable), HasSubstr("[models.anthropic]")));
    EXPECT_TRUE(m_server.requests().empty());
}

TEST_F(AnthropicModelTest, VersionAndCachingFollowTheConfig)
{
    m_config.anthropicVersion = "2023-01-01";
    m_config.promptCaching = false;
    addCommandExchange();
    m_server.respond({{200, writeFileResponse(), {}}});
    AnthropicModel model = makeModel();
    ASSERT_TRUE(model.next(m_context));
    const auto received = m_server.requests().at(0);
    EXPECT_EQ(received.version, "2023-01-01");
    EXPECT_THAT(received.body.dump(), Not(HasSubstr("cache_control")));

    m_config.anthropicVersion = "2099-01-01";   // a version the API does not know: named in the error
    AnthropicModel unknown = makeModel();
    m_expectNoRefusals = false;
    auto refused = unknown.next(m_context);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(refused.error().message, AllOf(HasSubstr("HTTP 400"), HasSubstr("anthropic-version"),
                                               HasSubstr("anthropic_version in the [models.anthropic] config")));
}

TEST_F(AnthropicModelTest, TheSystemPromptTellsTheTiersAndTheBound)
{
    EnvironmentBrief environment;
    environment.currentTier = "small";
    environment.selectionMode = "hybrid";
    environment.mayRequest = true;
    environment.bound = "small";
    environment.tiers = {{"small", 1.0, 128ll << 20, 0.02, true, false}, {"big", 2.0, 1ll << 30, 0.2, true, true}};
    m_context.environment = environment;
    m_server.respond({{200, writeFileResponse(), {}}});
    AnthropicModel model = makeModel();
    ASSERT_TRUE(model.next(m_context));
    const std::string system = m_server.requests().at(0).body["system"][0]["text"];
    EXPECT_THAT(system, AllOf(HasSubstr("- small: 1 cpu, 128 MiB memory, $0.02 per hour (current)"),
                              HasSubstr("- big: 2 cpu, 1 GiB memory, $0.20 per hour; above your bound"),
                              HasSubstr("Your bound is small"), HasSubstr("tier_escalation")));
}

TEST_F(AnthropicModelTest, CancelInFlightEndsTheTurnOnce)
{
    // A responder that holds the request until the test lets it go. Its state is shared with the
    // server's thread, which may still be waking from the wait when the test body has returned.
    struct Hold {
        std::mutex mutex;
        std::condition_variable changed;
        bool arrived = false;
        bool release = false;
        void letGo()
        {
            {
                std::lock_guard lock(mutex);
                release = true;
            }
            changed.notify_all();
        }
    };
    const auto hold = std::make_shared<Hold>();
    m_server.respondWith([hold](const json &) {
        std::unique_lock lock(hold->mutex);
        hold->arrived = true;
        hold->changed.notify_all();
        hold->changed.wait(lock, [&] { return hold->release; });
        return CannedResponse{200, writeFileResponse(), {}};
    });
    // Lets the request go however the test ends (an ASSERT returns early).
    const std::unique_ptr<Hold, void (*)(Hold *)> releaseAtEnd(hold.get(), [](Hold *h) { h->letGo(); });
    test::Inbox<Result<ModelTurn>> turns;
    {
        AnthropicModel model = makeModel();
        model.nextAsync(m_context, turns.doneFor(0));
        {
            std::unique_lock lock(hold->mutex);
            ASSERT_TRUE(hold->changed.wait_for(lock, std::chrono::seconds(30), [&] { return hold->arrived; }));
        }
        model.cancelInFlight();
        ASSERT_TRUE(turns.waitFor(1));
        const auto turn = turns.first(0);
        ASSERT_FALSE(turn);
        EXPECT_EQ(turn.error().code, ErrorCode::Cancelled);
        EXPECT_THAT(turn.error().message, HasSubstr(m_server.messagesUrl()));
    }
    hold->letGo();
    EXPECT_EQ(turns.deliveries(0), 1u);
}

TEST(AnthropicModelUrlTest, MessagesUrlFromBaseUrl)
{
    AnthropicConfig config;
    EXPECT_EQ(AnthropicModel::messagesUrl(config), "https://api.anthropic.com/v1/messages");
    config.baseUrl = "https://gateway.example/anthropic/v1/";
    EXPECT_EQ(AnthropicModel::messagesUrl(config), "https://gateway.example/anthropic/v1/messages");
}

} // namespace
} // namespace paddock::llm
