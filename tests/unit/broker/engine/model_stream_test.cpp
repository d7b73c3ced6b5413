// A model's streamed answer reaches the log as model.delta events while it streams
// (broker/engine/output_recorder.h): visible before the answer ends, and a stream cut mid-way
// retried and recorded once, the cut attempt's deltas superseded. The real store and the openai
// adapter against the fake chat completions server, which holds or cuts its stream as told.

#include "broker/llm/openai_model.h"
#include "broker/secrets/secret_store.h"
#include "tests/support/engine_fixture.h"
#include "tests/support/fake_pool_client.h"
#include "tests/unit/broker/llm/chat_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <thread>

namespace paddock::engine {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kAnswer = "Nothing to build: the goal is already met, so I stop here.";

class ModelStreamEngineTest : public test::EngineFixture {
protected:
    void SetUp() override
    {
        EngineFixture::SetUp();
        auto pool = std::make_unique<test::FakePoolClient>("fake");
        pool->setTier("lite", 1, 0, 4);
        m_pools.add(std::move(pool), false);
        llm::OpenAiConfig config;
        config.baseUrl = m_server.baseUrl();
        config.model = "gpt-test";
        config.apiKeyEnv.clear();
        config.maxRetries = 2;
        m_model = std::make_unique<llm::OpenAiModel>("openai", config, [](std::chrono::milliseconds) { return 0ms; });
        json completion{{"model", "gpt-test"},
                        {"choices", json::array({{{"index", 0},
                                                  {"message", {{"role", "assistant"}, {"content", kAnswer}}},
                                                  {"finish_reason", "stop"}}})},
                        {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 12}}}};
        m_server.respond({{200, completion.dump(), {}}});
    }

    void TearDown() override
    {
        m_server.streamGate().release();
        if (m_steps.joinable())
            m_steps.join();
        EngineFixture::TearDown();
    }

    StepEngine makeStreamingEngine(EngineOptions options = {})
    {
        return StepEngine(*m_store, m_pools, [this](const std::string &name) -> llm::ModelAdapter * {
            return name == "openai" ? m_model.get() : nullptr;
        }, std::move(options));
    }

    // Until the deltas a reader keeps hold `text` (up to 30 s).
    bool waitForKeptText(const std::string &id, const std::string &text)
    {
        for (int round = 0; round < 3000; ++round) {
            if (keptText(events(id)) == text)
                return true;
            std::this_thread::sleep_for(10ms);
        }
        return false;
    }

    // The arguments of tool call `index` the deltas a reader keeps hold, offsets checked dense.
    static std::string keptArguments(const std::vector<core::Event> &log, int index)
    {
        std::string arguments;
        for (const auto &p : payloadsOf(log, core::kind::ModelDelta)) {
            for (const auto &call : p.value("tool_calls", json::array())) {
                if (call["index"] != index)
                    continue;
                EXPECT_EQ(call["offset"].get<size_t>(), arguments.size()) << p.dump();
                arguments += call["arguments"].get<std::string>();
            }
        }
        return arguments;
    }

    // Until a model.delta is in the log (up to 30 s).
    bool waitForDelta(const std::string &id)
    {
        for (int round = 0; round < 3000; ++round) {
            if (count(events(id), core::kind::ModelDelta) > 0)
                return true;
            std::this_thread::sleep_for(10ms);
        }
        return false;
    }

    // The text of the deltas a reader keeps: those of the last attempt, offsets checked dense.
    static std::string keptText(const std::vector<core::Event> &log)
    {
        int last = 0;
        for (const auto &p : payloadsOf(log, core::kind::ModelDelta))
            last = std::max(last, p["attempt"].get<int>());
        std::string text;
        for (const auto &p : payloadsOf(log, core::kind::ModelDelta)) {
            if (p["attempt"] != last || !p.contains("text"))
                continue;
            EXPECT_EQ(p["text_offset"].get<size_t>(), text.size()) << p.dump();
            text += p["text"].get<std::string>();
        }
        return text;
    }

    llm::test::FakeChatServer m_server;
    std::unique_ptr<llm::OpenAiModel> m_model;
    std::thread m_steps;
};

TEST_F(ModelStreamEngineTest, TheAnswerIsInTheLogBeforeItEnds)
{
    m_server.streamPlans({llm::test::StreamPlan{.holdAfter = 6}});
    const std::string id = submit("", {{"model", "openai"}});
    auto engine = makeStreamingEngine();
    m_steps = std::thread([&] { runUntilIdle(engine); });

    // The server holds the stream open: what is in the log now was recorded while it streamed.
    ASSERT_TRUE(waitForDelta(id)) << "no model.delta reached the log while the answer streamed";
    EXPECT_EQ(count(events(id), core::kind::ModelResponse), 0);
    m_server.streamGate().release();
    m_steps.join();

    const auto log = events(id);
    ASSERT_EQ(count(log, core::kind::ModelResponse), 1);
    const json response = payloadsOf(log, core::kind::ModelResponse).at(0);
    EXPECT_EQ(response["text"], kAnswer);   // as it always was
    EXPECT_EQ(keptText(log), kAnswer);
    int64_t responseSeq = 0;
    for (const auto &e : log)
        responseSeq = e.kind == core::kind::ModelResponse ? e.seq : responseSeq;
    for (const auto &e : log) {
        if (e.kind == core::kind::ModelDelta) {
            EXPECT_LT(e.seq, responseSeq) << "a delta recorded after its response";
        }
    }
    EXPECT_EQ(session(id).status, core::SessionStatus::Succeeded);
}

