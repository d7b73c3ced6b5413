// Cost events, budgets and propose_change in the step engine, with the real SQLite store, the real
// scripted model, the real review desk and a fake pool the test controls (integration tests run
// real sandboxes).

#include "broker/engine/step_engine.h"
#include "broker/model/scripted_model.h"
#include "broker/review/review_desk.h"
#include "broker/store/cost_index.h"
#include "broker/store/sqlite_event_store.h"
#include "tests/unit/broker/pools/fake_pool.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <unistd.h>

namespace paddock::engine {
namespace {

using nlohmann::json;

constexpr const char *kThreeCommands = R"(
name = "three"
goal = "run three commands"
[[step]]
tool = "run_command"
command = "echo one"
[[step]]
tool = "run_command"
command = "echo two"
[[step]]
tool = "run_command"
command = "echo three"
)";

std::string proposal(int files, const std::string &kind = "bulk_change")
{
    std::string targets;
    std::string diff;
    for (int i = 0; i < files; ++i) {
        targets += (i ? ", " : "") + std::string("\"f") + std::to_string(i) + ".txt\"";
        diff += "--- a/f" + std::to_string(i) + ".txt\n+++ b/f" + std::to_string(i) + ".txt\n@@ -1 +1 @@\n-old\n+new\n";
    }
    return std::string(R"(
name = "propose"
goal = "change files"
[[step]]
tool = "propose_change"
kind = ")") + kind + R"("
targets = [)" + targets + R"(]
change = ''')" + diff + R"('''
justification = "rename the old word"
[[step]]
tool = "run_command"
command = "echo after"
)";
}

class ReviewEngineTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = std::filesystem::temp_directory_path() / ("paddock-review-engine-" + std::to_string(::getpid()) + "-"
                                                          + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
        auto store = store::openSqliteEventStore(m_dir / "broker.db");
        ASSERT_TRUE(store) << store.error().message;
        m_store = std::move(*store);
        auto queries = store::ReviewQueries::open(m_dir / "broker.db");
        ASSERT_TRUE(queries);
        m_queries = std::move(*queries);
        auto costs = store::CostQueries::open(m_dir / "broker.db");
        ASSERT_TRUE(costs);
        m_costs = std::move(*costs);
        m_desk = std::make_unique<review::ReviewDesk>(*m_store, *m_queries, review::ReviewPolicy{});
        auto pool = std::make_unique<pools::test::FakePool>("fake");
        m_pool = pool.get();
        m_pool->setTier("lite", 2, 0, 8);
        m_pool->tiers[0].pricePerHourUsd = 36.0;   // 10 micro-USD per millisecond: every step costs something
        m_pools.add(std::move(pool), false);
    }

    void TearDown() override
    {
        m_desk.reset();
        m_store->close();
        std::filesystem::remove_all(m_dir);
    }

    std::string submit(const std::string &playbook, int64_t budgetMicros = 0)
    {
        store::AppendRequest request;
        request.sessionId = "s-" + std::to_string(++m_sessions);
        request.expectedLastSeq = 0;
        request.events.push_back({core::kind::SessionCreated,
                                  json{{"goal", "g"}, {"agent", "builder"}, {"model", "scripted"}, {"tier", "lite"},
                                       {"submitted_by", "bob"}, {"budget_micros", budgetMicros},
                                       {"playbook_toml", playbook}}.dump()});
        auto created = m_store->appendSync(std::move(request));
        EXPECT_TRUE(created) << created.error().message;
        return created->state.id;
    }

    StepEngine makeEngine()
    {
        return StepEngine(*m_store, m_pools, [this](const std::string &name) -> model::ModelAdapter * {
            return name == "scripted" ? &m_scripted : nullptr;
        }, m_options);
    }

    // Steps until nothing needs work (finished, or waiting for a review).
    void runUntilIdle(StepEngine &engine, int maxSteps = 60)
    {
        for (int i = 0; i < maxSteps; ++i) {
            auto lease = m_store->acquireLease("test", 10000, 0);
            if (!lease)
                return;
            engine.runOneStep(*lease);
            m_store->releaseLease(*lease);
        }
        FAIL() << "the session did not settle in " << maxSteps << " steps";
    }

    std::vector<core::Event> events(const std::string &id)
    {
        auto read = m_store->readEvents(id, 1, 100000);
        EXPECT_TRUE(read) << read.error().message;
        return read ? *read : std::vector<core::Event>{};
    }

    static std::vector<json> payloadsOf(const std::vector<core::Event> &log, const char *kind)
    {
        std::vector<json> out;
        for (const auto &e : log) {
            if (e.kind == kind)
                out.push_back(json::parse(e.payload));
        }
        return out;
    }

    core::SessionState session(const std::string &id) { return *m_store->getSession(id); }

    store::ReviewRow onlyPendingItem()
    {
        auto page = m_queries->list({});
        EXPECT_TRUE(page);
        EXPECT_EQ(page->items.size(), 1u);
        return page->items.empty() ? store::ReviewRow{} : page->items.front();
    }

    review::DecideRequest approval(const store::ReviewRow &row)
    {
        review::DecideRequest request;
        request.ids = {row.id};
        request.approve = true;
        request.decider = "alice";
        request.reason = "checked";
        request.changeHashes[row.id] = row.changeHash;
        return request;
    }

    std::filesystem::path m_dir;
    std::unique_ptr<store::EventStore> m_store;
    std::unique_ptr<store::ReviewQueries> m_queries;
    std::unique_ptr<store::CostQueries> m_costs;
    std::unique_ptr<review::ReviewDesk> m_desk;
    pools::PoolSet m_pools;
    pools::test::FakePool *m_pool = nullptr;
    model::ScriptedModel m_scripted;
    EngineOptions m_options;
    int m_sessions = 0;
};

