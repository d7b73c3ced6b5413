// decide() on event lists: the step engine's next action is a pure function of the log; SessionFold,
// the same function applied one event at a time.

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
    // One model turn with several tool calls, each followed by its tool.call, as the engine records them.
    Log &turn(const std::vector<std::pair<std::string, std::string>> &calls)
    {
        json toolCalls = json::array();
        for (const auto &[id, name] : calls)
            toolCalls.push_back({{"id", id}, {"name", name}, {"arguments", {{"command", "make " + id}}}});
        add(core::kind::ModelResponse, {{"text", "t"}, {"model", "scripted"}, {"tool_calls", toolCalls},
                                        {"usage", {{"input_tokens", 10}, {"output_tokens", 2}, {"cached_tokens", 1}}}});
        for (const auto &[id, name] : calls)
            add(core::kind::ToolCall, {{"call_id", id}, {"name", name}, {"arguments", {{"command", "make " + id}}}});
        return *this;
    }
    Log &claimedTier(const std::string &sandbox, const char *tier)
    {
        return add(core::kind::SandboxClaimed, {{"sandbox_id", sandbox}, {"pool", "p"}, {"tier", tier}, {"price_per_hour", 0.25}});
    }
    Log &released(const char *reason) { return add(core::kind::SandboxReleased, {{"sandbox_id", "sb"}, {"pool", "p"}, {"reason", reason}}); }
    Log &modelError(const std::string &error) { return add(core::kind::ModelError, {{"error", error}}); }
    Log &cost(const char *kind, int64_t untilUnixMs) { return add(core::kind::Cost, {{"kind", kind}, {"until_unix_ms", untilUnixMs}}); }
    Log &review(const std::string &reviewId, const std::string &callId)
    {
        return add(core::kind::ApprovalRequested, {{"review_id", reviewId}, {"tool_call_id", callId}, {"kind", "bulk_change"},
                                                   {"summary", "edit"}});
    }
    Log &decided(const std::string &reviewId, bool approved)
    {
        return add(core::kind::ApprovalDecided, {{"review_id", reviewId}, {"approved", approved}, {"kind", "bulk_change"},
                                                 {"decider", "alice"}, {"reason", "ok"}});
    }
    Log &overrideTier(const char *to) { return add(core::kind::TierOverride, {{"chooser", "human"}, {"to", to}}); }
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
    EXPECT_TRUE(action.withModelCall) << "the first model call goes out with the claim";
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
    const Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::ClaimSandbox);
    EXPECT_FALSE(action.withModelCall) << "c1 waits for its result: the model is not asked before it ran";
    log.add(core::kind::ToolResult, {{"call_id", "c1"}, {"name", "run_command"}, {"exit_code", 0}});
    EXPECT_TRUE(decide(log.events()).withModelCall);
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

// --- More of decide's rules, pinned with concrete expectations --------------------------------------

TEST(Decide, ALogThatDoesNotStartWithItsCreationHasNothingToDo)
{
    Log log;
    log.state("running").created().claimed();
    const Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::None);
    EXPECT_EQ(action.idempotencyKey, "s1:4");
}

TEST(Decide, CallsRunInTheOrderTheModelMadeThem)
{
    Log log;
    log.created().claimed().turn({{"c1", "write_file"}, {"c2", "run_command"}, {"c3", "finish"}});
    Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::RunTool);
    EXPECT_EQ(action.call.id, "c1");
    EXPECT_EQ(action.call.name, "write_file");
    EXPECT_EQ(action.idempotencyKey, "s1:5") << "the seq after c1's tool.call (4)";
    log.result("c2");   // out of order: c1 still comes first
    EXPECT_EQ(decide(log.events()).call.id, "c1");
    log.result("c1");
    action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::Finish);
    EXPECT_EQ(action.call.id, "c3");
    EXPECT_EQ(action.idempotencyKey, "s1:7");
}

