// The engine's tools against the one definition of the tools (broker/llm/tool_catalogue.h): the
// engine's dispatch table names exactly the catalogue's tools, a model's call that its definition
// refuses becomes the call's error result (nothing runs, the model reads it and goes on), and the
// model is told the session's tiers and its bound. The model here is a list of turns the test
// writes (no network: the adapters' own tests talk HTTP); the store is real, the pool the shared fake.

#include "broker/engine/tool_routes.h"
#include "broker/llm/tool_catalogue.h"
#include "broker/store/agent_store.h"
#include "tests/support/engine_fixture.h"
#include "tests/support/fake_pool_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <set>

namespace paddock::engine {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

TEST(ToolRoutesTest, TheEngineCarriesOutExactlyTheToolsTheModelsAreOffered)
{
    std::set<std::string> routed;
    for (const ToolRouteEntry &entry : toolRoutes())
        EXPECT_TRUE(routed.insert(std::string(entry.tool)).second) << entry.tool << " is routed twice";
    std::set<std::string> defined;
    for (const llm::ToolDefinition &definition : llm::toolCatalogue())
        defined.insert(definition.name);
    for (const auto &name : routed)
        EXPECT_TRUE(defined.contains(name)) << "the engine carries out '" << name
                                            << "', which tool_catalogue.cpp does not define: models are not offered it";
    for (const auto &name : defined)
        EXPECT_TRUE(routed.contains(name)) << "tool_catalogue.cpp defines '" << name
                                           << "', which the engine cannot carry out (tool_routes.cpp)";
    EXPECT_EQ(toolRoute(llm::tool::Finish), ToolRoute::Finish);
    EXPECT_EQ(toolRoute("list_files"), std::nullopt);
}

// A model that answers the turns the test gives it, in order, and keeps what it was asked.
class ListedTurns final : public llm::ModelAdapter {
public:
    explicit ListedTurns(std::vector<llm::ModelTurn> turns) : m_turns(std::move(turns)) {}
    std::string name() const override { return "listed"; }
    Result<llm::ModelTurn> next(const llm::ModelContext &context) override
    {
        std::lock_guard lock(m_mutex);
        m_contexts.push_back(context);
        if (m_contexts.size() > m_turns.size())
            return fail(ErrorCode::FailedPrecondition, "the test gave no turn for this call");
        return m_turns[m_contexts.size() - 1];
    }
    std::vector<llm::ModelContext> contexts()
    {
        std::lock_guard lock(m_mutex);
        return m_contexts;
    }

private:
    const std::vector<llm::ModelTurn> m_turns;
    std::mutex m_mutex;
    std::vector<llm::ModelContext> m_contexts;
};

llm::ModelTurn call(const std::string &id, const std::string &name, json arguments)
{
    llm::ModelTurn turn;
    turn.model = "listed";
    turn.toolCalls.push_back({id, name, std::move(arguments)});
    return turn;
}

class ToolCallsTest : public test::EngineFixture {
protected:
    void SetUp() override
    {
        EngineFixture::SetUp();
        auto pool = std::make_unique<test::FakePoolClient>("fake");
        m_fakePool = pool.get();
        for (const auto &[name, cpu, memory, price] :
             {std::tuple{"lite", 0.5, int64_t{512} << 20, 0.02}, std::tuple{"big", 4.0, int64_t{8} << 30, 0.4}}) {
            m_fakePool->editTier(name, [&](pool_client::TierStatus &tier) {
                tier.warm = 1;
                tier.max = 4;
                tier.cpu = cpu;
                tier.memoryBytes = memory;
                tier.pricePerHourUsd = price;
            });
        }
        m_pools.add(std::move(pool), false);
    }

    StepEngine makeEngine(llm::ModelAdapter &model, EngineOptions options = {})
    {
        options.checkpointer = m_checkpointer.get();
        return StepEngine(*m_store, m_pools, [&model](const std::string &) { return &model; }, std::move(options));
    }

    std::string submitGoal(const json &fields = json::object())
    {
        json created{{"model", "listed"}, {"playbook_toml", ""}};
        created.update(fields);
        return submit("", created);
    }

