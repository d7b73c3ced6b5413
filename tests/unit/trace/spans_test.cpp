// Spans and marks from a session's events, applied one by one. Times are the events' own (made
// up here), never the clock's.

#include "trace/spans.h"

#include <gtest/gtest.h>

namespace paddock::trace {
namespace {

constexpr int64_t kT0 = 1'800'000'000'000;

class Spans : public ::testing::Test {
protected:
    // Applies one event at kT0 + atMs with the next seq.
    void at(int64_t atMs, std::string_view kind, const char *payload)
    {
        m_builder.apply(++m_seq, kT0 + atMs, kind, std::string_view(payload));
    }
    const Span &span(size_t index) const { return m_builder.spans().at(index); }
    size_t count() const { return m_builder.spans().size(); }

    SpanBuilder m_builder;
    int64_t m_seq = 0;
};

TEST_F(Spans, AModelCallAndItsToolsOnOneAxis)
{
    at(0, "session.created", R"({"goal":"g"})");
    at(3, "state.changed", R"({"status":"running"})");
    at(900, "sandbox.claimed", R"({"pool":"local","sandbox_id":"sb-1","tier":"lite","warm":true,"claim_ms":4})");
    at(900, "model.response", R"({"model":"scripted","latency_ms":850,"usage":{"input_tokens":18,"output_tokens":70},
        "tool_calls":[{"id":"c1"},{"id":"c2"}]})");
    at(900, "cost", R"({"kind":"model"})");
    at(900, "tool.call", R"({"call_id":"c1","name":"run_command","arguments":{"command":"make"}})");
    at(900, "tool.call", R"({"call_id":"c2","name":"run_command","arguments":{"command":"./hello"}})");
    EXPECT_EQ(m_builder.originMs(), kT0);
    ASSERT_EQ(count(), 4u);

    EXPECT_EQ(span(0).kind, SpanKind::SandboxClaim);
    EXPECT_EQ(span(0).startMs, kT0 + 896);
    EXPECT_EQ(span(0).endMs, kT0 + 900);
    EXPECT_EQ(span(0).step, 0);

    EXPECT_EQ(span(1).kind, SpanKind::ModelCall);
    EXPECT_EQ(span(1).startMs, kT0 + 50) << "the response's latency gives the call's start";
    EXPECT_EQ(span(1).durationMs(0), 850);
    EXPECT_EQ(span(1).step, 1);
    EXPECT_EQ(span(1).label, "scripted, 18 in / 70 out tokens, 850 ms, 2 tool calls");

    EXPECT_TRUE(span(2).open());
    EXPECT_FALSE(span(2).queued);
    EXPECT_EQ(span(2).label, "run_command: make");
    EXPECT_TRUE(span(3).queued) << "the second call waits for the first";
    EXPECT_EQ(span(3).durationMs(kT0 + 1000), 100) << "open spans grow with the clock given";

    at(1400, "cost", R"({"kind":"storage"})");
    at(1400, "tool.result", R"({"call_id":"c1","name":"run_command","command":"make","exit_code":0,"duration_ms":480})");
    EXPECT_EQ(span(2).endMs, kT0 + 1400);
    EXPECT_EQ(span(2).outcome, "exit 0 in 480 ms");
    EXPECT_FALSE(span(3).queued);
    EXPECT_EQ(span(3).startMs, kT0 + 1400) << "the next call starts when the one before ends";
    EXPECT_EQ(std::vector<size_t>(m_builder.changed().begin(), m_builder.changed().end()), (std::vector<size_t>{2, 3}));