TEST_F(ReviewEngineTest, EveryModelResponseAndSandboxStepIsCostedAndTheSplitAddsUp)
{
    auto engine = makeEngine();
    const std::string id = submit(kThreeCommands);
    runUntilIdle(engine);
    const auto log = events(id);
    const auto state = session(id);
    ASSERT_EQ(state.status, core::SessionStatus::Succeeded);

    int64_t model = 0, sandbox = 0, total = 0;
    int responses = 0;
    const auto &price = m_options.prices.modelPrice("scripted");
    for (size_t i = 0; i < log.size(); ++i) {
        total += log[i].costMicros;
        if (log[i].kind == core::kind::ModelResponse) {
            ++responses;
            // The model's cost follows its response, priced from the usage the response reports.
            ASSERT_LT(i + 1, log.size());
            ASSERT_EQ(log[i + 1].kind, core::kind::Cost);
            const json usage = json::parse(log[i].payload)["usage"];
            const json cost = json::parse(log[i + 1].payload);
            EXPECT_EQ(cost["kind"], "model");
            EXPECT_EQ(cost["agent"], "builder");
            EXPECT_GT(usage["input_tokens"].get<int64_t>(), 0);
            EXPECT_EQ(log[i + 1].costMicros, cost::modelCostMicros(price, usage["input_tokens"], usage["output_tokens"],
                                                                   usage["cached_tokens"]));
        }
        if (log[i].kind == core::kind::Cost) {
            const json cost = json::parse(log[i].payload);
            (cost["kind"] == "model" ? model : sandbox) += log[i].costMicros;
            if (cost["kind"] == "sandbox") {
                // Exact: the time since the last bill at the tier's price, rounded per event.
                const int64_t ms = cost["until_unix_ms"].get<int64_t>() - cost["from_unix_ms"].get<int64_t>();
                EXPECT_EQ(log[i].costMicros, cost::sandboxCostMicros(36.0, ms));
                EXPECT_EQ(cost["tier"], "lite");
            }
        }
    }
    EXPECT_EQ(responses, 4);   // three commands and the finish
    EXPECT_GT(model, 0);
    EXPECT_EQ(state.modelCostMicros, model);
    EXPECT_EQ(state.sandboxCostMicros, sandbox);
    EXPECT_EQ(state.costMicros, total);
    EXPECT_EQ(state.costMicros, model + sandbox);
    // Sandbox time is billed up to the release: consecutive bills leave no gap.
    const auto bills = payloadsOf(log, core::kind::Cost);
    int64_t lastUntil = 0;
    for (const auto &bill : bills) {
        if (bill["kind"] != "sandbox")
            continue;
        if (lastUntil) {
            EXPECT_EQ(bill["from_unix_ms"].get<int64_t>(), lastUntil);
        }
        lastUntil = bill["until_unix_ms"];
    }

    // The index answers the same sums without reading the log.
    store::CostQuery bySession;
    auto sums = m_costs->sums(bySession);
    ASSERT_TRUE(sums) << sums.error().message;
    ASSERT_EQ(sums->lines.size(), 1u);
    EXPECT_EQ(sums->lines[0].key, id);
    EXPECT_EQ(sums->lines[0].costMicros, total);
    store::CostQuery byKind;
    byKind.groupBy = "kind";
    auto kinds = m_costs->sums(byKind);
    ASSERT_TRUE(kinds);
    for (const auto &line : kinds->lines)
        EXPECT_EQ(line.costMicros, line.key == "model" ? model : sandbox) << line.key;
}

