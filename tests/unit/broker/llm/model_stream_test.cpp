// Both HTTP adapters streaming (server-sent events) against the fake servers, which stream when a
// request says stream: true: deltas reach the sink in order, the final turn equals the unstreamed
// one, a stream cut mid-way is retried as a whole, and malformed SSE is named.

#include "broker/llm/anthropic_model.h"
#include "broker/llm/openai_model.h"
#include "tests/unit/broker/llm/chat_test_support.h"
#include "tests/unit/broker/llm/fake_anthropic_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace paddock::llm {
namespace {

using nlohmann::json;
using test::CannedResponse;
using test::FakeAnthropicServer;
using test::FakeChatServer;
using test::Inbox;
using test::StreamPlan;
using ::testing::HasSubstr;

constexpr const char *kKeyVariable = "PADDOCK_TEST_STREAM_KEY";

std::string completionBody()
{
    json call{{"id", "call_1"}, {"type", "function"},
              {"function", {{"name", "write_file"}, {"arguments", R"({"path":"hello.c","content":"int main(void) { return 0; }\n"})"}}}};
    return json{{"id", "chatcmpl-1"}, {"model", "gpt-test-2024"},
                {"choices", json::array({{{"index", 0},
                                           {"message", {{"role", "assistant"}, {"content", "Writing the file now."},
                                                        {"tool_calls", json::array({call})}}},
                                           {"finish_reason", "tool_calls"}}})},
                {"usage", {{"prompt_tokens", 120}, {"completion_tokens", 30}, {"prompt_tokens_details", {{"cached_tokens", 64}}}}}}
        .dump();
}

std::string messageBody()
{
    return FakeAnthropicServer::messageBody(
        json::array({FakeAnthropicServer::text("Writing the file now."),
                     FakeAnthropicServer::toolUse("toolu_01A", "write_file",
                                                  {{"path", "hello.c"}, {"content", "int main(void) { return 0; }\n"}})}),
        "tool_use",
        {{"input_tokens", 50}, {"output_tokens", 30}, {"cache_creation_input_tokens", 200}, {"cache_read_input_tokens", 1000}},
        "claude-fake-2");
}

// What the sink saw, per attempt: the text and each call's arguments, joined.
struct Seen {
    std::mutex mutex;
    std::vector<ModelDelta> deltas;
    DeltaSink sink()
    {
        return [this](const ModelDelta &delta) {
            std::lock_guard lock(mutex);
            deltas.push_back(delta);
        };
    }
    std::string text(int attempt)
    {
        std::lock_guard lock(mutex);
        std::string all;
        for (const auto &d : deltas)
            all += d.attempt == attempt ? d.text : "";
        return all;
    }
    std::string arguments(int attempt, int index)
    {
        std::lock_guard lock(mutex);
        std::string all;
        for (const auto &d : deltas)
            all += d.attempt == attempt && d.toolIndex == index ? d.arguments : "";
        return all;
    }
    size_t count()
    {
        std::lock_guard lock(mutex);
        return deltas.size();
    }
};

template <typename Model>
Result<ModelTurn> ask(Model &model, ModelContext context)
{
    Inbox<Result<ModelTurn>> turns;
    model.nextAsync(std::move(context), turns.doneFor(0));
    EXPECT_TRUE(turns.waitFor(1));
    return turns.first(0);
}

void expectSameTurn(const ModelTurn &streamed, const ModelTurn &whole)
{
    EXPECT_EQ(streamed.text, whole.text);
    EXPECT_EQ(streamed.model, whole.model);
    EXPECT_EQ(streamed.stopReason, whole.stopReason);
    ASSERT_EQ(streamed.toolCalls.size(), whole.toolCalls.size());
    for (size_t i = 0; i < whole.toolCalls.size(); ++i) {
        EXPECT_EQ(streamed.toolCalls[i].id, whole.toolCalls[i].id);
        EXPECT_EQ(streamed.toolCalls[i].name, whole.toolCalls[i].name);
        EXPECT_EQ(streamed.toolCalls[i].arguments, whole.toolCalls[i].arguments);
    }
    EXPECT_EQ(streamed.usage.inputTokens, whole.usage.inputTokens);
    EXPECT_EQ(streamed.usage.outputTokens, whole.usage.outputTokens);
    EXPECT_EQ(streamed.usage.cachedTokens, whole.usage.cachedTokens);
    EXPECT_EQ(streamed.usage.cacheWriteTokens, whole.usage.cacheWriteTokens);
}

class ModelStreamTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ::setenv(kKeyVariable, m_anthropic.apiKey().c_str(), 1);
        m_openAiConfig.baseUrl = m_chat.baseUrl();
        m_openAiConfig.model = "gpt-test";
        m_openAiConfig.apiKeyEnv = kKeyVariable;
        m_openAiConfig.maxRetries = 2;
        m_anthropicConfig.baseUrl = m_anthropic.baseUrl();
        m_anthropicConfig.model = "claude-test";
        m_anthropicConfig.apiKeyEnv = kKeyVariable;
        m_anthropicConfig.maxRetries = 2;
        m_context.sessionId = "s-1";
        m_context.goal = "Write hello.c";
        m_context.idempotencyKey = "s-1:7";
        m_chat.respond({{200, completionBody(), {}}});
        m_anthropic.respond({{200, messageBody(), {}}});
    }
    void TearDown() override { ::unsetenv(kKeyVariable); }

    static std::chrono::milliseconds noWait(std::chrono::milliseconds) { return std::chrono::milliseconds(0); }

    ModelContext watched(Seen &seen)
    {
        ModelContext context = m_context;
        context.onDelta = seen.sink();
        return context;
    }

    FakeChatServer m_chat;
    FakeAnthropicServer m_anthropic;
    OpenAiConfig m_openAiConfig;
    AnthropicConfig m_anthropicConfig;
    ModelContext m_context;
};

