// Cost events, budgets and propose_change in the step engine, with the real SQLite store, the real
// scripted model, the real review desk and a fake pool the test controls (integration tests run
// real sandboxes).

#include "broker/review/review_desk.h"
#include "broker/store/agent_store.h"
#include "broker/store/cost_index.h"
#include "tests/support/engine_fixture.h"
#include "tests/support/fake_pool_client.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>


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

class ReviewEngineTest : public test::EngineFixture {
protected:
    void SetUp() override
    {
        EngineFixture::SetUp();
        auto queries = store::ReviewQueries::open(*m_store);
        ASSERT_TRUE(queries);
        m_queries = std::move(*queries);
        auto costs = store::CostQueries::open(*m_store);
        ASSERT_TRUE(costs);
        m_costs = std::move(*costs);
        m_desk = std::make_unique<review::ReviewDesk>(*m_store, *m_queries, review::ReviewPolicy{});
        auto pool = std::make_unique<test::FakePoolClient>("fake");
        m_pool = pool.get();
        m_pool->setTier("lite", 2, 0, 8);
        // 10 micro-USD per millisecond: every step costs something.
        m_pool->editTier("lite", [](pool_client::TierStatus &tier) { tier.pricePerHourUsd = 36.0; });
        m_pools.add(std::move(pool), false);
    }

    void TearDown() override
    {
        m_desk.reset();
        EngineFixture::TearDown();
    }

    // Sessions of agent `agent` submitted by bob (the requester of their reviews).
    std::string submit(const std::string &playbook, int64_t budgetMicros = 0, const std::string &agent = "builder")
    {
        return EngineFixture::submit(playbook, {{"agent", agent}, {"submitted_by", "bob"}, {"budget_micros", budgetMicros}});
    }

    StepEngine makeEngine() { return EngineFixture::makeEngine(m_options); }

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

    static review::DecideRequest rejection(const store::ReviewRow &row, const std::string &reason)
    {
        review::DecideRequest request;
        request.ids = {row.id};
        request.decider = "alice";
        request.reason = reason;
        return request;
    }

    // Two tiers to move between (the fake pool snapshots and restores), agents in the store, and
    // the tier decisions of request_environment.
    void enableTierEscalation(policy::TierPolicy policy = {})
    {
        m_pool->setSnapshots(true);
        m_pool->editTier("lite", [](pool_client::TierStatus &tier) { tier.pricePerHourUsd = 0.02; });
        m_pool->setTier("standard", 2, 0, 8);
        m_pool->editTier("standard", [](pool_client::TierStatus &tier) { tier.pricePerHourUsd = 0.12; });
        auto agents = store::AgentStore::open(*m_store);
        ASSERT_TRUE(agents) << agents.error().message;
        m_agents = std::move(*agents);
        m_decider = std::make_unique<EnvironmentDecider>(m_agents.get(), m_pools, std::move(policy), "lite");
        m_options.decider = m_decider.get();
    }

    void createAgent(const std::string &name, agents::SelectionMode mode)
    {
        agents::Agent agent;
        agent.name = name;
        agent.owner = "bob";
        agent.defaultTier = "lite";
        agent.selectionMode = mode;
        auto created = m_agents->create(agent);
        ASSERT_TRUE(created) << created.error().message;
    }

    // What each exec ran, as "<sandbox> <command>".
    std::vector<std::string> execKeys() const
    {
        std::vector<std::string> keys;
        for (const auto &spec : m_pool->execs())
            keys.push_back(spec.sandboxId + " " + spec.argv.back());
        return keys;
    }

    // The approved hosts each exec carried.
    std::vector<std::vector<pool_client::EgressGrant>> execGrants() const
    {
        std::vector<std::vector<pool_client::EgressGrant>> grants;
        for (const auto &spec : m_pool->execs())
            grants.push_back(spec.egressGrants);
        return grants;
    }

