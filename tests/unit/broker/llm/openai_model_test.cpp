// The openai adapter against a real HTTP server on 127.0.0.1 that speaks the chat completions wire
// format. Backoff waits go through a recording sleep function, so nothing here depends on time.

#include "broker/llm/openai_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

namespace paddock::llm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using nlohmann::json;

constexpr const char *kKeyVariable = "PADDOCK_TEST_OPENAI_KEY";

struct CannedResponse {
    int status = 200;
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
};

struct ReceivedRequest {
    std::string path;
    std::string body;
    std::string authorization;
    std::string idempotencyKey;
    std::string contentType;
};

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
        m_server.Post("/v1/chat/completions", [this](const httplib::Request &request, httplib::Response &response) {
            std::lock_guard lock(m_mutex);
            m_requests.push_back({request.path, request.body, request.get_header_value("Authorization"),
                                  request.get_header_value("Idempotency-Key"),
                                  request.get_header_value("Content-Type")});
            CannedResponse canned = m_responses.empty() ? CannedResponse{500, "no canned response left", {}}
                                                        : m_responses.front();
            if (!m_responses.empty() && m_responses.size() > 1)
                m_responses.pop_front();   // the last one repeats
            response.status = canned.status;
            for (const auto &[key, value] : canned.headers)
                response.set_header(key, value);
            response.set_content(canned.body, "application/json");
        });
        m_port = m_server.bind_to_any_port("127.0.0.1");
        ASSERT_GT(m_port, 0);
        m_thread = std::thread([this] { m_server.listen_after_bind(); });
        while (!m_server.is_running())
            std::this_thread::yield();

        m_config.baseUrl = "http://127.0.0.1:" + std::to_string(m_port) + "/v1/";
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

    void TearDown() override
    {
        m_server.stop();
        if (m_thread.joinable())
            m_thread.join();
        ::unsetenv(kKeyVariable);
    }

    void respond(std::vector<CannedResponse> responses)
    {
        std::lock_guard lock(m_mutex);
        m_responses.assign(responses.begin(), responses.end());
    }

    std::vector<ReceivedRequest> requests()
    {
        std::lock_guard lock(m_mutex);
        return m_requests;
    }

    OpenAiModel makeModel()
    {
        return OpenAiModel("openai", m_config, [this](std::chrono::milliseconds delay) { m_sleeps.push_back(delay); });
    }

    httplib::Server m_server;
    std::thread m_thread;
    int m_port = 0;
    std::mutex m_mutex;
    std::deque<CannedResponse> m_responses;     // guarded by m_mutex
    std::vector<ReceivedRequest> m_requests;    // guarded by m_mutex
    std::vector<std::chrono::milliseconds> m_sleeps;
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
    EXPECT_TRUE(m_sleeps.empty());

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
    EXPECT_EQ(toolNames,
              (std::vector<std::string>{"run_command", "write_file", "read_file", "finish", "propose_change"}));
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
    EXPECT_EQ(m_sleeps, (std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(2000)}));
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
    ASSERT_EQ(m_sleeps.size(), 1u);
    EXPECT_GE(m_sleeps[0].count(), m_config.initialBackoffMs / 2);
    EXPECT_LE(m_sleeps[0].count(), m_config.initialBackoffMs);
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
    ASSERT_EQ(m_sleeps.size(), 3u);
    for (size_t i = 0; i < m_sleeps.size(); ++i) {
        const int64_t full = m_config.initialBackoffMs << i;   // doubles per retry
        EXPECT_GE(m_sleeps[i].count(), full / 2) << i;
        EXPECT_LE(m_sleeps[i].count(), full) << i;
    }
}

TEST_F(OpenAiModelTest, RetriesConnectionErrors)
{
    m_server.stop();
    m_thread.join();
    m_config.maxRetries = 1;
    OpenAiModel model = makeModel();
    auto turn = model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::Unavailable);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("2 attempt(s)"), HasSubstr("connection error")));
    EXPECT_EQ(m_sleeps.size(), 1u);
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

} // namespace
} // namespace paddock::llm