// A result resolves its call id wherever it stands in the log: a later tool.call with the same id is
// taken as done, and a repeated tool.call of an open id runs once, under the first one's key.
TEST(Decide, AResultResolvesItsCallIdForGood)
{
    Log log;
    log.created().claimed().response("c1", "run_command").result("c1").response("c1", "run_command");
    EXPECT_EQ(decide(log.events()).kind, ActionKind::CallModel);

    Log twice;
    twice.created().claimed().response("c1", "run_command").response("c1", "write_file");
    const Action action = decide(twice.events());
    EXPECT_EQ(action.call.name, "run_command");
    EXPECT_EQ(action.idempotencyKey, "s1:5");
    twice.result("c1");
    EXPECT_EQ(decide(twice.events()).kind, ActionKind::CallModel);
}

TEST(Decide, ARunOfAReviewedCallCarriesTheReviewAndItsDecision)
{
    Log log;
    log.created().claimed().response("c1", "propose_change").review("r1", "c1");
    EXPECT_EQ(decide(log.events()).kind, ActionKind::None) << "waiting for the review";
    log.decided("r1", true);
    Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::RunTool);
    EXPECT_EQ(action.call.id, "c1");
    EXPECT_EQ(action.review.value("review_id", ""), "r1");
    EXPECT_EQ(action.decision.value("approved", false), true);
    EXPECT_EQ(action.decision.value("decider", ""), "alice");
    // Another call without a review has neither.
    log.result("c1").response("c2", "run_command");
    action = decide(log.events());
    EXPECT_EQ(action.call.id, "c2");
    EXPECT_TRUE(action.review.is_null());
    EXPECT_TRUE(action.decision.is_null());
}

TEST(Decide, AReviewNotYetDecidedComesWithoutADecision)
{
    Log log;
    log.created().claimed().response("c1", "propose_change").review("r1", "c1").decided("r0", true).state("running");
    const Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::RunTool);
    EXPECT_EQ(action.review.value("review_id", ""), "r1");
    EXPECT_TRUE(action.decision.is_null()) << "r0's decision is not r1's";
}

TEST(Decide, TheFailureReasonQuotesTheStreakAndTheLastError)
{
    Log log;
    log.created().claimed().modelError("HTTP 500").modelError("HTTP 502").modelError("timeout after 60 s");
    const Action action = decide(log.events());
    EXPECT_EQ(action.kind, ActionKind::FailSession);
    EXPECT_EQ(action.reason, "the model failed 3 times in a row; last error: timeout after 60 s");
    EXPECT_EQ(action.idempotencyKey, "s1:6");
}

TEST(Decide, OpenCommandLooksOnlyAtTheFirstOpenCallSinceTheClaim)
{
    Log log;
    log.created().claimed().turn({{"c1", "write_file"}, {"c2", "run_command"}}).state("paused");
    EXPECT_FALSE(openCommandOf(log.events())) << "c1 comes first and has no run to replay";
    log.result("c1");
    auto open = openCommandOf(log.events());
    ASSERT_TRUE(open);
    EXPECT_EQ(open->call.id, "c2");
    EXPECT_EQ(open->idempotencyKey, "s1:6");
    EXPECT_EQ(open->billing.sandboxId, "sb1");
    EXPECT_TRUE(open->billing.held);
    log.released("idle");
    EXPECT_FALSE(openCommandOf(log.events())) << "no sandbox held";
}

TEST(Billing, FollowsClaimsCostsAndReleases)
{
    Log log;
    log.created().claimedTier("sb7", "heavy");
    Billing billing = billingOf(log.events());
    EXPECT_TRUE(billing.held);
    EXPECT_EQ(billing.tier, "heavy");
    EXPECT_EQ(billing.pool, "p");
    EXPECT_EQ(billing.sandboxId, "sb7");
    EXPECT_DOUBLE_EQ(billing.pricePerHour, 0.25);
    EXPECT_EQ(billing.billedUntilUnixMs, 1002) << "the claim's time";
    log.cost("sandbox", 5000).cost("model", 9999).cost("storage", 6000);
    billing = billingOf(log.events());
    EXPECT_EQ(billing.billedUntilUnixMs, 5000);
    EXPECT_EQ(billing.storageBilledUntilUnixMs, 6000);
    log.add(core::kind::SandboxLost, {{"sandbox_id", "sb7"}});
    EXPECT_FALSE(billingOf(log.events()).held);
}