    at(1500, "tool.result", R"({"call_id":"c2","name":"run_command","exit_code":3,"duration_ms":90})");
    EXPECT_TRUE(span(3).error);
    EXPECT_EQ(span(3).durationMs(0), 100);
    EXPECT_EQ(span(3).step, 1);
}

TEST_F(Spans, AModelRequestOpensASpanThatTheResponseEnds)
{
    at(0, "model.request", R"({"model":"gpt-x"})");
    ASSERT_EQ(count(), 1u);
    EXPECT_TRUE(span(0).open());
    at(1200, "model.error", R"({"error":"HTTP 503","code":"unavailable"})");
    EXPECT_FALSE(span(0).open());
    EXPECT_TRUE(span(0).error);
    EXPECT_EQ(span(0).durationMs(0), 1200);
    at(1300, "model.error", R"({"error":"HTTP 503"})");   // no call open: a mark
    EXPECT_TRUE(span(1).mark);
    EXPECT_EQ(span(1).kind, SpanKind::ModelError);
}

TEST_F(Spans, WaitsForASandboxAnApprovalABudgetAndAResume)
{
    at(0, "sandbox.waiting", R"({"tier":"lite","reason":"waiting for a lite sandbox: 2 of 2 in use"})");
    at(10, "sandbox.waiting", R"({"tier":"lite"})");   // once per wait; a second one changes nothing
    ASSERT_EQ(count(), 1u);
    at(5000, "sandbox.claimed", R"({"sandbox_id":"sb","claim_ms":2})");
    EXPECT_EQ(span(0).kind, SpanKind::SandboxWait);
    EXPECT_EQ(span(0).durationMs(0), 5000);

    at(6000, "approval.requested", R"({"review_id":"r-1","kind":"bulk_change","summary":"rename"})");
    at(6000, "budget.exceeded", R"({"scope":"session","budget_micros":10,"spent_micros":11})");
    at(6000, "approval.requested", R"({"review_id":"r-2","kind":"budget_extension"})");
    at(9000, "approval.decided", R"({"review_id":"r-2","approved":true,"decider":"bob"})");
    EXPECT_EQ(span(2).kind, SpanKind::ApprovalWait);
    EXPECT_TRUE(span(2).open());
    EXPECT_TRUE(span(3).mark);
    EXPECT_TRUE(span(3).error);
    EXPECT_EQ(span(4).kind, SpanKind::BudgetWait);
    EXPECT_EQ(span(4).durationMs(0), 3000);
    EXPECT_EQ(span(4).outcome, "review r-2 approved by bob");

    at(9500, "state.changed", R"({"status":"paused","reason":"by ana"})");
    at(9900, "state.changed", R"({"status":"running"})");
    EXPECT_EQ(span(5).kind, SpanKind::Paused);
    EXPECT_EQ(span(5).durationMs(0), 400);
}

TEST_F(Spans, EgressFailuresAndMovesAreMarksOrDerivedSpans)
{
    at(100, "tool.call", R"({"call_id":"c1","name":"run_command","arguments":{"command":"curl x"}})");
    at(500, "egress.refused", R"({"host":"169.254.169.254","port":80,"reason":"metadata","time_unix_ms":1800000000250})");
    at(500, "tool.result", R"({"call_id":"c1","exit_code":7})");
    at(600, "sandbox.lost", R"({"sandbox_id":"sb","pool":"east","error":"gone"})");
    at(900, "sandbox.moved", R"({"from_pool":"east","to_pool":"west","manifest":"ab","restore_ms":120})");
    at(950, "tier.override", R"({"from":"lite","to":"heavy"})");
    ASSERT_EQ(count(), 5u);
    EXPECT_EQ(span(1).kind, SpanKind::EgressRefused);
    EXPECT_TRUE(span(1).mark);
    EXPECT_EQ(span(1).startMs, kT0 + 250) << "the attempt's own time";
    EXPECT_EQ(span(2).kind, SpanKind::SandboxFailure);
    EXPECT_TRUE(span(2).error);
    EXPECT_EQ(span(3).kind, SpanKind::SandboxMove);
    EXPECT_EQ(span(3).startMs, kT0 + 780);
    EXPECT_EQ(span(4).kind, SpanKind::TierOverride);
}

TEST_F(Spans, TheSessionsEndEndsWhatIsOpen)
{
    at(0, "tool.call", R"({"call_id":"c1","name":"run_command","arguments":{"command":"sleep 60"}})");
    at(0, "debug_shell.opened", R"({"shell_id":"sh-1"})");
    at(10, "debug_shell.exec", R"({"shell_id":"sh-1","argv":["ls"],"exit_code":0,"duration_ms":4})");
    at(2000, "state.changed", R"({"status":"cancelled","reason":"by ana"})");
    EXPECT_TRUE(m_builder.sessionEnded());
    EXPECT_EQ(span(0).durationMs(0), 2000);
    EXPECT_TRUE(span(0).interrupted);
    EXPECT_EQ(span(0).outcome, "session cancelled: by ana");
    EXPECT_TRUE(span(1).interrupted);
    EXPECT_EQ(span(2).kind, SpanKind::DebugCommand);
    EXPECT_EQ(span(2).startMs, kT0 + 6);
}

TEST_F(Spans, AResultWhoseCallCameBeforeTheWindowStillMakesASpan)
{
    at(1000, "tool.result", R"({"call_id":"c7","name":"run_command","command":"make","exit_code":0,"duration_ms":300})");
    ASSERT_EQ(count(), 1u);
    EXPECT_EQ(span(0).startMs, kT0 + 700);
    EXPECT_EQ(span(0).outcome, "exit 0 in 300 ms");
}

TEST_F(Spans, DroppingWhatEndedKeepsTheOpenSpansGoing)
{
    at(0, "model.response", R"({"latency_ms":10,"tool_calls":[{"id":"c1"},{"id":"c2"}]})");
    at(1, "approval.requested", R"({"review_id":"r1","kind":"egress_exception"})");
    at(2, "tool.call", R"({"call_id":"c1","name":"run_command","arguments":{"command":"make"}})");
    at(3, "tool.call", R"({"call_id":"c2","name":"run_command","arguments":{"command":"./hello"}})");
    ASSERT_EQ(count(), 4u);
    const std::vector<size_t> kept = m_builder.dropClosed();
    EXPECT_EQ(kept, (std::vector<size_t>{1, 2, 3})) << "the model call had ended";
    ASSERT_EQ(count(), 3u);
    EXPECT_TRUE(m_builder.changed().empty());

    // The running call, the queued one and the wait still end where they belong.
    at(50, "tool.result", R"({"call_id":"c1","name":"run_command","exit_code":0,"duration_ms":40})");
    EXPECT_EQ(span(1).endMs, kT0 + 50);
    EXPECT_FALSE(span(2).queued) << "the second call starts as the first ends";
    EXPECT_EQ(span(2).startMs, kT0 + 50);
    at(60, "approval.decided", R"({"review_id":"r1","decision":"approve"})");
    EXPECT_EQ(span(0).endMs, kT0 + 60);
    EXPECT_EQ(m_builder.dropClosed(), (std::vector<size_t>{2}));
    at(90, "tool.result", R"({"call_id":"c2","name":"run_command","exit_code":0,"duration_ms":30})");
    ASSERT_EQ(count(), 1u);
    EXPECT_EQ(span(0).endMs, kT0 + 90);
    EXPECT_TRUE(m_builder.dropClosed().empty());
}

TEST_F(Spans, ManyEventsCostTheSameEach)
{
    // 200,000 steps: what is kept open stays bounded, and the spans are one per call.
    for (int i = 0; i < 50'000; ++i) {
        const int64_t t = i * 10;
        const std::string id = "c" + std::to_string(i);
        m_builder.apply(++m_seq, kT0 + t, "model.response", std::string_view(R"({"latency_ms":2})"));
        m_builder.apply(++m_seq, kT0 + t, "cost", std::string_view(R"({"kind":"model"})"));
        m_builder.apply(++m_seq, kT0 + t, "tool.call", nlohmann::json{{"call_id", id}, {"name", "run_command"}});
        m_builder.apply(++m_seq, kT0 + t + 5, "tool.result", nlohmann::json{{"call_id", id}, {"exit_code", 0}});
    }
    EXPECT_EQ(count(), 100'000u);
    EXPECT_EQ(m_builder.currentStep(), 50'000);
    EXPECT_FALSE(span(count() - 1).open());
}

} // namespace
} // namespace paddock::trace
