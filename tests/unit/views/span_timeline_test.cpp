// The span timeline in the session view, driven with QTest: a click on a span selects its rows, a
// row selects its span, zoom and pan move the visible range, and a running span grows as its
// output arrives while the view follows it. The clock is the events' own.

#include "views_test_support.h"

#include "models/cost_series.h"
#include "models/span_model.h"
#include "models/trace_model.h"
#include "views/session_view.h"
#include "views/span_timeline.h"
#include "views/trace_view.h"
#include "tests/support/event_records.h"

#include <QItemSelectionModel>
#include <QScrollBar>
#include <QTest>
#include <gtest/gtest.h>

namespace paddock::console {
namespace {

using namespace test;

// Two steps: a claim, a model call, a command that finished, a second model call and a command
// still running (its output arriving).
QList<EventRecord> running()
{
    return {
        at(1, 0, "session.created", R"({"goal":"build"})"),
        at(2, 5, "state.changed", R"({"status":"running"})"),
        at(3, 300, "sandbox.claimed", R"({"pool":"local","sandbox_id":"sb-1","tier":"lite","warm":true,"claim_ms":250})"),
        at(4, 2000, "model.response", R"({"model":"scripted","latency_ms":1900,"tool_calls":[{"id":"c1"}]})"),
        at(5, 2000, "cost", R"({"kind":"model"})", 700),
        at(6, 2050, "tool.call", R"({"call_id":"c1","name":"run_command","arguments":{"command":"make"}})"),
        at(7, 6000, "tool.output", R"({"call_id":"c1","stream":"stdout","text":"cc -c a.c\n"})"),
        at(8, 9000, "tool.result", R"({"call_id":"c1","name":"run_command","command":"make","exit_code":0,"duration_ms":6950})"),
        at(9, 9000, "checkpoint", R"({"files":2,"changed":1,"removed":0,"sent_bytes":900,"duration_ms":5})"),
        at(10, 11000, "model.response", R"({"model":"scripted","latency_ms":1900,"tool_calls":[{"id":"c2"}]})"),
        at(11, 11050, "tool.call", R"({"call_id":"c2","name":"run_command","arguments":{"command":"make test"}})"),
        at(12, 12000, "tool.output", R"({"call_id":"c2","stream":"stdout","text":"test 1 ok\n"})"),
    };
}

class SpanTimelineTest : public ::testing::Test, public ApplicationGuard {
protected:
    void SetUp() override
    {
        ensureApplication();
        view.spanModel()->setClock([] { return qint64(0); });
        view.setModels(&trace, &cost);
        view.resize(1280, 760);
        trace.setSession(QStringLiteral("s-run"));
        view.showSession(session(QStringLiteral("s-run"), QStringLiteral("Build it"), SessionStatus::Running));
        trace.appendEvents(running());
        view.spanModel()->finishBuilding();
        view.show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
        timeline = view.spanTimeline();
        spans = view.spanModel();
    }
    int spanOf(SpanModel::Kind kind, int nth = 0) const
    {
        for (int id = 0; id < spans->count(); ++id) {
            if (spans->span(id).kind == kind && nth-- == 0)
                return id;
        }
        return -1;
    }
    QList<int> selectedRows() const
    {
        QList<int> rows;
        for (const QModelIndex &index : view.traceView()->selectionModel()->selectedRows())
            rows << index.row();
        std::sort(rows.begin(), rows.end());
        return rows;
    }

