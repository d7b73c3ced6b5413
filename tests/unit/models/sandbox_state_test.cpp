// The sandbox card's state, folded from sandbox.* events (models/sandbox_state.h), and a tool call
// paired with its result in the trace (TraceModel::resultRowOf, detailsWithResult): event logic
// that used to live in widgets, tested without a display.

#include "models/sandbox_state.h"
#include "models/trace_model.h"
#include "tests/unit/models/model_test_support.h"

#include <gtest/gtest.h>

namespace paddock::console {
namespace {

using test::event;
using test::session;

TEST(SandboxStateTest, ClaimsFailuresAndReleasesFoldOverTheSessionsRow)
{
    SandboxState s;
    const SessionInfo queued = session(QStringLiteral("s1"), SessionStatus::Queued);
    EXPECT_EQ(s.stateText(queued), QStringLiteral("not claimed yet"));
    EXPECT_EQ(s.poolText(queued), QStringLiteral("local")) << "the row fills what no event said yet";
    EXPECT_FALSE(s.apply(event(1, QStringLiteral("tool.call"))));

    const SessionInfo running = session(QStringLiteral("s1"), SessionStatus::Running);
    EXPECT_TRUE(s.apply(event(2, QStringLiteral("sandbox.claimed"),
                              R"({"pool":"exec-1","sandbox_id":"lite-a","tier":"lite","runtime":"bwrap","host":"h1","warm":true,"claim_ms":0.42})")));
    EXPECT_EQ(s.stateText(running), QStringLiteral("claimed"));
    EXPECT_EQ(s.poolText(running), QStringLiteral("exec-1"));
    EXPECT_EQ(s.runtimeText(), QStringLiteral("bwrap on h1"));
    EXPECT_EQ(s.claimText(), QStringLiteral("420 µs, warm sandbox"));
    EXPECT_TRUE(s.live(running));

    s.apply(event(3, QStringLiteral("sandbox.failed"), R"({"reason":"pool_lost","error":"pool exec-1 is gone"})"));
    EXPECT_TRUE(s.failed());
    EXPECT_EQ(s.stateText(running), QStringLiteral("failed: pool_lost (pool exec-1 is gone)"));
    EXPECT_FALSE(s.live(running));

    s.apply(event(4, QStringLiteral("sandbox.claimed"),
                  R"({"pool":"exec-2","sandbox_id":"lite-b","tier":"lite","runtime":"bwrap","warm":false,"claim_ms":140})"));
    EXPECT_EQ(s.claimText(), QStringLiteral("140 ms, cold start (claim 2)"));
    EXPECT_FALSE(s.failed()) << "a new claim clears the failure";
    EXPECT_EQ(s.stateText(session(QStringLiteral("s1"), SessionStatus::Succeeded)), QStringLiteral("released (session succeeded)"));

    s.apply(event(5, QStringLiteral("sandbox.released")));
    EXPECT_EQ(s.stateText(running), QStringLiteral("released"));
    EXPECT_FALSE(s.live(running));
}

TEST(SandboxStateTest, SaysWhereTheLastCheckpointLivesAndHowOldItIs)
{
    SandboxState s;
    EXPECT_EQ(s.checkpointText(0), QStringLiteral("none yet"));
    EventRecord checkpoint = event(2, QStringLiteral("checkpoint"),
                                   R"({"manifest":"3f2a9c0d1e2f00000000000000000000000000000000000000000000000000aa",)"
                                   R"("store":"broker","after_call":"c3"})");
    checkpoint.timeUnixMs = 1'000'000;
    EXPECT_TRUE(s.apply(checkpoint));
    EXPECT_EQ(s.checkpointText(1'012'000), QStringLiteral("3f2a9c0d1e2f in the broker's store, 12 s old, after call c3"));
    EXPECT_EQ(s.checkpointText(1'000'000 + 3 * 3600 * 1000), QStringLiteral("3f2a9c0d1e2f in the broker's store, 3 h old, after call c3"));
    EventRecord moved = event(3, QStringLiteral("sandbox.moved"), R"({"from_pool":"a","to_pool":"b","restore_ms":41.5})");
    moved.timeUnixMs = 1'020'000;
    EXPECT_TRUE(s.apply(moved));
    EXPECT_EQ(s.checkpointText(1'020'000),
              QStringLiteral("3f2a9c0d1e2f in the broker's store, 20 s old, after call c3; last restore 42 ms"));
    EventRecord released = event(4, QStringLiteral("sandbox.released"),
                                 R"({"reason":"idle","manifest":"77aa9c0d1e2f00000000000000000000000000000000000000000000000000bb"})");
    released.timeUnixMs = 1'030'000;
    s.apply(released);
    EXPECT_TRUE(s.checkpointText(1'030'000).startsWith(QStringLiteral("77aa9c0d1e2f"))) << "given back with a newer one";
}

TEST(ToolCallPairingTest, ACallFindsItsResultByCallIdAndSaysWhenThereIsNone)
{
    TraceModel model;
    model.setSession(QStringLiteral("s1"));
    model.appendEvents({event(1, QStringLiteral("tool.call"), R"({"call_id":"c1","tool":"run_command","arguments":{"command":"ls"}})"),
                        event(2, QStringLiteral("tool.call"), R"({"call_id":"c2","tool":"run_command","arguments":{"command":"pwd"}})"),
                        event(3, QStringLiteral("tool.result"), R"({"call_id":"c2","stdout":"/workspace\n","exit_code":0})"),
                        event(4, QStringLiteral("tool.result"), R"({"call_id":"c1","stdout":"a.txt\n","exit_code":0})")});
    EXPECT_EQ(model.resultRowOf(0), 3) << "c1's result, not the first result below it";
    EXPECT_EQ(model.resultRowOf(1), 2);
    EXPECT_EQ(model.resultRowOf(2), -1) << "a result row has no result";
    const QString c1 = model.detailsWithResult(0);
    EXPECT_NE(c1.indexOf(QStringLiteral("(call c1, seq 1)")), -1) << c1.toStdString();
    EXPECT_NE(c1.indexOf(QStringLiteral(R"(arguments: {"command":"ls"})")), -1) << c1.toStdString();
    EXPECT_NE(c1.indexOf(QStringLiteral("── result (seq 4) ──")), -1) << c1.toStdString();
    EXPECT_NE(c1.indexOf(QStringLiteral("a.txt")), -1) << c1.toStdString();

    model.appendEvents({event(5, QStringLiteral("tool.call"), R"({"call_id":"c3","tool":"read_file","arguments":{"path":"x"}})")});
    EXPECT_EQ(model.resultRowOf(4), -1);
    EXPECT_NE(model.detailsWithResult(4).indexOf(QStringLiteral("── no result yet ──")), -1);
    EXPECT_EQ(model.detailsWithResult(2), model.index(2, 0).data(TraceModel::DetailsRole).toString()) << "other rows: their own details";
}

} // namespace
} // namespace paddock::console
