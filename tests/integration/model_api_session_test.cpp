// A session driven by a hosted model API, end to end: the real paddock-pool and paddockd (processes,
// bubblewrap sandboxes), paddockctl as a user runs it, and only the model API faked, speaking its
// real protocol over HTTP on loopback: an `anthropic` session (the Messages API, the key in a file
// of mode 0600 named by broker.toml) and an `openai` session (chat completions) each run a command
// in their sandbox, read its output back and finish. The fakes refuse what the real APIs refuse
// (fake_anthropic_server.h), so every request the broker made was a valid one.

#include "tests/integration/daemons_fixture.h"
#include "tests/unit/broker/llm/chat_test_support.h"
#include "tests/unit/broker/llm/fake_anthropic_server.h"

#include <sys/stat.h>

#include <cmath>

namespace paddock::test {
namespace {

using nlohmann::json;
using llm::test::CannedResponse;
using llm::test::FakeAnthropicServer;
using llm::test::FakeChatServer;

constexpr const char *kCommand = "echo \"made in $(pwd)\" > note.txt && cat note.txt";

class ModelApiSession : public DaemonsTest {
protected:
    void SetUp() override
    {
        DaemonsTest::SetUp();
        if (IsSkipped() || HasFatalFailure())
            return;
        // The key file is written with the config; the broker reads it at each call and refuses it
        // unless only its owner may read it.
        ASSERT_EQ(::chmod((*m_dir / "xdg/config/paddock/anthropic.key").c_str(), 0600), 0);
    }

    std::map<std::string, std::string> configFiles() const override
    {
        return {{"broker.toml", "[models.anthropic]\n"
                                "base_url = \"" + m_anthropic.baseUrl() + "\"\n"
                                "model = \"claude-test\"\n"
                                "api_key_file = \"anthropic.key\"\n"   // next to broker.toml
                                "max_retries = 1\n"
                                "initial_backoff_ms = 10\n"
                                "\n[models.openai]\n"
                                "base_url = \"" + m_openai.baseUrl() + "\"\n"
                                "model = \"gpt-test\"\n"
                                "api_key_env = \"\"\n"
                                "max_retries = 1\n"
                                "initial_backoff_ms = 10\n"},
                {"anthropic.key", m_anthropic.apiKey() + "\n"}};
    }

    // Submits a goal to `model`, follows it to its end, and returns its log; the session must
    // have run kCommand in its sandbox and finished with the summary the model gave.
    json runCommandSession(const std::string &model)
    {
        const std::string id = submitAndFollow({"--goal", "Write a note and read it back", "--model", model});
        if (id.empty())
            return json::array();
        const json shown = json::parse(cli({"show", id, "--output", "json"}).out, nullptr, false);
        EXPECT_EQ(shown.value("status", ""), "succeeded") << shown.dump();
        EXPECT_EQ(shown.value("status_reason", ""), "wrote the note") << shown.dump();
        const json events = eventsOf(id);
        const auto results = ofKind(events, "tool.result");
        EXPECT_EQ(results.size(), 2u) << events.dump(1);
        if (results.size() == 2) {
            EXPECT_EQ(results[0].value("name", ""), "run_command");
            EXPECT_EQ(results[0].value("exit_code", -1), 0) << results[0];
            EXPECT_EQ(results[0].value("stdout", ""), "made in /workspace\n") << results[0];
            EXPECT_EQ(results[1].value("name", ""), "finish");
        }
        EXPECT_EQ(ofKind(events, "sandbox.claimed").size(), 1u);
        EXPECT_EQ(ofKind(events, "model.response").size(), 2u);
        EXPECT_TRUE(ofKind(events, "model.error").empty()) << events.dump(1);
        return events;
    }

    static std::vector<json> ofKind(const json &events, const std::string &kind)
    {
        std::vector<json> out;
        for (const auto &e : events) {
            if (e.value("kind", "") == kind)
                out.push_back(e["payload"]);
        }
        return out;
    }