TEST_F(ReviewEngineTest, BudgetWarnsAt80PercentPausesAt100AndResumesAfterAnApprovedExtension)
{
    // Measure what the playbook costs in model tokens alone, then give a second session a budget
    // that the third step crosses.
    m_pool->tiers[0].pricePerHourUsd = 0;
    auto engine = makeEngine();
    const std::string probe = submit(kThreeCommands);
    runUntilIdle(engine);
    std::vector<int64_t> modelCosts;
    for (const auto &e : events(probe)) {
        if (e.kind == core::kind::Cost)
            modelCosts.push_back(e.costMicros);
    }
    ASSERT_EQ(modelCosts.size(), 4u);
    const int64_t afterTwo = modelCosts[0] + modelCosts[1];
    const int64_t afterThree = afterTwo + modelCosts[2];
    // 80% reached after two responses, 100% after three.
    const int64_t budget = std::min(afterTwo * 100 / 80, afterThree);
    ASSERT_GE(afterTwo * 100, budget * 80);
    ASSERT_LT(afterTwo, budget);
    ASSERT_GE(afterThree, budget);

    // An extension of 300% covers the last step, so one approval sees the session through.
    m_options.reviewPolicy.budgetExtensionPercent = 300;
    auto budgeted = makeEngine();
    const std::string id = submit(kThreeCommands, budget);
    runUntilIdle(budgeted);
    auto log = events(id);
    auto warnings = payloadsOf(log, core::kind::BudgetWarning);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0]["scope"], "session");
    EXPECT_EQ(warnings[0]["budget_micros"], budget);
    ASSERT_EQ(payloadsOf(log, core::kind::BudgetExceeded).size(), 1u);
    auto state = session(id);
    EXPECT_EQ(state.status, core::SessionStatus::WaitingApproval);
    const auto item = onlyPendingItem();
    EXPECT_EQ(item.kind, "budget_extension");
    EXPECT_EQ(item.requester, "bob");
    const int64_t extension = budget * 300 / 100;
    EXPECT_EQ(json::parse(item.payload)["cost_micros"], extension);

    // Nothing runs while it waits.
    EXPECT_FALSE(m_store->acquireLease("test", 1000, 0));

    ASSERT_TRUE(m_desk->decide(approval(item)));
    state = session(id);
    EXPECT_EQ(state.status, core::SessionStatus::Running);
    EXPECT_EQ(state.budgetMicros, budget + extension);
    runUntilIdle(budgeted);
    state = session(id);
    EXPECT_EQ(state.status, core::SessionStatus::Succeeded) << state.statusReason;
    EXPECT_EQ(state.steps, 4);
}

TEST_F(ReviewEngineTest, BulkChangeBeyondPolicyWaitsAndIsAppliedInTheSandboxOnceApproved)
{
    auto engine = makeEngine();
    const std::string id = submit(proposal(6));   // 6 files > bulk_target_limit 5
    runUntilIdle(engine);
    EXPECT_EQ(session(id).status, core::SessionStatus::WaitingApproval);
    const auto item = onlyPendingItem();
    EXPECT_EQ(item.kind, "bulk_change");
    const json requested = json::parse(item.payload);
    EXPECT_EQ(requested["target_count"], 6);
    EXPECT_EQ(requested["impact"], "6 files, +6 -6");
    EXPECT_EQ(requested["justification"], "rename the old word");
    EXPECT_NE(requested["policy_verdict"].get<std::string>().find("6 targets > bulk_target_limit 5"), std::string::npos);
    EXPECT_EQ(requested["change_format"], "diff");
    const int execsBefore = m_pool->execs;

    ASSERT_TRUE(m_desk->decide(approval(item)));
    runUntilIdle(engine);
    const auto log = events(id);
    const auto results = payloadsOf(log, core::kind::ToolResult);
    ASSERT_GE(results.size(), 2u);
    EXPECT_EQ(results[0]["name"], "propose_change");
    EXPECT_EQ(results[0]["approved"], true);
    EXPECT_EQ(results[0]["applied"], true);
    EXPECT_EQ(results[0]["decider"], "alice");
    // patch ran inside the sandbox, then the session went on from that step.
    ASSERT_GT(m_pool->execs, execsBefore);
    EXPECT_NE(m_pool->execKeys[static_cast<size_t>(execsBefore)].find("patch -p1"), std::string::npos);
    EXPECT_EQ(session(id).status, core::SessionStatus::Succeeded) << session(id).statusReason;
}

