#include "model_test_support.h"

#include "models/session_filter_proxy.h"
#include "models/session_table_model.h"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <gtest/gtest.h>

namespace paddock::console {
namespace {

using test::session;

TEST(SessionTableModelTest, InsertsABatchWithOneInsertAndUpdatesInPlace)
{
    SessionTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);

    model.applyChanges({session(QStringLiteral("s1"), SessionStatus::Queued),
                        session(QStringLiteral("s2"), SessionStatus::Running),
                        session(QStringLiteral("s3"), SessionStatus::Running)});
    ASSERT_EQ(model.rowCount(), 3);
    EXPECT_EQ(inserted.count(), 1);
    EXPECT_EQ(model.rowOf(QStringLiteral("s2")), 1);
    EXPECT_EQ(model.rowOf(QStringLiteral("nope")), -1);

    // An update and a new one in the same batch; the new id twice collapses to one row.
    model.applyChanges({session(QStringLiteral("s2"), SessionStatus::Succeeded, 5),
                        session(QStringLiteral("s4"), SessionStatus::Queued, 1),
                        session(QStringLiteral("s4"), SessionStatus::Running, 2)});
    EXPECT_EQ(model.rowCount(), 4);
    EXPECT_EQ(inserted.count(), 2);
    EXPECT_EQ(changed.count(), 1);
    EXPECT_EQ(model.sessionAt(1).status, SessionStatus::Succeeded);
    EXPECT_EQ(model.sessionAt(3).status, SessionStatus::Running);

