// The openai adapter against a real HTTP server on 127.0.0.1 that speaks the chat completions wire
// format. Backoff waits go through a recording hook that waits zero, so nothing here depends on
// time but the hanging-endpoint test, which waits for its configured timeout.

#include "broker/llm/openai_model.h"
#include "tests/unit/broker/llm/chat_test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace paddock::llm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using nlohmann::json;
using test::CannedResponse;
using test::FakeChatServer;
using test::Inbox;
using test::ReceivedRequest;

constexpr const char *kKeyVariable = "PADDOCK_TEST_OPENAI_KEY";

std::string toolCallResponse()
{
    return json{{"id", "chatcmpl-1"},
                {"object", "chat.completion"},
                {"model", "gpt-test-2024"},
                {"choices",
                 {{{"index", 0},
                   {"finish_reason", "tool_calls"},
                   {"message",
                    {{"role", "assistant"},
                     {"content", "Writing the file."},
                     {"tool_calls",
                      {{{"id", "call_abc"},
                        {"type", "function"},
                        {"function",
                         {{"name", "write_file"},
                          {"arguments", R"({"path": "hello.c", "content": "int main(void) { return 0; }\n"})"}}}}}}}}}}},
                {"usage",
                 {{"prompt_tokens", 120},
                  {"completion_tokens", 30},
                  {"total_tokens", 150},
                  {"prompt_tokens_details", {{"cached_tokens", 64}}}}}}
        .dump();
}

class OpenAiModelTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ::setenv(kKeyVariable, "test-key-123", 1);
        m_config.baseUrl = m_server.baseUrl();
        m_config.model = "gpt-test";
        m_config.apiKeyEnv = kKeyVariable;
        m_config.timeoutMs = 10000;
        m_config.maxRetries = 3;
        m_config.initialBackoffMs = 8;
        m_config.maxBackoffMs = 5000;

        m_context.sessionId = "s-1";
        m_context.goal = "Compile hello.c";
        m_context.idempotencyKey = "s-1:7";
    }

    void TearDown() override { ::unsetenv(kKeyVariable); }

    void respond(std::vector<CannedResponse> responses) { m_server.respond(std::move(responses)); }
    std::vector<ReceivedRequest> requests() { return m_server.requests(); }

    // Records each backoff the adapter chose and waits none of it.
    OpenAiModel makeModel()
    {
        return OpenAiModel("openai", m_config, [this](std::chrono::milliseconds delay) {
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

    // One nextAsync, waited for; checks that done ran once, on a thread other than the caller's.
    Result<ModelTurn> nextAsyncAndWait(OpenAiModel &model)
    {
        Inbox<Result<ModelTurn>> turns;
        model.nextAsync(m_context, turns.doneFor(0));
        EXPECT_TRUE(turns.waitFor(1));
        EXPECT_EQ(turns.deliveries(0), 1u);
        EXPECT_NE(turns.threads().at(0), std::this_thread::get_id());
        return turns.first(0);
    }

    FakeChatServer m_server;
    std::mutex m_backoffsMutex;
    std::vector<std::chrono::milliseconds> m_backoffs;   // guarded by m_backoffsMutex
    OpenAiConfig m_config;
    ModelContext m_context;
};

TEST_F(OpenAiModelTest, ToolCallRoundTrip)
{
    // One earlier exchange, as the engine rebuilds it from the log.
    ModelTurn earlier;
    earlier.text = "Let me look first.";
    earlier.toolCalls.push_back(ToolCall{"call_1", "run_command", json{{"command", "ls"}}});
    m_context.history.push_back(
        Exchange{earlier, {json{{"exit_code", 0}, {"stdout", "README\n"}, {"stderr", ""}, {"duration_ms", 2},
                                {"timed_out", false}}}});
    respond({{200, toolCallResponse(), {}}});

    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_TRUE(turn) << turn.error().message;

    EXPECT_EQ(turn->text, "Writing the file.");
    ASSERT_EQ(turn->toolCalls.size(), 1u);
    EXPECT_EQ(turn->toolCalls[0].id, "call_abc");
    EXPECT_EQ(turn->toolCalls[0].name, "write_file");
    EXPECT_EQ(turn->toolCalls[0].arguments,
              (json{{"path", "hello.c"}, {"content", "int main(void) { return 0; }\n"}}));
    EXPECT_EQ(turn->usage.inputTokens, 120);
    EXPECT_EQ(turn->usage.outputTokens, 30);
    EXPECT_EQ(turn->usage.cachedTokens, 64);
    EXPECT_EQ(turn->model, "gpt-test-2024");
    EXPECT_EQ(turn->attempts, 1);
    EXPECT_GE(turn->latencyMs, 0.0);
    EXPECT_TRUE(backoffs().empty());

    const std::vector<ReceivedRequest> received = requests();
    ASSERT_EQ(received.size(), 1u);
    EXPECT_EQ(received[0].path, "/v1/chat/completions");
    EXPECT_EQ(received[0].authorization, "Bearer test-key-123");
    EXPECT_EQ(received[0].idempotencyKey, "s-1:7");
    EXPECT_EQ(received[0].contentType, "application/json");

    const json body = json::parse(received[0].body);
    EXPECT_EQ(body["model"], "gpt-test");
    const json &messages = body["messages"];
    ASSERT_EQ(messages.size(), 4u);
    EXPECT_EQ(messages[0]["role"], "system");
    EXPECT_THAT(messages[0]["content"].get<std::string>(), HasSubstr("finish"));
    EXPECT_EQ(messages[1], (json{{"role", "user"}, {"content", "Compile hello.c"}}));
    EXPECT_EQ(messages[2]["role"], "assistant");
    EXPECT_EQ(messages[2]["content"], "Let me look first.");
    ASSERT_EQ(messages[2]["tool_calls"].size(), 1u);
    const json &call = messages[2]["tool_calls"][0];
    EXPECT_EQ(call["id"], "call_1");
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "run_command");
    ASSERT_TRUE(call["function"]["arguments"].is_string());   // the wire carries arguments as a JSON string
    EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), (json{{"command", "ls"}}));
    EXPECT_EQ(messages[3]["role"], "tool");
    EXPECT_EQ(messages[3]["tool_call_id"], "call_1");
    EXPECT_EQ(json::parse(messages[3]["content"].get<std::string>())["stdout"], "README\n");

    std::vector<std::string> toolNames;
    for (const json &t : body["tools"]) {
        EXPECT_EQ(t["type"], "function");
        EXPECT_EQ(t["function"]["parameters"]["type"], "object");
        toolNames.push_back(t["function"]["name"]);
    }
    // Every tool the engine carries out (tool_catalogue_test.cpp checks the schemas).
    EXPECT_EQ(toolNames, (std::vector<std::string>{"run_command", "write_file", "read_file", "read_records",
                                                   "request_environment", "finish", "propose_change"}));
    EXPECT_EQ(turn->stopReason, "tool_calls");
}