TEST_F(ReviewEngineTest, RejectionIsTheToolResult)
{
    auto engine = makeEngine();
    const std::string id = submit(proposal(6));
    runUntilIdle(engine);
    const auto item = onlyPendingItem();
    const int execsBefore = m_pool->execs;
    review::DecideRequest reject;
    reject.ids = {item.id};
    reject.decider = "alice";
    reject.reason = "touches generated files";
    ASSERT_TRUE(m_desk->decide(reject));
    runUntilIdle(engine);
    const auto results = payloadsOf(events(id), core::kind::ToolResult);
    ASSERT_GE(results.size(), 1u);
    EXPECT_EQ(results[0]["approved"], false);
    EXPECT_EQ(results[0]["error"], "the change was rejected by alice: touches generated files");
    EXPECT_EQ(m_pool->execs, execsBefore);   // nothing was applied
    // The scripted model sees the rejection and ends its playbook there.
    const auto state = session(id);
    EXPECT_EQ(state.status, core::SessionStatus::Failed);
    EXPECT_NE(state.statusReason.find("rejected by alice"), std::string::npos) << state.statusReason;
}

TEST_F(ReviewEngineTest, ChangeWithinPolicyIsAppliedWithoutReview)
{
    auto engine = makeEngine();
    const std::string id = submit(proposal(2));
    runUntilIdle(engine);
    const auto log = events(id);
    EXPECT_TRUE(payloadsOf(log, core::kind::ApprovalRequested).empty());
    const auto results = payloadsOf(log, core::kind::ToolResult);
    ASSERT_GE(results.size(), 1u);
    EXPECT_EQ(results[0]["applied"], true);
    EXPECT_EQ(session(id).status, core::SessionStatus::Succeeded);
}

TEST_F(ReviewEngineTest, ExpiredReviewResumesWithTheExpiryAsTheResult)
{
    auto engine = makeEngine();
    const std::string id = submit(proposal(6, "egress_exception"));
    runUntilIdle(engine);
    // egress_exception names exactly one host: six targets are refused at once, without a review.
    auto results = payloadsOf(events(id), core::kind::ToolResult);
    ASSERT_GE(results.size(), 1u);
    EXPECT_NE(results[0]["error"].get<std::string>().find("exactly one host"), std::string::npos);

    const std::string second = submit(proposal(6));
    runUntilIdle(engine);
    const auto item = onlyPendingItem();
    EXPECT_EQ(m_desk->expireDue(item.expiresUnixMs + 1), 1);
    runUntilIdle(engine);
    results = payloadsOf(events(second), core::kind::ToolResult);
    ASSERT_GE(results.size(), 1u);
    EXPECT_NE(results[0]["error"].get<std::string>().find("expired without a decision"), std::string::npos);
}

std::string egressProposal(const std::string &host)
{
    return R"(
name = "egress"
goal = "fetch from a mirror"
[[step]]
tool = "propose_change"
kind = "egress_exception"
targets = [")" + host + R"("]
change = "GET http://)" + host + R"(/pkg"
change_format = "text"
justification = "the mirror has the package"
[[step]]
tool = "run_command"
command = "curl http://)" + host + R"(/pkg"
)";
}

