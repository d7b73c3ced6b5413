#include "model_test_support.h"

#include "models/trace_model.h"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <gtest/gtest.h>

namespace paddock::console {
namespace {

using test::event;
using test::events;

class TraceModelTest : public ::testing::Test {
protected:
    QString display(int row, int column) const { return m_model.index(row, column).data().toString(); }
    std::string summary(int row) const { return display(row, TraceModel::Summary).toStdString(); }

    TraceModel m_model;
    QAbstractItemModelTester m_tester{&m_model, QAbstractItemModelTester::FailureReportingMode::Fatal};
};

TEST_F(TraceModelTest, AppendsEachBatchWithOneInsertAndDropsRepeats)
{
    QSignalSpy inserted(&m_model, &QAbstractItemModel::rowsInserted);
    QSignalSpy appended(&m_model, &TraceModel::eventsAppended);
    m_model.appendEvents(events(1, 2500));
    m_model.appendEvents(events(2001, 5000));   // overlaps: only 2501.. are new
    EXPECT_EQ(m_model.rowCount(), 5000);
    EXPECT_EQ(inserted.count(), 2);
    EXPECT_EQ(appended.at(1).at(0).toInt(), 2500);
    EXPECT_EQ(m_model.firstSeq(), 1);
    EXPECT_EQ(m_model.lastSeq(), 5000);
    EXPECT_EQ(m_model.index(4999, TraceModel::Seq).data().toLongLong(), 5000);
    m_model.appendEvents(events(10, 20));
    EXPECT_EQ(inserted.count(), 2) << "a batch of repeats inserts nothing";
}

TEST_F(TraceModelTest, AGapStopsTheBatchAndIsReported)
{
    QSignalSpy gap(&m_model, &TraceModel::gapDetected);
    m_model.appendEvents(events(1, 10));
    QList<EventRecord> batch = events(11, 15);
    batch << events(18, 20);
    m_model.appendEvents(batch);
    EXPECT_EQ(m_model.lastSeq(), 15);
    ASSERT_EQ(gap.count(), 1);
    EXPECT_EQ(gap.at(0).at(0).toLongLong(), 16);
}

TEST_F(TraceModelTest, TheTailStartIsWhereTheFirstEventMustBe)
{
    QSignalSpy gap(&m_model, &TraceModel::gapDetected);
    m_model.setSession(QStringLiteral("s1"));
    m_model.setTailStart(100);
    EXPECT_TRUE(m_model.canFetchMore({}));
    m_model.appendEvents(events(101, 110));
    EXPECT_EQ(m_model.rowCount(), 0);
    EXPECT_EQ(gap.count(), 1);
    m_model.appendEvents(events(95, 110));
    EXPECT_EQ(m_model.firstSeq(), 100);
    EXPECT_EQ(m_model.rowCount(), 11);
}

// QAbstractItemModelTester itself calls fetchMore() after every change, as a view would, so the
// tests ask for the request that is in flight rather than counting them.
TEST_F(TraceModelTest, PagesHistoryInAtTheTop)
{
    QSignalSpy needed(&m_model, &TraceModel::historyNeeded);
    QSignalSpy prepended(&m_model, &TraceModel::historyPrepended);
    auto request = [&] {
        if (!m_model.historyPending())
            m_model.fetchMore({});
        EXPECT_TRUE(m_model.historyPending());
        return std::pair(needed.last().at(0).toLongLong(), needed.last().at(1).toInt());
    };
    m_model.setHistoryPageSize(1000);
    m_model.setTailStart(2401);
    m_model.appendEvents(events(2401, 3000));

    EXPECT_EQ(request(), std::pair(qint64(1401), 1000));
    EXPECT_FALSE(m_model.canFetchMore({})) << "one page in flight at a time";
    const auto requests = needed.count();
    m_model.fetchMore({});
    EXPECT_EQ(needed.count(), requests);

    // Live events keep arriving while the page is in flight.
    m_model.appendEvents(events(3001, 3100));
    m_model.prependHistory(events(1401, 2400));
    EXPECT_EQ(m_model.firstSeq(), 1401);
    EXPECT_EQ(m_model.rowCount(), 3100 - 1400);
    EXPECT_EQ(prepended.count(), 1);
    EXPECT_EQ(m_model.index(0, TraceModel::Seq).data().toLongLong(), 1401);

    // A page overlapping the top: only the part right above the top joins.
    EXPECT_EQ(request(), std::pair(qint64(401), 1000));
    m_model.prependHistory(events(300, 1500));
    EXPECT_EQ(m_model.firstSeq(), 300);
    EXPECT_EQ(request(), std::pair(qint64(1), 299));
    m_model.prependHistory({});   // a failed fetch: nothing, but the next one may go
    EXPECT_EQ(request(), std::pair(qint64(1), 299));
    m_model.prependHistory(events(1, 299));
    EXPECT_FALSE(m_model.canFetchMore({}));
    for (int row = 0; row < m_model.rowCount(); row += 97)
        ASSERT_EQ(m_model.index(row, 0).data(TraceModel::SeqRole).toLongLong(), row + 1);
}

TEST_F(TraceModelTest, TheLiveWindowIsBounded)
{
    m_model.setMaxRows(1000);
    m_model.appendEvents(events(1, 800));
    QSignalSpy removed(&m_model, &QAbstractItemModel::rowsRemoved);
    m_model.appendEvents(events(801, 1300));
    EXPECT_EQ(m_model.rowCount(), 1000);
    EXPECT_EQ(m_model.firstSeq(), 301);
    EXPECT_EQ(removed.count(), 1);
    m_model.prependHistory({});
    EXPECT_FALSE(m_model.canFetchMore({})) << "full: no room for history";
    m_model.appendEvents(events(1301, 5000));   // more than the window in one batch
    EXPECT_EQ(m_model.rowCount(), 1000);
    EXPECT_EQ(m_model.firstSeq(), 4001);
    EXPECT_EQ(m_model.lastSeq(), 5000);
    m_model.prependHistory({});
    m_model.setMaxRows(2000);
    EXPECT_TRUE(m_model.canFetchMore({}));
}

TEST_F(TraceModelTest, SummarisesEachKindInOneLine)
{
    m_model.appendEvents({
        event(1, QStringLiteral("session.created"), R"({"goal":"build it","playbook":"demo","tier":"lite"})"),
        event(2, QStringLiteral("sandbox.claimed"),
              R"({"pool":"local","sandbox_id":"sb-1","tier":"lite","warm":true,"claim_ms":1.4})"),
        event(3, QStringLiteral("model.response"),
              R"({"model":"scripted","text":"","tool_calls":[{"id":"c1","name":"run_command","arguments":{"command":"make"}}],"usage":{"input_tokens":1234,"output_tokens":56},"latency_ms":850})",
              1200),
        event(4, QStringLiteral("tool.call"), R"({"call_id":"c1","name":"run_command","arguments":{"command":"make -j2"}})"),
        event(5, QStringLiteral("tool.result"),
              R"({"call_id":"c1","name":"run_command","command":"make -j2","exit_code":2,"stdout":"cc a.c\n","stderr":"error: boom\n","duration_ms":1200})"),
        event(6, QStringLiteral("state.changed"), R"({"status":"failed","reason":"three model errors"})"),
        event(7, QStringLiteral("tool.call"), R"({"call_id":"c2","name":"write_file","arguments":"{\"path\":\"a.txt\",\"content\":\"x\"}"})"),
        event(8, QStringLiteral("custom.kind"), R"({"a":1,
"b":"two"})"),
        event(9, QStringLiteral("tool.result"), R"({"call_id":"c3","name":"finish","ok":true})"),
    });
    // The words are paddock_trace's (tests/unit/trace has one test per kind); here, that the model
    // shows them and the figures beside them.
    EXPECT_EQ(summary(0), "build it; playbook demo, tier lite");
    EXPECT_EQ(summary(1), "sb-1 (lite) from pool local, warm, claim 1.4 ms");
    EXPECT_EQ(summary(2), "scripted, 1234 in / 56 out tokens, 850 ms, 1 tool call");
    EXPECT_EQ(m_model.index(2, 0).data(TraceModel::TokensRole).toLongLong(), 1290);
    EXPECT_EQ(m_model.index(2, 0).data(TraceModel::LatencyMsRole).toLongLong(), 850);
    EXPECT_EQ(display(2, TraceModel::Tokens), QStringLiteral("1290"));
    EXPECT_EQ(display(2, TraceModel::Cost), QStringLiteral("$0.0012"));
    EXPECT_EQ(summary(3), "run_command: make -j2");
    EXPECT_EQ(summary(4), "exit 2 in 1.2 s: make -j2");
    EXPECT_TRUE(m_model.index(4, 0).data(TraceModel::IsErrorRole).toBool());
    EXPECT_TRUE(m_model.index(4, 0).data(TraceModel::HasDetailsRole).toBool());
    const QString details = m_model.index(4, 0).data(TraceModel::DetailsRole).toString();
    EXPECT_TRUE(details.contains(QStringLiteral("--- stdout ---\ncc a.c"))) << qPrintable(details);
    EXPECT_TRUE(details.contains(QStringLiteral("--- stderr ---\nerror: boom"))) << qPrintable(details);
    EXPECT_EQ(summary(5), "failed: three model errors");
    EXPECT_EQ(summary(6), "write_file: a.txt (1 B)");
    EXPECT_EQ(summary(7), "a=1 b=two");
    EXPECT_EQ(display(7, TraceModel::Kind), QStringLiteral("custom.kind"));
    EXPECT_EQ(summary(8), "finish ok");

    const EventRecord record = m_model.index(2, 0).data(TraceModel::EventRecordRole).value<EventRecord>();
    EXPECT_EQ(record.seq, 3);
    EXPECT_EQ(record.costMicros, 1200);
    EXPECT_EQ(record.kind, QStringLiteral("model.response"));
    EXPECT_EQ(m_model.rowOfSeq(3), 2);
    EXPECT_EQ(m_model.rowOfSeq(99), -1);
}

TEST_F(TraceModelTest, SessionChangeResets)
{
    m_model.appendEvents(events(1, 10));
    QSignalSpy reset(&m_model, &QAbstractItemModel::modelReset);
    m_model.setSession(QStringLiteral("other"));
    EXPECT_EQ(reset.count(), 1);
    EXPECT_EQ(m_model.rowCount(), 0);
    EXPECT_EQ(m_model.sessionId(), QStringLiteral("other"));
    EXPECT_FALSE(m_model.canFetchMore({}));
}

} // namespace
} // namespace paddock::console
