// decide() on event lists: the step engine's next action is a pure function of the log.

#include "broker/engine/decide.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace paddock::engine {
namespace {

using nlohmann::json;

class Log {
public:
    Log &add(const char *kind, const json &payload)
    {
        core::Event e;
        e.sessionId = "s1";
        e.seq = static_cast<int64_t>(m_events.size()) + 1;
        e.timeUnixMs = 1000 + e.seq;
        e.kind = kind;
        e.payload = payload.dump();
        m_events.push_back(e);
        return *this;
    }
    Log &created() { return add(core::kind::SessionCreated, {{"goal", "g"}, {"model", "scripted"}, {"tier", "lite"}, {"playbook_toml", "x"}}); }
    Log &claimed() { return add(core::kind::SandboxClaimed, {{"sandbox_id", "sb1"}, {"pool", "p"}, {"tier", "lite"}}); }
    Log &response(const std::string &id, const std::string &name)
    {
        add(core::kind::ModelResponse, {{"tool_calls", json::array({{{"id", id}, {"name", name}, {"arguments", {{"command", "ls"}}}}})}});
        return add(core::kind::ToolCall, {{"call_id", id}, {"name", name}, {"arguments", {{"command", "ls"}}}});
    }
    Log &result(const std::string &id) { return add(core::kind::ToolResult, {{"call_id", id}, {"exit_code", 0}, {"stdout", "out"}}); }
    Log &state(const char *status) { return add(core::kind::StateChanged, {{"status", status}}); }
    const std::vector<core::Event> &events() const { return m_events; }

private:
    std::vector<core::Event> m_events;
};

TEST(Decide, EmptyLogHasNothingToDo)
{
    EXPECT_EQ(decide({}).kind, ActionKind::None);
}

TEST(Decide, NewSessionClaimsASandboxOfItsTier)
{
    Log log;
    log.created();
    const Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::ClaimSandbox);
    EXPECT_EQ(action.tier, "lite");
    EXPECT_EQ(action.idempotencyKey, "s1:2");
}

TEST(Decide, WithASandboxAndNoPendingCallAsksTheModel)
{
    Log log;
    log.created().claimed();
    EXPECT_EQ(decide(log.events()).kind, ActionKind::CallModel);
}

TEST(Decide, PendingToolCallRunsBeforeAnythingElse)
{
    Log log;
    log.created().claimed().response("c1", "run_command");
    const Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::RunTool);
    EXPECT_EQ(action.call.id, "c1");
    EXPECT_EQ(action.call.arguments.value("command", ""), "ls");
    EXPECT_EQ(action.idempotencyKey, "s1:5");
}

// A pause and a resume after the call was recorded must not make its repeat look like a new run:
// the pool answers a repeat from its record only when the key is the same.
TEST(Decide, ACallKeepsItsKeyWhateverIsAppendedAfterIt)
{
    Log log;
    log.created().claimed().response("c1", "run_command");
    const std::string key = decide(log.events()).idempotencyKey;
    log.state("paused").state("running");
    const Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::RunTool);
    EXPECT_EQ(action.idempotencyKey, key);
}

TEST(Decide, OpenCommandOfAPausedSessionIsAReplayOnlyRun)
{
    Log log;
    log.created().claimed().response("c1", "run_command").state("paused");
    EXPECT_EQ(decide(log.events()).kind, ActionKind::None);
    auto open = openCommandOf(log.events());
    ASSERT_TRUE(open);
    EXPECT_EQ(open->kind, ActionKind::RunTool);
    EXPECT_EQ(open->call.id, "c1");
    EXPECT_TRUE(open->replayOnly);
    EXPECT_EQ(open->idempotencyKey, "s1:5");
    log.add(core::kind::ToolResult, {{"call_id", "c1"}, {"name", "run_command"}});
    EXPECT_FALSE(openCommandOf(log.events())) << "recorded: nothing open";
    Log other;
    other.created().claimed().response("c2", "write_file").state("paused");
    EXPECT_FALSE(openCommandOf(other.events())) << "only commands have a run to replay";
    Log moved;
    moved.created().claimed().response("c3", "run_command").claimed().state("paused");
    EXPECT_FALSE(openCommandOf(moved.events())) << "a call from before the claim never ran in this sandbox";
}

TEST(Decide, ResolvedCallLeadsBackToTheModel)
{
    Log log;
    log.created().claimed().response("c1", "run_command").result("c1");
    EXPECT_EQ(decide(log.events()).kind, ActionKind::CallModel);
}

TEST(Decide, FinishCallFinishes)
{
    Log log;
    log.created().claimed().response("c1", "finish");
    const Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::Finish);
    EXPECT_EQ(action.call.id, "c1");
}

TEST(Decide, EndedSessionReleasesItsSandboxThenRests)
{
    Log log;
    log.created().claimed().state("succeeded");
    EXPECT_EQ(decide(log.events()).kind, ActionKind::ReleaseSandbox);
    log.add(core::kind::SandboxReleased, {{"sandbox_id", "sb1"}});
    EXPECT_EQ(decide(log.events()).kind, ActionKind::None);
}

TEST(Decide, CancelledSessionWithPendingCallDoesNotRunIt)
{
    Log log;
    log.created().claimed().response("c1", "run_command").state("cancelled");
    EXPECT_EQ(decide(log.events()).kind, ActionKind::ReleaseSandbox);
}