// An approved egress_exception reaches the pool: every later command of that session carries the
// host and the review, the egress events of what it allowed say so, and other sessions carry nothing.
TEST_F(ReviewEngineTest, ApprovedEgressExceptionTravelsWithEveryLaterCommandOfThatSessionOnly)
{
    m_pool->tiers[0].allowlistNetwork = true;
    auto engine = makeEngine();
    const std::string id = submit(egressProposal("mirror.example"));
    runUntilIdle(engine);
    ASSERT_EQ(session(id).status, core::SessionStatus::WaitingApproval) << session(id).statusReason;
    const auto item = onlyPendingItem();
    EXPECT_EQ(item.kind, "egress_exception");
    EXPECT_EQ(m_pool->execs, 0);

    pools::EgressAttempt attempt;
    attempt.allowed = true;
    attempt.host = "mirror.example";
    attempt.port = 80;
    attempt.method = "GET";
    attempt.reviewId = item.id;
    m_pool->egressPerExec = {attempt};
    ASSERT_TRUE(m_desk->fetch(item.id, "alice"));   // high risk: read before approved
    ASSERT_TRUE(m_desk->decide(approval(item)));
    runUntilIdle(engine);
    const auto log = events(id);
    const auto results = payloadsOf(log, core::kind::ToolResult);
    ASSERT_GE(results.size(), 2u);
    EXPECT_EQ(results[0]["approved"], true);
    EXPECT_EQ(results[0]["host"], "mirror.example");
    EXPECT_EQ(results[0]["reachable"], true);
    EXPECT_NE(results[0]["note"].get<std::string>().find("approved in review " + item.id), std::string::npos)
        << results[0].dump();
    ASSERT_EQ(m_pool->execGrants.size(), 1u);
    ASSERT_EQ(m_pool->execGrants[0].size(), 1u);
    EXPECT_EQ(m_pool->execGrants[0][0].host, "mirror.example");
    EXPECT_EQ(m_pool->execGrants[0][0].reviewId, item.id);
    const auto allowed = payloadsOf(log, core::kind::EgressAllowed);
    ASSERT_EQ(allowed.size(), 1u);
    EXPECT_EQ(allowed[0]["review_id"], item.id);
    EXPECT_EQ(allowed[0]["detail"], "approved in review " + item.id);
    EXPECT_EQ(session(id).approvedHosts, (std::vector<core::ApprovedHost>{{"mirror.example", item.id}}));

    // Another session on the same pool: its commands carry no approved host.
    m_pool->egressPerExec.clear();
    const std::string other = submit(kThreeCommands);
    runUntilIdle(engine);
    EXPECT_EQ(session(other).status, core::SessionStatus::Succeeded);
    ASSERT_EQ(m_pool->execGrants.size(), 4u);
    for (size_t i = 1; i < 4; ++i)
        EXPECT_TRUE(m_pool->execGrants[i].empty()) << i;
}

// On a tier with no network the approval cannot do anything: the tool's result says so and names
// a tier with an allowlist the session could be moved to.
TEST_F(ReviewEngineTest, ApprovedEgressOnATierWithoutNetworkSaysSoAndNamesOneWithIt)
{
    m_pool->setTier("standard", 1, 0, 4);
    m_pool->tiers[1].allowlistNetwork = true;
    auto engine = makeEngine();
    const std::string id = submit(egressProposal("mirror.example"));
    runUntilIdle(engine);
    const auto item = onlyPendingItem();
    ASSERT_TRUE(m_desk->fetch(item.id, "alice"));
    ASSERT_TRUE(m_desk->decide(approval(item)));
    runUntilIdle(engine);
    const auto results = payloadsOf(events(id), core::kind::ToolResult);
    ASSERT_GE(results.size(), 1u);
    EXPECT_EQ(results[0]["approved"], true);
    EXPECT_EQ(results[0]["reachable"], false);
    const std::string note = results[0]["note"];
    EXPECT_NE(note.find("tier 'lite' has no network at all"), std::string::npos) << note;
    EXPECT_NE(note.find("paddockctl override " + id + " standard"), std::string::npos) << note;
    EXPECT_EQ(results[0]["tiers_with_network"], json::array({"standard"}));
}

// A host that is no allowlist entry is refused at once, without a review.
TEST_F(ReviewEngineTest, EgressExceptionForSomethingThatIsNotAHostIsRefusedWithoutReview)
{
    auto engine = makeEngine();
    const std::string id = submit(egressProposal("user@mirror.example"));
    runUntilIdle(engine);
    const auto log = events(id);
    EXPECT_TRUE(payloadsOf(log, core::kind::ApprovalRequested).empty());
    const auto results = payloadsOf(log, core::kind::ToolResult);
    ASSERT_GE(results.size(), 1u);
    const std::string error = results[0].value("error", "");
    EXPECT_NE(error.find("allowlist entry"), std::string::npos) << results[0].dump();
    EXPECT_NE(error.find("use \"host\""), std::string::npos) << error;
}

} // namespace
} // namespace paddock::engine