TEST_F(OpenAiModelTest, RetriesA429HonouringRetryAfter)
{
    respond({{429, R"({"error": {"message": "Rate limit reached", "type": "requests"}})", {{"Retry-After", "2"}}},
             {200, toolCallResponse(), {}}});
    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_TRUE(turn) << turn.error().message;
    EXPECT_EQ(turn->attempts, 2);
    EXPECT_EQ(requests().size(), 2u);
    EXPECT_EQ(backoffs(), (std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(2000)}));
    // A retry repeats the same request, with the same idempotency key.
    EXPECT_EQ(requests()[0].body, requests()[1].body);
    EXPECT_EQ(requests()[1].idempotencyKey, "s-1:7");
}

TEST_F(OpenAiModelTest, RetriesA500WithBackoff)
{
    respond({{500, "internal error", {}}, {200, toolCallResponse(), {}}});
    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_TRUE(turn) << turn.error().message;
    EXPECT_EQ(turn->attempts, 2);
    const std::vector<std::chrono::milliseconds> waits = backoffs();
    ASSERT_EQ(waits.size(), 1u);
    EXPECT_GE(waits[0].count(), m_config.initialBackoffMs / 2);
    EXPECT_LE(waits[0].count(), m_config.initialBackoffMs);
}

TEST_F(OpenAiModelTest, GivesUpAfterMaxRetries)
{
    respond({{503, "upstream overloaded", {}}});
    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::Unavailable);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("4 attempt(s)"), HasSubstr("HTTP 503"),
                                            HasSubstr("upstream overloaded")));
    EXPECT_EQ(requests().size(), 4u);
    const std::vector<std::chrono::milliseconds> waits = backoffs();
    ASSERT_EQ(waits.size(), 3u);
    for (size_t i = 0; i < waits.size(); ++i) {
        const int64_t full = m_config.initialBackoffMs << i;   // doubles per retry
        EXPECT_GE(waits[i].count(), full / 2) << i;
        EXPECT_LE(waits[i].count(), full) << i;
    }
}

