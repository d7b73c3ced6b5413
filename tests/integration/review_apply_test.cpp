// Approved review items applied in real sandboxes: a real paddock-pool process, and in this
// process the broker's own parts (SQLite store, step engine, scripted model, review desk) so that
// the test can decide as a principal other than the session's submitter (paddockd's callers are
// named by their connection, docs/permissions.md).
// - A bulk change: the diff is applied with `patch` inside the sandbox; the files read back
//   afterwards hold the new text, and the session resumes at that step.
// - A tier escalation: the session moves to the approved tier (snapshot, claim, restore) and the
//   next command there reads the file written on the first tier.
#include "tests/integration/harness.h"

#include "broker/engine/step_engine.h"
#include "broker/model/scripted_model.h"
#include "broker/pools/grpc_pool_client.h"
#include "broker/review/review_desk.h"
#include "broker/store/agent_store.h"
#include "broker/store/sqlite_event_store.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace paddock::test {
namespace {

using nlohmann::json;

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

TEST(ReviewApply, ApprovedDiffChangesTheWorkspaceAndTheSessionResumes)
{
    const auto missing = missingBinaries({"paddock-pool", "paddock-sandbox-init"});
    if (!missing.empty())
        GTEST_SKIP() << "not built: " << missing.front();
    TempDir dir;
    auto pool = startPool(dir);
    ASSERT_TRUE(pool) << pool.error().message;

    auto store = store::openSqliteEventStore(dir / "broker.db");
    ASSERT_TRUE(store) << store.error().message;
    auto queries = store::ReviewQueries::open(dir / "broker.db");
    ASSERT_TRUE(queries);
    review::ReviewDesk desk(**store, **queries, review::ReviewPolicy{});
    pools::PoolSet pools;
    pools.add(pools::makeGrpcPoolClient("local", pool->endpoint), true);
    model::ScriptedModel scripted;
    engine::StepEngine engine(**store, pools, [&](const std::string &) -> model::ModelAdapter * { return &scripted; });

    store::AppendRequest create;
    create.sessionId = "s-apply";
    create.expectedLastSeq = 0;
    create.events.push_back({core::kind::SessionCreated,
                             json{{"agent", "renamer"}, {"model", "scripted"}, {"tier", "lite"}, {"goal", "rename"},
                                  {"submitted_by", "bob"}, {"playbook_toml", playbook()}}.dump()});
    ASSERT_TRUE((*store)->appendSync(std::move(create)));

    auto runUntilIdle = [&] {
        for (int i = 0; i < 100; ++i) {
            auto lease = (*store)->acquireLease("test", 30000, 0);
            if (!lease)
                return;
            engine.runOneStep(*lease);
            (*store)->releaseLease(*lease);
        }
        FAIL() << "the session did not settle";
    };
    runUntilIdle();
    auto waiting = (*store)->getSession("s-apply");
    ASSERT_TRUE(waiting);
    ASSERT_EQ(waiting->status, core::SessionStatus::WaitingApproval) << waiting->statusReason;
    auto page = desk.list({});
    ASSERT_TRUE(page);
    ASSERT_EQ(page->items.size(), 1u);
    const auto item = page->items.front();

    review::DecideRequest approve;
    approve.ids = {item.id};
    approve.approve = true;
    approve.decider = "alice";
    approve.reason = "old is deprecated indeed";
    approve.changeHashes[item.id] = item.changeHash;
    auto decided = desk.decide(approve);
    ASSERT_TRUE(decided) << decided.error().message;
    runUntilIdle();

    auto done = (*store)->getSession("s-apply");
    ASSERT_TRUE(done);
    EXPECT_EQ(done->status, core::SessionStatus::Succeeded) << done->statusReason;
    auto log = (*store)->readEvents("s-apply", 1, 10000);
    ASSERT_TRUE(log);
    json applied, cat;
    for (const auto &event : *log) {
        if (event.kind != core::kind::ToolResult)
            continue;
        const json payload = json::parse(event.payload);
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
    engine.stop();
    (*store)->close();
}

TEST(ReviewApply, ApprovedTierEscalationMovesTheWorkspaceToTheNewTier)
{
    const auto missing = missingBinaries({"paddock-pool", "paddock-sandbox-init"});
    if (!missing.empty())
        GTEST_SKIP() << "not built: " << missing.front();
    TempDir dir;
    // Two bubblewrap tiers of different sizes and prices.
    std::filesystem::create_directories(dir / "xdg/config/paddock");
    std::ofstream(dir / "xdg/config/paddock/pool.toml")
        << "[[tier]]\nname = \"small\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 4\nmemory_mb = 128\n"
           "cpu = 1.0\nprice_per_hour = 0.02\n"
           "[[tier]]\nname = \"big\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 4\nmemory_mb = 512\n"
           "cpu = 2.0\nprice_per_hour = 0.2\n";
    auto pool = startPool(dir);
    ASSERT_TRUE(pool) << pool.error().message;

    auto store = store::openSqliteEventStore(dir / "broker.db");
    ASSERT_TRUE(store) << store.error().message;
    auto queries = store::ReviewQueries::open(dir / "broker.db");
    ASSERT_TRUE(queries);
    auto agents = store::AgentStore::open(dir / "broker.db");
    ASSERT_TRUE(agents) << agents.error().message;
    agents::Agent agent;
    agent.name = "builder";
    agent.owner = "bob";
    agent.defaultTier = "small";
    agent.selectionMode = agents::SelectionMode::Hybrid;
    ASSERT_TRUE((*agents)->create(agent));
    review::ReviewDesk desk(**store, **queries, review::ReviewPolicy{});
    pools::PoolSet pools;
    pools.add(pools::makeGrpcPoolClient("local", pool->endpoint), true);
    engine::EnvironmentDecider decider(agents->get(), pools, {}, "small");
    engine::EngineOptions options;
    options.decider = &decider;
    model::ScriptedModel scripted;
    engine::StepEngine engine(**store, pools, [&](const std::string &) -> model::ModelAdapter * { return &scripted; },
                              options);

    store::AppendRequest create;
    create.sessionId = "s-escalate";
    create.expectedLastSeq = 0;
    create.events.push_back({core::kind::SessionCreated,
                             json{{"agent", "builder"}, {"model", "scripted"}, {"tier", "small"}, {"goal", "build"},
                                  {"submitted_by", "bob"}, {"playbook_toml", R"(
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
)"}}.dump()});
    ASSERT_TRUE((*store)->appendSync(std::move(create)));

    auto runUntilIdle = [&] {
        for (int i = 0; i < 100; ++i) {
            auto lease = (*store)->acquireLease("test", 30000, 0);
            if (!lease)
                return;
            engine.runOneStep(*lease);
            (*store)->releaseLease(*lease);
        }
        FAIL() << "the session did not settle";
    };
    runUntilIdle();
    auto waiting = (*store)->getSession("s-escalate");
    ASSERT_TRUE(waiting);
    ASSERT_EQ(waiting->status, core::SessionStatus::WaitingApproval) << waiting->statusReason;
    auto page = desk.list({});
    ASSERT_TRUE(page);
    ASSERT_EQ(page->items.size(), 1u);
    const auto item = page->items.front();
    EXPECT_EQ(item.kind, "tier_escalation");
    EXPECT_EQ(json::parse(item.payload)["cost_micros"], 180000) << "$0.18/h more on big";

    review::DecideRequest approve;
    approve.ids = {item.id};
    approve.approve = true;
    approve.decider = "alice";
    approve.reason = "a link step";
    approve.changeHashes[item.id] = item.changeHash;
    auto decided = desk.decide(approve);
    ASSERT_TRUE(decided) << decided.error().message;
    runUntilIdle();

    auto done = (*store)->getSession("s-escalate");
    ASSERT_TRUE(done);
    EXPECT_EQ(done->status, core::SessionStatus::Succeeded) << done->statusReason;
    EXPECT_EQ(done->tier, "big");
    EXPECT_EQ(done->tierChooser, "human");
    auto log = (*store)->readEvents("s-escalate", 1, 10000);
    ASSERT_TRUE(log);
    // In order: the approver's decision, the move to a big sandbox restored from the snapshot, and
    // the command that read the file back, with no other claim in between.
    json granted, moved, cat;
    int claimsAfterMove = 0;
    for (const auto &event : *log) {
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
    engine.stop();
    (*store)->close();
}

} // namespace
} // namespace paddock::test