TEST(Decide, PausedSessionRests)
{
    Log log;
    log.created().claimed().state("running").state("paused");
    EXPECT_EQ(decide(log.events()).kind, ActionKind::None);
    log.state("running");
    EXPECT_EQ(decide(log.events()).kind, ActionKind::CallModel);
}

TEST(Decide, LostSandboxIsClaimedAgain)
{
    Log log;
    log.created().claimed().response("c1", "run_command");
    log.add(core::kind::SandboxFailed, {{"sandbox_id", "sb1"}, {"reason", "crashed"}});
    EXPECT_EQ(decide(log.events()).kind, ActionKind::ClaimSandbox);
}

TEST(Decide, RepeatedModelErrorsFailTheSession)
{
    Log log;
    log.created().claimed();
    for (int i = 0; i < kMaxConsecutiveModelErrors - 1; ++i)
        log.add(core::kind::ModelError, {{"error", "HTTP 500"}});
    EXPECT_EQ(decide(log.events()).kind, ActionKind::CallModel);
    log.add(core::kind::ModelError, {{"error", "HTTP 503"}});
    const Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::FailSession);
    EXPECT_NE(action.reason.find("HTTP 503"), std::string::npos);
}

TEST(Decide, ModelResponseResetsTheErrorCount)
{
    Log log;
    log.created().claimed();
    for (int i = 0; i < kMaxConsecutiveModelErrors; ++i)
        log.add(core::kind::ModelError, {{"error", "x"}});
    log.response("c1", "run_command").result("c1");
    EXPECT_EQ(decide(log.events()).kind, ActionKind::CallModel);
}

TEST(Decide, SameLogSameAction)
{
    Log log;
    log.created().claimed().response("c1", "run_command");
    const Action a = decide(log.events());
    const Action b = decide(log.events());
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.idempotencyKey, b.idempotencyKey);
    EXPECT_EQ(a.call.id, b.call.id);
}

TEST(BuildModelContext, PairsEachResultWithItsCall)
{
    Log log;
    log.created().claimed().response("c1", "run_command").result("c1").response("c2", "run_command");
    const llm::ModelContext context = buildModelContext(log.events());
    EXPECT_EQ(context.goal, "g");
    EXPECT_EQ(context.playbookToml, "x");
    ASSERT_EQ(context.history.size(), 2u);
    ASSERT_EQ(context.history[0].results.size(), 1u);
    EXPECT_EQ(context.history[0].results[0].value("stdout", ""), "out");
    EXPECT_TRUE(context.history[1].results[0].is_null());
    EXPECT_EQ(context.idempotencyKey, "s1:8");
}

TEST(Decide, TierOverrideMovesAtTheNextStepBeforeAnythingElse)
{
    Log log;
    log.created().claimed().response("c1", "run_command");
    log.add(core::kind::TierOverride, {{"chooser", "human"}, {"from", "lite"}, {"to", "heavy"}, {"reason", "r"}});
    Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::MoveTier);
    EXPECT_EQ(action.tier, "heavy");
    EXPECT_EQ(action.state.tier, "heavy");
    // Once a sandbox of the new tier is claimed, the pending call runs there.
    log.add(core::kind::SandboxReleased, {{"sandbox_id", "sb1"}, {"pool", "p"}, {"reason", "tier_move"}});
    log.add(core::kind::SandboxClaimed, {{"sandbox_id", "sb2"}, {"pool", "p"}, {"tier", "heavy"}});
    action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::RunTool);
    EXPECT_EQ(action.call.id, "c1");
}

TEST(Decide, TierOverrideWithoutASandboxClaimsTheNewTier)
{
    Log log;
    log.created().claimed().state("paused");
    log.add(core::kind::SandboxReleased, {{"sandbox_id", "sb1"}, {"pool", "p"}, {"reason", "idle"}, {"snapshot_ref", "r1"}});
    log.add(core::kind::TierOverride, {{"chooser", "human"}, {"from", "lite"}, {"to", "heavy"}});
    EXPECT_EQ(decide(log.events()).kind, ActionKind::None);   // paused: nothing to do
    log.state("running");
    const Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::ClaimSandbox);
    EXPECT_EQ(action.tier, "heavy");
}

// Storage is billed at the size of the workspace's latest checkpoint, also one taken when the
// sandbox was given back (recorded in sandbox.released).
TEST(Billing, ACheckpointTakenAtAReleaseSetsTheBilledSize)
{
    Log log;
    log.created().claimed();
    log.add(core::kind::Checkpoint, {{"manifest", std::string(64, 'a')}, {"size_bytes", 100}});
    EXPECT_EQ(billingOf(log.events()).checkpointBytes, 100);
    log.add(core::kind::SandboxReleased, {{"reason", "idle"}, {"manifest", std::string(64, 'b')}, {"checkpoint", "new"},
                                          {"size_bytes", 5000}});
    EXPECT_EQ(billingOf(log.events()).checkpointBytes, 5000);
    log.add(core::kind::SandboxReleased, {{"reason", "idle"}, {"manifest", std::string(64, 'b')}, {"checkpoint", "current"}});
    EXPECT_EQ(billingOf(log.events()).checkpointBytes, 5000) << "the same checkpoint: the same size";
}

} // namespace
} // namespace paddock::engine