    test::FakePoolClient *m_fakePool = nullptr;
};

TEST_F(ToolCallsTest, ACallItsDefinitionRefusesIsAnsweredWithTheProblemAndNothingRuns)
{
    ListedTurns model({call("c1", "run_command", {{"cmd", "make"}}),
                       call("c2", "list_files", {{"path", "."}}),
                       call("c3", "finish", {{"summary", "s"}, {"status", "done"}}),
                       call("c4", "run_command", {{"command", "make"}}),
                       call("c5", "finish", {{"summary", "built"}})});
    auto engine = makeEngine(model);
    const std::string id = submitGoal();
    runUntilIdle(engine);

    EXPECT_EQ(session(id).status, core::SessionStatus::Succeeded) << session(id).statusReason;
    const auto results = payloadsOf(events(id), core::kind::ToolResult);
    ASSERT_EQ(results.size(), 5u);
    EXPECT_THAT(results[0].value("error", ""), HasSubstr("run_command: it takes no argument 'cmd'"));
    EXPECT_THAT(results[1].value("error", ""), HasSubstr("there is no tool 'list_files'. The tools are run_command"));
    EXPECT_THAT(results[2].value("error", ""), HasSubstr("status is 'done'"));
    EXPECT_FALSE(results[3].contains("error")) << results[3];
    // Only the valid command ran; the refused finish did not end the session.
    ASSERT_EQ(m_fakePool->execs().size(), 1u);
    EXPECT_EQ(m_fakePool->execs()[0].argv.back(), "make");
    // The model read each refusal as its call's result.
    const auto contexts = model.contexts();
    ASSERT_EQ(contexts.size(), 5u);
    EXPECT_THAT(contexts[1].history.at(0).results.at(0).value("error", ""), HasSubstr("'cmd'"));
}

TEST_F(ToolCallsTest, TheModelIsToldItsTiersAndItsBound)
{
    auto agents = store::AgentStore::open(*m_store);
    ASSERT_TRUE(agents) << agents.error().message;
    agents::Agent agent;
    agent.name = "builder";
    agent.owner = "bob";
    agent.defaultTier = "lite";
    agent.selectionMode = agents::SelectionMode::Hybrid;
    ASSERT_TRUE((*agents)->create(agent));
    EnvironmentDecider decider(agents->get(), m_pools, {}, "lite");
    EngineOptions options;
    options.decider = &decider;
    ListedTurns model({call("c1", "finish", {{"summary", "nothing to do"}})});
    auto engine = makeEngine(model, options);
    const std::string id = submitGoal({{"agent", "builder"}});
    runUntilIdle(engine);

    const auto contexts = model.contexts();
    ASSERT_EQ(contexts.size(), 1u);
    ASSERT_TRUE(contexts[0].environment.has_value());
    const llm::EnvironmentBrief &brief = *contexts[0].environment;
    EXPECT_EQ(brief.currentTier, "lite");
    EXPECT_EQ(brief.selectionMode, "hybrid");
    EXPECT_TRUE(brief.mayRequest);
    EXPECT_EQ(brief.bound, "lite") << "hybrid without a tier rule: bound by its default tier";
    ASSERT_EQ(brief.tiers.size(), 2u);
    EXPECT_EQ(brief.tiers[0].name, "lite");
    EXPECT_FALSE(brief.tiers[0].needsReview);
    EXPECT_EQ(brief.tiers[1].name, "big");
    EXPECT_DOUBLE_EQ(brief.tiers[1].pricePerHourUsd, 0.4);
    EXPECT_EQ(brief.tiers[1].memoryBytes, int64_t{8} << 30);
    EXPECT_TRUE(brief.tiers[1].needsReview);

    // The built-in agent cannot choose: the model is told so.
    ListedTurns other({call("c1", "finish", {{"summary", "done"}})});
    auto plain = makeEngine(other, options);
    submitGoal();
    runUntilIdle(plain);
    ASSERT_EQ(other.contexts().size(), 1u);
    ASSERT_TRUE(other.contexts()[0].environment.has_value());
    EXPECT_FALSE(other.contexts()[0].environment->mayRequest);
    EXPECT_EQ(other.contexts()[0].environment->selectionMode, "default");
}

} // namespace
} // namespace paddock::engine
