// Approved review items applied in real sandboxes: a real paddock-pool process, and in this
// process the broker's own parts (SQLite store, step engine, scripted model, review desk) so that
// the test can decide as a principal other than the session's submitter (paddockd's callers are
// named by their connection, docs/permissions.md).
// - A bulk change: the diff is applied with `patch` inside the sandbox; the files read back
//   afterwards hold the new text, and the session resumes at that step.
// - A tier escalation: the session moves to the approved tier (snapshot, claim, restore) and the
//   next command there reads the file written on the first tier.
#include "tests/integration/harness.h"
#include "tests/support/engine_fixture.h"

#include "broker/pool_client/grpc_pool_client.h"
#include "broker/review/review_desk.h"
#include "broker/store/agent_store.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace paddock::test {
namespace {

using nlohmann::json;

class ReviewApply : public EngineFixture {
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
    }

    void TearDown() override
    {
        m_desk.reset();
        EngineFixture::TearDown();
    }

    // A real paddock-pool with the tiers of `poolToml` (empty: its default lite tier).
    void startRealPool(const std::string &poolToml = "")
    {
        if (!poolToml.empty()) {
            std::filesystem::create_directories(m_poolDir / "xdg/config/paddock");
            std::ofstream(m_poolDir / "xdg/config/paddock/pool.toml") << poolToml;
        }
        auto pool = startPool(m_poolDir);
        ASSERT_TRUE(pool) << pool.error().message;
        m_pool = std::make_unique<PoolProcess>(std::move(*pool));
        m_pools.add(pool_client::makeGrpcPoolClient("local", m_pool->endpoint), true);
    }

    // The only pending item, approved by alice (not the submitter, bob).
    store::ReviewRow approveTheOnlyItem(const std::string &reason)
    {
        auto page = m_desk->list({});
        EXPECT_TRUE(page);
        if (!page || page->items.size() != 1u) {
            ADD_FAILURE() << "expected one pending review item";
            return {};
        }
        const auto item = page->items.front();
        review::DecideRequest approve;
        approve.ids = {item.id};
        approve.approve = true;
        approve.decider = "alice";
        approve.reason = reason;
        approve.changeHashes[item.id] = item.changeHash;
        auto decided = m_desk->decide(approve);
        EXPECT_TRUE(decided) << decided.error().message;
        return item;
    }

    TempDir m_poolDir;
    std::unique_ptr<PoolProcess> m_pool;
    std::unique_ptr<store::ReviewQueries> m_queries;
    std::unique_ptr<review::ReviewDesk> m_desk;
};

constexpr int kFiles = 6;   // one more than the policy's bulk_target_limit

std::string playbook()
{
    std::string text = "name = \"bulk\"\ngoal = \"rename old to new in six files\"\n";
    std::string targets, diff;
    for (int i = 0; i < kFiles; ++i) {
        const std::string file = "f" + std::to_string(i) + ".txt";
        text += "[[step]]\ntool = \"write_file\"\npath = \"" + file + "\"\ncontent = \"old " + std::to_string(i) + "\\n\"\n";
        targets += (i ? ", \"" : "\"") + file + "\"";
        diff += "--- a/" + file + "\n+++ b/" + file + "\n@@ -1 +1 @@\n-old " + std::to_string(i) + "\n+new "
            + std::to_string(i) + "\n";
    }
    text += "[[step]]\ntool = \"propose_change\"\ntargets = [" + targets + "]\nchange = '''" + diff
        + "'''\njustification = \"old is deprecated\"\n";
    text += "[[step]]\ntool = \"run_command\"\ncommand = \"cat f*.txt\"\nexpect_stdout = \"new 5\"\n";
    return text;
}

