// Cost and checkpoint events fold into their step's row by default; the toggle shows every event.
// The window's edges (a bill whose row has not arrived yet, history paged in above a folded
// event, old events trimmed) keep the rows and their notes right, under QAbstractItemModelTester.

#include "model_test_support.h"
#include "models/trace_model.h"
#include "tests/support/event_records.h"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <gtest/gtest.h>

namespace paddock::console {
namespace {


using test::at;
using test::kT0;

// A model step and a command step as the broker appends them (see a hello-c run's log): the model
// cost after its response, a storage bill first in the command's append, the checkpoint after the
// result.
QList<EventRecord> twoSteps()
{
    return {
        at(1, 0, "session.created", R"({"goal":"build"})"),
        at(2, 347, "model.response", R"({"model":"scripted","usage":{"input_tokens":188,"output_tokens":14},"latency_ms":40})"),
        at(3, 347, "cost", R"({"kind":"model","model":"scripted","input_tokens":188,"output_tokens":14})", 774),
        at(4, 347, "tool.call", R"({"call_id":"c1","name":"run_command","arguments":{"command":"make"}})"),
        at(5, 431, "cost", R"({"kind":"storage","bytes":199,"seconds":0.08})", 2),
        at(6, 431, "tool.result", R"({"call_id":"c1","name":"run_command","command":"make","exit_code":0,"duration_ms":68})"),
        at(7, 431, "checkpoint", R"({"files":2,"changed":3,"removed":1,"sent_bytes":900,"duration_ms":5})"),
        at(8, 441, "state.changed", R"({"status":"succeeded"})"),
    };
}

class TraceFoldTest : public ::testing::Test {
protected:
    std::string summary(int row) const { return m_model.index(row, TraceModel::Summary).data().toString().toStdString(); }
    qint64 seq(int row) const { return m_model.index(row, 0).data(TraceModel::SeqRole).toLongLong(); }

