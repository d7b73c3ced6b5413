// An LLM agent chooses its tier: an `openai` session (the real adapter over HTTP to a fake
// chat-completions server on loopback) of an agent in mode hybrid is told its tiers, their prices
// and its bound in the system prompt, asks for a tier above its bound with request_environment,
// waits (no model call) for the tier_escalation review, and once an approver other than its
// submitter approves, moves with its workspace to the new tier and goes on there. A real
// paddock-pool process runs the sandboxes; the broker's parts (SQLite store, step engine, review
// desk) run in this process so that the test decides as another principal (as review_apply_test).

#include "tests/integration/harness.h"
#include "tests/support/engine_fixture.h"
#include "tests/unit/broker/llm/chat_test_support.h"

#include "broker/llm/openai_model.h"
#include "broker/pool_client/grpc_pool_client.h"
#include "broker/review/review_desk.h"
#include "broker/store/agent_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace paddock::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using nlohmann::json;
using llm::test::FakeChatServer;

// A chat completion that calls one tool.
std::string toolCall(const std::string &id, const std::string &name, const json &arguments)
{
    return llm::test::toolCallCompletion(id, name, arguments, nullptr, 500, 30);
}

class LlmTierEscalation : public EngineFixture {
protected:
    void SetUp() override
    {
        const auto missing = missingBinaries({"paddock-pool", "paddock-sandbox-init"});
        if (!missing.empty())
            GTEST_SKIP() << "not built: " << missing.front();
        EngineFixture::SetUp();
        auto queries = store::ReviewQueries::open(*m_store);
        ASSERT_TRUE(queries);
        m_queries = std::move(*queries);
        m_desk = std::make_unique<review::ReviewDesk>(*m_store, *m_queries, review::ReviewPolicy{});

        // Two bubblewrap tiers of different sizes and prices.
        std::filesystem::create_directories(m_poolDir / "xdg/config/paddock");
        std::ofstream(m_poolDir / "xdg/config/paddock/pool.toml")
            << "[[tier]]\nname = \"small\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 4\nmemory_mb = 128\n"
               "cpu = 1.0\nprice_per_hour = 0.02\n"
               "[[tier]]\nname = \"big\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 4\nmemory_mb = 512\n"
               "cpu = 2.0\nprice_per_hour = 0.2\n";
        auto pool = startPool(m_poolDir);
        ASSERT_TRUE(pool) << pool.error().message;
        m_pool = std::make_unique<PoolProcess>(std::move(*pool));
        m_pools.add(pool_client::makeGrpcPoolClient("local", m_pool->endpoint), true);

        llm::OpenAiConfig config;
        config.baseUrl = m_chat.baseUrl();
        config.model = "gpt-test";
        config.apiKeyEnv.clear();
        config.maxRetries = 0;
        m_model = std::make_unique<llm::OpenAiModel>("openai", config);
    }

    void TearDown() override
    {
        m_desk.reset();
        EngineFixture::TearDown();
    }

    engine::StepEngine makeLlmEngine(const engine::EnvironmentDecider &decider)
    {
        engine::EngineOptions options;
        options.checkpointer = m_checkpointer.get();
        options.decider = &decider;
        return engine::StepEngine(*m_store, m_pools, [this](const std::string &name) -> llm::ModelAdapter * {
            return name == "openai" ? m_model.get() : nullptr;
        }, std::move(options));
    }

    // The requests the model was sent, as JSON.
    std::vector<json> modelRequests()
    {
        std::vector<json> out;
        for (const auto &request : m_chat.requests())
            out.push_back(json::parse(request.body));
        return out;
    }

    // The tool message answering `callId` in a chat request, parsed.
    static json toolMessage(const json &request, const std::string &callId)
    {
        for (const auto &message : request["messages"]) {
            if (message.value("role", "") == "tool" && message.value("tool_call_id", "") == callId)
                return json::parse(message["content"].get<std::string>());
        }
        return nullptr;
    }

    FakeChatServer m_chat;
    TempDir m_poolDir;
    std::unique_ptr<PoolProcess> m_pool;
    std::unique_ptr<store::ReviewQueries> m_queries;
    std::unique_ptr<review::ReviewDesk> m_desk;
    std::unique_ptr<llm::OpenAiModel> m_model;
};