TEST_F(ModelStreamTest, OpenAiStreamsTextAndArgumentsAndEndsWithTheUnstreamedTurn)
{
    OpenAiModel streaming("openai", m_openAiConfig, noWait);
    Seen seen;
    auto streamed = ask(streaming, watched(seen));
    ASSERT_TRUE(streamed) << streamed.error().message;
    const json sent = json::parse(m_chat.requests().at(0).body);
    EXPECT_EQ(sent["stream"], true);
    EXPECT_EQ(sent["stream_options"]["include_usage"], true);
    EXPECT_GT(seen.count(), 5u);
    EXPECT_EQ(seen.text(1), "Writing the file now.");
    EXPECT_EQ(json::parse(seen.arguments(1, 0)), streamed->toolCalls.at(0).arguments);

    m_openAiConfig.stream = false;
    OpenAiModel whole("openai", m_openAiConfig, noWait);
    auto unstreamed = ask(whole, m_context);
    ASSERT_TRUE(unstreamed) << unstreamed.error().message;
    EXPECT_FALSE(json::parse(m_chat.requests().at(1).body).contains("stream"));
    expectSameTurn(*streamed, *unstreamed);
}

TEST_F(ModelStreamTest, AnthropicStreamsTextAndToolInputAndEndsWithTheUnstreamedTurn)
{
    AnthropicModel streaming("anthropic", m_anthropicConfig, noWait);
    Seen seen;
    auto streamed = ask(streaming, watched(seen));
    ASSERT_TRUE(streamed) << streamed.error().message;
    EXPECT_EQ(m_anthropic.requests().at(0).body["stream"], true);
    EXPECT_EQ(seen.text(1), "Writing the file now.");
    EXPECT_EQ(json::parse(seen.arguments(1, 0)), streamed->toolCalls.at(0).arguments);
    {
        std::lock_guard lock(seen.mutex);
        const auto first = std::ranges::find_if(seen.deltas, [](const ModelDelta &d) { return d.toolIndex == 0; });
        ASSERT_NE(first, seen.deltas.end());
        EXPECT_EQ(first->toolId, "toolu_01A");
        EXPECT_EQ(first->toolName, "write_file");
    }

    m_anthropicConfig.stream = false;
    AnthropicModel whole("anthropic", m_anthropicConfig, noWait);
    auto unstreamed = ask(whole, m_context);
    ASSERT_TRUE(unstreamed) << unstreamed.error().message;
    expectSameTurn(*streamed, *unstreamed);
    EXPECT_THAT(m_anthropic.refusals(), ::testing::IsEmpty());
}

// A turn of several text blocks: the model.response joins them with a newline, and so do the
// deltas, so that a reader who rebuilds the answer from what streamed reads the same text.
TEST_F(ModelStreamTest, AnthropicTextBlocksStreamWithTheNewlineTheTurnJoinsThemWith)
{
    m_anthropic.respond({{200,
                          FakeAnthropicServer::messageBody(
                              json::array({FakeAnthropicServer::text("Reading the file."),
                                           FakeAnthropicServer::toolUse("toolu_01B", "read_file", {{"path", "a.txt"}}),
                                           FakeAnthropicServer::text("Then writing it.")}),
                              "tool_use", {{"input_tokens", 10}, {"output_tokens", 5}}),
                          {}}});
    AnthropicModel streaming("anthropic", m_anthropicConfig, noWait);
    Seen seen;
    auto streamed = ask(streaming, watched(seen));
    ASSERT_TRUE(streamed) << streamed.error().message;
    EXPECT_EQ(streamed->text, "Reading the file.\nThen writing it.");
    EXPECT_EQ(seen.text(1), streamed->text);
}

