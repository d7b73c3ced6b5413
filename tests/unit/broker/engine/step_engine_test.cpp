// The step engine with the real SQLite store, the real scripted model and a fake pool the test
// controls (the pool's own tests run real sandboxes).

#include "tests/support/engine_fixture.h"
#include "tests/support/fake_pool_client.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <thread>

namespace paddock::engine {
namespace {

using nlohmann::json;

constexpr const char *kPlaybook = R"(
name = "two-commands"
goal = "run two commands"
[[step]]
tool = "run_command"
command = "echo one"
[[step]]
tool = "run_command"
command = "echo two"
)";

class StepEngineTest : public test::EngineFixture {
protected:
    void SetUp() override
    {
        EngineFixture::SetUp();
        auto pool = std::make_unique<test::FakePoolClient>("fake");
        m_fakePool = pool.get();
        m_fakePool->setTier("lite", 1, 0, 4);
        // "ran: <command>", with the rest of what the test set as the outcome (its reason).
        m_fakePool->setExecHook([fake = m_fakePool](const pool_client::ExecSpec &spec,
                                                    const pool_client::OutputSink &) -> Result<pool_client::ExecOutcome> {
            pool_client::ExecOutcome outcome = fake->execOutcome();
            outcome.stdoutData = "ran: " + spec.argv.back() + "\n";
            return outcome;
        });
        m_fakePool->setReadFileHook(
            [](const std::string &, const std::string &path) -> Result<std::string> { return "content of " + path; });
        m_pools.add(std::move(pool), false);
    }

    std::string submit(const std::string &playbook = kPlaybook) { return EngineFixture::submit(playbook); }

    // The idempotency key of every exec, in order.
    std::vector<std::string> keys() const
    {
        std::vector<std::string> out;
        for (const auto &spec : m_fakePool->execs())
            out.push_back(spec.idempotencyKey);
        return out;
    }

