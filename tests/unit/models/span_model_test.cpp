// SpanModel follows a TraceModel: spans from a scripted session (an open tool call that grows and
// later ends), the lanes, the rows a span covers and the span a row belongs to, history paged in
// above what was built, a window cleared for another session. The clock is the events' own.

#include "model_test_support.h"
#include "models/span_model.h"
#include "models/trace_model.h"
#include "tests/support/qt_wait.h"
#include "tests/support/event_records.h"

#include <QCoreApplication>
#include <QSignalSpy>
#include <gtest/gtest.h>

namespace paddock::console {
namespace {

using Kind = SpanModel::Kind;
using Lane = SpanModel::Lane;

using test::at;
using test::kT0;

// A claim, a model call and a command that prints twice before it ends, then the session's end.
QList<EventRecord> script()
{
    return {
        at(1, 0, "session.created", R"({"goal":"build"})"),
        at(2, 5, "state.changed", R"({"status":"running"})"),
        at(3, 40, "sandbox.claimed", R"({"pool":"local","sandbox_id":"sb-1","tier":"lite","warm":true,"claim_ms":4})"),
        at(4, 900, "model.response", R"({"model":"scripted","latency_ms":850,"usage":{"input_tokens":18,"output_tokens":7},
            "tool_calls":[{"id":"c1"}]})"),
        at(5, 900, "cost", R"({"kind":"model"})", 700),
        at(6, 910, "tool.call", R"({"call_id":"c1","name":"run_command","arguments":{"command":"make test"}})"),
        at(7, 1500, "tool.output", R"({"call_id":"c1","stream":"stdout","text":"cc -c a.c\n"})"),
        at(8, 4100, "tool.output", R"({"call_id":"c1","stream":"stdout","text":"all tests passed\n"})"),
        at(9, 4200, "tool.result", R"({"call_id":"c1","name":"run_command","command":"make test","exit_code":0,"duration_ms":3290})"),
        at(10, 4210, "egress.refused", R"({"host":"169.254.169.254","port":80,"reason":"link-local"})"),
        at(11, 4300, "state.changed", R"({"status":"succeeded"})"),
    };
}

// Slices continue from a zero timer: an event loop is needed.
void ensureCoreApplication()
{
    static int argc = 1;
    static char name[] = "span_model_test";
    static char *argv[] = {name, nullptr};
    if (!QCoreApplication::instance())
        new QCoreApplication(argc, argv);
}

class SpanModelTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ensureCoreApplication();
        spans.setClock([] { return qint64(0); });   // open spans end at the newest event
        spans.setTraceModel(&trace);
        trace.setSession(QStringLiteral("s-1"));
    }
    // The id of the only span of this kind.
    int only(Kind kind) const
    {
        int found = -1;
        for (int id = 0; id < spans.count(); ++id) {
            if (spans.span(id).kind == kind) {
                EXPECT_EQ(found, -1) << "two spans of kind " << int(kind);
                found = id;
            }
        }
        return found;
    }

    TraceModel trace;
    SpanModel spans;
};

TEST_F(SpanModelTest, AnOpenToolCallGrowsWithItsOutputAndEndsWithItsResult)
{
    QSignalSpy changed(&spans, &SpanModel::spansChanged);
    const QList<EventRecord> all = script();
    trace.appendEvents(all.mid(0, 7));   // up to the first output line
    spans.finishBuilding();
    EXPECT_FALSE(spans.isBuilding());
    EXPECT_GT(changed.count(), 0);
    ASSERT_EQ(spans.count(), 3);

    const int claim = only(Kind::SandboxClaim);
    ASSERT_GE(claim, 0);
    EXPECT_EQ(spans.span(claim).lane, Lane::Sandbox);
    EXPECT_EQ(spans.span(claim).startMs, kT0 + 36) << "the claim's duration gives its start";
    EXPECT_EQ(spans.span(claim).endMs, kT0 + 40);

    const int model = only(Kind::ModelCall);
    EXPECT_EQ(spans.span(model).lane, Lane::Model);
    EXPECT_EQ(spans.span(model).startMs, kT0 + 50);
    EXPECT_EQ(spans.label(model), QStringLiteral("scripted, 18 in / 7 out tokens, 850 ms, 1 tool call"));

    const int tool = only(Kind::ToolCall);
    const SpanModel::Span &running = spans.span(tool);
    EXPECT_EQ(running.lane, Lane::Tools);
    EXPECT_TRUE(running.open());
    EXPECT_EQ(spans.openCount(), 1);
    EXPECT_EQ(running.startSeq, 6);
    EXPECT_EQ(spans.lastSeqOf(running), 7) << "an open span covers the rows up to the newest";
    EXPECT_EQ(spans.endOf(running), kT0 + 1500);
    EXPECT_EQ(spans.label(tool), QStringLiteral("run_command: make test"));
    EXPECT_TRUE(spans.outcome(tool).isEmpty());

    // More output: the same span, a later end.
    trace.appendEvents(all.mid(7, 1));
    spans.finishBuilding();
    ASSERT_EQ(spans.count(), 3);
    EXPECT_TRUE(spans.span(tool).open());
    EXPECT_EQ(spans.endOf(spans.span(tool)), kT0 + 4100);
    EXPECT_EQ(spans.lastMs(), kT0 + 4100);

    // Its result ends it where the result says; the egress attempt is a mark; the end of the
    // session leaves nothing open.
    trace.appendEvents(all.mid(8));
    spans.finishBuilding();
    ASSERT_EQ(spans.count(), 4);
    EXPECT_FALSE(spans.span(tool).open());
    EXPECT_EQ(spans.span(tool).endMs, kT0 + 4200);
    EXPECT_EQ(spans.span(tool).endSeq, 9);
    EXPECT_TRUE(spans.outcome(tool).startsWith(u"exit 0 in 3.3 s")) << spans.outcome(tool).toStdString();
    const int egress = only(Kind::EgressRefused);
    EXPECT_TRUE(spans.span(egress).mark);
    EXPECT_EQ(spans.span(egress).lane, Lane::Marks);
    EXPECT_EQ(spans.openCount(), 0);
    EXPECT_TRUE(spans.sessionEnded());
    EXPECT_EQ(spans.firstMs(), kT0 + 36);
    EXPECT_EQ(spans.lastMs(), kT0 + 4300);
}