    // Constructed before SetUp, so that configFiles() can name them.
    FakeAnthropicServer m_anthropic;
    FakeChatServer m_openai;
};

TEST_F(ModelApiSession, AnAnthropicSessionRunsACommandAndFinishes)
{
    m_anthropic.respond(
        {{200, FakeAnthropicServer::messageBody(
                   json::array({FakeAnthropicServer::text("I'll write the note."),
                                FakeAnthropicServer::toolUse("toolu_01", "run_command", {{"command", kCommand}})}),
                   "tool_use",
                   {{"input_tokens", 900}, {"output_tokens", 40}, {"cache_creation_input_tokens", 2000},
                    {"cache_read_input_tokens", 0}}),
          {}},
         {200, FakeAnthropicServer::messageBody(
                   json::array({FakeAnthropicServer::toolUse("toolu_02", "finish",
                                                             {{"status", "succeeded"}, {"summary", "wrote the note"}})}),
                   "tool_use",
                   {{"input_tokens", 60}, {"output_tokens", 25}, {"cache_creation_input_tokens", 300},
                    {"cache_read_input_tokens", 2000}}),
          {}}});
    const json events = runCommandSession("anthropic");

    // Both requests were ones the real API takes, with the key from the file.
    EXPECT_TRUE(m_anthropic.refusals().empty()) << ::testing::PrintToString(m_anthropic.refusals());
    const auto requests = m_anthropic.requests();
    ASSERT_EQ(requests.size(), 2u);
    for (const auto &request : requests) {
        EXPECT_EQ(request.apiKey, m_anthropic.apiKey());
        EXPECT_EQ(request.version, "2023-06-01");
        EXPECT_EQ(request.body.value("model", ""), "claude-test");
    }
    // The second carries the command's result, answering the first's tool_use.
    const json &messages = requests[1].body["messages"];
    ASSERT_EQ(messages.size(), 3u);
    EXPECT_EQ(messages[1]["content"][1]["id"], "toolu_01");
    EXPECT_EQ(messages[2]["content"][0]["tool_use_id"], "toolu_01");
    EXPECT_NE(messages[2]["content"][0]["content"].get<std::string>().find("made in /workspace"), std::string::npos);

    // Cache reads and writes are priced apart: the built-in anthropic prices (per million: input
    // 3.00, output 15.00, cache reads 0.30, cache writes 3.75), the model being unknown to the table.
    int64_t total = 0;
    std::vector<json> modelCosts;
    for (const auto &e : events) {
        if (e.value("kind", "") == "cost" && e["payload"].value("kind", "") == "model") {
            modelCosts.push_back(e);
            total += e.value("cost_micros", int64_t{0});
        }
    }
    ASSERT_EQ(modelCosts.size(), 2u);
    EXPECT_EQ(modelCosts[0]["payload"]["cache_write_tokens"], 2000);
    EXPECT_EQ(modelCosts[0]["payload"]["cache_write_per_million"], 3.75);
    EXPECT_EQ(modelCosts[1]["payload"]["cached_tokens"], 2000);
    const double expected = (900 * 3.00 + 40 * 15.00 + 2000 * 3.75) + (60 * 3.00 + 25 * 15.00 + 300 * 3.75 + 2000 * 0.30);
    EXPECT_EQ(total, std::llround(expected));
    const auto responses = ofKind(events, "model.response");
    ASSERT_EQ(responses.size(), 2u);
    EXPECT_EQ(responses[0]["stop_reason"], "tool_use");
    EXPECT_EQ(responses[0]["usage"]["input_tokens"], 900 + 2000);
}

TEST_F(ModelApiSession, AnOpenAiSessionRunsACommandAndFinishes)
{
    const auto toolCall = [](const std::string &id, const std::string &name, const json &arguments) {
        return llm::test::toolCallCompletion(id, name, arguments);
    };
    m_openai.respond({{200, toolCall("call_1", "run_command", {{"command", kCommand}}), {}},
                      {200, toolCall("call_2", "finish", {{"status", "succeeded"}, {"summary", "wrote the note"}}), {}}});
    runCommandSession("openai");

    const auto requests = m_openai.requests();
    ASSERT_EQ(requests.size(), 2u);
    const json second = json::parse(requests[1].body);
    const json &messages = second["messages"];
    ASSERT_EQ(messages.size(), 4u);
    EXPECT_EQ(messages[3]["role"], "tool");
    EXPECT_EQ(messages[3]["tool_call_id"], "call_1");
    EXPECT_NE(messages[3]["content"].get<std::string>().find("made in /workspace"), std::string::npos);
    EXPECT_EQ(second["tools"].size(), 7u) << "every tool of the catalogue";
}

} // namespace
} // namespace paddock::test