TEST_F(ReviewApply, ApprovedDiffChangesTheWorkspaceAndTheSessionResumes)
{
    startRealPool();
    auto engine = makeEngine();
    const std::string id = submit(playbook(), {{"agent", "renamer"}, {"submitted_by", "bob"}});
    runUntilIdle(engine);
    ASSERT_EQ(session(id).status, core::SessionStatus::WaitingApproval) << session(id).statusReason;
    approveTheOnlyItem("old is deprecated indeed");
    runUntilIdle(engine);

    EXPECT_EQ(session(id).status, core::SessionStatus::Succeeded) << session(id).statusReason;
    json applied, cat;
    for (const auto &payload : payloadsOf(events(id), core::kind::ToolResult)) {
        if (payload["name"] == "propose_change")
            applied = payload;
        if (payload.value("command", "") == "cat f*.txt")
            cat = payload;
    }
    ASSERT_FALSE(applied.is_null());
    EXPECT_EQ(applied["approved"], true);
    EXPECT_EQ(applied["applied"], true) << applied.dump();
    EXPECT_EQ(applied["decider"], "alice");
    ASSERT_FALSE(cat.is_null());
    std::string expected;
    for (int i = 0; i < kFiles; ++i)
        expected += "new " + std::to_string(i) + "\n";
    EXPECT_EQ(cat["stdout"], expected) << cat.dump();
}

TEST_F(ReviewApply, ApprovedTierEscalationMovesTheWorkspaceToTheNewTier)
{
    // Two bubblewrap tiers of different sizes and prices.
    startRealPool("[[tier]]\nname = \"small\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 4\nmemory_mb = 128\n"
                  "cpu = 1.0\nprice_per_hour = 0.02\n"
                  "[[tier]]\nname = \"big\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 4\nmemory_mb = 512\n"
                  "cpu = 2.0\nprice_per_hour = 0.2\n");
    auto agents = store::AgentStore::open(*m_store);
    ASSERT_TRUE(agents) << agents.error().message;
    agents::Agent agent;
    agent.name = "builder";
    agent.owner = "bob";
    agent.defaultTier = "small";
    agent.selectionMode = agents::SelectionMode::Hybrid;
    ASSERT_TRUE((*agents)->create(agent));
    engine::EnvironmentDecider decider(agents->get(), m_pools, {}, "small");
    engine::EngineOptions options;
    options.decider = &decider;
    auto engine = makeEngine(options);
    const std::string id = submit(R"(
name = "escalate"
goal = "build big"
[[step]]
tool = "write_file"
path = "plan.txt"
content = "written on small"
[[step]]
tool = "request_environment"
tier = "big"
reason = "the link step needs memory"
[[step]]
tool = "run_command"
command = "cat plan.txt"
expect_stdout = "written on small"
)", {{"agent", "builder"}, {"tier", "small"}, {"submitted_by", "bob"}});
    runUntilIdle(engine);
    ASSERT_EQ(session(id).status, core::SessionStatus::WaitingApproval) << session(id).statusReason;
    const auto item = approveTheOnlyItem("a link step");
    EXPECT_EQ(item.kind, "tier_escalation");
    EXPECT_EQ(json::parse(item.payload)["cost_micros"], 180000) << "$0.18/h more on big";
    runUntilIdle(engine);

    const auto done = session(id);
    EXPECT_EQ(done.status, core::SessionStatus::Succeeded) << done.statusReason;
    EXPECT_EQ(done.tier, "big");
    EXPECT_EQ(done.tierChooser, "human");
    // In order: the approver's decision, the move to a big sandbox restored from the snapshot, and
    // the command that read the file back, with no other claim in between.
    json granted, moved, cat;
    int claimsAfterMove = 0;
    for (const auto &event : events(id)) {
        const json payload = json::parse(event.payload);
        if (event.kind == core::kind::EnvDecision && payload["chooser"] == "human")
            granted = payload;
        if (event.kind == core::kind::SandboxMoved)
            moved = payload;
        if (event.kind == core::kind::SandboxClaimed && !moved.is_null() && cat.is_null())
            ++claimsAfterMove;
        if (event.kind == core::kind::ToolResult && payload.value("command", "") == "cat plan.txt")
            cat = payload;
    }
    ASSERT_FALSE(granted.is_null());
    EXPECT_EQ(granted["who"], "alice");
    EXPECT_EQ(granted["rule"], "review " + item.id);
    ASSERT_FALSE(moved.is_null());
    EXPECT_EQ(moved["from_tier"], "small");
    EXPECT_EQ(moved["to_tier"], "big");
    EXPECT_EQ(moved["workspace"], "restored");
    EXPECT_EQ(claimsAfterMove, 0);
    ASSERT_FALSE(cat.is_null());
    EXPECT_EQ(cat["stdout"], "written on small") << cat.dump();
}

} // namespace
} // namespace paddock::test