    TraceModel trace;
    CostSeries cost;
    SessionView view;
    SpanTimeline *timeline = nullptr;
    SpanModel *spans = nullptr;
};

TEST_F(SpanTimelineTest, ClickingASpanSelectsItsRows)
{
    ASSERT_EQ(spans->count(), 5);
    const int tool = spanOf(SpanModel::Kind::ToolCall);
    const QRect rect = timeline->spanRect(tool);
    ASSERT_FALSE(rect.isEmpty());
    QTest::mouseClick(timeline->viewport(), Qt::LeftButton, {}, rect.center());
    EXPECT_EQ(timeline->selectedSpan(), tool);
    // From the call to its result; the checkpoint after it folded into the result's row.
    QList<int> expected;
    for (int row = trace.rowOfSeq(6); row <= trace.rowOfSeq(8); ++row)
        expected << row;
    EXPECT_EQ(selectedRows(), expected);
    EXPECT_EQ(view.traceView()->currentIndex().row(), trace.rowOfSeq(6));

    // The running call: its row, which its output so far folds into.
    const int runningTool = spanOf(SpanModel::Kind::ToolCall, 1);
    QTest::mouseClick(timeline->viewport(), Qt::LeftButton, {}, timeline->spanRect(runningTool).center());
    EXPECT_EQ(trace.rowOfSeq(12), trace.rowOfSeq(11));
    EXPECT_EQ(selectedRows(), (QList<int>{trace.rowOfSeq(11)}));
    EXPECT_EQ(timeline->selectedSpan(), runningTool) << "the table's new current row kept the span";
}

TEST_F(SpanTimelineTest, SelectingARowSelectsAndRevealsItsSpan)
{
    const int claim = spanOf(SpanModel::Kind::SandboxClaim);
    const int tool = spanOf(SpanModel::Kind::ToolCall);
    view.traceView()->setCurrentIndex(view.traceView()->indexOfRow(trace.rowOfSeq(7)));
    EXPECT_EQ(timeline->selectedSpan(), tool) << "an output row belongs to its call";

    // Zoomed in at the newest, the claim is out of view until its row is selected.
    timeline->setFocus();
    for (int i = 0; i < 12; ++i)
        QTest::keyClick(timeline, Qt::Key_Plus);
    ASSERT_TRUE(timeline->spanRect(claim).isEmpty());
    view.traceView()->setCurrentIndex(view.traceView()->indexOfRow(trace.rowOfSeq(3)));
    EXPECT_EQ(timeline->selectedSpan(), claim);
    EXPECT_FALSE(timeline->spanRect(claim).isEmpty()) << "the timeline brought it into view";
    EXPECT_LE(timeline->visibleStartMs(), spans->span(claim).startMs);
}

TEST_F(SpanTimelineTest, ZoomAndPanMoveTheVisibleRange)
{
    ASSERT_TRUE(timeline->isFitted());
    const qint64 fullWidth = timeline->visibleEndMs() - timeline->visibleStartMs();
    EXPECT_LE(timeline->visibleStartMs(), spans->firstMs());
    EXPECT_GE(timeline->visibleEndMs(), spans->lastMs());

    timeline->setFocus();
    QTest::keyClick(timeline, Qt::Key_Plus);
    QTest::keyClick(timeline, Qt::Key_Plus);
    const qint64 zoomed = timeline->visibleEndMs() - timeline->visibleStartMs();
    EXPECT_LT(zoomed, fullWidth * 0.7);
    EXPECT_FALSE(timeline->isFitted());
    EXPECT_GT(timeline->horizontalScrollBar()->maximum(), 0) << "the scroll bar pans what is hidden";

    // The wheel zooms around the cursor: the time under it stays put.
    const QPoint mid = timeline->viewport()->rect().center();
    const qint64 startBefore = timeline->visibleStartMs();
    QWheelEvent wheel(mid, timeline->viewport()->mapToGlobal(mid), {}, QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                      Qt::NoScrollPhase, false);
    QApplication::sendEvent(timeline->viewport(), &wheel);
    EXPECT_LT(timeline->visibleEndMs() - timeline->visibleStartMs(), zoomed);
    EXPECT_GT(timeline->visibleStartMs(), startBefore);

    // Dragging right shows earlier times; the scroll bar follows.
    const qint64 beforeDrag = timeline->visibleStartMs();
    const int barBefore = timeline->horizontalScrollBar()->value();
    QTest::mousePress(timeline->viewport(), Qt::LeftButton, {}, mid);
    QTest::mouseMove(timeline->viewport(), mid + QPoint(200, 0));
    QTest::mouseRelease(timeline->viewport(), Qt::LeftButton, {}, mid + QPoint(200, 0));
    EXPECT_LT(timeline->visibleStartMs(), beforeDrag);
    EXPECT_LT(timeline->horizontalScrollBar()->value(), barBefore);
    EXPECT_FALSE(timeline->isFollowing());
    EXPECT_EQ(timeline->selectedSpan(), -1) << "a drag selects nothing";

    QTest::keyClick(timeline, Qt::Key_Minus);
    EXPECT_GT(timeline->visibleEndMs() - timeline->visibleStartMs(), zoomed / 2);
    QTest::keyClick(timeline, Qt::Key_0);
    EXPECT_TRUE(timeline->isFitted());
    EXPECT_EQ(timeline->visibleEndMs() - timeline->visibleStartMs(), fullWidth);
}

TEST_F(SpanTimelineTest, ARunningSpanGrowsWhileTheViewFollowsIt)
{
    const int runningTool = spanOf(SpanModel::Kind::ToolCall, 1);
    ASSERT_TRUE(spans->span(runningTool).open());
    EXPECT_TRUE(timeline->isLiveRepainting()) << "something is open: the timer repaints";
    timeline->setFocus();
    for (int i = 0; i < 4; ++i)
        QTest::keyClick(timeline, Qt::Key_Plus);
    QTest::keyClick(timeline, Qt::Key_End);
    ASSERT_TRUE(timeline->isFollowing());
    const QRect before = timeline->spanRect(runningTool);
    const qint64 endBefore = timeline->visibleEndMs();
    EXPECT_EQ(spans->endOf(spans->span(runningTool)), kT0 + 12000);

    // More output, seconds later: the same span ends later, and the view moves with it.
    trace.appendEvents({at(13, 20000, "tool.output", R"({"call_id":"c2","stream":"stdout","text":"test 2 ok\n"})"),
                        at(14, 26000, "tool.output", R"({"call_id":"c2","stream":"stdout","text":"test 3 ok\n"})")});
    spans->finishBuilding();
    EXPECT_TRUE(spans->span(runningTool).open());
    EXPECT_EQ(spans->endOf(spans->span(runningTool)), kT0 + 26000);
    EXPECT_NEAR(double(timeline->visibleEndMs() - endBefore), 14000.0, 2.0);
    EXPECT_GE(timeline->visibleEndMs(), kT0 + 26000);
    const QRect after = timeline->spanRect(runningTool);
    EXPECT_GE(after.right(), before.right() - 1) << "its end stays at the right edge";
    EXPECT_LT(after.left(), before.left()) << "its start moved left as time went on";

    // Its result ends it; the session's end leaves nothing to repaint for.
    trace.appendEvents({at(15, 27000, "tool.result", R"({"call_id":"c2","name":"run_command","exit_code":0,"duration_ms":15950})"),
                        at(16, 27100, "state.changed", R"({"status":"succeeded"})")});
    spans->finishBuilding();
    EXPECT_EQ(spans->span(runningTool).endMs, kT0 + 27000);
    EXPECT_FALSE(timeline->isLiveRepainting());
}

} // namespace
} // namespace paddock::console
