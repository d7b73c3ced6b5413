// The step engine with the real SQLite store, the real scripted model and a fake pool the test
// controls (the pool's own tests run real sandboxes).

#include "tests/support/engine_fixture.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace paddock::engine {
namespace {

using nlohmann::json;

// Records every call; exec can be held until the test lets it go.
class FakePool final : public pool_client::PoolClient {
public:
    std::string name() const override { return "fake"; }
    std::string endpoint() const override { return "fake:0"; }

    Result<pool_client::ClaimedSandbox> claim(const std::string &tier, const std::string &, const std::string &) override
    {
        std::lock_guard lock(m_mutex);
        ++claims;
        return pool_client::ClaimedSandbox{"sb-" + std::to_string(claims), tier, "fake", "host", true, 0.1};
    }

    Result<pool_client::ExecOutcome> exec(const pool_client::ExecSpec &spec, const pool_client::OutputSink &) override
    {
        std::unique_lock lock(m_mutex);
        ++execs;
        keys.push_back(spec.idempotencyKey);
        m_cv.notify_all();
        m_cv.wait(lock, [&] { return !holdExec; });
        if (execError)
            return std::unexpected(*execError);
        pool_client::ExecOutcome outcome;
        outcome.stdoutData = "ran: " + spec.argv.back() + "\n";
        outcome.reason = execReason;
        return outcome;
    }

    Result<std::string> readFile(const std::string &, const std::string &path, int64_t) override
    {
        return "content of " + path;
    }
    Status writeFile(const std::string &, const std::string &, const std::string &, uint32_t) override { return {}; }
    Result<std::vector<pool_client::DirEntry>> listDir(const std::string &, const std::string &) override { return {}; }
    Status release(const std::string &) override
    {
        std::lock_guard lock(m_mutex);
        ++releases;
        return {};
    }
    void cancelInFlight() override
    {
        std::lock_guard lock(m_mutex);
        execError = Error{ErrorCode::Cancelled, "cancelled"};
        holdExec = false;
        m_cv.notify_all();
    }
    Result<pool_client::PoolStatus> status() override
    {
        {
            std::lock_guard lock(m_mutex);
            ++statuses;
        }
        pool_client::PoolStatus status;
        status.tiers.push_back({"lite", "fake", 1, 0, 4, 1.0, 0});
        return status;
    }

    void waitForExecs(int n)
    {
        std::unique_lock lock(m_mutex);
        m_cv.wait(lock, [&] { return execs >= n; });
    }
    void letGo()
    {
        std::lock_guard lock(m_mutex);
        holdExec = false;
        m_cv.notify_all();
    }

    std::mutex m_mutex;
    std::condition_variable m_cv;
    int claims = 0;
    int execs = 0;
    int releases = 0;
    int statuses = 0;
    std::string execReason;
    bool holdExec = false;
    std::optional<Error> execError;
    std::vector<std::string> keys;
};

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
        auto pool = std::make_unique<FakePool>();
        m_fakePool = pool.get();
        m_pools.add(std::move(pool), false);
    }

    std::string submit(const std::string &playbook = kPlaybook) { return EngineFixture::submit(playbook); }

    FakePool *m_fakePool = nullptr;
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
    EXPECT_EQ(m_fakePool->claims, 1);
    EXPECT_EQ(m_fakePool->releases, 1);
    // Keys are (session, seq) of the result: distinct per step.
    ASSERT_EQ(m_fakePool->keys.size(), 2u);
    EXPECT_NE(m_fakePool->keys[0], m_fakePool->keys[1]);
    EXPECT_TRUE(m_fakePool->keys[0].starts_with(id + ":"));
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
    m_fakePool->execReason = "oom_killed";
    runUntilIdle(engine);
    int named = 0;
    for (const auto &event : events(id)) {
        if (event.kind == core::kind::ToolResult && json::parse(event.payload).value("reason", "") == "oom_killed")
            ++named;
    }
    EXPECT_EQ(named, 2) << "both commands' results carry the pool's reason";
}

TEST_F(StepEngineTest, ExpiredLeaseLetsAnotherWorkerTakeTheStepAndTheLateResultLoses)
{
    auto engine = makeEngine();
    const std::string id = submit();
    takeSteps(engine, 2);   // claim and the first model turn: the next step is a command
    ASSERT_EQ(decide(events(id)).kind, ActionKind::RunTool);

    m_fakePool->holdExec = true;
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
    m_fakePool->letGo();
    slowWorker.join();
    fastWorker.join();

    // Both derived the same action with the same key; exactly one result was recorded.
    ASSERT_EQ(m_fakePool->keys.size(), 2u);
    EXPECT_EQ(m_fakePool->keys[0], m_fakePool->keys[1]);
    EXPECT_NE(slowOutcome.appended, fastOutcome.appended);
    EXPECT_EQ(count(events(id), core::kind::ToolResult), 1);
    m_store->releaseLease(*fast);
}

TEST_F(StepEngineTest, CancelBetweenReadAndAppendWins)
{
    auto engine = makeEngine();
    const std::string id = submit();
    takeSteps(engine, 2);   // claim and the first model turn: the next step is a command
    m_fakePool->holdExec = true;
    auto lease = m_store->acquireLease("w", 10000, 0);
    StepOutcome outcome;
    std::thread worker([&] { outcome = engine.runOneStep(*lease); });
    m_fakePool->waitForExecs(1);

    store::AppendRequest cancel;
    cancel.sessionId = id;
    cancel.events.push_back({core::kind::StateChanged, R"({"status":"cancelled"})"});
    ASSERT_TRUE(m_store->appendSync(std::move(cancel)));
    m_fakePool->letGo();
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
    takeSteps(engine, 2);   // claim and the first model turn: the next step is a command
    const int64_t before = events(id).size();
    m_fakePool->execError = Error{ErrorCode::Unavailable, "pool down"};
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
    takeSteps(engine, 2);   // claim and the first model turn: the next step is a command
    m_fakePool->execError = Error{ErrorCode::NotFound, "no sandbox 'sb-1' on this pool"};
    auto lease = m_store->acquireLease("w", 10000, 0);
    engine.runOneStep(*lease);
    m_store->releaseLease(*lease);
    m_fakePool->execError.reset();
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

TEST_F(StepEngineTest, StopCancelsAStepThatOutlastsTheDrainAndRecordsNothingForIt)
{
    EngineOptions options;
    options.workers = 1;
    options.idleWaitMs = 20;
    options.drainMs = 50;
    auto engine = makeEngine(options);
    const std::string id = submit();
    m_fakePool->holdExec = true;   // the first command never finishes on its own
    engine.start();
    m_fakePool->waitForExecs(1);
    engine.stop();

    const auto log = events(id);
    EXPECT_EQ(count(log, core::kind::ToolResult), 0);
    EXPECT_EQ(decide(log).kind, ActionKind::RunTool) << "the next broker must take the same step again";
}

TEST_F(StepEngineTest, PlacementAsksEachPoolForItsStatusOncePerInterval)
{
    // Many claims and tier checks within the cache's age cost the pool one Status call.
    for (int i = 0; i < 20; ++i) {
        ASSERT_TRUE(m_pools.choose("lite"));
        ASSERT_TRUE(m_pools.offeredTiers().has_value());
    }
    EXPECT_EQ(m_fakePool->statuses, 1);
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

} // namespace
} // namespace paddock::engine