TEST(BuildModelContext, KeepsEachTurnsTextModelAndUsage)
{
    Log log;
    log.created().claimed().turn({{"c1", "run_command"}, {"c2", "read_file"}}).result("c2");
    const llm::ModelContext context = buildModelContext(log.events());
    EXPECT_EQ(context.sessionId, "s1");
    ASSERT_EQ(context.history.size(), 1u);
    const llm::Exchange &exchange = context.history[0];
    EXPECT_EQ(exchange.turn.text, "t");
    EXPECT_EQ(exchange.turn.model, "scripted");
    EXPECT_EQ(exchange.turn.usage.inputTokens, 10);
    EXPECT_EQ(exchange.turn.usage.outputTokens, 2);
    EXPECT_EQ(exchange.turn.usage.cachedTokens, 1);
    ASSERT_EQ(exchange.turn.toolCalls.size(), 2u);
    EXPECT_EQ(exchange.turn.toolCalls[1].arguments.value("command", ""), "make c2");
    ASSERT_EQ(exchange.results.size(), 2u);
    EXPECT_TRUE(exchange.results[0].is_null());
    EXPECT_EQ(exchange.results[1].value("call_id", ""), "c2");
    EXPECT_EQ(context.idempotencyKey, "s1:7");
    EXPECT_EQ(buildModelContext({}).idempotencyKey, ":1");
}

// --- SessionFold: the same answers, one event at a time ---------------------------------------------

void expectSameBilling(const Billing &fold, const Billing &span)
{
    EXPECT_EQ(fold.held, span.held);
    EXPECT_EQ(fold.tier, span.tier);
    EXPECT_EQ(fold.pool, span.pool);
    EXPECT_EQ(fold.sandboxId, span.sandboxId);
    EXPECT_EQ(fold.pricePerHour, span.pricePerHour);
    EXPECT_EQ(fold.billedUntilUnixMs, span.billedUntilUnixMs);
    EXPECT_EQ(fold.checkpointBytes, span.checkpointBytes);
    EXPECT_EQ(fold.storageBilledUntilUnixMs, span.storageBilledUntilUnixMs);
}

void expectSameAction(const Action &fold, const Action &span)
{
    EXPECT_EQ(actionName(fold.kind), std::string(actionName(span.kind)));
    EXPECT_EQ(fold.state.id, span.state.id);
    EXPECT_EQ(fold.state.lastSeq, span.state.lastSeq);
    EXPECT_EQ(fold.state.status, span.state.status);
    EXPECT_EQ(fold.state.tier, span.state.tier);
    EXPECT_EQ(fold.state.sandboxId, span.state.sandboxId);
    EXPECT_EQ(fold.state.steps, span.state.steps);
    EXPECT_EQ(fold.tier, span.tier);
    EXPECT_EQ(fold.call.id, span.call.id);
    EXPECT_EQ(fold.call.name, span.call.name);
    EXPECT_EQ(fold.call.arguments, span.call.arguments);
    EXPECT_EQ(fold.reason, span.reason);
    EXPECT_EQ(fold.review, span.review);
    EXPECT_EQ(fold.decision, span.decision);
    EXPECT_EQ(fold.idempotencyKey, span.idempotencyKey);
    EXPECT_EQ(fold.replayOnly, span.replayOnly);
    expectSameBilling(fold.billing, span.billing);
}

void expectSameContext(const llm::ModelContext &fold, const llm::ModelContext &span)
{
    EXPECT_EQ(fold.sessionId, span.sessionId);
    EXPECT_EQ(fold.goal, span.goal);
    EXPECT_EQ(fold.playbookToml, span.playbookToml);
    EXPECT_EQ(fold.idempotencyKey, span.idempotencyKey);
    ASSERT_EQ(fold.history.size(), span.history.size());
    for (size_t i = 0; i < fold.history.size(); ++i) {
        const llm::Exchange &a = fold.history[i];
        const llm::Exchange &b = span.history[i];
        EXPECT_EQ(a.turn.text, b.turn.text);
        EXPECT_EQ(a.turn.model, b.turn.model);
        EXPECT_EQ(a.turn.usage.inputTokens, b.turn.usage.inputTokens);
        EXPECT_EQ(a.turn.usage.outputTokens, b.turn.usage.outputTokens);
        EXPECT_EQ(a.turn.usage.cachedTokens, b.turn.usage.cachedTokens);
        ASSERT_EQ(a.turn.toolCalls.size(), b.turn.toolCalls.size());
        for (size_t j = 0; j < a.turn.toolCalls.size(); ++j) {
            EXPECT_EQ(a.turn.toolCalls[j].id, b.turn.toolCalls[j].id);
            EXPECT_EQ(a.turn.toolCalls[j].name, b.turn.toolCalls[j].name);
            EXPECT_EQ(a.turn.toolCalls[j].arguments, b.turn.toolCalls[j].arguments);
        }
        EXPECT_EQ(a.results, b.results);
    }
}

