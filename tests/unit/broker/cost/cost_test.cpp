// Prices, budgets and the cost index's sums against the events they come from (real SQLite store).

#include "broker/cost/budgets.h"
#include "broker/cost/prices.h"
#include "broker/store/cost_index.h"
#include "broker/store/sqlite_event_store.h"
#include "tests/support/store_backend.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <unistd.h>

namespace paddock::cost {
namespace {

using nlohmann::json;

TEST(Prices, ModelTokensSandboxTimeAndStorage)
{
    const ModelPrice price{2.50, 10.00, 1.25};
    // 1000 input of which 200 cached, 500 output: 800*2.5 + 200*1.25 + 500*10 micro-USD.
    EXPECT_EQ(modelCostMicros(price, 1000, 500, 200), 2000 + 250 + 5000);
    EXPECT_EQ(modelCostMicros(price, 0, 0, 0), 0);
    EXPECT_EQ(sandboxCostMicros(0.36, 3'600'000), 360'000);   // an hour at $0.36
    EXPECT_EQ(sandboxCostMicros(3.6, 1), 1);                  // a millisecond at $3.60/h
    EXPECT_EQ(storageCostMicros(0.03, 1LL << 30, 30LL * 86'400'000), 30'000);   // a GiB for a month
    EXPECT_EQ(storageCostMicros(0.03, 0, 1000), 0);
}

TEST(Prices, TableLookupAndParsing)
{
    PriceTable table = defaultPriceTable();
    EXPECT_EQ(table.modelPrice("scripted").inputPerMillion, 3.00);
    EXPECT_EQ(table.modelPrice("gpt-unknown").inputPerMillion, 2.50);   // default
    EXPECT_EQ(table.modelPrice("gpt-unknown", "scripted").outputPerMillion, 15.00);   // the session's model

    auto parsed = toml::parse(R"(
storage_per_gib_month = 0.05
[models.gpt-4o-mini]
input_per_million = 0.15
output_per_million = 0.60
)");
    auto loaded = parsePrices(parsed, "broker.toml", table);
    ASSERT_TRUE(loaded) << loaded.error().message;
    EXPECT_EQ(loaded->storagePerGibMonth, 0.05);
    EXPECT_EQ(loaded->modelPrice("gpt-4o-mini").outputPerMillion, 0.60);
    EXPECT_EQ(loaded->modelPrice("gpt-4o-mini").cachedPerMillion, 0.0);

    auto bad = parsePrices(toml::parse("[models.x]\ninput = 1.0\n"), "broker.toml", table);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("broker.toml:2"), std::string::npos) << bad.error().message;
    EXPECT_NE(bad.error().message.find("input_per_million"), std::string::npos);
    auto negative = parsePrices(toml::parse("storage_per_gib_month = -1\n"), "broker.toml", table);
    ASSERT_FALSE(negative);
}

TEST(Budgets, WarnOnceAt80PercentExceedAt100)
{
    core::SessionState state;
    state.budgetMicros = 1000;
    EXPECT_FALSE(checkBudget(state, 799, 0, {}).warn);
    auto warn = checkBudget(state, 800, 0, {});
    EXPECT_TRUE(warn.warn);
    EXPECT_EQ(warn.scope, "session");
    state.budgetWarned = true;
    EXPECT_FALSE(checkBudget(state, 900, 0, {}).warn);
    auto exceeded = checkBudget(state, 1000, 0, {});
    EXPECT_TRUE(exceeded.exceeded);
    EXPECT_EQ(exceeded.budgetMicros, 1000);

    core::SessionState unbudgeted;
    EXPECT_FALSE(checkBudget(unbudgeted, 1'000'000, 0, {}).exceeded);
    // The agent's day: its budget plus the extensions approved for this session.
    auto day = checkBudget(unbudgeted, 10, 5000, AgentBudget{0, 5000});
    EXPECT_TRUE(day.exceeded);
    EXPECT_EQ(day.scope, "agent_day");
    unbudgeted.dayAllowanceMicros = 2500;
    EXPECT_FALSE(checkBudget(unbudgeted, 10, 5000, AgentBudget{0, 5000}).exceeded);
}

// The cost index on both backends.
class CostIndexTest : public ::testing::TestWithParam<paddock::test::StoreBackend> {
protected:
    void SetUp() override
    {
        m_dir = std::filesystem::temp_directory_path() / ("paddock-cost-test-" + std::to_string(::getpid()));
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
        auto opened = paddock::test::openTestStore(GetParam(), m_dir / "broker.db");
        if (!opened.skipReason.empty())
            GTEST_SKIP() << opened.skipReason;
        ASSERT_TRUE(opened.store) << opened.error;
        m_store = std::move(opened.store);
        auto costs = store::CostQueries::open(*m_store);
        ASSERT_TRUE(costs);
        m_costs = std::move(*costs);
    }
    void TearDown() override
    {
        if (m_store)
            m_store->close();
        std::filesystem::remove_all(m_dir);
    }

    std::filesystem::path m_dir;
    std::unique_ptr<store::EventStore> m_store;
    std::unique_ptr<store::CostQueries> m_costs;
};

INSTANTIATE_TEST_SUITE_P(Backends, CostIndexTest, PADDOCK_STORE_BACKENDS);

TEST_P(CostIndexTest, SumsPerSessionAgentTierModelDayAndKindMatchTheEvents)
{
    struct Spend {
        std::string session, agent, tier, model, kind;
        int64_t micros;
    };
    const std::vector<Spend> spends = {
        {"s-1", "alpha", "lite", "scripted", "model", 120}, {"s-1", "alpha", "lite", "", "sandbox", 30},
        {"s-2", "alpha", "heavy", "gpt-4o", "model", 700},  {"s-2", "alpha", "heavy", "", "sandbox", 400},
        {"s-3", "beta", "lite", "scripted", "model", 55},   {"s-3", "beta", "lite", "", "storage", 2},
    };
    std::map<std::string, std::string> created;
    for (const auto &spend : spends) {
        store::AppendRequest request;
        request.sessionId = spend.session;
        if (!created.count(spend.session)) {
            request.expectedLastSeq = 0;
            request.events.push_back({core::kind::SessionCreated, json{{"agent", spend.agent}}.dump()});
            created[spend.session] = spend.agent;
        }
        request.events.push_back({core::kind::Cost,
                                  json{{"kind", spend.kind}, {"agent", spend.agent}, {"tier", spend.tier},
                                       {"model", spend.model}}.dump(),
                                  spend.micros});
        ASSERT_TRUE(m_store->appendSync(std::move(request)));
    }
    for (const std::string by : {"session", "agent", "tier", "model", "kind"}) {
        std::map<std::string, int64_t> expected;
        int64_t total = 0;
        for (const auto &s : spends) {
            const std::string key = by == "session" ? s.session : by == "agent" ? s.agent : by == "tier" ? s.tier
                : by == "model" ? s.model : s.kind;
            expected[key] += s.micros;
            total += s.micros;
        }
        store::CostQuery query;
        query.groupBy = by;
        auto sums = m_costs->sums(query);
        ASSERT_TRUE(sums) << sums.error().message;
        std::map<std::string, int64_t> got;
        for (const auto &line : sums->lines)
            got[line.key] = line.costMicros;
        EXPECT_EQ(got, expected) << "by " << by;
        EXPECT_EQ(sums->totalMicros, total);
    }
    // By day: all of it today (UTC); a range that ends before today holds nothing.
    store::CostQuery byDay;
    byDay.groupBy = "day";
    auto days = m_costs->sums(byDay);
    ASSERT_TRUE(days);
    ASSERT_EQ(days->lines.size(), 1u);
    EXPECT_EQ(days->lines[0].costMicros, 1307);
    EXPECT_EQ(days->lines[0].key.size(), 10u);   // YYYY-MM-DD
    store::CostQuery past;
    past.toUnixMs = 1000;
    EXPECT_EQ(m_costs->sums(past)->totalMicros, 0);
    // Filters and buckets.
    store::CostQuery alpha;
    alpha.agent = "alpha";
    alpha.groupBy = "tier";
    alpha.bucketMs = 3'600'000;
    auto bucketed = m_costs->sums(alpha);
    ASSERT_TRUE(bucketed);
    EXPECT_EQ(bucketed->totalMicros, 1250);
    for (const auto &line : bucketed->lines)
        EXPECT_EQ(line.bucketStartUnixMs % 3'600'000, 0);
    auto perAgent = m_costs->spentByAgentSince(0);
    ASSERT_TRUE(perAgent);
    EXPECT_EQ(perAgent->at("alpha"), 1250);
    EXPECT_EQ(perAgent->at("beta"), 57);
    store::CostQuery wrong;
    wrong.groupBy = "colour";
    auto refused = m_costs->sums(wrong);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
}

} // namespace
} // namespace paddock::cost
