#include "model_test_support.h"

#include "models/session_filter_proxy.h"
#include "models/session_group_model.h"
#include "models/session_table_model.h"

#include <QAbstractItemModelTester>
#include <QRandomGenerator>
#include <QSignalSpy>
#include <gtest/gtest.h>

namespace paddock::console {
namespace {

using test::session;

class SessionGroupModelTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_proxy.setSourceModel(&m_table);
        m_groups.setSourceModel(&m_proxy);
    }

    QStringList idsIn(SessionStatus status) const
    {
        const QModelIndex group = m_groups.groupIndex(status);
        QStringList out;
        for (int row = 0; row < m_groups.rowCount(group); ++row)
            out << m_groups.index(row, 0, group).data(SessionTableModel::SessionIdRole).toString();
        return out;
    }

    // Every session of the source is in exactly the group of its status, in source order.
    void expectConsistent() const
    {
        int total = 0;
        for (SessionStatus status : SessionGroupModel::groupOrder()) {
            QStringList expected;
            for (int row = 0; row < m_proxy.rowCount(); ++row) {
                const QModelIndex index = m_proxy.index(row, 0);
                if (index.data(SessionTableModel::StatusRole).toInt() == static_cast<int>(status))
                    expected << index.data(SessionTableModel::SessionIdRole).toString();
            }
            ASSERT_EQ(idsIn(status), expected) << qPrintable(statusName(status));
            total += static_cast<int>(expected.size());
        }
        ASSERT_EQ(total, m_proxy.rowCount());
    }

    SessionTableModel m_table;
    SessionFilterProxy m_proxy;
    SessionGroupModel m_groups;
    QAbstractItemModelTester m_tester{&m_groups, QAbstractItemModelTester::FailureReportingMode::Fatal};
};

TEST_F(SessionGroupModelTest, GroupsByStatusWithCounts)
{
    m_table.applyChanges({session(QStringLiteral("a"), SessionStatus::Running),
                          session(QStringLiteral("b"), SessionStatus::Failed),
                          session(QStringLiteral("c"), SessionStatus::Running)});
    EXPECT_EQ(m_groups.rowCount(), 8);
    const QModelIndex running = m_groups.groupIndex(SessionStatus::Running);
    EXPECT_EQ(running.row(), 0);
    EXPECT_EQ(running.data().toString(), QStringLiteral("Running (2)"));
    EXPECT_TRUE(running.data(SessionGroupModel::IsGroupRole).toBool());
    EXPECT_EQ(running.data(SessionGroupModel::GroupCountRole).toInt(), 2);
    EXPECT_EQ(idsIn(SessionStatus::Running), (QStringList{QStringLiteral("a"), QStringLiteral("c")}));
    const QModelIndex child = m_groups.index(1, SessionTableModel::Cost, running);
    EXPECT_FALSE(child.data(SessionGroupModel::IsGroupRole).toBool());
    EXPECT_EQ(child.data().toString(), QStringLiteral("$0.0000"));
    EXPECT_EQ(m_groups.mapToSource(child).data(SessionTableModel::SessionIdRole).toString(), QStringLiteral("c"));
    EXPECT_EQ(m_groups.indexOfSession(QStringLiteral("b")).parent(), m_groups.groupIndex(SessionStatus::Failed));
    EXPECT_EQ(m_groups.headerData(SessionTableModel::Goal, Qt::Horizontal).toString(), QStringLiteral("Goal"));
}

TEST_F(SessionGroupModelTest, ASessionMovesBetweenGroupsWhenItsStatusChanges)
{
    m_table.applyChanges({session(QStringLiteral("a"), SessionStatus::Queued),
                          session(QStringLiteral("b"), SessionStatus::Queued)});
    QSignalSpy removed(&m_groups, &QAbstractItemModel::rowsRemoved);
    QSignalSpy inserted(&m_groups, &QAbstractItemModel::rowsInserted);
    m_table.applyChanges({session(QStringLiteral("a"), SessionStatus::Running, 2)});
    EXPECT_EQ(idsIn(SessionStatus::Queued), QStringList{QStringLiteral("b")});
    EXPECT_EQ(idsIn(SessionStatus::Running), QStringList{QStringLiteral("a")});
    EXPECT_EQ(removed.count(), 1);
    EXPECT_EQ(inserted.count(), 1);
    // A change that keeps the status is a dataChanged only.
    m_table.applyChanges({session(QStringLiteral("a"), SessionStatus::Running, 3, 500)});
    EXPECT_EQ(removed.count(), 1);
    EXPECT_EQ(m_groups.indexOfSession(QStringLiteral("a"), SessionTableModel::Cost).data().toString(),
              QStringLiteral("$0.0005"));
}

TEST_F(SessionGroupModelTest, FilterAndSortOfTheProxyApplyInsideGroups)
{
    QList<SessionInfo> batch;
    for (int i = 0; i < 6; ++i)
        batch << session(QStringLiteral("s%1").arg(i), SessionStatus::Running, 1, (6 - i) * 10);
    m_table.applyChanges(batch);
    m_proxy.sort(SessionTableModel::Cost, Qt::AscendingOrder);
    EXPECT_EQ(idsIn(SessionStatus::Running).first(), QStringLiteral("s5"));
    m_proxy.setSearchText(QStringLiteral("s1"));
    EXPECT_EQ(idsIn(SessionStatus::Running), QStringList{QStringLiteral("s1")});
    m_proxy.clearFilters();
    expectConsistent();
}

TEST_F(SessionGroupModelTest, StaysConsistentUnderRandomBatches)
{
    QRandomGenerator random(42);
    const QList<SessionStatus> statuses = SessionGroupModel::groupOrder();
    QHash<QString, qint64> seqs;
    m_proxy.sort(SessionTableModel::Cost, Qt::DescendingOrder);
    for (int round = 0; round < 200; ++round) {
        QList<SessionInfo> batch;
        const int n = random.bounded(1, 30);
        for (int i = 0; i < n; ++i) {
            const QString id = QStringLiteral("s%1").arg(random.bounded(120));
            const qint64 seq = ++seqs[id];
            batch << session(id, statuses.at(random.bounded(static_cast<int>(statuses.size()))), seq,
                             random.bounded(1000));
        }
        m_table.applyChanges(batch);
        if (round % 25 == 0)
            m_proxy.setSearchText(round % 50 == 0 ? QStringLiteral("s1") : QString());
        if (round % 40 == 0)
            m_proxy.setStatusFilter(round % 80 == 0 ? QSet<SessionStatus>{SessionStatus::Running, SessionStatus::Failed}
                                                    : QSet<SessionStatus>{});
        if (round % 30 == 0)
            m_proxy.sort(round % 60 == 0 ? SessionTableModel::Id : SessionTableModel::Cost);
        ASSERT_NO_FATAL_FAILURE(expectConsistent()) << "round " << round;
    }
}

TEST_F(SessionGroupModelTest, SourceResetAndDirectTable)
{
    m_table.applyChanges({session(QStringLiteral("a"), SessionStatus::Paused)});
    m_table.clear();
    EXPECT_EQ(m_groups.rowCount(m_groups.groupIndex(SessionStatus::Paused)), 0);
    SessionGroupModel direct;
    QAbstractItemModelTester tester(&direct, QAbstractItemModelTester::FailureReportingMode::Fatal);
    direct.setSourceModel(&m_table);
    m_table.applyChanges({session(QStringLiteral("b"), SessionStatus::Paused)});
    EXPECT_EQ(direct.rowCount(direct.groupIndex(SessionStatus::Paused)), 1);
}

} // namespace
} // namespace paddock::console