    // The sandbox id a command ran in.
    std::string sandboxOfCommand(const std::string &command)
    {
        for (const auto &key : execKeys()) {
            if (key.ends_with(" " + command))
                return key.substr(0, key.find(' '));
        }
        return {};
    }

    std::unique_ptr<store::AgentStore> m_agents;
    std::unique_ptr<EnvironmentDecider> m_decider;
    std::unique_ptr<store::ReviewQueries> m_queries;
    std::unique_ptr<store::CostQueries> m_costs;
    std::unique_ptr<review::ReviewDesk> m_desk;
    test::FakePoolClient *m_pool = nullptr;
    EngineOptions m_options;
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
    int sandboxBills = 0;
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
                ++sandboxBills;
                // Exact: the time since the last bill at the tier's price, rounded per event.
                const int64_t ms = cost["until_unix_ms"].get<int64_t>() - cost["from_unix_ms"].get<int64_t>();
                EXPECT_EQ(log[i].costMicros, cost::sandboxCostMicros(36.0, ms));
                EXPECT_EQ(cost["tier"], "lite");
            }
        }
    }
    EXPECT_EQ(responses, 4);   // three commands and the finish
    EXPECT_GT(model, 0);
    EXPECT_GE(sandboxBills, 1) << "the sandbox's time was never billed";
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
    m_pool->editTier("lite", [](pool_client::TierStatus &tier) { tier.pricePerHourUsd = 0; });
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
    const int execsBefore = m_pool->execCount();

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
    ASSERT_GT(m_pool->execCount(), execsBefore);
    EXPECT_NE(execKeys()[static_cast<size_t>(execsBefore)].find("patch -p1"), std::string::npos);
    EXPECT_EQ(session(id).status, core::SessionStatus::Succeeded) << session(id).statusReason;
}

TEST_F(ReviewEngineTest, RejectionIsTheToolResult)
{
    auto engine = makeEngine();
    const std::string id = submit(proposal(6));
    runUntilIdle(engine);
    const auto item = onlyPendingItem();
    const int execsBefore = m_pool->execCount();
    ASSERT_TRUE(m_desk->decide(rejection(item, "touches generated files")));
    runUntilIdle(engine);
    const auto results = payloadsOf(events(id), core::kind::ToolResult);
    ASSERT_GE(results.size(), 1u);
    EXPECT_EQ(results[0]["approved"], false);
    EXPECT_EQ(results[0]["error"], "the change was rejected by alice: touches generated files");
    EXPECT_EQ(m_pool->execCount(), execsBefore);   // nothing was applied
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
    m_pool->editTier("lite", [](pool_client::TierStatus &tier) { tier.allowlistNetwork = true; });
    auto engine = makeEngine();
    const std::string id = submit(egressProposal("mirror.example"));
    runUntilIdle(engine);
    ASSERT_EQ(session(id).status, core::SessionStatus::WaitingApproval) << session(id).statusReason;
    const auto item = onlyPendingItem();
    EXPECT_EQ(item.kind, "egress_exception");
    EXPECT_EQ(m_pool->execCount(), 0);

    pool_client::EgressAttempt attempt;
    attempt.allowed = true;
    attempt.host = "mirror.example";
    attempt.port = 80;
    attempt.method = "GET";
    attempt.reviewId = item.id;
    m_pool->editExecOutcome([&](pool_client::ExecOutcome &outcome) { outcome.egress = {attempt}; });
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
    ASSERT_EQ(execGrants().size(), 1u);
    ASSERT_EQ(execGrants()[0].size(), 1u);
    EXPECT_EQ(execGrants()[0][0].host, "mirror.example");
    EXPECT_EQ(execGrants()[0][0].reviewId, item.id);
    const auto allowed = payloadsOf(log, core::kind::EgressAllowed);
    ASSERT_EQ(allowed.size(), 1u);
    EXPECT_EQ(allowed[0]["review_id"], item.id);
    EXPECT_EQ(allowed[0]["detail"], "approved in review " + item.id);
    EXPECT_EQ(session(id).approvedHosts, (std::vector<core::ApprovedHost>{{"mirror.example", item.id}}));

    // Another session on the same pool: its commands carry no approved host.
    m_pool->editExecOutcome([](pool_client::ExecOutcome &outcome) { outcome.egress.clear(); });
    const std::string other = submit(kThreeCommands);
    runUntilIdle(engine);
    EXPECT_EQ(session(other).status, core::SessionStatus::Succeeded);
    ASSERT_EQ(execGrants().size(), 4u);
    for (size_t i = 1; i < 4; ++i)
        EXPECT_TRUE(execGrants()[i].empty()) << i;
}

