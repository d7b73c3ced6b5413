// Failover with the real step engine, the real SQLite store and the real scripted model over two
// pools the test controls: when a pool stops answering for its lost window, its sessions move to
// the other pool (sandbox.lost, sandbox.moved), finish there, and repeat at most one step; a claim
// no pool can take leaves one sandbox.waiting in the log instead of a silent wait.

#include "tests/support/engine_fixture.h"
#include "tests/support/fake_pool_client.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <thread>

namespace paddock::engine {
namespace {

using nlohmann::json;
using test::FakePoolClient;

constexpr int kCommands = 6;

std::string playbook()
{
    std::string text = "name = \"six\"\ngoal = \"six commands\"\n";
    for (int i = 1; i <= kCommands; ++i)
        text += "[[step]]\ntool = \"run_command\"\ncommand = \"echo step-" + std::to_string(i) + "\"\n";
    return text;
}

class FailoverTest : public test::EngineFixture {
protected:
    void SetUp() override
    {
        EngineFixture::SetUp();
        placement::PoolSetOptions options;
        options.lostAfterMs = 150;
        m_pools.setOptions(options);
        auto a = std::make_unique<FakePoolClient>("a");
        auto b = std::make_unique<FakePoolClient>("b");
        m_a = a.get();
        m_b = b.get();
        m_a->setTier("lite", 1, 0, 8);
        m_b->setTier("lite", 1, 0, 8);
        m_pools.add(std::move(a), false);
        m_pools.add(std::move(b), false);
    }

    std::string submit() { return EngineFixture::submit(playbook()); }

    StepEngine makeEngine()
    {
        EngineOptions options;
        options.workers = 2;
        options.idleWaitMs = 10;
        options.retryAfterUnavailableMs = 20;
        return EngineFixture::makeEngine(options);
    }

