// The governance models: a review item's change read by people (diff line classes, records), the
// bulk decision's confirmation text, the review queue table (upserts that keep rows, new-item
// reporting, ages, sorting), decisions with their allocation, and cost bucketing per group.

#include "models/cost_breakdown.h"
#include "models/decision_table_model.h"
#include "models/review_change.h"
#include "models/review_queue_model.h"

#include <QAbstractItemModelTester>
#include <QSortFilterProxyModel>
#include <gtest/gtest.h>

namespace paddock::console {
namespace {

constexpr qint64 kNow = 1'700'000'000'000;

ReviewItemInfo item(const QString &id, const QString &kind = QStringLiteral("bulk_change"),
                    const QString &risk = QStringLiteral("low"), qint64 ageMs = 60'000, qint64 costMicros = 0)
{
    ReviewItemInfo r;
    r.id = id;
    r.kind = kind;
    r.risk = risk;
    r.sessionId = QStringLiteral("s-") + id;
    r.requester = QStringLiteral("alice");
    r.state = QStringLiteral("pending");
    r.summary = QStringLiteral("change of ") + id;
    r.impact = QStringLiteral("3 records");
    r.createdUnixMs = kNow - ageMs;
    r.costMicros = costMicros;
    r.targetCount = 3;
    return r;
}

TEST(ReviewChangeTest, DiffLinesAreClassified)
{
    EXPECT_EQ(classifyDiffLine(u"--- a/src/main.c"), DiffLine::FileHeader);
    EXPECT_EQ(classifyDiffLine(u"+++ b/src/main.c"), DiffLine::FileHeader);
    EXPECT_EQ(classifyDiffLine(u"@@ -1,3 +1,4 @@ int main()"), DiffLine::Hunk);
    EXPECT_EQ(classifyDiffLine(u"+    return 0;"), DiffLine::Added);
    EXPECT_EQ(classifyDiffLine(u"-    return 1;"), DiffLine::Removed);
    EXPECT_EQ(classifyDiffLine(u"     int x;"), DiffLine::Context);
    EXPECT_EQ(classifyDiffLine(u"diff --git a/x b/x"), DiffLine::Meta);
    EXPECT_EQ(classifyDiffLine(u"\\ No newline at end of file"), DiffLine::Meta);
    // A removed line that itself starts with "--" is still removed, not a header.
    EXPECT_EQ(classifyDiffLine(u"--x"), DiffLine::Removed);
    EXPECT_EQ(classifyDiffLine(u""), DiffLine::Context);

    const DiffStat stat = diffStat(u"--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-old\n+new\n+more\n ctx\n--- a/y\n+++ b/y\n@@ -1 +0,0 @@\n-gone\n");
    EXPECT_EQ(stat.added, 2);
    EXPECT_EQ(stat.removed, 2);
    EXPECT_EQ(stat.files, 2);
}

TEST(ReviewChangeTest, RecordsAreMadeReadable)
{
    const QString records = QStringLiteral(R"([{"key":"customers/1","value":{"tier":"gold"}},{"key":"customers/2","value":"x"}])");
    const auto rows = changeRecords(records);
    ASSERT_EQ(rows.size(), 2);
    EXPECT_EQ(rows.at(0).first, QStringLiteral("customers/1"));
    EXPECT_EQ(rows.at(0).second, QStringLiteral(R"({"tier":"gold"})"));
    EXPECT_EQ(rows.at(1).second, QStringLiteral("x"));
    // JSON lines too.
    EXPECT_EQ(changeRecords(QStringLiteral("{\"key\":\"a\",\"value\":1}\n{\"key\":\"b\",\"value\":2}\n")).size(), 2);
    // An object: its members.
    const auto members = changeRecords(QStringLiteral(R"({"a": 1, "b": [1,2]})"));
    ASSERT_EQ(members.size(), 2);
    EXPECT_EQ(members.at(1).second, QStringLiteral("[1,2]"));
    EXPECT_TRUE(changeRecords(QStringLiteral("not json")).isEmpty());

    EXPECT_TRUE(readableChange(QStringLiteral("records"), records).contains(QStringLiteral("\n        \"key\": \"customers/1\"")));
    // A diff stays as it is.
    EXPECT_EQ(readableChange(QStringLiteral("diff"), QStringLiteral("+a\n")), QStringLiteral("+a\n"));
    EXPECT_EQ(readableChange(QStringLiteral("records"), QStringLiteral("plain")), QStringLiteral("plain"));
}

TEST(ReviewChangeTest, ReasonsAndBulkRules)
{
    const QList<ReviewItemInfo> low{item(QStringLiteral("r1")), item(QStringLiteral("r2"))};
    EXPECT_FALSE(reasonRequired(true, low));
    EXPECT_TRUE(reasonRequired(false, low));
    QList<ReviewItemInfo> mixedRisk = low;
    mixedRisk << item(QStringLiteral("r3"), QStringLiteral("bulk_change"), QStringLiteral("high"));
    EXPECT_TRUE(reasonRequired(true, mixedRisk));

    EXPECT_EQ(bulkProblem(low), QString());
    EXPECT_FALSE(bulkProblem({}).isEmpty());
    QList<ReviewItemInfo> mixedKinds = low;
    mixedKinds << item(QStringLiteral("r4"), QStringLiteral("secret_access"));
    EXPECT_TRUE(bulkProblem(mixedKinds).contains(QStringLiteral("mixes kinds")));
    QList<ReviewItemInfo> decided = low;
    decided[1].state = QStringLiteral("approved");
    EXPECT_EQ(bulkProblem(decided), QStringLiteral("r2 is already approved"));
}

TEST(ReviewChangeTest, ConfirmationSummarisesTheWholeSelection)
{
    QList<ReviewItemInfo> items{item(QStringLiteral("r1"), QStringLiteral("bulk_change"), QStringLiteral("high"), 1, 250'000),
                                item(QStringLiteral("r2"), QStringLiteral("bulk_change"), QStringLiteral("low"), 1, 1'000'000),
                                item(QStringLiteral("r3"), QStringLiteral("bulk_change"), QStringLiteral("low"), 1, 0)};
    items[2].requester = QStringLiteral("bob");
    items[2].sessionId = items[1].sessionId;
    const QString text = decisionSummary(false, items);
    const QStringList lines = text.split(u'\n');
    EXPECT_EQ(lines.value(0), QStringLiteral("Reject 3 review items?"));
    EXPECT_EQ(lines.value(1), QStringLiteral("Kinds: 3 × bulk_change"));
    EXPECT_EQ(lines.value(2), QStringLiteral("Risks: 2 × low, 1 × high"));
    EXPECT_EQ(lines.value(3), QStringLiteral("Requesters: 2 × alice, 1 × bob"));
    EXPECT_EQ(lines.value(4), QStringLiteral("Sessions: 2"));
    EXPECT_EQ(lines.value(5), QStringLiteral("Targets: 9"));
    EXPECT_EQ(lines.value(6), QStringLiteral("Total cost: $1.2500"));
    EXPECT_TRUE(text.contains(QStringLiteral("All are decided, or none.")));
    EXPECT_TRUE(decisionSummary(true, {items.first()}).startsWith(QStringLiteral("Approve 1 review item?")));
}

TEST(ReviewQueueModelTest, PollsUpdateRowsInPlaceAndReportNewItems)
{
    ReviewQueueModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setClock([] { return kNow; });

    // The first list is what was there: nothing "arrived".
    EXPECT_TRUE(model.setItems({item(QStringLiteral("r1")), item(QStringLiteral("r2"))}).isEmpty());
    ASSERT_EQ(model.rowCount(), 2);
    EXPECT_EQ(model.index(0, ReviewQueueModel::Kind).data().toString(), QStringLiteral("bulk change"));
    EXPECT_EQ(model.index(0, ReviewQueueModel::Age).data().toString(), QStringLiteral("1m 00s"));

    // r1 decided elsewhere, r3 new, r2 updated: r2 keeps a row, r3 is reported.
    ReviewItemInfo r2 = item(QStringLiteral("r2"));
    r2.impact = QStringLiteral("5 records");
    const QList<ReviewItemInfo> fresh = model.setItems({r2, item(QStringLiteral("r3"))});
    ASSERT_EQ(fresh.size(), 1);
    EXPECT_EQ(fresh.first().id, QStringLiteral("r3"));
    ASSERT_EQ(model.rowCount(), 2);
    EXPECT_EQ(model.rowOf(QStringLiteral("r1")), -1);
    EXPECT_EQ(model.index(model.rowOf(QStringLiteral("r2")), ReviewQueueModel::Impact).data().toString(),
              QStringLiteral("5 records"));
    // The same list again reports nothing new; an item that left and came back is not new either.
    EXPECT_TRUE(model.setItems({r2, item(QStringLiteral("r3"))}).isEmpty());
    model.removeItems({QStringLiteral("r3")});
    EXPECT_EQ(model.rowCount(), 1);
    EXPECT_TRUE(model.setItems({r2, item(QStringLiteral("r3"))}).isEmpty());

    // Ages follow the clock.
    model.setClock([] { return kNow + 3'600'000; });
    EXPECT_EQ(model.index(0, ReviewQueueModel::Age).data().toString(), QStringLiteral("1h 01m"));
    model.clear();
    EXPECT_EQ(model.rowCount(), 0);
}

TEST(ReviewQueueModelTest, SortsByRiskAgeAndCost)
{
    ReviewQueueModel model;
    model.setClock([] { return kNow; });
    model.setItems({item(QStringLiteral("young-high"), QStringLiteral("bulk_change"), QStringLiteral("high"), 1'000, 5),
                    item(QStringLiteral("old-low"), QStringLiteral("bulk_change"), QStringLiteral("low"), 900'000, 10),
                    item(QStringLiteral("mid-medium"), QStringLiteral("bulk_change"), QStringLiteral("medium"), 60'000, 1)});
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&model);
    proxy.setSortRole(ReviewQueueModel::SortRole);
    auto firstId = [&] { return proxy.index(0, 0).data(ReviewQueueModel::ItemIdRole).toString(); };

    proxy.sort(ReviewQueueModel::Risk, Qt::DescendingOrder);
    EXPECT_EQ(firstId(), QStringLiteral("young-high"));
    proxy.sort(ReviewQueueModel::Age, Qt::DescendingOrder);   // oldest first
    EXPECT_EQ(firstId(), QStringLiteral("old-low"));
    proxy.sort(ReviewQueueModel::Cost, Qt::AscendingOrder);
    EXPECT_EQ(firstId(), QStringLiteral("mid-medium"));
    EXPECT_EQ(model.totalCostMicros(), 16);
}

TEST(DecisionTableModelTest, OverAndUnderAllocationAreMarkedWithTheFittingTier)
{
    DecisionTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    DecisionInfo over;
    over.id = QStringLiteral("d1");
    over.sessionId = QStringLiteral("s1");
    over.chosenTier = QStringLiteral("heavy");
    over.chooser = QStringLiteral("agent");
    over.outcome = QStringLiteral("over_allocated");
    over.fittingTier = QStringLiteral("lite");
    over.peakMemoryBytes = 40LL << 20;
    over.memoryLimitBytes = 16LL << 30;
    over.meanCpuFraction = 0.03;
    DecisionInfo under = over;
    under.id = QStringLiteral("d2");
    under.chosenTier = QStringLiteral("lite");
    under.outcome = QStringLiteral("oom");
    under.fittingTier = QStringLiteral("standard");
    DecisionInfo human = over;
    human.id = QStringLiteral("d3");
    human.chooser = QStringLiteral("human");
    human.who = QStringLiteral("carol");
    human.outcome.clear();
    human.fittingTier.clear();

    model.setDecisions({over, under, human});
    ASSERT_EQ(model.rowCount(), 3);
    EXPECT_EQ(model.index(0, 0).data(DecisionTableModel::AllocationRole).toInt(), 1);
    EXPECT_EQ(model.index(1, 0).data(DecisionTableModel::AllocationRole).toInt(), -1);
    EXPECT_EQ(model.index(2, 0).data(DecisionTableModel::AllocationRole).toInt(), 0);
    EXPECT_EQ(model.index(0, DecisionTableModel::Outcome).data().toString(), QStringLiteral("over-allocated"));
    EXPECT_EQ(model.index(0, DecisionTableModel::Fitting).data().toString(), QStringLiteral("lite"));
    EXPECT_EQ(model.index(2, DecisionTableModel::Chooser).data().toString(), QStringLiteral("human (carol)"));
    EXPECT_EQ(model.index(2, DecisionTableModel::Outcome).data().toString(), QStringLiteral("pending"));
    EXPECT_EQ(DecisionTableModel::outcomeText(over),
              QStringLiteral("over-allocated: peak 40 MiB of 16 GiB, CPU 3%; lite would have fitted"));
    // A refresh with the same ids keeps the rows (and a selection on them).
    over.outcome = QStringLiteral("ok");
    model.setDecisions({over, under, human});
    EXPECT_EQ(model.index(0, 0).data(DecisionTableModel::AllocationRole).toInt(), 0);
}

TEST(CostBreakdownTest, LinesAreLaidOnADenseGridPerGroup)
{
    constexpr qint64 kBucket = 3'600'000;
    const qint64 from = 10 * kBucket + 1234;   // not aligned: the grid starts at 10 h
    const qint64 to = 14 * kBucket;
    const QList<CostLineInfo> lines{
        {QStringLiteral("alpha"), 100, 10 * kBucket}, {QStringLiteral("alpha"), 300, 12 * kBucket},
        {QStringLiteral("beta"), 1000, 11 * kBucket}, {QStringLiteral("gamma"), 5, 13 * kBucket},
        {QStringLiteral("delta"), 7, 13 * kBucket},    {QStringLiteral("late"), 999, 14 * kBucket},   // outside
    };
    CostBreakdown breakdown;
    breakdown.setMaxGroups(3);
    breakdown.setLines(lines, kBucket, from, to);
    ASSERT_EQ(breakdown.bucketCount(), 4);
    EXPECT_EQ(breakdown.bucketStarts().first(), 10 * kBucket);
    // Largest first; the rest folded into "other".
    EXPECT_EQ(breakdown.groups(), (QStringList{QStringLiteral("beta"), QStringLiteral("alpha"), QStringLiteral("other")}));
    EXPECT_EQ(breakdown.groupSeries(0), (QList<qint64>{0, 1000, 0, 0}));
    EXPECT_EQ(breakdown.groupSeries(1), (QList<qint64>{100, 0, 300, 0}));
    EXPECT_EQ(breakdown.groupSeries(2), (QList<qint64>{0, 0, 0, 12}));
    EXPECT_EQ(breakdown.groupTotal(2), 12);
    EXPECT_EQ(breakdown.totalMicros(), 1412);
    EXPECT_EQ(breakdown.bucketTotal(2), 300);

    EXPECT_EQ(CostBreakdown::bucketFor(3'600'000), 5 * 60'000);
    EXPECT_EQ(CostBreakdown::bucketFor(24 * 3'600'000), 3'600'000);
    EXPECT_EQ(CostBreakdown::bucketFor(7 * 24 * 3'600'000LL), 6 * 3'600'000);
    EXPECT_EQ(CostBreakdown::bucketFor(30 * 24 * 3'600'000LL), 24 * 3'600'000);
}

} // namespace
} // namespace paddock::console
