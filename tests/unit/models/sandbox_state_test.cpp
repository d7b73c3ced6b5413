// The sandbox card's state, folded from sandbox.* events (models/sandbox_state.h), a tool call
// paired with its result in the trace (TraceModel::resultRowOf, detailsWithResult), and the peak
// memory and CPU time of commands too short for a sample (models/command_resources.h): event logic
// that used to live in widgets, tested without a display.

#include "models/command_resources.h"
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

// A run_command's result with the figures the pool read from the sandbox's cgroup at its exit.
EventRecord commandResult(qint64 seq, qint64 timeUnixMs, const QByteArray &command, double durationMs, qint64 peakBytes,
                          double cpuMs, const QByteArray &scope = "command", const QByteArray &extra = {})
{
    EventRecord e = event(seq, QStringLiteral("tool.result"),
                          R"({"call_id":"c)" + QByteArray::number(seq) + R"(","name":"run_command","command":")" + command
                              + R"(","exit_code":0,"duration_ms":)" + QByteArray::number(durationMs)
                              + (peakBytes > 0 ? R"(,"peak_memory_bytes":)" + QByteArray::number(peakBytes)
                                                     + R"(,"peak_memory_scope":")" + scope + '"'
                                               : QByteArray())
                              + (cpuMs > 0 ? R"(,"cpu_time_ms":)" + QByteArray::number(cpuMs) : QByteArray()) + extra + "}");
    e.timeUnixMs = timeUnixMs;
    return e;
}

ResourcePoint sampleAt(qint64 unixMs, qint64 memoryBytes = 8 << 20)
{
    ResourcePoint p;
    p.timeUnixMs = unixMs;
    p.memoryBytes = memoryBytes;
    return p;
}