TEST_F(OpenAiModelTest, RetriesConnectionErrors)
{
    m_server.stop();
    m_config.maxRetries = 1;
    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::Unavailable);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("2 attempt(s)"), HasSubstr("connection error")));
    EXPECT_EQ(backoffs().size(), 1u);
}

TEST_F(OpenAiModelTest, ReportsABodyThatIsNotJson)
{
    respond({{200, "<html>502 Bad Gateway</html>", {}}});
    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("malformed response"), HasSubstr("not JSON"),
                                            HasSubstr("<html>502 Bad Gateway</html>"), HasSubstr("base_url")));
    EXPECT_EQ(requests().size(), 1u);   // a malformed answer is not retried
}

TEST_F(OpenAiModelTest, ReportsMissingChoices)
{
    respond({{200, R"({"id": "x", "choices": []})", {}}});
    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(turn.error().message, HasSubstr("no choices"));
}

TEST_F(OpenAiModelTest, ReportsArgumentsThatAreNotJson)
{
    const json body = {{"choices",
                        {{{"message",
                           {{"role", "assistant"},
                            {"content", nullptr},
                            {"tool_calls",
                             {{{"id", "call_9"},
                               {"type", "function"},
                               {"function", {{"name", "run_command"}, {"arguments", "{\"command\": \"ls"}}}}}}}}}}}};
    respond({{200, body.dump(), {}}});
    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("arguments of tool call 'run_command' (call_9)"),
                                            HasSubstr("not valid JSON"), HasSubstr("{\"command\": \"ls")));
}

TEST_F(OpenAiModelTest, MissingKeyVariableIsAFailedPrecondition)
{
    ::unsetenv(kKeyVariable);
    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::FailedPrecondition);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr(kKeyVariable), HasSubstr("api_key_env")));
    EXPECT_TRUE(requests().empty());
}

TEST_F(OpenAiModelTest, NoKeyVariableSendsNoAuthorization)
{
    m_config.apiKeyEnv.clear();
    respond({{200, toolCallResponse(), {}}});
    OpenAiModel model = makeModel();
    ASSERT_TRUE(model.next(m_context));
    EXPECT_EQ(requests().at(0).authorization, "");
}

TEST_F(OpenAiModelTest, ClientErrorsAreNotRetried)
{
    respond({{401, R"({"error": {"message": "Incorrect API key provided"}})", {}}});
    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::PermissionDenied);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("HTTP 401"), HasSubstr("Incorrect API key"),
                                            HasSubstr(kKeyVariable)));
    EXPECT_EQ(requests().size(), 1u);

    respond({{400, R"({"error": {"message": "Unrecognized request argument"}})", {}}});
    turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::InvalidArgument);
}

TEST_F(OpenAiModelTest, AcceptsServersThatSendArgumentsAsObjectsWithoutIds)
{
    const json body = {{"model", "llama"},
                       {"choices",
                        {{{"message",
                           {{"role", "assistant"},
                            {"tool_calls",
                             {{{"function", {{"name", "finish"},
                                             {"arguments", {{"status", "succeeded"}, {"summary", "ok"}}}}}}}}}}}}}};
    respond({{200, body.dump(), {}}});
    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_TRUE(turn) << turn.error().message;
    ASSERT_EQ(turn->toolCalls.size(), 1u);
    EXPECT_EQ(turn->toolCalls[0].id, "call-s-1:7-0");
    EXPECT_EQ(turn->toolCalls[0].arguments["status"], "succeeded");
    EXPECT_EQ(turn->usage.inputTokens, 0);
}