TEST_F(SpanModelTest, ARowFindsItsSpanAndASpanItsRows)
{
    trace.appendEvents(script());
    spans.finishBuilding();
    const int tool = only(Kind::ToolCall);
    EXPECT_EQ(spans.spanAtSeq(6), tool) << "the call opened it";
    EXPECT_EQ(spans.spanAtSeq(8), tool) << "output inside it";
    EXPECT_EQ(spans.spanAtSeq(9), tool) << "the result ended it";
    EXPECT_EQ(spans.spanAtSeq(4), only(Kind::ModelCall));
    EXPECT_EQ(spans.spanAtSeq(3), only(Kind::SandboxClaim));
    EXPECT_EQ(spans.spanAtSeq(1), -1) << "the session's creation is in no span";
    EXPECT_EQ(spans.spanAtSeq(5), -1) << "the model's cost comes after its call";

    // Only the spans over a range, as the timeline asks while painting.
    QList<int> seen;
    spans.forEachIn(kT0 + 1000, kT0 + 1100, [&](int id, const SpanModel::Span &) { seen << id; });
    EXPECT_EQ(seen, QList<int>{tool});
}

TEST_F(SpanModelTest, HistoryPagedInAboveIsBuiltAgainFromTheWindowsFirstEvent)
{
    const QList<EventRecord> all = script();
    trace.setTailStart(6);
    trace.appendEvents(all.mid(5));
    spans.finishBuilding();
    // The tail alone: the call, its egress mark; no claim, no model call yet.
    EXPECT_EQ(only(Kind::SandboxClaim), -1);
    EXPECT_EQ(spans.count(), 2);

    QSignalSpy reset(&spans, &SpanModel::spansReset);
    trace.prependHistory(all.mid(0, 5));
    ASSERT_EQ(trace.firstSeq(), 1);
    spans.finishBuilding();
    EXPECT_EQ(reset.count(), 1);
    EXPECT_EQ(spans.count(), 4);
    EXPECT_GE(only(Kind::SandboxClaim), 0);
    EXPECT_GE(only(Kind::ModelCall), 0);
    EXPECT_EQ(spans.span(only(Kind::ToolCall)).endSeq, 9);
}

TEST_F(SpanModelTest, ShowingEveryEventKeepsTheSpansAnotherSessionClearsThem)
{
    trace.appendEvents(script());
    spans.finishBuilding();
    QSignalSpy reset(&spans, &SpanModel::spansReset);
    trace.setFoldBookkeeping(false);
    spans.finishBuilding();
    EXPECT_EQ(reset.count(), 0) << "the same events, other rows";
    EXPECT_EQ(spans.count(), 4);

    trace.setSession(QStringLiteral("s-2"));
    EXPECT_EQ(reset.count(), 1);
    EXPECT_EQ(spans.count(), 0);
    EXPECT_EQ(spans.firstMs(), 0);
    trace.appendEvents({at(1, 0, "model.response", R"({"latency_ms":10})")});
    spans.finishBuilding();
    EXPECT_EQ(spans.count(), 1);
}

// Many events at once are built in slices from the event loop, and each span costs the same.
TEST_F(SpanModelTest, ABigWindowIsBuiltInSlicesWithTheSameSpans)
{
    QList<EventRecord> events;
    qint64 seq = 0;
    for (int step = 0; step < 3000; ++step) {
        const qint64 t = step * 1000;
        const QByteArray id = "c" + QByteArray::number(step);
        events << at(++seq, t + 100, "model.response", R"({"latency_ms":90})");
        events << at(++seq, t + 110, "tool.call", R"({"call_id":")" + id + R"(","name":"run_command"})");
        events << at(++seq, t + 500, "tool.output", R"({"call_id":")" + id + R"(","text":"x"})");
        events << at(++seq, t + 900, "tool.result", R"({"call_id":")" + id + R"(","exit_code":0})");
    }
    trace.appendEvents(events);
    ASSERT_TRUE(paddock::test::waitFor([&] { return !spans.isBuilding(); }));
    ASSERT_EQ(spans.count(), 6000);
    EXPECT_EQ(spans.openCount(), 0);
    // What forEachIn visits over a range is exactly what overlaps it.
    const qint64 from = kT0 + 1'234'000;
    const qint64 to = kT0 + 1'299'000;
    int visited = 0;
    spans.forEachIn(from, to, [&](int, const SpanModel::Span &s) {
        ++visited;
        EXPECT_TRUE(s.startMs <= to && s.endMs >= from);
    });
    int expected = 0;
    for (int id = 0; id < spans.count(); ++id)
        expected += spans.span(id).startMs <= to && spans.span(id).endMs >= from ? 1 : 0;
    EXPECT_EQ(visited, expected);
    EXPECT_GT(visited, 100);
}

} // namespace
} // namespace paddock::console