TEST(CommandResourcesTest, AResultsFiguresAreReadAndSaidInWords)
{
    auto c = CommandResources::fromEvent(commandResult(5, 10'000, "make", 40, 70'696'960, 59.037));
    ASSERT_TRUE(c);
    EXPECT_EQ(c->command, u"make");
    EXPECT_EQ(c->peakMemoryBytes, 70'696'960);
    EXPECT_EQ(c->startUnixMs(), 9'960);
    EXPECT_EQ(c->figuresText(), QStringLiteral("peak 67 MiB, CPU 59 ms"));
    auto small = CommandResources::fromEvent(commandResult(6, 10'000, "true", 1, 3'207'168, 0.841));
    ASSERT_TRUE(small);
    EXPECT_EQ(small->figuresText(), QStringLiteral("peak 3.1 MiB, CPU 841 µs"));
    auto lifetime = CommandResources::fromEvent(commandResult(7, 10'000, "true", 1, 3 << 20, 0, "sandbox"));
    ASSERT_TRUE(lifetime);
    EXPECT_TRUE(lifetime->figuresText().contains(u"since it started")) << lifetime->figuresText().toStdString();

    EXPECT_FALSE(CommandResources::fromEvent(commandResult(8, 10'000, "true", 1, 0, 0)))
        << "a pool without cgroups reports nothing: no figures, not zeros";
    EXPECT_FALSE(CommandResources::fromEvent(event(9, QStringLiteral("tool.result"), R"({"path":"a","content":"x"})")));
    EXPECT_FALSE(CommandResources::fromEvent(event(10, QStringLiteral("tool.call"), R"({"command":"x","cpu_time_ms":3})")));
}

TEST(CommandResourcesTest, TheCardNamesOnlyTheCommandsNoSampleFellInside)
{
    SandboxCommandLog log;
    ResourceSeries series;
    EXPECT_EQ(log.betweenSamplesText(series), QString());
    EXPECT_TRUE(log.apply(event(1, QStringLiteral("sandbox.claimed"), R"({"sandbox_id":"lite-a"})")));
    EXPECT_FALSE(log.apply(event(2, QStringLiteral("tool.call"))));

    // One short command and no sample at all: its figures stand in for the curve.
    EXPECT_TRUE(log.apply(commandResult(3, 10'000, "dd if=/dev/zero of=/dev/null bs=64M count=1", 40, 70'696'960, 59)));
    EXPECT_EQ(log.betweenSamplesText(series),
              QStringLiteral("dd if=/dev/zero of=/dev/null bs=64M count=1 ran between samples: peak 67 MiB, CPU 59 ms"));

    // A sample inside it: the curve shows it.
    series.append({sampleAt(9'990)});
    EXPECT_TRUE(series.hasSampleBetween(9'960, 10'000));
    EXPECT_EQ(log.betweenSamplesText(series), QString());

    // Two more between samples: how many, the largest peak and all their CPU time.
    log.apply(commandResult(4, 10'500, "true", 2, 3'207'168, 0.8));
    log.apply(commandResult(5, 10'700, "python3 -c 'x = bytearray(1 << 27)'", 90, 140 << 20, 120, "concurrent"));
    series.append({sampleAt(11'000)});
    EXPECT_FALSE(series.hasSampleBetween(10'610, 10'700));
    EXPECT_EQ(log.betweenSamplesText(series),
              QStringLiteral("2 commands ran between samples: the largest peak 140 MiB (python3 -c 'x = bytearray(1 << 27)'; "
                             "with the commands that ran beside it), CPU 121 ms in all"));

    // Another sandbox: its commands start afresh.
    EXPECT_TRUE(log.apply(event(6, QStringLiteral("sandbox.claimed"), R"({"sandbox_id":"lite-b"})")));
    EXPECT_TRUE(log.commands().isEmpty());
    EXPECT_EQ(log.betweenSamplesText(series), QString());
}

TEST(CommandResourcesTest, TheInspectorFindsTheFailedCommandsResultInTheTrace)
{
    TraceModel trace;
    trace.setSession(QStringLiteral("s1"));
    const QByteArray failed = R"(,"post_mortem":{"pool":"exec-1","sandbox_id":"lite-a"})";
    trace.appendEvents({commandResult(1, 10'000, "make", 300, 90 << 20, 250, "command", failed),
                        commandResult(2, 20'000, "make test", 40, 70 << 20, 30, "command", failed),
                        commandResult(3, 30'000, "ls", 2, 3 << 20, 1)});
    PostMortemInfo pm;
    pm.pool = QStringLiteral("exec-1");
    pm.sandboxId = QStringLiteral("lite-a");
    pm.sessionId = QStringLiteral("s1");
    pm.argv = {QStringLiteral("/bin/sh"), QStringLiteral("-c"), QStringLiteral("make test")};
    pm.timeUnixMs = 20'000;
    pm.durationMs = 40;
    auto command = commandResourcesOf(trace, pm);
    ASSERT_TRUE(command);
    EXPECT_EQ(command->command, u"make test");
    EXPECT_EQ(command->peakMemoryBytes, 70 << 20);

    // The post-mortem's only sample is the one taken at the failure, after the command: not inside.
    ResourceSeries samples;
    samples.setSamples({sampleAt(20'000)});
    EXPECT_EQ(postMortemCommandText(*command, pm, samples),
              QStringLiteral("No sample fell inside the command; from its result: peak 70 MiB, CPU 30 ms"));
    samples.setSamples({sampleAt(19'980), sampleAt(20'000)});
    EXPECT_EQ(postMortemCommandText(*command, pm, samples), QStringLiteral("The command, from its result: peak 70 MiB, CPU 30 ms"));

    pm.sandboxId = QStringLiteral("lite-b");
    EXPECT_FALSE(commandResourcesOf(trace, pm)) << "another sandbox's post-mortem";
    EXPECT_EQ(postMortemCommandText(CommandResources{}, pm, samples), QString());
}

} // namespace
} // namespace paddock::console