// Realistic lives of a session: every kind of event decide reads, in the orders the engine writes them.
std::vector<Log> realisticLogs()
{
    std::vector<Log> logs;
    // Tools, a review approved, model errors, an idle release with a checkpoint, a restore, a finish.
    Log a;
    a.created().claimedTier("sb1", "lite").turn({{"c1", "run_command"}}).cost("model", 0).result("c1").cost("sandbox", 1500);
    a.turn({{"c2", "propose_change"}}).review("r1", "c2").decided("r1", true).result("c2");
    a.modelError("HTTP 500").modelError("HTTP 503").turn({{"c3", "run_command"}, {"c4", "write_file"}}).state("paused");
    a.add(core::kind::SandboxReleased, {{"sandbox_id", "sb1"}, {"pool", "p"}, {"reason", "idle"},
                                        {"manifest", std::string(64, 'a')}, {"size_bytes", 4096}});
    a.cost("storage", 2000).state("running").claimedTier("sb2", "lite");
    a.add(core::kind::SandboxRestored, {{"sandbox_id", "sb2"}}).result("c3").result("c4");
    a.add(core::kind::Checkpoint, {{"manifest", std::string(64, 'b')}, {"size_bytes", 8192}});
    a.turn({{"c5", "finish"}}).result("c5").state("succeeded").released("done");
    logs.push_back(a);
    // A tier override moves a pending call to a heavy sandbox; three model errors then fail it.
    Log b;
    b.created().claimed().response("c1", "run_command").overrideTier("heavy").released("tier_move");
    b.claimedTier("sb2", "heavy").result("c1").cost("sandbox", 3000);
    b.add(core::kind::EnvDecision, {{"chosen_tier", "heavy"}, {"chooser", "agent"}, {"verdict", "granted"}});
    b.modelError("a").modelError("b").modelError("c").state("failed").released("done");
    logs.push_back(b);
    // A rejected review, a lost sandbox with a call open, a re-claim, a cancel with a call pending.
    Log c;
    c.created().claimed().turn({{"c1", "propose_change"}}).review("r1", "c1").decided("r1", false);
    c.add(core::kind::ToolResult, {{"call_id", "c1"}, {"error", "rejected by alice: ok"}});
    c.response("c2", "run_command").add(core::kind::SandboxLost, {{"sandbox_id", "sb1"}}).claimedTier("sb3", "lite");
    c.state("paused").state("running").response("c2", "run_command").result("c2").response("c3", "run_command");
    c.state("cancelled").released("done");
    logs.push_back(c);
    return logs;
}

TEST(SessionFold, AppliedEventByEventAnswersLikeTheSpanFunctionsAtEveryPrefix)
{
    for (const Log &log : realisticLogs()) {
        const std::vector<core::Event> &events = log.events();
        SessionFold fold;
        for (size_t n = 0; n <= events.size(); ++n) {
            if (n > 0)
                fold.apply(events[n - 1]);
            SCOPED_TRACE("after " + std::to_string(n) + " events");
            const std::span<const core::Event> prefix(events.data(), n);
            EXPECT_EQ(fold.eventCount(), n);
            EXPECT_EQ(fold.lastSeq(), static_cast<int64_t>(n));
            EXPECT_EQ(fold.state().lastSeq, static_cast<int64_t>(n));
            expectSameAction(fold.decide(), decide(prefix));
            expectSameBilling(fold.billing(), billingOf(prefix));
            expectSameContext(fold.modelContext(), buildModelContext(prefix));
            const auto open = fold.openCommand();
            const auto spanOpen = openCommandOf(prefix);
            ASSERT_EQ(open.has_value(), spanOpen.has_value());
            if (open)
                expectSameAction(*open, *spanOpen);
        }
    }
}