TEST_F(OpenAiModelTest, ServesSeveralWorkersAtOnce)
{
    respond({{200, toolCallResponse(), {}}});
    OpenAiModel model = makeModel();
    constexpr int kThreads = 4;
    constexpr int kCallsPerThread = 5;
    std::atomic<int> succeeded{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < kThreads; ++t) {
        workers.emplace_back([&, t] {
            for (int i = 0; i < kCallsPerThread; ++i) {
                ModelContext context = m_context;
                context.idempotencyKey = "s-" + std::to_string(t) + ":" + std::to_string(i);
                if (model.next(context))
                    ++succeeded;
            }
        });
    }
    for (std::thread &worker : workers)
        worker.join();
    EXPECT_EQ(succeeded.load(), kThreads * kCallsPerThread);
    EXPECT_EQ(requests().size(), static_cast<size_t>(kThreads * kCallsPerThread));
}

TEST_F(OpenAiModelTest, NextAsyncRetriesA429HonouringRetryAfter)
{
    respond({{429, R"({"error": {"message": "Rate limit reached"}})", {{"Retry-After", "2"}}},
             {200, toolCallResponse(), {}}});
    OpenAiModel model = makeModel();
    auto turn = nextAsyncAndWait(model);
    ASSERT_TRUE(turn) << turn.error().message;
    EXPECT_EQ(turn->attempts, 2);
    EXPECT_EQ(turn->toolCalls.at(0).id, "call_abc");
    EXPECT_EQ(backoffs(), (std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(2000)}));
}

TEST_F(OpenAiModelTest, NextAsyncRetriesA500)
{
    respond({{500, "internal error", {}}, {200, toolCallResponse(), {}}});
    OpenAiModel model = makeModel();
    auto turn = nextAsyncAndWait(model);
    ASSERT_TRUE(turn) << turn.error().message;
    EXPECT_EQ(turn->attempts, 2);
    EXPECT_EQ(backoffs().size(), 1u);
}

TEST_F(OpenAiModelTest, NextAsyncReportsAMalformedBody)
{
    respond({{200, R"({"id": "x", "choices": [{"message": "not an object"}]})", {}}});
    OpenAiModel model = makeModel();
    auto turn = nextAsyncAndWait(model);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr(m_server.chatUrl()), HasSubstr("malformed response"),
                                            HasSubstr("choices[0] has no message object")));
    EXPECT_EQ(requests().size(), 1u);
}

TEST_F(OpenAiModelTest, NextAsyncWithoutAKeyFailsBeforeItReturns)
{
    ::unsetenv(kKeyVariable);
    OpenAiModel model = makeModel();
    Inbox<Result<ModelTurn>> turns;
    model.nextAsync(m_context, turns.doneFor(0));
    ASSERT_EQ(turns.deliveries(0), 1u);
    EXPECT_EQ(turns.first(0).error().code, ErrorCode::FailedPrecondition);
    EXPECT_TRUE(requests().empty());
}

// Every turn is held by the server until all 64 are open at once, so this passes only if the
// adapter keeps them all in flight together; and it must do so without a thread for each.
TEST_F(OpenAiModelTest, SixtyFourTurnsWaitAtOnceWithoutAThreadEach)
{
    constexpr int kTurns = 64;
    FakeChatServer server(kTurns + 8);   // a worker for each held request
    server.respond({{200, toolCallResponse(), {}}});
    server.holdUntilOpen(kTurns);
    m_config.baseUrl = server.baseUrl();
    m_config.maxRetries = 0;   // a request the server gave up holding fails the test at once
    OpenAiModel model = makeModel();

    const size_t threadsBefore = test::threadCount();
    Inbox<Result<ModelTurn>> turns;
    for (int i = 0; i < kTurns; ++i) {
        ModelContext context = m_context;
        context.idempotencyKey = "s-" + std::to_string(i) + ":1";
        model.nextAsync(std::move(context), turns.doneFor(i));
    }
    const size_t threadsWhileWaiting = test::threadCount();
    ASSERT_TRUE(turns.waitFor(kTurns));

    // The loop's own thread; curl needs no resolver thread for a numeric address.
    EXPECT_LE(threadsWhileWaiting, threadsBefore + 2);
    EXPECT_EQ(server.mostHeld(), kTurns);
    for (int i = 0; i < kTurns; ++i) {
        EXPECT_EQ(turns.deliveries(i), 1u) << i;
        const Result<ModelTurn> turn = turns.first(i);
        ASSERT_TRUE(turn) << i << ": " << turn.error().message;
        EXPECT_EQ(turn->attempts, 1);
        EXPECT_EQ(turn->toolCalls.at(0).name, "write_file");
    }
    EXPECT_EQ(server.requests().size(), static_cast<size_t>(kTurns));
}