// On a tier with no network the approval cannot do anything: the tool's result says so and names
// a tier with an allowlist the session could be moved to.
TEST_F(ReviewEngineTest, ApprovedEgressOnATierWithoutNetworkSaysSoAndNamesOneWithIt)
{
    m_pool->setTier("standard", 1, 0, 4);
    m_pool->editTier("standard", [](pool_client::TierStatus &tier) { tier.allowlistNetwork = true; });
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

// request_environment beyond the agent's bound (hybrid: its default tier lite) asks for standard.
std::string escalation(const std::string &onResult = "")
{
    return R"(
name = "escalate"
goal = "build something big"
[[step]]
tool = "write_file"
path = "notes.txt"
content = "written on lite"
[[step]]
tool = "request_environment"
tier = "standard"
reason = "the build needs 4 GiB"
)" + onResult + R"(
[[step]]
tool = "run_command"
command = "cat notes.txt"
)";
}

TEST_F(ReviewEngineTest, RequestBeyondTheBoundWaitsForATierEscalationAndApprovalMovesTheSession)
{
    enableTierEscalation();
    createAgent("builder", agents::SelectionMode::Hybrid);
    auto engine = makeEngine();
    const std::string id = submit(escalation());
    runUntilIdle(engine);
    ASSERT_EQ(session(id).status, core::SessionStatus::WaitingApproval) << session(id).statusReason;
    auto log = events(id);
    auto decisions = payloadsOf(log, core::kind::EnvDecision);
    ASSERT_EQ(decisions.size(), 1u);
    EXPECT_EQ(decisions[0]["verdict"], "needs_review");
    EXPECT_EQ(decisions[0]["chosen_tier"], "lite");
    // The call waits: no result for it until the review is decided.
    auto results = payloadsOf(log, core::kind::ToolResult);
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0]["name"], "write_file");

    const auto item = onlyPendingItem();
    EXPECT_EQ(item.kind, "tier_escalation");
    EXPECT_EQ(item.requester, "bob");
    EXPECT_EQ(item.risk, "medium");
    const json requested = json::parse(item.payload);
    EXPECT_EQ(requested["summary"], "move session " + id + " from tier lite to tier standard");
    EXPECT_EQ(requested["impact"], "+$0.1000/h (lite $0.0200/h -> standard $0.1200/h)");
    EXPECT_EQ(requested["cost_micros"], 100000);
    EXPECT_EQ(requested["justification"], "the build needs 4 GiB");
    EXPECT_EQ(requested["policy_verdict"], decisions[0]["reason"]);
    EXPECT_NE(requested["policy_verdict"].get<std::string>().find("above lite"), std::string::npos) << requested;
    EXPECT_EQ(requested["payload"]["tier"], "standard");
    EXPECT_EQ(requested["payload"]["from_tier"], "lite");
    EXPECT_EQ(requested["payload"]["decision_id"], decisions[0]["id"]);
    EXPECT_EQ(requested["payload"]["reason"], "the build needs 4 GiB");
    EXPECT_FALSE(m_store->acquireLease("test", 1000, 0)) << "nothing runs while it waits";

    // The submitter cannot approve it; another approver can, once.
    review::DecideRequest self = approval(item);
    self.decider = "bob";
    auto refused = m_desk->decide(self);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::PermissionDenied);
    ASSERT_TRUE(m_desk->decide(approval(item)));
    auto replayed = m_desk->decide(approval(item));
    ASSERT_FALSE(replayed);
    EXPECT_EQ(replayed.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(replayed.error().message.find("already approved by alice"), std::string::npos) << replayed.error().message;

    runUntilIdle(engine);
    const auto state = session(id);
    EXPECT_EQ(state.status, core::SessionStatus::Succeeded) << state.statusReason;
    EXPECT_EQ(state.tier, "standard");
    EXPECT_EQ(state.tierChooser, "human");
    log = events(id);
    decisions = payloadsOf(log, core::kind::EnvDecision);
    ASSERT_EQ(decisions.size(), 2u);
    EXPECT_EQ(decisions[1]["verdict"], "granted");
    EXPECT_EQ(decisions[1]["chooser"], "human");
    EXPECT_EQ(decisions[1]["who"], "alice");
    EXPECT_EQ(decisions[1]["rule"], "review " + item.id);
    EXPECT_EQ(decisions[1]["chosen_tier"], "standard");
    EXPECT_EQ(decisions[1]["trigger"], "request_environment");
    results = payloadsOf(log, core::kind::ToolResult);
    ASSERT_GE(results.size(), 3u);
    EXPECT_EQ(results[1]["name"], "request_environment");
    EXPECT_EQ(results[1]["granted"], true);
    EXPECT_EQ(results[1]["granted_by"], "alice");
    EXPECT_EQ(results[1]["decision_id"], decisions[1]["id"]);
    EXPECT_FALSE(results[1].contains("error")) << results[1];
    // The move: snapshot of lite's workspace, a standard sandbox restored from it, and the next
    // command ran there.
    const auto moves = payloadsOf(log, core::kind::SandboxMoved);
    ASSERT_EQ(moves.size(), 1u);
    EXPECT_EQ(moves[0]["from_tier"], "lite");
    EXPECT_EQ(moves[0]["to_tier"], "standard");
    EXPECT_EQ(moves[0]["workspace"], "restored");
    const std::string moved = moves[0]["to_sandbox_id"];
    ASSERT_EQ(m_pool->restores().size(), 1u);
    EXPECT_EQ(m_pool->restores()[0], moved + " <- " + moves[0]["manifest"].get<std::string>());
    EXPECT_EQ(sandboxOfCommand("cat notes.txt"), moved);
    // The approver's decision is the one that gets the standard tier's outcome at the release.
    const auto outcomes = payloadsOf(log, core::kind::EnvOutcome);
    ASSERT_EQ(outcomes.size(), 1u);
    EXPECT_EQ(outcomes[0]["decision_id"], decisions[1]["id"]);
    EXPECT_EQ(outcomes[0]["tier"], "standard");
}