// The same logs, with the action each step should take pinned: what the fold answers is also right,
// not only the same as the span functions.
TEST(SessionFold, WalksTheFirstRealisticLogThroughItsSteps)
{
    const Log log = realisticLogs().front();
    SessionFold fold;
    std::vector<std::string> steps;
    for (const core::Event &event : log.events()) {
        fold.apply(event);
        const Action action = fold.decide();
        std::string step = actionName(action.kind);
        if (action.kind == ActionKind::RunTool || action.kind == ActionKind::Finish)
            step += " " + action.call.id + " @" + action.idempotencyKey;
        if (steps.empty() || steps.back() != step)
            steps.push_back(step);
    }
    const std::vector<std::string> expected = {
        "claim_sandbox", "call_model", "run_tool c1 @s1:5", "call_model", "run_tool c2 @s1:10", "none",
        "run_tool c2 @s1:10", "call_model", "run_tool c3 @s1:17", "none", "claim_sandbox",
        "run_tool c3 @s1:17", "run_tool c4 @s1:18", "call_model", "finish c5 @s1:29", "call_model",
        "release_sandbox", "none"};
    EXPECT_EQ(steps, expected);
    EXPECT_EQ(fold.billing().checkpointBytes, 8192);
    EXPECT_FALSE(fold.billing().held);
    EXPECT_EQ(fold.state().status, core::SessionStatus::Succeeded);
    EXPECT_EQ(fold.modelContext().history.size(), 4u);
}

TEST(SessionFold, StartsEmpty)
{
    const SessionFold fold;
    EXPECT_EQ(fold.lastSeq(), 0);
    EXPECT_EQ(fold.eventCount(), 0u);
    EXPECT_EQ(fold.decide().kind, ActionKind::None);
    EXPECT_FALSE(fold.openCommand());
    EXPECT_EQ(fold.modelContext().idempotencyKey, ":1");
    EXPECT_FALSE(fold.billing().held);
}

TEST(SessionFold, ASpanAppliesLikeItsEventsOneByOne)
{
    const Log log = realisticLogs()[1];
    const std::span<const core::Event> events(log.events());
    SessionFold whole;
    whole.apply(events.first(7));
    whole.apply(events.subspan(7));
    EXPECT_EQ(whole.eventCount(), events.size());
    expectSameAction(whole.decide(), decide(events));
    expectSameContext(whole.modelContext(), buildModelContext(events));
}

// A tail read twice (two readers racing on the same session) must not fold anything twice.
TEST(SessionFold, EventsAtOrBelowLastSeqAreIgnored)
{
    Log log;
    log.created().claimed().response("c1", "run_command").result("c1").cost("sandbox", 4000);
    const std::span<const core::Event> events(log.events());
    SessionFold fold;
    fold.apply(events.first(4));
    fold.apply(events.first(4));        // all seen already
    fold.apply(events.subspan(2));      // overlaps: only seq 5 and 6 are new
    fold.apply(events[0]);
    EXPECT_EQ(fold.eventCount(), events.size());
    EXPECT_EQ(fold.lastSeq(), 6);
    EXPECT_EQ(fold.state().steps, 1) << "one tool.result, folded once";
    EXPECT_EQ(fold.modelContext().history.size(), 1u);
    expectSameAction(fold.decide(), decide(events));
    EXPECT_EQ(fold.billing().billedUntilUnixMs, 4000);
}

// A gap would make the fold miss events silently (a result, a cancel): the caller reads the tail
// from lastSeq() + 1, so a gap is a bug there, and the process stops rather than decide on it.
TEST(SessionFoldDeathTest, AGapIsAProgrammingErrorThatAborts)
{
    Log log;
    log.created().claimed().response("c1", "run_command");
    SessionFold fold;
    fold.apply(std::span<const core::Event>(log.events()).first(2));
    EXPECT_DEATH(fold.apply(log.events()[3]), "session s1: event seq 4 applied after seq 2");
    EXPECT_EQ(fold.lastSeq(), 2) << "nothing was applied in this process";
}

} // namespace
} // namespace paddock::engine