    // An older state (by lastSeq) than what we have is ignored.
    model.applyChanges({session(QStringLiteral("s2"), SessionStatus::Running, 4)});
    EXPECT_EQ(model.sessionAt(1).status, SessionStatus::Succeeded);
    EXPECT_EQ(changed.count(), 1);
}

TEST(SessionTableModelTest, FormatsLazilyAndGivesRawValuesForSorting)
{
    SessionTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    SessionInfo s = session(QStringLiteral("s1"), SessionStatus::Failed, 3, 12'300);
    s.statusReason = QStringLiteral("three model errors in a row");
    s.steps = 7;
    model.applyChanges({s});

    auto at = [&](int column, int role = Qt::DisplayRole) { return model.index(0, column).data(role); };
    EXPECT_EQ(at(SessionTableModel::Cost).toString(), QStringLiteral("$0.0123"));
    EXPECT_EQ(at(SessionTableModel::Duration).toString(), QStringLiteral("1m 05s"));
    EXPECT_EQ(at(SessionTableModel::Status).toString(), QStringLiteral("Failed"));
    EXPECT_EQ(at(SessionTableModel::Steps).toString(), QStringLiteral("7"));
    EXPECT_EQ(at(SessionTableModel::Cost, SessionTableModel::SortRole).toLongLong(), 12'300);
    EXPECT_EQ(at(SessionTableModel::Duration, SessionTableModel::SortRole).toLongLong(), 65'000);
    EXPECT_EQ(at(SessionTableModel::Goal, SessionTableModel::SessionIdRole).toString(), QStringLiteral("s1"));
    EXPECT_EQ(at(0, SessionTableModel::StatusRole).toInt(), static_cast<int>(SessionStatus::Failed));
    EXPECT_EQ(at(0, SessionTableModel::SessionInfoRole).value<SessionInfo>().steps, 7);
    EXPECT_TRUE(at(0, Qt::ToolTipRole).toString().contains(QStringLiteral("three model errors")));

    // A running session's duration runs on the clock.
    qint64 now = s.createdUnixMs + 3'000;
    model.setClock([&] { return now; });
    model.applyChanges({session(QStringLiteral("s2"), SessionStatus::Running)});
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    now += 60'000;
    model.refreshDurations();
    EXPECT_EQ(changed.count(), 1);
    EXPECT_EQ(model.index(1, SessionTableModel::Duration).data().toString(), QStringLiteral("1m 03s"));
}

TEST(SessionTableModelTest, StaleIsARoleAndAProperty)
{
    SessionTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.applyChanges({session(QStringLiteral("s1"), SessionStatus::Running)});
    QSignalSpy stale(&model, &SessionTableModel::staleChanged);
    model.setStale(true);
    model.setStale(true);
    EXPECT_EQ(stale.count(), 1);
    EXPECT_TRUE(model.index(0, 0).data(SessionTableModel::StaleRole).toBool());
    EXPECT_TRUE(model.property("stale").toBool());
    model.clear();
    EXPECT_EQ(model.rowCount(), 0);
}

TEST(SessionTableModelTest, ManyScatteredUpdatesAreOneRange)
{
    SessionTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    QList<SessionInfo> all;
    for (int i = 0; i < 100; ++i)
        all.append(session(QStringLiteral("s%1").arg(i), SessionStatus::Running));
    model.applyChanges(all);
    QList<SessionInfo> every3rd;
    for (int i = 0; i < 100; i += 3)
        every3rd.append(session(QStringLiteral("s%1").arg(i), SessionStatus::Succeeded, 2));
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.applyChanges(every3rd);
    EXPECT_EQ(changed.count(), 1);
}

class SessionFilterProxyTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_proxy.setSourceModel(&m_table);
        SessionInfo a = session(QStringLiteral("alpha-1"), SessionStatus::Running, 1, 300);
        a.goal = QStringLiteral("Fix the flaky build");
        SessionInfo b = session(QStringLiteral("beta-2"), SessionStatus::Failed, 1, 100);
        b.agent = QStringLiteral("reviewer");
        SessionInfo c = session(QStringLiteral("gamma-3"), SessionStatus::Queued, 1, 200);
        c.playbook = QStringLiteral("bulk-rename");
        m_table.applyChanges({a, b, c});
    }

    QStringList ids() const
    {
        QStringList out;
        for (int row = 0; row < m_proxy.rowCount(); ++row)
            out << m_proxy.index(row, 0).data(SessionTableModel::SessionIdRole).toString();
        return out;
    }

    SessionTableModel m_table;
    SessionFilterProxy m_proxy;
    QAbstractItemModelTester m_tester{&m_proxy, QAbstractItemModelTester::FailureReportingMode::Fatal};
};

TEST_F(SessionFilterProxyTest, SearchesIdGoalAgentAndPlaybook)
{
    m_proxy.setSearchText(QStringLiteral("FLAKY"));
    EXPECT_EQ(ids(), QStringList{QStringLiteral("alpha-1")});
    m_proxy.setSearchText(QStringLiteral("reviewer"));
    EXPECT_EQ(ids(), QStringList{QStringLiteral("beta-2")});
    m_proxy.setSearchText(QStringLiteral("bulk gamma"));
    EXPECT_EQ(ids(), QStringList{QStringLiteral("gamma-3")});
    m_proxy.setSearchText(QStringLiteral("bulk alpha"));
    EXPECT_TRUE(ids().isEmpty());
    m_proxy.clearFilters();
    EXPECT_EQ(ids().size(), 3);
}

TEST_F(SessionFilterProxyTest, FiltersByStatusAndFollowsUpdates)
{
    m_proxy.setStatusFilter({SessionStatus::Running, SessionStatus::Queued});
    EXPECT_EQ(ids().size(), 2);
    m_table.applyChanges({session(QStringLiteral("alpha-1"), SessionStatus::Succeeded, 9)});
    EXPECT_EQ(ids(), QStringList{QStringLiteral("gamma-3")});
    m_table.applyChanges({session(QStringLiteral("delta-4"), SessionStatus::Running)});
    EXPECT_EQ(ids().size(), 2);
}

TEST_F(SessionFilterProxyTest, SortsByRawValues)
{
    m_proxy.sort(SessionTableModel::Cost, Qt::AscendingOrder);
    EXPECT_EQ(ids(), (QStringList{QStringLiteral("beta-2"), QStringLiteral("gamma-3"), QStringLiteral("alpha-1")}));
    m_table.applyChanges({session(QStringLiteral("beta-2"), SessionStatus::Failed, 5, 1'000)});
    EXPECT_EQ(ids().last(), QStringLiteral("beta-2"));
    m_proxy.sort(SessionTableModel::Status, Qt::AscendingOrder);
    EXPECT_EQ(ids().first(), QStringLiteral("alpha-1")) << "running sorts before queued and failed";
}

} // namespace
} // namespace paddock::console