    FakePoolClient *m_a = nullptr;
    FakePoolClient *m_b = nullptr;
};

TEST_F(FailoverTest, SessionsOfALostPoolFinishOnTheOtherRepeatingAtMostOneStep)
{
    std::vector<std::string> ids;
    for (int i = 0; i < 6; ++i)
        ids.push_back(submit());
    auto engine = makeEngine();
    engine.start();
    // Let some commands run on a, then take it down in the middle of the run.
    for (int i = 0; i < 2000 && m_a->execCount() < 4; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    m_a->setDown(true);
    const int execsOnABeforeDown = m_a->execCount();
    ASSERT_TRUE(waitUntilSettled(ids));
    engine.stop();
    ASSERT_GE(execsOnABeforeDown, 4);

    int moved = 0;
    for (const auto &id : ids) {
        SCOPED_TRACE(id);
        const auto log = events(id);
        EXPECT_EQ(core::foldEvents(log).status, core::SessionStatus::Succeeded);
        // Every tool call has exactly one result, and the model was not asked again for a step.
        std::map<std::string, int> results;
        for (const auto &r : payloadsOf(log, core::kind::ToolResult))
            ++results[r.value("call_id", std::string())];
        EXPECT_EQ(payloadsOf(log, core::kind::ToolCall).size(), static_cast<size_t>(kCommands + 1));
        EXPECT_EQ(results.size(), static_cast<size_t>(kCommands + 1));
        for (const auto &[call, n] : results)
            EXPECT_EQ(n, 1) << call;

        const auto claims = payloadsOf(log, core::kind::SandboxClaimed);
        const auto lost = payloadsOf(log, core::kind::SandboxLost);
        const auto moves = payloadsOf(log, core::kind::SandboxMoved);
        ASSERT_FALSE(claims.empty());
        if (claims.front()["pool"] != "a" || lost.empty()) {
            EXPECT_TRUE(moves.empty());
            continue;
        }
        ++moved;
        ASSERT_EQ(lost.size(), 1u) << "one loss, one move";
        ASSERT_EQ(moves.size(), 1u);
        EXPECT_EQ(lost[0]["pool"], "a");
        EXPECT_EQ(lost[0]["reason"], "pool_lost");
        EXPECT_EQ(moves[0]["from_pool"], "a");
        EXPECT_EQ(moves[0]["to_pool"], "b");
        EXPECT_EQ(moves[0]["workspace"], "empty");
        EXPECT_NE(moves[0]["note"].get<std::string>().find("empty workspace"), std::string::npos);
        EXPECT_EQ(claims.back()["pool"], "b");
        // The interrupted call is the one repeated on b: it has no result before the loss.
        const std::string interrupted = lost[0]["interrupted_call"];
        bool resultBeforeLoss = false;
        for (const auto &e : log) {
            if (e.kind == core::kind::SandboxLost)
                break;
            if (e.kind == core::kind::ToolResult && json::parse(e.payload)["call_id"] == interrupted)
                resultBeforeLoss = true;
        }
        EXPECT_FALSE(resultBeforeLoss);
    }
    EXPECT_GE(moved, 1) << "pool a held no session when it went down; the test proved nothing";
    // Commands that ran, across both pools: each session's commands at most once each, plus at
    // most one repeat per session.
    EXPECT_LE(m_a->execCount() + m_b->execCount(), static_cast<int>(ids.size()) * (kCommands + 1));
}

// The pool dies between answering a command and snapshotting the workspace after it. The command's
// result is not recorded without its snapshot: the move restores the snapshot taken before the
// command and runs the command again there, so what it did to the workspace is not lost (what
// MultiHost.* saw once: a step's line missing from the marker file).
TEST_F(FailoverTest, ACommandWhoseSnapshotThePoolNeverTookIsRepeatedAfterTheMove)
{
    m_a->setSnapshots(true);
    m_b->setSnapshots(true);
    m_a->setDownAfterExecs(3);
    m_b->setTier("lite", 0, 1, 1);   // full: the session starts on a
    const std::string id = submit();
    auto engine = makeEngine();
    engine.start();
    for (int i = 0; i < 5000 && m_a->execCount() < 3; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    m_b->setTier("lite", 1, 0, 8);
    ASSERT_TRUE(waitUntilSettled({id}));
    engine.stop();

    const auto log = events(id);
    EXPECT_EQ(core::foldEvents(log).status, core::SessionStatus::Succeeded);
    const auto calls = payloadsOf(log, core::kind::ToolCall);
    ASSERT_EQ(calls.size(), static_cast<size_t>(kCommands + 1));
    const std::string second = calls[1]["call_id"];
    const std::string third = calls[2]["call_id"];
    const auto lost = payloadsOf(log, core::kind::SandboxLost);
    const auto moves = payloadsOf(log, core::kind::SandboxMoved);
    ASSERT_EQ(lost.size(), 1u);
    ASSERT_EQ(moves.size(), 1u);
    EXPECT_EQ(lost[0]["interrupted_call"], third) << "the command whose snapshot was never taken";
    EXPECT_EQ(moves[0]["repeats_call"], third);
    EXPECT_EQ(moves[0]["workspace"], "restored");
    // Every recorded command result on a has its checkpoint right after it; the move restored the
    // one taken after the second command.
    std::string lastCheckpointBeforeLoss;
    for (size_t i = 0; i < log.size(); ++i) {
        if (log[i].kind == core::kind::SandboxLost)
            break;
        if (log[i].kind == core::kind::Checkpoint)
            lastCheckpointBeforeLoss = json::parse(log[i].payload)["manifest"];
        if (log[i].kind == core::kind::ToolResult) {
            ASSERT_LT(i + 1, log.size());
            EXPECT_EQ(log[i + 1].kind, core::kind::Checkpoint) << "a result recorded without its snapshot";
            EXPECT_NE(json::parse(log[i].payload)["call_id"], third) << "recorded before the loss";
        }
    }
    EXPECT_EQ(moves[0]["manifest"], lastCheckpointBeforeLoss);
    EXPECT_EQ(m_b->restores(), std::vector<std::string>{moves[0]["to_sandbox_id"].get<std::string>() + " <- "
                                                        + lastCheckpointBeforeLoss});
    // The workspace restored on b is the one after the second command: the fake's two files.
    auto restored = m_checkpointStore->getManifest(lastCheckpointBeforeLoss);
    ASSERT_TRUE(restored) << restored.error().message;
    EXPECT_EQ(restored->entries.size(), 2u);
    for (const auto &c : payloadsOf(log, core::kind::Checkpoint)) {
        if (c["manifest"] == lastCheckpointBeforeLoss) {
            EXPECT_EQ(c["after_call"], second);
        }
    }
    // The third command ran on a (answered, then lost) and once more on b: one repeat.
    EXPECT_EQ(m_a->execCount(), 3);
    EXPECT_EQ(m_b->execCount(), kCommands - 2);
}

// A change being applied when its pool is lost moves like a command: sandbox.lost names the
// propose_change call, and the change is applied on the other pool, once.
TEST_F(FailoverTest, AChangeBeingAppliedWhenThePoolIsLostIsAppliedOnTheOther)
{
    m_a->setDownAfterExecs(1);       // the first command is answered; the patch after it is not
    m_b->setTier("lite", 0, 1, 1);   // full: the session starts on a
    const std::string id = EngineFixture::submit(R"(
name = "change"
goal = "one command, then a small change"
[[step]]
tool = "run_command"
command = "echo one"
[[step]]
tool = "propose_change"
kind = "bulk_change"
targets = ["a.txt"]
change = '''--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-old
+new
'''
justification = "one file"
)");
    auto engine = makeEngine();
    engine.start();
    for (int i = 0; i < 5000 && m_a->execCount() < 1; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    m_b->setTier("lite", 1, 0, 8);
    ASSERT_TRUE(waitUntilSettled({id})) << "a change whose pool was lost must not retry it forever";
    engine.stop();

    const auto log = events(id);
    EXPECT_EQ(core::foldEvents(log).status, core::SessionStatus::Succeeded);
    const auto calls = payloadsOf(log, core::kind::ToolCall);
    ASSERT_GE(calls.size(), 2u);
    const std::string propose = calls[1]["call_id"];
    const auto lost = payloadsOf(log, core::kind::SandboxLost);
    ASSERT_EQ(lost.size(), 1u);
    EXPECT_EQ(lost[0]["interrupted_call"], propose);
    int applied = 0;
    for (const auto &r : payloadsOf(log, core::kind::ToolResult)) {
        if (r["call_id"] == propose) {
            ++applied;
            EXPECT_TRUE(r.value("applied", false)) << r.dump();
        }
    }
    EXPECT_EQ(applied, 1);
    EXPECT_EQ(m_b->execCount(), 1) << "the patch, on b";
}

TEST_F(FailoverTest, AClaimNoPoolCanTakeWaitsAndSaysSoOnce)
{
    m_a->setTier("lite", 0, 8, 8);
    m_b->setTier("lite", 0, 8, 8);
    const std::string id = submit();
    auto engine = makeEngine();
    engine.start();
    for (int i = 0; i < 500 && payloadsOf(events(id), core::kind::SandboxWaiting).empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));   // several retries
    auto waiting = payloadsOf(events(id), core::kind::SandboxWaiting);
    ASSERT_EQ(waiting.size(), 1u) << "said once, not once per retry";
    EXPECT_EQ(waiting[0]["code"], "resource_exhausted");
    EXPECT_NE(waiting[0]["reason"].get<std::string>().find("at its capacity"), std::string::npos);
    EXPECT_NE(waiting[0]["reason"].get<std::string>().find("waiting for a lite sandbox: 16 of 16 in use on every pool"),
              std::string::npos)
        << waiting[0].dump();
    EXPECT_EQ(m_store->getSession(id)->status, core::SessionStatus::Queued);

    m_b->setTier("lite", 1, 2, 8);   // room again
    ASSERT_TRUE(waitUntilSettled({id}));
    engine.stop();
    EXPECT_EQ(core::foldEvents(events(id)).status, core::SessionStatus::Succeeded);
}

} // namespace
} // namespace paddock::engine