TEST_F(ReviewEngineTest, RejectedOrExpiredEscalationKeepsTheTierAndTheSessionGoesOn)
{
    enableTierEscalation();
    createAgent("builder", agents::SelectionMode::Hybrid);
    auto engine = makeEngine();
    const std::string id = submit(escalation("expect_error = \"the session stays on tier lite\"\n"));
    runUntilIdle(engine);
    const auto item = onlyPendingItem();
    ASSERT_TRUE(m_desk->decide(rejection(item, "lite is enough for this")));
    runUntilIdle(engine);
    auto state = session(id);
    EXPECT_EQ(state.status, core::SessionStatus::Succeeded) << state.statusReason;
    EXPECT_EQ(state.tier, "lite");
    auto log = events(id);
    auto results = payloadsOf(log, core::kind::ToolResult);
    ASSERT_GE(results.size(), 3u);
    EXPECT_EQ(results[1]["granted"], false);
    EXPECT_EQ(results[1]["decider"], "alice");
    EXPECT_EQ(results[1]["error"], "tier standard was rejected by alice: lite is enough for this; the session stays "
                                   "on tier lite");
    EXPECT_TRUE(payloadsOf(log, core::kind::SandboxMoved).empty());
    EXPECT_EQ(payloadsOf(log, core::kind::EnvDecision).size(), 1u) << "a rejection grants nothing";
    EXPECT_EQ(sandboxOfCommand("cat notes.txt"), payloadsOf(log, core::kind::SandboxClaimed).front()["sandbox_id"]);

    // Expiry acts like a rejection.
    const std::string second = submit(escalation("expect_error = \"expired without a decision\"\n"));
    runUntilIdle(engine);
    const auto pending = onlyPendingItem();
    EXPECT_EQ(m_desk->expireDue(pending.expiresUnixMs + 1), 1);
    runUntilIdle(engine);
    EXPECT_EQ(session(second).status, core::SessionStatus::Succeeded) << session(second).statusReason;
    EXPECT_EQ(session(second).tier, "lite");
    results = payloadsOf(events(second), core::kind::ToolResult);
    ASSERT_GE(results.size(), 2u);
    EXPECT_EQ(results[1]["error"], "tier standard was not granted: review " + pending.id + " expired without a "
                                   "decision; the session stays on tier lite");
}

