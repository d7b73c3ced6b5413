#include "models/pools_model.h"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <gtest/gtest.h>

namespace paddock::console {
namespace {

PoolInfo pool(const QString &name, bool healthy, int warm)
{
    PoolInfo p;
    p.name = name;
    p.endpoint = QStringLiteral("unix:/run/") + name;
    p.healthy = healthy;
    p.local = name == QStringLiteral("local");
    if (!healthy)
        p.error = QStringLiteral("connection refused");
    p.tiers = {TierInfo{QStringLiteral("lite"), QStringLiteral("bwrap"), warm, 1, 8, 0.875, 2},
               TierInfo{QStringLiteral("standard"), QStringLiteral("runsc"), 1, 0, 4, 0.5, 0}};
    return p;
}

TEST(PoolsModelTest, PoolsWithTheirTiers)
{
    PoolsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setPools({pool(QStringLiteral("local"), true, 3), pool(QStringLiteral("far"), false, 0)}, true);
    ASSERT_EQ(model.rowCount(), 2);
    EXPECT_TRUE(model.localExecution());
    const QModelIndex local = model.index(0, PoolsModel::Name);
    EXPECT_EQ(model.rowCount(local), 2);
    EXPECT_EQ(model.index(0, PoolsModel::Warm).data().toInt(), 4);
    EXPECT_EQ(model.index(0, PoolsModel::Max).data().toInt(), 12);
    EXPECT_EQ(model.index(1, PoolsModel::Health).data().toString(), QStringLiteral("unreachable: connection refused"));
    EXPECT_TRUE(model.index(0, 0).data(PoolsModel::IsPoolRole).toBool());
    const QModelIndex lite = model.index(0, PoolsModel::HitRate, local);
    EXPECT_EQ(lite.data().toString(), QStringLiteral("88%"));
    EXPECT_EQ(lite.data(PoolsModel::TierNameRole).toString(), QStringLiteral("lite"));
    EXPECT_EQ(lite.data(PoolsModel::PoolNameRole).toString(), QStringLiteral("local"));
    EXPECT_FALSE(lite.data(PoolsModel::IsPoolRole).toBool());
    EXPECT_EQ(model.index(1, 0).data(PoolsModel::PoolInfoRole).value<PoolInfo>().name, QStringLiteral("far"));
}

TEST(PoolsModelTest, SameShapeUpdatesInPlaceOtherwiseResets)
{
    PoolsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setPools({pool(QStringLiteral("local"), true, 3)}, true);
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    model.setPools({pool(QStringLiteral("local"), true, 1)}, true);
    EXPECT_EQ(reset.count(), 0);
    EXPECT_GE(changed.count(), 1);
    EXPECT_EQ(model.index(0, PoolsModel::Warm, model.index(0, 0)).data().toInt(), 1);
    model.setPools({pool(QStringLiteral("local"), true, 1), pool(QStringLiteral("b"), true, 1)}, false);
    EXPECT_EQ(reset.count(), 1);
    model.setStale(true);
    EXPECT_TRUE(model.index(0, 0).data(PoolsModel::StaleRole).toBool());
    model.setPools({}, false);
    EXPECT_EQ(model.rowCount(), 0);
}

} // namespace
} // namespace paddock::console