TEST_F(ModelStreamEngineTest, AStreamCutMidWayIsRetriedAndRecordedOnce)
{
    // The first attempt streams a few deltas, waits until they are in the log, then is cut.
    m_server.streamPlans({llm::test::StreamPlan{.cutAfter = 7, .holdAfter = 5}});
    const std::string id = submit("", {{"model", "openai"}});
    auto engine = makeStreamingEngine();
    m_steps = std::thread([&] { runUntilIdle(engine); });
    ASSERT_TRUE(waitForDelta(id));
    m_server.streamGate().release();
    m_steps.join();

    const auto log = events(id);
    EXPECT_EQ(count(log, core::kind::ModelResponse), 1);
    EXPECT_EQ(count(log, core::kind::ModelError), 0);
    const json response = payloadsOf(log, core::kind::ModelResponse).at(0);
    EXPECT_EQ(response["text"], kAnswer);
    EXPECT_EQ(response["attempts"], 2);
    bool superseded = false;
    for (const auto &p : payloadsOf(log, core::kind::ModelDelta)) {
        if (p["attempt"] == 2 && p.value("supersedes", 0) == 1)
            superseded = true;
    }
    EXPECT_TRUE(superseded) << "the retry's first delta does not supersede the cut attempt's";
    EXPECT_EQ(keptText(log), kAnswer);
    EXPECT_EQ(m_server.requests().size(), 2u);
}

// A model may say a secret's value (echoed from somewhere the redactor missed, or guessed): it is
// redacted as it streams, even split across two deltas with a flush in between, in the text and in
// a tool call's arguments, and in the model.response.
TEST_F(ModelStreamEngineTest, ASecretTheModelSaysIsRedactedAsItStreams)
{
    const std::string value = "tok-Zq81-model-Answer-5";
    auto secrets = secrets::SecretStore::open(m_dir / "config" / "secrets.toml");
    ASSERT_TRUE(secrets) << secrets.error().message;
    ASSERT_TRUE((*secrets)->set("TOKEN", value));
    const json arguments{{"summary", "used " + value}};
    json completion{{"model", "gpt-test"},
                    {"choices", json::array({{{"index", 0},
                                              {"message", {{"role", "assistant"},
                                                           {"content", "Here is " + value + " ok."},
                                                           {"tool_calls", json::array({{{"id", "call_1"},
                                                                                        {"type", "function"},
                                                                                        {"function", {{"name", "finish"},
                                                                                                      {"arguments", arguments.dump()}}}}})}}},
                                              {"finish_reason", "tool_calls"}}})},
                    {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 12}}}};
    m_server.respond({{200, completion.dump(), {}}});
    // The fake streams the text 5 bytes a delta: "Here ", "is to", then it holds the stream. The
    // recorder flushes "Here is " and keeps "to", which may begin the value.
    m_server.streamPlans({llm::test::StreamPlan{.holdAfter = 3}});
    const std::string id = submit("", {{"model", "openai"}});
    EngineOptions options;
    options.secrets = secrets->get();
    auto engine = makeStreamingEngine(std::move(options));
    m_steps = std::thread([&] { runUntilIdle(engine); });
    ASSERT_TRUE(waitForKeptText(id, "Here is ")) << "kept: " << keptText(events(id));
    m_server.streamGate().release();
    m_steps.join();

    const auto log = events(id);
    EXPECT_EQ(keptText(log), "Here is [REDACTED:TOKEN] ok.");
    EXPECT_EQ(keptArguments(log, 0), R"({"summary":"used [REDACTED:TOKEN]"})");
    const json response = payloadsOf(log, core::kind::ModelResponse).at(0);
    EXPECT_EQ(response["text"], "Here is [REDACTED:TOKEN] ok.");
    EXPECT_EQ(response["tool_calls"][0]["arguments"]["summary"], "used [REDACTED:TOKEN]") << response.dump();
    for (const auto &e : log) {
        EXPECT_EQ(e.payload.find(value.substr(0, 9)), std::string::npos) << e.kind << " " << e.payload;
        EXPECT_EQ(e.payload.find(value.substr(9)), std::string::npos) << e.kind << " " << e.payload;
    }
    EXPECT_EQ(session(id).status, core::SessionStatus::Succeeded);
}

TEST_F(ModelStreamEngineTest, MalformedSseIsNamedInTheSessionLog)
{
    m_server.streamPlans({llm::test::StreamPlan{.malformedAt = 3}, llm::test::StreamPlan{.malformedAt = 3},
                          llm::test::StreamPlan{.malformedAt = 3}});
    const std::string id = submit("", {{"model", "openai"}});
    auto engine = makeStreamingEngine();
    takeSteps(engine, 1);
    const auto errors = payloadsOf(events(id), core::kind::ModelError);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0]["error"].get<std::string>().find("malformed server-sent events"), std::string::npos)
        << errors[0].dump();
}

} // namespace
} // namespace paddock::engine