    TraceModel m_model;
    QAbstractItemModelTester m_tester{&m_model, QAbstractItemModelTester::FailureReportingMode::Fatal};
};

TEST_F(TraceFoldTest, BookkeepingFoldsIntoItsStepsRowByDefault)
{
    EXPECT_TRUE(m_model.foldBookkeeping());
    m_model.appendEvents(twoSteps());
    ASSERT_EQ(m_model.rowCount(), 5);
    EXPECT_EQ(m_model.eventCount(), 8);
    EXPECT_EQ(seq(0), 1);
    EXPECT_EQ(seq(1), 2);
    EXPECT_EQ(summary(1), "scripted, 188 in / 14 out tokens, 40 ms + cost $0.0008");
    EXPECT_EQ(m_model.index(1, TraceModel::Cost).data().toString(), QStringLiteral("$0.0008"));
    EXPECT_EQ(seq(2), 4);
    EXPECT_EQ(summary(2), "run_command: make") << "the bill of the next append is not the call's";
    EXPECT_EQ(seq(3), 6);
    EXPECT_EQ(summary(3), "exit 0 in 68 ms: make + cost $0.0000, checkpoint 3 changed, 1 removed");
    EXPECT_EQ(m_model.index(3, 0).data(TraceModel::RowCostMicrosRole).toLongLong(), 2);
    EXPECT_EQ(m_model.index(3, 0).data(TraceModel::CostMicrosRole).toLongLong(), 0) << "the event's own cost";
    EXPECT_EQ(m_model.index(3, 0).data(TraceModel::FoldedSeqsRole).value<QList<qint64>>(), (QList<qint64>{5, 7}));
    EXPECT_EQ(m_model.index(3, 0).data(TraceModel::FoldNoteRole).toString(),
              QStringLiteral("+ cost $0.0000, checkpoint 3 changed, 1 removed"));
    // A folded event is found in the row it folded into.
    EXPECT_EQ(m_model.rowOfSeq(3), 1);
    EXPECT_EQ(m_model.rowOfSeq(5), 3);
    EXPECT_EQ(m_model.rowOfSeq(7), 3);
    EXPECT_EQ(m_model.rowOfSeq(8), 4);
    // The details pane has the folded events' full payloads under the row's own.
    const QString details = m_model.detailsWithResult(3);
    EXPECT_TRUE(details.contains(QStringLiteral("folded into this row: checkpoint (seq 7)"))) << details.toStdString();
    EXPECT_TRUE(details.contains(QStringLiteral("\"sent_bytes\": 900"))) << details.toStdString();
}

TEST_F(TraceFoldTest, TheToggleShowsEveryEventAndBack)
{
    m_model.appendEvents(twoSteps());
    QSignalSpy reset(&m_model, &QAbstractItemModel::modelReset);
    QSignalSpy changed(&m_model, &TraceModel::foldBookkeepingChanged);
    m_model.setFoldBookkeeping(false);
    EXPECT_EQ(reset.count(), 1);
    ASSERT_EQ(changed.count(), 1);
    EXPECT_FALSE(changed.at(0).at(0).toBool());
    ASSERT_EQ(m_model.rowCount(), 8);
    EXPECT_EQ(summary(2), "model scripted, 188 in / 14 out tokens, $0.0008");
    EXPECT_EQ(summary(6), "checkpoint 2 files, 3 changed, 1 removed, 900 B sent, 5 ms");
    EXPECT_EQ(summary(1), "scripted, 188 in / 14 out tokens, 40 ms") << "no note when nothing is folded";
    EXPECT_EQ(m_model.rowOfSeq(7), 6);
    m_model.setFoldBookkeeping(false);
    EXPECT_EQ(reset.count(), 1) << "no change, no reset";
    // The property, as a view or QML would set it.
    m_model.setProperty("foldBookkeeping", true);
    EXPECT_EQ(m_model.rowCount(), 5);
    EXPECT_EQ(changed.count(), 2);
}

TEST_F(TraceFoldTest, ABillWaitsInTheRowAboveUntilItsStepsRowArrives)
{
    QList<EventRecord> events = twoSteps();
    m_model.appendEvents(events.mid(0, 5));   // up to the storage bill of seq 5
    ASSERT_EQ(m_model.rowCount(), 3);
    EXPECT_EQ(summary(2), "run_command: make + cost $0.0000") << "the live tail: shown in the row above for now";
    QSignalSpy dataChanged(&m_model, &QAbstractItemModel::dataChanged);
    m_model.appendEvents(events.mid(5));
    ASSERT_EQ(m_model.rowCount(), 5);
    EXPECT_EQ(summary(2), "run_command: make");
    EXPECT_EQ(summary(3), "exit 0 in 68 ms: make + cost $0.0000, checkpoint 3 changed, 1 removed");
    bool rowAboveRepainted = false;
    for (const auto &signal : dataChanged)
        rowAboveRepainted = rowAboveRepainted || signal.at(0).toModelIndex().row() == 2;
    EXPECT_TRUE(rowAboveRepainted);
}

TEST_F(TraceFoldTest, HistoryPagedInAboveAFoldedEventTakesItBack)
{
    const QList<EventRecord> events = twoSteps();
    m_model.setTailStart(3);
    m_model.appendEvents(events.mid(2));   // seq 3 (the model's cost) opens the window
    ASSERT_EQ(m_model.rowCount(), 3);
    EXPECT_EQ(summary(0), "run_command: make + cost $0.0008") << "at the top, with its row not here yet";
    QSignalSpy prepended(&m_model, &TraceModel::historyPrepended);
    m_model.prependHistory(events.mid(0, 2));
    ASSERT_EQ(m_model.rowCount(), 5);
    ASSERT_EQ(prepended.count(), 1);
    EXPECT_EQ(prepended.at(0).at(0).toInt(), 2) << "rows, not events";
    EXPECT_EQ(summary(1), "scripted, 188 in / 14 out tokens, 40 ms + cost $0.0008");
    EXPECT_EQ(summary(2), "run_command: make");
}

TEST_F(TraceFoldTest, TheBoundedWindowTrimsRowsAndTheirFoldedEvents)
{
    m_model.setMaxRows(5);
    m_model.appendEvents(twoSteps());   // 8 events: the first 3 go
    EXPECT_EQ(m_model.firstSeq(), 4);
    ASSERT_EQ(m_model.rowCount(), 3);
    EXPECT_EQ(seq(0), 4);
    m_model.setFoldBookkeeping(false);
    EXPECT_EQ(m_model.rowCount(), 5);
    m_model.setFoldBookkeeping(true);
    QList<EventRecord> more;
    for (qint64 s = 9; s <= 20; ++s)
        more << at(s, 500 + s, s % 2 ? "cost" : "tool.call", "{}", 1);
    m_model.appendEvents(more);
    EXPECT_EQ(m_model.eventCount(), 5);
    EXPECT_EQ(m_model.firstSeq(), 16);
    for (int row = 0; row < m_model.rowCount(); ++row)
        EXPECT_EQ(m_model.index(row, 0).data(TraceModel::KindRole).toString(), QStringLiteral("tool.call"));
}

TEST_F(TraceFoldTest, AnAgentsBytesAreEscapedInTheRow)
{
    m_model.appendEvents({at(1, 0, "tool.result", R"({"name":"run_command","command":"printf '\u001b[2J\u001b]0;x\u0007'","exit_code":0})")});
    const QString text = m_model.index(0, TraceModel::Summary).data().toString();
    EXPECT_FALSE(text.contains(QChar(0x1b)));
    EXPECT_FALSE(text.contains(QChar(0x07)));
    EXPECT_TRUE(text.contains(QStringLiteral("\\x1b[2J"))) << text.toStdString();
}

TEST_F(TraceFoldTest, ARunningCommandsOutputGrowsInItsCallsRow)
{
    // The call, then its output as the broker records it while the command runs (no result yet).
    m_model.appendEvents({
        at(1, 0, "session.created", R"({"goal":"build"})"),
        at(2, 347, "tool.call", R"({"call_id":"c1","name":"run_command","arguments":{"command":"make"}})"),
        at(3, 520, "tool.output", R"({"call_id":"c1","stream":"stdout","offset":0,"bytes":11,"text":"first line\n"})"),
    });
    ASSERT_EQ(m_model.rowCount(), 2);
    EXPECT_EQ(summary(1), "run_command: make + output 11 B: first line");
    QSignalSpy changed(&m_model, &QAbstractItemModel::dataChanged);
    m_model.appendEvents({at(4, 3520, "tool.output", R"({"call_id":"c1","stream":"stdout","offset":11,"bytes":12,"text":"second line\n"})")});
    EXPECT_EQ(m_model.rowCount(), 2) << "output is not a row of its own by default";
    EXPECT_EQ(summary(1), "run_command: make + output 23 B: second line");
    EXPECT_FALSE(changed.isEmpty()) << "the views were not told the call's row changed";
    const QString details = m_model.detailsWithResult(1);   // the details pane's text
    EXPECT_TRUE(details.contains(u"first line\n")) << details.toStdString();
    EXPECT_TRUE(details.contains(u"second line\n")) << details.toStdString();

    m_model.setFoldBookkeeping(false);
    ASSERT_EQ(m_model.rowCount(), 4);
    EXPECT_EQ(summary(2), "stdout: first line\\n");
}

// A model's answer as it streams: its text grows in the row before it (the last thing that
// happened) and the details pane shows the answer so far, the latest attempt's only; once the
// model.response arrives the deltas are that row's, whatever their times.
TEST_F(TraceFoldTest, AStreamedAnswerGrowsInTheTraceThenFoldsIntoItsResponse)
{
    m_model.appendEvents({
        at(1, 0, "session.created", R"({"goal":"build"})"),
        at(2, 400, "model.delta", R"({"after_seq":1,"attempt":1,"text":"Cut short"})"),
        at(3, 900, "model.delta", R"({"after_seq":1,"attempt":2,"supersedes":1,"text":"I will build\nthe ","text_offset":0})"),
    });
    ASSERT_EQ(m_model.rowCount(), 1);
    EXPECT_EQ(summary(0), "build + model text 17 B: the ");
    QSignalSpy changed(&m_model, &QAbstractItemModel::dataChanged);
    m_model.appendEvents({at(4, 1000, "model.delta",
                             R"({"after_seq":1,"attempt":2,"text":"project.","text_offset":17,)"
                             R"("tool_calls":[{"index":0,"offset":0,"id":"call_1","name":"run_command","arguments":"{\"comm"}]})")});
    EXPECT_FALSE(changed.isEmpty()) << "the views were not told the row grew";
    EXPECT_EQ(summary(0), "build + model text 25 B: the project.");
    QString details = m_model.detailsWithResult(0);
    EXPECT_TRUE(details.contains(u"the model's answer so far (streaming, attempt 2, seq 2 to 4)")) << details.toStdString();
    EXPECT_TRUE(details.contains(u"I will build\nthe project.\n→ run_command({\"comm")) << details.toStdString();
    EXPECT_FALSE(details.contains(u"Cut short")) << "a superseded attempt's text is shown";

    m_model.appendEvents({
        at(5, 1500, "model.response", R"({"model":"gpt","text":"I will build\nthe project.","usage":{"input_tokens":9,"output_tokens":7},"latency_ms":1100})"),
        at(6, 1500, "cost", R"({"kind":"model"})", 30),
    });
    ASSERT_EQ(m_model.rowCount(), 2);
    EXPECT_EQ(summary(0), "build") << "the deltas left the row before once their response came";
    EXPECT_EQ(seq(1), 5);
    EXPECT_EQ(m_model.index(1, 0).data(TraceModel::FoldedSeqsRole).value<QList<qint64>>(), (QList<qint64>{2, 3, 4, 6}));
    details = m_model.detailsWithResult(1);
    EXPECT_TRUE(details.contains(u"streamed in 3 model.delta event(s), seq 2 to 4")) << details.toStdString();
    EXPECT_EQ(m_model.rowOfSeq(3), 1);
}

// The first step's answer streams before the sandbox is claimed: its model.response comes behind
// the state and the claim, appended with it, and the answer moves there from the row it grew in.
// Its response may come in an append of its own after them.
TEST_F(TraceFoldTest, AnAnswerFoldsIntoItsResponseBehindTheRowsItsStepAppendedFirst)
{
    for (const bool split : {false, true}) {
        SCOPED_TRACE(split ? "the response in an append of its own" : "one append");
        TraceModel model;
        QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
        model.appendEvents({
            at(1, 0, "session.created", R"({"goal":"build"})"),
            at(2, 0, "env.decision", R"({"tier":"lite"})"),
            at(3, 100, "model.delta", R"({"after_seq":2,"attempt":1,"text":"Looking at "})"),
            at(4, 200, "model.delta", R"({"after_seq":2,"attempt":1,"text":"the project."})"),
        });
        ASSERT_EQ(model.rowCount(), 2);
        EXPECT_TRUE(model.index(1, 0).data(TraceModel::FoldNoteRole).toString().contains(u"model text 23 B: Looking at the project."));
        QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
        const QList<EventRecord> step{
            at(5, 300, "state.changed", R"({"status":"running"})"),
            at(6, 300, "sandbox.claimed", R"({"pool":"local","sandbox_id":"sb-1","tier":"lite"})"),
            at(7, 300, "model.response", R"({"model":"gpt","text":"Looking at the project.","latency_ms":250})"),
            at(8, 300, "cost", R"({"kind":"model"})", 30),
        };
        if (split) {
            model.appendEvents(step.mid(0, 2));
            model.appendEvents(step.mid(2));
        } else {
            model.appendEvents(step);
        }
        ASSERT_EQ(model.rowCount(), 5);
        EXPECT_TRUE(model.index(1, 0).data(TraceModel::FoldNoteRole).toString().isEmpty())
            << "the answer stayed in the row it grew in: " << model.index(1, 0).data(TraceModel::FoldNoteRole).toString().toStdString();
        EXPECT_FALSE(changed.isEmpty()) << "the views were not told the row it grew in changed";
        EXPECT_EQ(model.index(4, 0).data(TraceModel::SeqRole).toLongLong(), 7);
        EXPECT_EQ(model.index(4, 0).data(TraceModel::FoldedSeqsRole).value<QList<qint64>>(), (QList<qint64>{3, 4, 8}));
        EXPECT_TRUE(model.detailsWithResult(4).contains(u"streamed in 2 model.delta event(s), seq 3 to 4"))
            << model.detailsWithResult(4).toStdString();
        EXPECT_EQ(model.rowOfSeq(3), 4);
        EXPECT_EQ(model.rowOfSeq(5), 2);
    }
}

} // namespace
} // namespace paddock::console