TEST_F(OpenAiModelTest, AHangingEndpointTimesOutWhileOtherTurnsComplete)
{
    respond({{200, toolCallResponse(), {}}});
    m_server.hangOn("s-1:hang");
    m_config.timeoutMs = 1500;
    m_config.maxRetries = 0;
    OpenAiModel model = makeModel();

    Inbox<Result<ModelTurn>> turns;
    ModelContext hanging = m_context;
    hanging.idempotencyKey = "s-1:hang";
    model.nextAsync(hanging, turns.doneFor(0));
    ASSERT_TRUE(m_server.waitUntilHeld(1));   // sent, read by the server, never to be answered
    constexpr int kOthers = 5;
    for (int i = 1; i <= kOthers; ++i) {
        ModelContext context = m_context;
        context.idempotencyKey = "s-2:" + std::to_string(i);
        model.nextAsync(std::move(context), turns.doneFor(i));
    }
    ASSERT_TRUE(turns.waitFor(kOthers + 1));

    const std::vector<int> order = turns.order();
    EXPECT_EQ(order.back(), 0) << "the other turns waited for the hanging one";
    for (int i = 1; i <= kOthers; ++i)
        EXPECT_TRUE(turns.first(i)) << i;
    const Result<ModelTurn> hung = turns.first(0);
    ASSERT_FALSE(hung);
    EXPECT_EQ(hung.error().code, ErrorCode::Unavailable);
    EXPECT_THAT(hung.error().message, AllOf(HasSubstr(m_server.chatUrl()), HasSubstr("1 attempt(s)"),
                                            HasSubstr("connection error"), HasSubstr("timed out after")));
}

TEST_F(OpenAiModelTest, CancelInFlightEndsEveryWaitingTurnOnce)
{
    respond({{200, toolCallResponse(), {}}});
    m_server.holdUntilOpen(1000);   // a slow server: nothing is answered until release()
    constexpr int kTurns = 5;
    Inbox<Result<ModelTurn>> turns;
    {
        OpenAiModel model = makeModel();
        for (int i = 0; i < kTurns; ++i) {
            ModelContext context = m_context;
            context.idempotencyKey = "s-" + std::to_string(i) + ":1";
            model.nextAsync(std::move(context), turns.doneFor(i));
        }
        ASSERT_TRUE(m_server.waitUntilHeld(kTurns));
        model.cancelInFlight();
        ASSERT_TRUE(turns.waitFor(kTurns));
        for (int i = 0; i < kTurns; ++i) {
            const Result<ModelTurn> turn = turns.first(i);
            ASSERT_FALSE(turn) << i;
            EXPECT_EQ(turn.error().code, ErrorCode::Cancelled) << i;
            EXPECT_THAT(turn.error().message, AllOf(HasSubstr(m_server.chatUrl()), HasSubstr("cancelled")));
        }

        // A cancel ends what was open then, not the adapter.
        m_server.release();
        auto turn = model.next(m_context);
        EXPECT_TRUE(turn) << turn.error().message;
    }   // the adapter is gone: a second delivery for any turn would have come by now
    for (int i = 0; i < kTurns; ++i)
        EXPECT_EQ(turns.deliveries(i), 1u) << i;
}

TEST_F(OpenAiModelTest, NextFromACompletionCallbackIsRefused)
{
    respond({{200, toolCallResponse(), {}}});
    OpenAiModel model = makeModel();
    Inbox<Result<ModelTurn>> turns;
    model.nextAsync(m_context, [&](Result<ModelTurn>) { turns.doneFor(0)(model.next(m_context)); });
    ASSERT_TRUE(turns.waitFor(1));
    const Result<ModelTurn> nested = turns.first(0);
    ASSERT_FALSE(nested);
    EXPECT_EQ(nested.error().code, ErrorCode::Internal);
    EXPECT_THAT(nested.error().message, HasSubstr("nextAsync"));
}

} // namespace
} // namespace paddock::llm