TEST_F(ModelStreamTest, AStreamCutMidWayIsRetriedAsAWhole)
{
    m_chat.streamPlans({StreamPlan{.cutAfter = 4}});
    m_anthropic.streamPlans({StreamPlan{.cutAfter = 5}});
    OpenAiModel openAi("openai", m_openAiConfig, noWait);
    AnthropicModel anthropic("anthropic", m_anthropicConfig, noWait);
    Seen openAiSeen, anthropicSeen;
    auto a = ask(openAi, watched(openAiSeen));
    auto b = ask(anthropic, watched(anthropicSeen));
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_TRUE(b) << b.error().message;
    EXPECT_EQ(a->attempts, 2);
    EXPECT_EQ(b->attempts, 2);
    EXPECT_FALSE(openAiSeen.text(1).empty());   // the first attempt streamed some before it was cut
    EXPECT_EQ(openAiSeen.text(2), "Writing the file now.");
    EXPECT_EQ(anthropicSeen.text(2), "Writing the file now.");
    EXPECT_EQ(a->text, "Writing the file now.");
    EXPECT_EQ(b->toolCalls.at(0).arguments["path"], "hello.c");
}

TEST_F(ModelStreamTest, MalformedSseIsNamedOnceRetriesAreSpent)
{
    m_chat.streamPlans({StreamPlan{.malformedAt = 2}, StreamPlan{.malformedAt = 2}, StreamPlan{.malformedAt = 2}});
    m_anthropic.streamPlans({StreamPlan{.malformedAt = 3}, StreamPlan{.malformedAt = 3}, StreamPlan{.malformedAt = 3}});
    OpenAiModel openAi("openai", m_openAiConfig, noWait);
    AnthropicModel anthropic("anthropic", m_anthropicConfig, noWait);
    for (const auto &turn : {ask(openAi, m_context), ask(anthropic, m_context)}) {
        ASSERT_FALSE(turn);
        EXPECT_EQ(turn.error().code, ErrorCode::Unavailable);
        EXPECT_THAT(turn.error().message, HasSubstr("malformed server-sent events"));
        EXPECT_THAT(turn.error().message, HasSubstr("not a server-sent event field"));
        EXPECT_THAT(turn.error().message, HasSubstr("stream = false"));
        EXPECT_THAT(turn.error().message, HasSubstr("3 attempt(s)"));
    }
}

TEST_F(ModelStreamTest, AStreamWithoutItsEndIsBroken)
{
    // Cut just before the last event: [DONE] / message_stop never comes, the connection closes.
    m_chat.streamPlans({StreamPlan{.cutAfter = 12}, StreamPlan{.cutAfter = 12}, StreamPlan{.cutAfter = 12}});
    m_openAiConfig.maxRetries = 0;
    OpenAiModel openAi("openai", m_openAiConfig, noWait);
    auto turn = ask(openAi, m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::Unavailable);
    EXPECT_THAT(turn.error().message, HasSubstr("broken stream"));
}

// A server whose events have fields of the wrong type (found by fuzz_model_stream: nlohmann's
// value() threw inside curl's write callback, which ended the broker): the stream is broken with
// the reason, and the error bodies are read the same way.
TEST(ModelStreamDecoders, AnEventWithAFieldOfTheWrongTypeBreaksTheStreamNotTheBroker)
{
    const std::string start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"content\":[]}}\n\n";
    for (const std::string &wrong : {
             std::string(R"({"type":"content_block_start","index":"zero","content_block":{"type":"text","text":""}})"),
             std::string(R"({"type":7})"),
             std::string(R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":5,"name":["x"]}})"),
             std::string(R"({"type":"error","error":{"type":3,"message":{"a":1}}})")}) {
        auto stream = AnthropicModel::makeStream(nullptr);
        stream->begin(1);
        std::string problem;
        EXPECT_NO_THROW(problem = stream->data(start + "data: " + wrong + "\n\n")) << wrong;
        if (wrong.find("index\":\"zero") != std::string::npos) {
            EXPECT_THAT(problem, HasSubstr("content_block_start has no index or block")) << wrong;
        }
        if (wrong.find("\"error\"") != std::string::npos) {
            EXPECT_THAT(problem, HasSubstr("the stream carried an error")) << wrong;
        }
    }
    // A whole answer of the wrong shape is named, not thrown.
    const auto turn = AnthropicModel::parseResponse(R"({"type":{"x":1},"content":[{"type":2}]})", AnthropicConfig{}, "k");
    ASSERT_FALSE(turn);
    EXPECT_THAT(turn.error().message, HasSubstr("content[0] is not a block with a type"));
}

} // namespace
} // namespace paddock::llm