    test::FakePoolClient *m_fakePool = nullptr;
};

TEST_F(StepEngineTest, PlaybookRunsToSuccessAndReleasesItsSandbox)
{
    auto engine = makeEngine();
    const std::string id = submit();
    runUntilIdle(engine);

    const auto log = events(id);
    const auto state = core::foldEvents(log);
    EXPECT_EQ(state.status, core::SessionStatus::Succeeded);
    EXPECT_TRUE(state.sandboxId.empty());
    EXPECT_EQ(count(log, core::kind::SandboxClaimed), 1);
    EXPECT_EQ(count(log, core::kind::ToolResult), 3);   // two commands and the implicit finish
    EXPECT_EQ(count(log, core::kind::SandboxReleased), 1);
    EXPECT_EQ(m_fakePool->claimCount(), 1);
    EXPECT_EQ(m_fakePool->releaseCount(), 1);
    // Keys are (session, seq) of the result: distinct per step.
    ASSERT_EQ(keys().size(), 2u);
    EXPECT_NE(keys()[0], keys()[1]);
    EXPECT_TRUE(keys()[0].starts_with(id + ":"));
}

TEST_F(StepEngineTest, ResultHoldsTheCommandAndItsOutput)
{
    auto engine = makeEngine();
    const std::string id = submit();
    runUntilIdle(engine);
    for (const auto &event : events(id)) {
        if (event.kind != core::kind::ToolResult)
            continue;
        const auto payload = json::parse(event.payload);
        if (payload.value("command", "") == "echo one") {
            EXPECT_EQ(payload.value("stdout", ""), "ran: echo one\n");
            EXPECT_EQ(payload.value("exit_code", -1), 0);
            return;
        }
    }
    FAIL() << "no tool.result for `echo one`";
}

TEST_F(StepEngineTest, ThePoolsNameForAnAbnormalEndIsRecorded)
{
    auto engine = makeEngine();
    const std::string id = submit();
    m_fakePool->editExecOutcome([](pool_client::ExecOutcome &outcome) { outcome.reason = "oom_killed"; });
    runUntilIdle(engine);
    int named = 0;
    for (const auto &event : events(id)) {
        if (event.kind == core::kind::ToolResult && json::parse(event.payload).value("reason", "") == "oom_killed")
            ++named;
    }
    EXPECT_EQ(named, 2) << "both commands' results carry the pool's reason";
}

TEST_F(StepEngineTest, TheCommandsPeakMemoryAndCpuTimeAreRecordedWhenThePoolMeasuredThem)
{
    auto engine = makeEngine();
    const std::string id = submit();
    m_fakePool->editExecOutcome([](pool_client::ExecOutcome &outcome) {
        outcome.peakMemoryBytes = 70696960;
        outcome.peakMemoryScope = "command";
        outcome.cpuTimeUs = 59037;
    });
    takeSteps(engine, 2);   // the claim and the first model turn, then the first command
    m_fakePool->editExecOutcome([](pool_client::ExecOutcome &outcome) {
        outcome.peakMemoryBytes = 0;   // a sandbox without a cgroup: nothing measured
        outcome.peakMemoryScope.clear();
        outcome.cpuTimeUs = 0;
    });
    runUntilIdle(engine);
    std::vector<json> results;
    for (const auto &event : events(id))
        if (event.kind == core::kind::ToolResult)
            results.push_back(json::parse(event.payload));
    ASSERT_GE(results.size(), 2u);
    EXPECT_EQ(results[0].value("peak_memory_bytes", int64_t{0}), 70696960) << results[0].dump();
    EXPECT_EQ(results[0].value("peak_memory_scope", ""), "command");
    EXPECT_DOUBLE_EQ(results[0].value("cpu_time_ms", 0.0), 59.037);
    EXPECT_FALSE(results[1].contains("peak_memory_bytes")) << "unmeasured is absent, not zero: " << results[1].dump();
    EXPECT_FALSE(results[1].contains("peak_memory_scope"));
    EXPECT_FALSE(results[1].contains("cpu_time_ms"));
}

TEST_F(StepEngineTest, ExpiredLeaseLetsAnotherWorkerTakeTheStepAndTheLateResultLoses)
{
    auto engine = makeEngine();
    const std::string id = submit();
    takeSteps(engine, 1);   // the claim, with the first model turn beside it: the next step is a command
    ASSERT_EQ(decide(events(id)).kind, ActionKind::RunTool);

    m_fakePool->holdExecs();
    auto slow = m_store->acquireLease("slow", 50, 0);
    ASSERT_TRUE(slow);
    StepOutcome slowOutcome;
    std::thread slowWorker([&] { slowOutcome = engine.runOneStep(*slow); });
    m_fakePool->waitForExecs(1);

    // The slow worker's lease runs out while its command is held.
    std::optional<store::Lease> fast;
    for (int i = 0; i < 100 && !fast; ++i)
        fast = m_store->acquireLease("fast", 10000, 20);
    ASSERT_TRUE(fast) << "an expired lease did not make the session runnable again";
    EXPECT_FALSE(m_store->renewLease(*slow, 50));

    StepOutcome fastOutcome;
    std::thread fastWorker([&] { fastOutcome = engine.runOneStep(*fast); });
    m_fakePool->waitForExecs(2);
    m_fakePool->letExecsGo();
    slowWorker.join();
    fastWorker.join();

    // Both derived the same action with the same key; exactly one result was recorded.
    ASSERT_EQ(keys().size(), 2u);
    EXPECT_EQ(keys()[0], keys()[1]);
    EXPECT_NE(slowOutcome.appended, fastOutcome.appended);
    EXPECT_EQ(count(events(id), core::kind::ToolResult), 1);
    m_store->releaseLease(*fast);
}

// Fencing: a worker that paused past its lease (here: its command held while the lease ran out
// and went to another worker, which has appended nothing yet) finds the log's tail unchanged, but
// its append carries the old lease's token and is refused; the holder's step records the result.
TEST_F(StepEngineTest, AStepWhoseLeaseWentToAnotherWorkerAppendsNothing)
{
    auto engine = makeEngine();
    const std::string id = submit();
    takeSteps(engine, 1);
    ASSERT_EQ(decide(events(id)).kind, ActionKind::RunTool);

    m_fakePool->holdExecs();
    auto slow = m_store->acquireLease("slow", 50, 0);
    ASSERT_TRUE(slow);
    StepOutcome slowOutcome;
    std::thread slowWorker([&] { slowOutcome = engine.runOneStep(*slow); });
    m_fakePool->waitForExecs(1);
    std::optional<store::Lease> holder;
    for (int i = 0; i < 100 && !holder; ++i)
        holder = m_store->acquireLease("holder", 10000, 20);
    ASSERT_TRUE(holder) << "an expired lease did not make the session runnable again";
    m_fakePool->letExecsGo();
    slowWorker.join();

    EXPECT_FALSE(slowOutcome.appended);
    EXPECT_NE(slowOutcome.note.find("no longer held"), std::string::npos) << slowOutcome.note;
    EXPECT_EQ(count(events(id), core::kind::ToolResult), 0);

    const StepOutcome held = engine.runOneStep(*holder);
    EXPECT_TRUE(held.appended) << held.note;
    EXPECT_EQ(count(events(id), core::kind::ToolResult), 1);
    m_store->releaseLease(*holder);
}

TEST_F(StepEngineTest, CancelBetweenReadAndAppendWins)
{
    auto engine = makeEngine();
    const std::string id = submit();
    takeSteps(engine, 1);   // the claim, with the first model turn beside it: the next step is a command
    m_fakePool->holdExecs();
    auto lease = m_store->acquireLease("w", 10000, 0);
    StepOutcome outcome;
    std::thread worker([&] { outcome = engine.runOneStep(*lease); });
    m_fakePool->waitForExecs(1);

    store::AppendRequest cancel;
    cancel.sessionId = id;
    cancel.events.push_back({core::kind::StateChanged, R"({"status":"cancelled"})"});
    ASSERT_TRUE(m_store->appendSync(std::move(cancel)));
    m_fakePool->letExecsGo();
    worker.join();
    m_store->releaseLease(*lease);

    EXPECT_FALSE(outcome.appended);
    runUntilIdle(engine);
    const auto log = events(id);
    EXPECT_EQ(core::foldEvents(log).status, core::SessionStatus::Cancelled);
    EXPECT_EQ(count(log, core::kind::ToolResult), 0);
    EXPECT_EQ(count(log, core::kind::SandboxReleased), 1);
}

TEST_F(StepEngineTest, UnreachablePoolRecordsNothingAndRetriesLater)
{
    auto engine = makeEngine();
    const std::string id = submit();
    takeSteps(engine, 1);   // the claim, with the first model turn beside it: the next step is a command
    const int64_t before = events(id).size();
    m_fakePool->setExecError(Error{ErrorCode::Unavailable, "pool down"});
    auto lease = m_store->acquireLease("w", 10000, 0);
    const StepOutcome outcome = engine.runOneStep(*lease);
    m_store->releaseLease(*lease, outcome.retryAfterMs);
    EXPECT_FALSE(outcome.appended);
    EXPECT_GT(outcome.retryAfterMs, 0);
    EXPECT_EQ(static_cast<int64_t>(events(id).size()), before);
}

TEST_F(StepEngineTest, LostSandboxIsRecordedAndReplaced)
{
    auto engine = makeEngine();
    const std::string id = submit();
    takeSteps(engine, 1);   // the claim, with the first model turn beside it: the next step is a command
    m_fakePool->setExecError(Error{ErrorCode::NotFound, "no sandbox 'fake-sb-1' on this pool"});
    auto lease = m_store->acquireLease("w", 10000, 0);
    engine.runOneStep(*lease);
    m_store->releaseLease(*lease);
    m_fakePool->setExecError(std::nullopt);
    runUntilIdle(engine);

    const auto log = events(id);
    EXPECT_EQ(count(log, core::kind::SandboxFailed), 1);
    EXPECT_EQ(count(log, core::kind::SandboxClaimed), 2);
    EXPECT_EQ(core::foldEvents(log).status, core::SessionStatus::Succeeded);
}

TEST_F(StepEngineTest, UnknownModelFailsTheSessionWithAReason)
{
    auto engine = makeEngine();
    store::AppendRequest request;
    request.sessionId = "s-x";
    request.expectedLastSeq = 0;
    request.events.push_back({core::kind::SessionCreated, R"({"goal":"g","model":"nope","tier":"lite"})"});
    ASSERT_TRUE(m_store->appendSync(std::move(request)));
    runUntilIdle(engine);
    const auto state = core::foldEvents(events("s-x"));
    EXPECT_EQ(state.status, core::SessionStatus::Failed);
    EXPECT_NE(state.statusReason.find("nope"), std::string::npos);
}

TEST_F(StepEngineTest, PlacementAsksEachPoolForItsStatusOncePerInterval)
{
    // Many claims and tier checks within the cache's age cost the pool one Status call.
    for (int i = 0; i < 20; ++i) {
        ASSERT_TRUE(m_pools.choose("lite"));
        ASSERT_TRUE(m_pools.offeredTiers().has_value());
    }
    EXPECT_EQ(m_fakePool->statusCalls(), 1);
    EXPECT_FALSE(m_pools.choose("heavy")) << "a tier the pool does not offer";
}

TEST_F(StepEngineTest, WorkersRunManySessionsConcurrently)
{
    EngineOptions options;
    options.workers = 4;
    options.idleWaitMs = 20;
    auto engine = makeEngine(options);
    std::vector<std::string> ids;
    for (int i = 0; i < 30; ++i)
        ids.push_back(submit());
    engine.start();
    EXPECT_TRUE(waitUntilSettled(ids));
    engine.stop();
    for (const auto &id : ids) {
        const auto log = events(id);
        EXPECT_EQ(core::foldEvents(log).status, core::SessionStatus::Succeeded) << id;
        EXPECT_EQ(count(log, core::kind::ToolResult), 3) << id;
    }
}

TEST_F(StepEngineTest, TheFirstModelTurnIsRecordedWithTheClaim)
{
    auto engine = makeEngine();
    const std::string id = submit();
    takeSteps(engine, 1);
    const auto log = events(id);
    std::vector<std::string> kinds;
    for (const auto &e : log)
        kinds.push_back(e.kind);
    const std::vector<std::string> expected{core::kind::SessionCreated, core::kind::StateChanged, core::kind::SandboxClaimed,
                                            core::kind::ModelResponse,  core::kind::Cost,         core::kind::ToolCall};
    EXPECT_EQ(kinds, expected) << "one step: the claim and the model's first turn, in one append";
    EXPECT_EQ(m_fakePool->claimCount(), 1);
    EXPECT_EQ(decide(log).kind, ActionKind::RunTool) << "the next step runs the command at once";
}

TEST_F(StepEngineTest, ASessionWaitingForAFullTierSaysHowFullAndItsPlaceInLine)
{
    m_fakePool->setTier("lite", 0, 4, 4);   // four of four claimed, none warm
    auto engine = makeEngine();
    const std::string first = submit();
    const std::string second = submit();
    takeSteps(engine, 2);
    for (const auto &[id, ahead] : {std::pair{first, 0}, std::pair{second, 1}}) {
        const auto log = events(id);
        ASSERT_EQ(log.back().kind, core::kind::SandboxWaiting) << id;
        const json waiting = json::parse(log.back().payload);
        EXPECT_EQ(waiting["in_use"], 4);
        EXPECT_EQ(waiting["max"], 4);
        EXPECT_EQ(waiting["ahead"], ahead) << id;
        EXPECT_NE(waiting["reason"].get<std::string>().find("waiting for a lite sandbox: 4 of 4 in use on the pool"),
                  std::string::npos) << waiting.dump();
    }
    EXPECT_EQ(m_fakePool->claimCount(), 0);
}

TEST_F(StepEngineTest, AClaimThePoolDoesNotAnswerIsSaidOnceAndTheModelsTurnIsKept)
{
    auto engine = makeEngine();
    const std::string id = submit();
    m_fakePool->setClaimError(Error{ErrorCode::DeadlineExceeded, "pool 'fake' did not answer claim in time"});
    takeSteps(engine, 1);
    auto log = events(id);
    ASSERT_EQ(count(log, core::kind::SandboxWaiting), 1);
    EXPECT_EQ(count(log, core::kind::ToolCall), 1) << "the model's first turn, asked beside the claim, is recorded";
    for (const auto &e : log) {
        if (e.kind != core::kind::SandboxWaiting)
            continue;
        const json waiting = json::parse(e.payload);
        EXPECT_EQ(waiting["pool"], "fake");
        EXPECT_EQ(waiting["code"], "deadline_exceeded");
        EXPECT_NE(waiting["reason"].get<std::string>().find("did not answer claim in time"), std::string::npos);
    }
    for (int i = 0; i < 3; ++i) {
        auto lease = m_store->acquireLease("w", 10000, 0);
        if (lease) {
            engine.runOneStep(*lease);
            m_store->releaseLease(*lease);
        }
    }
    EXPECT_EQ(count(events(id), core::kind::SandboxWaiting), 1) << "said once per wait, not once per retry";
    m_fakePool->setClaimError(std::nullopt);
    runUntilIdle(engine);
    EXPECT_EQ(core::foldEvents(events(id)).status, core::SessionStatus::Succeeded);
}

TEST_F(StepEngineTest, RunningCommandsHoldNoStepThread)
{
    // Two step threads and twenty sessions whose commands do not end until the test lets them:
    // all twenty must be running at once, so none of them holds a thread while it runs.
    EngineOptions options;
    options.workers = 2;
    options.idleWaitMs = 20;
    m_fakePool->setTier("lite", 1, 0, 64);
    auto engine = makeEngine(options);
    m_fakePool->holdExecs();
    std::vector<std::string> ids;
    for (int i = 0; i < 20; ++i)
        ids.push_back(submit());
    engine.start();
    ASSERT_TRUE(m_fakePool->waitForExecs(20)) << "only " << m_fakePool->execs().size()
                                              << " commands started: each running command holds a step thread";
    EXPECT_EQ(m_fakePool->parkedExecs(), 20);
    m_fakePool->letExecsGo();
    EXPECT_TRUE(waitUntilSettled(ids));
    engine.stop();
    for (const auto &id : ids) {
        const auto log = events(id);
        EXPECT_EQ(core::foldEvents(log).status, core::SessionStatus::Succeeded) << id;
        EXPECT_EQ(count(log, core::kind::ToolResult), 3) << id;
    }
    // Each command ran once: forty execs for twenty sessions of two commands.
    EXPECT_EQ(m_fakePool->execs().size(), 40u);
}

TEST_F(StepEngineTest, CheckpointsAfterAStepHoldNoStepThread)
{
    // Two step threads and twenty sessions whose checkpoints do not end until the test lets them:
    // all twenty must be waiting at once, so a checkpoint in progress holds no thread either.
    EngineOptions options;
    options.workers = 2;
    options.idleWaitMs = 20;
    m_fakePool->setTier("lite", 1, 0, 64);
    m_fakePool->setSnapshots(true);
    auto engine = makeEngine(options);
    m_fakePool->holdCheckpoints();
    std::vector<std::string> ids;
    for (int i = 0; i < 20; ++i)
        ids.push_back(submit());
    engine.start();
    ASSERT_TRUE(m_fakePool->waitForParkedCheckpoints(20))
        << "only " << m_fakePool->parkedCheckpoints() << " checkpoints waiting: each one holds a step thread";
    for (const auto &id : ids)
        EXPECT_EQ(count(events(id), core::kind::ToolResult), 0) << "a step's result is recorded with its checkpoint";
    m_fakePool->letCheckpointsGo();
    EXPECT_TRUE(waitUntilSettled(ids));
    engine.stop();
    for (const auto &id : ids) {
        const auto log = events(id);
        EXPECT_EQ(core::foldEvents(log).status, core::SessionStatus::Succeeded) << id;
        // One checkpoint after each of the two commands, each recorded with its command's result.
        EXPECT_EQ(count(log, core::kind::Checkpoint), 2) << id;
        EXPECT_EQ(count(log, core::kind::ToolResult), 3) << id;
    }
    EXPECT_EQ(m_fakePool->execs().size(), 40u) << "a parked checkpoint must not run its command again";
}

TEST_F(StepEngineTest, StopCancelsCheckpointsInProgressAndTheNextBrokerTakesTheStepAgain)
{
    EngineOptions options;
    options.workers = 2;
    options.idleWaitMs = 20;
    options.drainMs = 50;
    m_fakePool->setSnapshots(true);
    auto engine = makeEngine(options);
    m_fakePool->holdCheckpoints();
    const std::string id = submit();
    engine.start();
    ASSERT_TRUE(m_fakePool->waitForParkedCheckpoints(1));
    engine.stop();
    EXPECT_EQ(m_fakePool->parkedCheckpoints(), 0) << "stop() must end every parked checkpoint";
    const auto log = events(id);
    EXPECT_EQ(count(log, core::kind::ToolResult), 0) << "a result without its checkpoint must not be recorded";
    EXPECT_EQ(decide(log).kind, ActionKind::RunTool) << "the next broker must take the same step again";
}

TEST_F(StepEngineTest, StopCancelsCommandsThatOutlastTheDrainAndRecordsNothingForThem)
{
    EngineOptions options;
    options.workers = 2;
    options.idleWaitMs = 20;
    options.drainMs = 50;
    auto engine = makeEngine(options);
    m_fakePool->holdExecs();
    std::vector<std::string> ids;
    for (int i = 0; i < 6; ++i)
        ids.push_back(submit());
    engine.start();
    ASSERT_TRUE(m_fakePool->waitForExecs(6));
    engine.stop();
    EXPECT_EQ(m_fakePool->parkedExecs(), 0) << "stop() must end every parked call";
    for (const auto &id : ids) {
        const auto log = events(id);
        EXPECT_EQ(count(log, core::kind::ToolResult), 0) << id;
        EXPECT_EQ(decide(log).kind, ActionKind::RunTool) << "the next broker must take the same step again";
    }
}

} // namespace
} // namespace paddock::engine