TEST_F(ReviewEngineTest, BulkApprovalOfTwoHighRiskEscalationsFromHybridAndAgentModes)
{
    // A rule bounds agent mode too: sessions of "picker" get lite without review, no more.
    policy::TierRule rule;
    rule.name = "small things";
    rule.agent = "picker";
    rule.tier = "lite";
    rule.maxTierWithoutReview = "lite";
    policy::TierPolicy tiers;
    tiers.rules.push_back(rule);
    enableTierEscalation(tiers);
    createAgent("builder", agents::SelectionMode::Hybrid);
    createAgent("picker", agents::SelectionMode::Agent);
    m_options.reviewPolicy.risk[review::kind::TierEscalation] = "high";
    auto engine = makeEngine();
    const std::string hybrid = submit(escalation());
    const std::string agent = submit(escalation(), 0, "picker");
    runUntilIdle(engine);
    auto page = m_queries->list({});
    ASSERT_TRUE(page);
    ASSERT_EQ(page->items.size(), 2u);
    review::DecideRequest both;
    both.approve = true;
    both.decider = "alice";
    both.reason = "the builds need it";
    for (const auto &item : page->items) {
        EXPECT_EQ(item.kind, "tier_escalation");
        EXPECT_EQ(item.risk, "high");
        both.ids.push_back(item.id);
        both.changeHashes[item.id] = item.changeHash;
    }
    EXPECT_NE(json::parse(events(agent).back().payload)["policy_verdict"].get<std::string>().find(
                  "policy rule 'small things'"), std::string::npos);
    // High risk: not before alice fetched each change; then both at once.
    auto refused = m_desk->decide(both);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(refused.error().message.find("has not fetched its full change"), std::string::npos);
    EXPECT_EQ(session(hybrid).status, core::SessionStatus::WaitingApproval) << "nothing was decided";
    for (const auto &item : page->items)
        ASSERT_TRUE(m_desk->fetch(item.id, "alice"));
    auto decided = m_desk->decide(both);
    ASSERT_TRUE(decided) << decided.error().message;
    runUntilIdle(engine);
    for (const auto &id : {hybrid, agent}) {
        SCOPED_TRACE(id);
        const auto state = session(id);
        EXPECT_EQ(state.status, core::SessionStatus::Succeeded) << state.statusReason;
        EXPECT_EQ(state.tier, "standard");
        EXPECT_EQ(state.tierChooser, "human");
        const auto moves = payloadsOf(events(id), core::kind::SandboxMoved);
        ASSERT_EQ(moves.size(), 1u);
        EXPECT_EQ(sandboxOfCommand("cat notes.txt").empty(), false);
    }
}

} // namespace
} // namespace paddock::engine
