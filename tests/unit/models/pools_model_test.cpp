#include "models/pools_model.h"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <gtest/gtest.h>

#include <limits>

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

// A pool the broker gave up on, and the sessions that left it with their workspaces.
TEST(PoolsModelTest, ALostPoolSaysWhichSessionsLeftIt)
{
    PoolsModel model;
    PoolInfo east = pool(QStringLiteral("east"), false, 0);
    east.lost = true;
    east.sessionsMovedAway = 2;
    east.movedSessionIds = {QStringLiteral("s-1"), QStringLiteral("s-7")};
    model.setPools({east, pool(QStringLiteral("west"), true, 2)}, false);
    EXPECT_EQ(model.index(0, PoolsModel::Health).data().toString(),
              QStringLiteral("lost · 2 session(s) moved away: connection refused"));
    const QString tip = model.index(0, PoolsModel::Health).data(Qt::ToolTipRole).toString();
    EXPECT_TRUE(tip.contains(QStringLiteral("s-1, s-7"))) << tip.toStdString();
    EXPECT_EQ(model.index(1, PoolsModel::Health).data().toString(), QStringLiteral("healthy"));
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

namespace paddock::console {
namespace {

TierInfo tierWithHistogram()
{
    TierInfo tier{QStringLiteral("lite"), QStringLiteral("bwrap"), 4, 2, 8, 0.9, 1};
    tier.latencyBucketsUs = {250, 500, 1000, 1'000'000, std::numeric_limits<qint64>::max()};
    tier.latencyCounts = {50, 40, 8, 1, 1};
    tier.refillPerSecond = 2.5;
    tier.pricePerHourUsd = 0.02;
    return tier;
}

TEST(PoolsModelTest, LatencyPercentilesFromTheHistogram)
{
    TierInfo tier = tierWithHistogram();
    EXPECT_EQ(latencyPercentileUs(tier, 0.5), 250);
    EXPECT_EQ(latencyPercentileUs(tier, 0.9), 500);
    EXPECT_EQ(latencyPercentileUs(tier, 0.98), 1000);
    bool overflow = false;
    EXPECT_EQ(latencyPercentileUs(tier, 1.0, &overflow), 1'000'000);   // the open bucket: "more than 1 s"
    EXPECT_TRUE(overflow);
    EXPECT_EQ(latencyBucketLabel(tier, 0), QStringLiteral("≤ 250 µs"));
    EXPECT_EQ(latencyBucketLabel(tier, 4), QStringLiteral("> 1.0 s"));
    tier.latencyCounts = {0, 0, 0, 0, 0};
    EXPECT_EQ(latencyPercentileUs(tier, 0.5), -1);
}

TEST(PoolsModelTest, RefillIdleCostAndHealthHistory)
{
    PoolsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    PoolInfo p;
    p.name = QStringLiteral("local");
    p.healthy = true;
    p.tiers = {tierWithHistogram()};
    model.setPools({p}, true, 1000);
    const QModelIndex pool = model.index(0, 0);
    const QModelIndex lite = model.index(0, PoolsModel::IdleCost, pool);
    EXPECT_EQ(lite.data().toString(), QStringLiteral("$0.080/h"));   // 4 warm x $0.02
    EXPECT_DOUBLE_EQ(model.index(0, 0).data(PoolsModel::IdleCostRole).toDouble(), 0.08);
    EXPECT_EQ(model.index(0, PoolsModel::RefillRate, pool).data().toString(), QStringLiteral("2.5/s"));
    EXPECT_EQ(model.index(0, PoolsModel::ClaimLatency, pool).data().toString(), QStringLiteral("p50 ≤250 µs · p99 ≤1.0 s"));
    EXPECT_EQ(model.index(0, 0, pool).data(PoolsModel::TierInfoRole).value<TierInfo>().latencyCounts.size(), 5);

    p.healthy = false;
    model.setPools({p}, true, 6000);
    p.healthy = true;
    p.tiers[0].warm = 1;
    model.setPools({p}, true, 11000);
    const QList<PoolHealthPoint> history = model.healthHistory(QStringLiteral("local"));
    ASSERT_EQ(history.size(), 3);
    EXPECT_TRUE(history.at(0).healthy);
    EXPECT_FALSE(history.at(1).healthy);
    EXPECT_EQ(history.at(2).warm, 1);
    EXPECT_EQ(history.at(2).timeUnixMs, 11000);

    // The broker's own history wins over the console's polls.
    p.history = {{500, false, 0, 0}};
    model.setPools({p}, true, 16000);
    ASSERT_EQ(model.healthHistory(QStringLiteral("local")).size(), 1);
    EXPECT_EQ(model.healthHistory(QStringLiteral("local")).first().timeUnixMs, 500);
}

TEST(PoolsModelTest, EachTierSaysWhatItPromisesAboutItsHost)
{
    PoolsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    PoolInfo p = pool(QStringLiteral("exec-1"), true, 2);
    p.tiers[0].isolationIdentity = QStringLiteral("own host ids (uids and gids 1000000000-1067108863, 65536 per sandbox); "
                                                  "sandbox root is never host root");
    p.tiers[0].isolationSeccomp = QStringLiteral("on (EPERM for 9 groups and 3 argument rules)");
    p.tiers[0].isolationEtc = QStringLiteral("minimal (16 entries)");
    p.tiers[1].isolationIdentity = QStringLiteral("the pool's user (uid 1000), capabilities dropped");
    p.tiers[1].isolationSeccomp = QStringLiteral("off");
    p.tiers[1].isolationEtc = QStringLiteral("empty");
    model.setPools({p, pool(QStringLiteral("old"), true, 1)}, false);
    const QModelIndex exec = model.index(0, 0);
    const QModelIndex lite = model.index(0, PoolsModel::Isolation, exec);
    EXPECT_EQ(lite.data().toString(), QStringLiteral("own ids, seccomp, minimal /etc"));
    EXPECT_NE(lite.data(Qt::ToolTipRole).toString().indexOf(QStringLiteral("Identity: own host ids (uids and gids 1000000000")), -1);
    EXPECT_EQ(model.index(1, PoolsModel::Isolation, exec).data().toString(), QStringLiteral("pool's user, NO seccomp, empty /etc"));
    EXPECT_EQ(model.index(0, PoolsModel::Isolation, model.index(1, 0)).data().toString(), QStringLiteral("not reported"));
    EXPECT_EQ(model.headerData(PoolsModel::Isolation, Qt::Horizontal).toString(), QStringLiteral("Isolation"));
}

CheckpointStorage storage()
{
    CheckpointStorage s;
    s.store = QStringLiteral("broker");
    s.where = QStringLiteral("the broker's checkpoint directory /var/lib/paddock/checkpoints");
    s.retentionHours = 168;
    s.chunks = 3401;
    s.manifests = 212;
    s.bytesStored = 1288490188;
    s.logicalBytes = 6227702579;
    s.dedupRatio = 4.84;
    s.freeableBytes = 310LL << 20;
    s.freeableChunks = 41;
    s.freeableManifests = 30;
    return s;
}

TEST(PoolsModelTest, TheCheckpointStoreFiguresInWords)
{
    const StorageCardText text = storageCardText(storage());
    EXPECT_EQ(text.where, QStringLiteral("the broker's checkpoint directory /var/lib/paddock/checkpoints"));
    EXPECT_EQ(text.figures, QStringLiteral("1.2 GiB stored · 5.8 GiB of workspaces · dedup 4.8x · collection would free 310 MiB"));
    EXPECT_EQ(text.detail, QStringLiteral("3,401 chunks and 212 manifests · 41 chunks and 30 manifests to collect · "
                                          "ended sessions kept 168 h"));
    EXPECT_TRUE(text.warning.isEmpty());

    CheckpointStorage s = storage();
    s.retentionHours = 0;
    s.chunks = 1;
    s.manifests = 1;
    s.dedupRatio = 0;
    s.freeableChunks = 0;
    s.freeableManifests = 0;
    s.lastCollectionUnixMs = 1'700'000'000'000;
    s.lastFreedBytes = 2048;
    s.problem = QStringLiteral("no chunk was collected: 1 kept checkpoint manifest cannot be read");
    const StorageCardText other = storageCardText(s, true);
    EXPECT_EQ(other.figures, QStringLiteral("1.2 GiB stored · 5.8 GiB of workspaces · collection would free 310 MiB"));
    EXPECT_EQ(other.detail, QStringLiteral("1 chunk and 1 manifest · 0 chunks and 0 manifests to collect · ended sessions "
                                           "kept forever · last collection 2023-11-14 22:13 freed 2.0 KiB"));
    EXPECT_EQ(other.warning, s.problem);
}

TEST(PoolsModelTest, StorageFiguresRideAlongAndAnErrorKeepsTheLastOnes)
{
    PoolsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    QSignalSpy changed(&model, &PoolsModel::storageChanged);
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    EXPECT_FALSE(model.hasStorage());
    model.setStorage(storage());
    EXPECT_TRUE(model.hasStorage());
    EXPECT_EQ(model.storage().chunks, 3401);
    model.setStorageError(QStringLiteral("could not read the checkpoint store's figures: deadline exceeded"));
    EXPECT_TRUE(model.hasStorage());
    EXPECT_EQ(model.storage().chunks, 3401);
    EXPECT_FALSE(model.storageError().isEmpty());
    model.setStorage(storage());
    EXPECT_TRUE(model.storageError().isEmpty());
    EXPECT_EQ(changed.count(), 3);
    EXPECT_EQ(reset.count(), 0) << "the figures are not rows";
    EXPECT_EQ(model.rowCount(), 0);
}

} // namespace
} // namespace paddock::console