TEST_F(LlmTierEscalation, AskingAboveItsBoundWaitsForTheReviewAndMovesOnApproval)
{
    auto agents = store::AgentStore::open(*m_store);
    ASSERT_TRUE(agents) << agents.error().message;
    agents::Agent agent;
    agent.name = "builder";
    agent.owner = "bob";
    agent.defaultTier = "small";
    agent.selectionMode = agents::SelectionMode::Hybrid;   // bound: its default tier
    ASSERT_TRUE((*agents)->create(agent));
    engine::EnvironmentDecider decider(agents->get(), m_pools, {}, "small");
    auto engine = makeLlmEngine(decider);

    const std::string reason = "the link step needs more than 128 MiB";
    m_chat.respond({{200, toolCall("call_1", "write_file", {{"path", "plan.txt"}, {"content", "written on small\n"}}), {}},
                    {200, toolCall("call_2", "request_environment", {{"tier", "big"}, {"reason", reason}}), {}},
                    {200, toolCall("call_3", "run_command", {{"command", "cat plan.txt; nproc"}}), {}},
                    {200, toolCall("call_4", "finish", {{"summary", "linked on big"}}), {}}});
    const std::string id = submit("", {{"model", "openai"}, {"tier", "small"}, {"agent", "builder"},
                                       {"submitted_by", "bob"}, {"goal", "Link the big binary"}});
    runUntilIdle(engine);

    // The model was told its tiers, their prices and its bound before it chose.
    auto requests = modelRequests();
    ASSERT_EQ(requests.size(), 2u) << "the model is not asked again while the review waits";
    const std::string system = requests[0]["messages"][0]["content"];
    EXPECT_THAT(system, AllOf(HasSubstr("you are on small"),
                              HasSubstr("- small: 1 cpu, 128 MiB memory, $0.02 per hour (current)"),
                              HasSubstr("- big: 2 cpu, 512 MiB memory, $0.20 per hour; above your bound"),
                              HasSubstr("Your bound is small"), HasSubstr("tier_escalation")));
    bool offered = false;
    for (const auto &tool : requests[0]["tools"])
        offered = offered || tool["function"]["name"] == "request_environment";
    EXPECT_TRUE(offered) << "request_environment is offered to the model";

    // It waits for a tier_escalation review, with the model's reason as the justification.
    ASSERT_EQ(session(id).status, core::SessionStatus::WaitingApproval) << session(id).statusReason;
    auto page = m_desk->list({});
    ASSERT_TRUE(page);
    ASSERT_EQ(page->items.size(), 1u);
    const auto item = page->items.front();
    EXPECT_EQ(item.kind, "tier_escalation");
    EXPECT_EQ(item.sessionId, id);
    EXPECT_EQ(json::parse(item.payload).value("justification", ""), reason) << item.payload;
    const auto decisions = payloadsOf(events(id), core::kind::EnvDecision);
    ASSERT_FALSE(decisions.empty());
    EXPECT_EQ(decisions.back()["verdict"], "needs_review");
    EXPECT_EQ(decisions.back()["chooser"], "agent");
    EXPECT_EQ(decisions.back()["max_tier_without_review"], "small");
    EXPECT_THAT(decisions.back()["reason"].get<std::string>(), HasSubstr(reason));
    runUntilIdle(engine);
    EXPECT_EQ(m_chat.requests().size(), 2u) << "still waiting, still not asking the model";

    // alice (not bob, who submitted) approves; the session moves and goes on there.
    review::DecideRequest approve;
    approve.ids = {item.id};
    approve.approve = true;
    approve.decider = "alice";
    approve.reason = "the link step does need it";
    approve.changeHashes[item.id] = item.changeHash;
    auto decided = m_desk->decide(approve);
    ASSERT_TRUE(decided) << decided.error().message;
    runUntilIdle(engine);

    const auto done = session(id);
    EXPECT_EQ(done.status, core::SessionStatus::Succeeded) << done.statusReason;
    EXPECT_EQ(done.tier, "big");
    EXPECT_EQ(done.tierChooser, "human");
    requests = modelRequests();
    ASSERT_EQ(requests.size(), 4u);
    // The model read the approval as its call's result, and was told it is on big now.
    const json granted = toolMessage(requests[2], "call_2");
    EXPECT_EQ(granted["granted"], true) << granted;
    EXPECT_EQ(granted["granted_by"], "alice") << granted;
    EXPECT_EQ(granted["tier"], "big") << granted;
    EXPECT_THAT(requests[2]["messages"][0]["content"].get<std::string>(), HasSubstr("you are on big"));
    // The command ran on big, with the file written on small.
    const json cat = toolMessage(requests[3], "call_3");
    EXPECT_EQ(cat["exit_code"], 0) << cat;
    EXPECT_THAT(cat["stdout"].get<std::string>(), HasSubstr("written on small")) << cat;
    json moved;
    for (const auto &payload : payloadsOf(events(id), core::kind::SandboxMoved))
        moved = payload;
    ASSERT_FALSE(moved.is_null());
    EXPECT_EQ(moved["from_tier"], "small");
    EXPECT_EQ(moved["to_tier"], "big");
    EXPECT_EQ(moved["workspace"], "restored");
}

} // namespace
} // namespace paddock::test
