// The governance views offscreen with QTest input over their real models (no broker): the review
// queue's keyboard (j/k, a, r), reasons required and said, the change shown highlighted or as
// records, a bulk decision behind its confirmation; the override dialog's required reason; the
// submit dialog's tier picker; the decisions view's tint and override; the cost view's stacks.

#include "models/cost_breakdown.h"
#include "models/decision_table_model.h"
#include "models/review_change.h"
#include "models/review_queue_model.h"
#include "views/cost_view.h"
#include "views/decisions_view.h"
#include "views/override_dialog.h"
#include "views/review_queue_view.h"
#include "views/stacked_bar_plot.h"
#include "views/submit_dialog.h"
#include "views/tier_picker.h"
#include "views_test_support.h"

#include <QApplication>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTableWidget>
#include <QTest>
#include <QTextBlock>
#include <QTextLayout>
#include <QTimer>

#include <gtest/gtest.h>

using namespace paddock::console;
using namespace paddock::console::test;

namespace {

ReviewItemInfo reviewItem(const QString &id, const QString &kind, const QString &risk, qint64 created)
{
    ReviewItemInfo r;
    r.id = id;
    r.kind = kind;
    r.risk = risk;
    r.sessionId = QStringLiteral("s-") + id;
    r.requester = QStringLiteral("alice");
    r.state = QStringLiteral("pending");
    r.summary = QStringLiteral("Rewrite ") + id;
    r.impact = QStringLiteral("2 files, +2 -1");
    r.createdUnixMs = created;
    r.costMicros = 120'000;
    r.changeFormat = QStringLiteral("diff");
    r.changePreview = QStringLiteral("--- a/x\n");
    return r;
}

class ReviewQueueViewTest : public ::testing::Test, public ApplicationGuard {
protected:
    void SetUp() override
    {
        model.setItems({reviewItem(QStringLiteral("r1"), QStringLiteral("bulk_change"), QStringLiteral("low"), 1000),
                        reviewItem(QStringLiteral("r2"), QStringLiteral("bulk_change"), QStringLiteral("high"), 2000),
                        reviewItem(QStringLiteral("r3"), QStringLiteral("bulk_change"), QStringLiteral("low"), 3000),
                        reviewItem(QStringLiteral("r4"), QStringLiteral("secret_access"), QStringLiteral("medium"), 4000)});
        view.setModel(&model);
        // What the window does on itemRequested: answer with the full item.
        QObject::connect(&view, &ReviewQueueView::itemRequested, &view, [this](const QString &id) {
            requested << id;
            ReviewItemInfo full = model.itemAt(model.rowOf(id));
            full.change = QStringLiteral("--- a/src/x.c\n+++ b/src/x.c\n@@ -1,2 +1,2 @@\n int x;\n-int y = 1;\n+int y = 2;\n");
            full.changeHash = QStringLiteral("sha256:") + id;
            view.showItem(full, CallError::none());
        });
        view.resize(1280, 700);
        view.show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
    }

    QStringList currentIds() const { return view.selectedItemIds(); }

    ReviewQueueModel model;
    ReviewQueueView view;
    QStringList requested;
};

TEST_F(ReviewQueueViewTest, KeyboardMovesReadsAndApproves)
{
    QSignalSpy decide(&view, &ReviewQueueView::decideRequested);
    view.tableView()->setFocus();
    QTest::keyClick(view.tableView(), Qt::Key_J);
    ASSERT_EQ(currentIds().size(), 1);
    const QString first = currentIds().first();
    EXPECT_TRUE(requested.contains(first)) << "selecting an item reads its full change";
    QTest::keyClick(view.tableView(), Qt::Key_J);
    const QString second = currentIds().first();
    EXPECT_NE(second, first);
    QTest::keyClick(view.tableView(), Qt::Key_K);
    EXPECT_EQ(currentIds().first(), first);

    // The change is shown with its added and removed lines highlighted differently.
    const QString shown = view.changeView()->toPlainText();
    EXPECT_TRUE(shown.contains(QStringLiteral("+int y = 2;")));
    auto backgroundOf = [&](const QString &line) {
        for (QTextBlock block = view.changeView()->document()->begin(); block.isValid(); block = block.next()) {
            if (block.text() == line && !block.layout()->formats().isEmpty())
                return block.layout()->formats().first().format.background().color();
        }
        return QColor();
    };
    const QColor added = backgroundOf(QStringLiteral("+int y = 2;"));
    const QColor removed = backgroundOf(QStringLiteral("-int y = 1;"));
    EXPECT_TRUE(added.isValid());
    EXPECT_TRUE(removed.isValid());
    EXPECT_NE(added, removed);

    // Oldest first: r1 (low) needs no reason to approve.
    ASSERT_EQ(first, QStringLiteral("r1"));
    EXPECT_TRUE(view.approveButton()->isEnabled());
    EXPECT_FALSE(view.rejectButton()->isEnabled()) << "rejecting needs a reason";
    EXPECT_TRUE(view.rejectButton()->toolTip().contains(QStringLiteral("reason")));
    QTest::keyClick(view.tableView(), Qt::Key_A);
    ASSERT_EQ(decide.size(), 1);
    EXPECT_EQ(decide.first().at(0).toStringList(), QStringList{QStringLiteral("r1")});
    EXPECT_TRUE(decide.first().at(1).toBool());
}

TEST_F(ReviewQueueViewTest, AHighRiskItemNeedsAReasonAndTheKeyTakesYouThere)
{
    QSignalSpy decide(&view, &ReviewQueueView::decideRequested);
    view.selectItems({QStringLiteral("r2")});
    view.tableView()->setFocus();
    EXPECT_FALSE(view.approveButton()->isEnabled());
    EXPECT_TRUE(view.approveButton()->toolTip().contains(QStringLiteral("high-risk")));
    QTest::keyClick(view.tableView(), Qt::Key_A);
    EXPECT_EQ(decide.size(), 0);
    EXPECT_TRUE(view.reasonEdit()->hasFocus()) << "pressing a without a reason goes to the reason field";
    QTest::keyClicks(view.reasonEdit(), QStringLiteral("read the diff; the rename is safe"));
    EXPECT_TRUE(view.approveButton()->isEnabled());
    QTest::mouseClick(view.approveButton(), Qt::LeftButton);
    ASSERT_EQ(decide.size(), 1);
    EXPECT_EQ(decide.first().at(2).toString(), QStringLiteral("read the diff; the rename is safe"));
}

TEST_F(ReviewQueueViewTest, NobodyApprovesTheirOwnRequestButMayRejectIt)
{
    QSignalSpy decide(&view, &ReviewQueueView::decideRequested);
    view.setSelf(QStringLiteral("alice"));   // every item here was requested by alice
    view.selectItems({QStringLiteral("r1")});
    view.tableView()->setFocus();
    EXPECT_FALSE(view.approveButton()->isEnabled());
    EXPECT_TRUE(view.approveButton()->toolTip().contains(QStringLiteral("You requested r1"))) << view.approveButton()->toolTip().toStdString();
    QTest::keyClick(view.tableView(), Qt::Key_A);
    EXPECT_EQ(decide.size(), 0);
    EXPECT_TRUE(view.tableView()->hasFocus()) << "no reason would make it approvable: the focus stays";
    QTest::keyClicks(view.reasonEdit(), QStringLiteral("withdrawn: wrong branch"));
    EXPECT_FALSE(view.approveButton()->isEnabled());
    EXPECT_TRUE(view.rejectButton()->isEnabled()) << "a requester may withdraw their own request";

    view.setSelf(QStringLiteral("bob"));
    EXPECT_TRUE(view.approveButton()->isEnabled()) << "another approver may";
}

TEST_F(ReviewQueueViewTest, ABulkRejectionIsConfirmedWithASummaryOfTheSelection)
{
    QSignalSpy decide(&view, &ReviewQueueView::decideRequested);
    view.selectItems({QStringLiteral("r1"), QStringLiteral("r2"), QStringLiteral("r4")});
    EXPECT_FALSE(view.rejectButton()->isEnabled());
    EXPECT_TRUE(view.rejectButton()->toolTip().contains(QStringLiteral("mixes kinds"))) << view.rejectButton()->toolTip().toStdString();

    view.selectItems({QStringLiteral("r1"), QStringLiteral("r2"), QStringLiteral("r3")});
    QTest::keyClicks(view.reasonEdit(), QStringLiteral("out of scope for this sprint"));
    QString confirmation;
    // First Cancel: nothing is sent.
    QTimer::singleShot(0, [&] {
        auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget());
        ASSERT_NE(box, nullptr);
        confirmation = box->text();
        box->button(QMessageBox::Cancel)->click();
    });
    QTest::mouseClick(view.rejectButton(), Qt::LeftButton);
    EXPECT_EQ(decide.size(), 0);
    EXPECT_TRUE(confirmation.startsWith(QStringLiteral("Reject 3 review items?"))) << confirmation.toStdString();
    EXPECT_TRUE(confirmation.contains(QStringLiteral("Risks: 2 × low, 1 × high")));
    EXPECT_TRUE(confirmation.contains(QStringLiteral("Total cost: $0.3600")));

    // Then accept it from the keyboard.
    QTimer::singleShot(0, [&] {
        auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget());
        ASSERT_NE(box, nullptr);
        for (QAbstractButton *button : box->buttons()) {
            if (box->buttonRole(button) == QMessageBox::AcceptRole)
                button->click();
        }
    });
    view.tableView()->setFocus();
    QTest::keyClick(view.tableView(), Qt::Key_R);
    ASSERT_EQ(decide.size(), 1);
    QStringList ids = decide.first().at(0).toStringList();
    ids.sort();
    EXPECT_EQ(ids, (QStringList{QStringLiteral("r1"), QStringLiteral("r2"), QStringLiteral("r3")}));
    EXPECT_FALSE(decide.first().at(1).toBool());
    // While the decision is on its way the buttons wait; the answer clears the reason.
    EXPECT_FALSE(view.rejectButton()->isEnabled());
    view.decisionFinished(false, ids, CallError::none());
    EXPECT_TRUE(view.reasonEdit()->text().isEmpty());
}

TEST_F(ReviewQueueViewTest, RecordListsShowAsATable)
{
    ReviewItemInfo records = reviewItem(QStringLiteral("r9"), QStringLiteral("bulk_change"), QStringLiteral("low"), 500);
    records.changeFormat = QStringLiteral("records");
    model.setItems({records});
    QObject::disconnect(&view, &ReviewQueueView::itemRequested, nullptr, nullptr);
    view.selectItems({QStringLiteral("r9")});
    records.change = QStringLiteral(R"([{"key":"customers/1","value":{"tier":"gold"}},{"key":"customers/2","value":"x"}])");
    records.changeHash = QStringLiteral("sha256:r9");
    view.showItem(records, CallError::none());
    ASSERT_TRUE(view.recordsTable()->isVisible());
    EXPECT_EQ(view.recordsTable()->rowCount(), 2);
    EXPECT_EQ(view.recordsTable()->item(0, 0)->text(), QStringLiteral("customers/1"));
}

TEST(OverrideDialogTest, TheReasonIsRequiredAndEachTierShowsItsPriceAndLimits)
{
    ensureApplication();
    SessionInfo session;
    session.id = QStringLiteral("s1");
    session.tier = QStringLiteral("lite");
    session.tierChooser = QStringLiteral("default");
    const QList<TierInfo> tiers{TierInfo{QStringLiteral("lite"), QStringLiteral("bwrap"), 0, 0, 0, 0, 0, {}, {}, 0, 0.01, 0.5, 512LL << 20},
                                TierInfo{QStringLiteral("standard"), QStringLiteral("runsc"), 0, 0, 0, 0, 0, {}, {}, 0, 0.12, 2, 4LL << 30}};
    OverrideDialog dialog(session, tiers);
    dialog.show();
    EXPECT_EQ(dialog.tier(), QStringLiteral("standard")) << "another tier than the current one is preselected";
    EXPECT_EQ(dialog.tierPicker()->currentText(), QStringLiteral("standard · $0.120/h · 2 CPU · 4.0 GiB · runsc"));
    EXPECT_FALSE(dialog.overrideButton()->isEnabled());
    EXPECT_TRUE(dialog.problem().contains(QStringLiteral("reason")));
    QTest::keyClicks(dialog.reasonEdit(), QStringLiteral("needs more memory"));
    EXPECT_TRUE(dialog.overrideButton()->isEnabled());
    dialog.tierPicker()->selectTier(QStringLiteral("lite"));
    EXPECT_FALSE(dialog.overrideButton()->isEnabled()) << "the current tier is no override";
}

TEST(SubmitDialogTierTest, TheFirstChoiceLeavesTheTierToTheAgentsSelectionMode)
{
    ensureApplication();
    SubmitDialog dialog;
    dialog.setTiers({TierInfo{QStringLiteral("lite"), QStringLiteral("bwrap"), 0, 0, 0, 0, 0, {}, {}, 0, 0.01, 0.5, 512LL << 20}});
    ASSERT_EQ(dialog.tierCombo()->count(), 2);
    EXPECT_EQ(dialog.tierCombo()->itemText(0), QStringLiteral("Let the agent's selection mode decide"));
    EXPECT_EQ(dialog.tierCombo()->itemText(1), QStringLiteral("lite · $0.010/h · 0.5 CPU · 512 MiB · bwrap"));
    dialog.accept();
    EXPECT_TRUE(dialog.request().tier.isEmpty());
}

TEST(DecisionsViewTest, MisallocatedRowsAreTintedAndOverrideNamesTheSession)
{
    ensureApplication();
    DecisionTableModel model;
    DecisionsView view;
    view.setModel(&model);
    DecisionInfo ok;
    ok.id = QStringLiteral("d1");
    ok.sessionId = QStringLiteral("s-ok");
    ok.chosenTier = QStringLiteral("lite");
    ok.chooser = QStringLiteral("default");
    ok.outcome = QStringLiteral("ok");
    DecisionInfo over = ok;
    over.id = QStringLiteral("d2");
    over.sessionId = QStringLiteral("s-over");
    over.outcome = QStringLiteral("over_allocated");
    over.fittingTier = QStringLiteral("lite");
    model.setDecisions({ok, over});
    view.resize(1200, 700);
    view.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
    QAbstractItemModel *shown = view.tableView()->model();
    EXPECT_FALSE(shown->index(0, 0).data(Qt::BackgroundRole).isValid());
    EXPECT_TRUE(shown->index(1, 0).data(Qt::BackgroundRole).value<QColor>().isValid());

    EXPECT_FALSE(view.overrideButton()->isEnabled());
    QSignalSpy overrideSpy(&view, &DecisionsView::overrideRequested);
    view.tableView()->selectRow(1);
    ASSERT_TRUE(view.overrideButton()->isEnabled());
    QTest::mouseClick(view.overrideButton(), Qt::LeftButton);
    ASSERT_EQ(overrideSpy.size(), 1);
    EXPECT_EQ(overrideSpy.first().first().toString(), QStringLiteral("s-over"));

    view.setStats(QStringLiteral("tier"), {DecisionStatsLineInfo{QStringLiteral("lite"), 5, 1, 2, 1, 0, 1, 0},
                                           DecisionStatsLineInfo{QStringLiteral("heavy"), 3, 0, 1, 0, 0, 2, 0}});
    EXPECT_EQ(view.byTierPlot()->barCount(), 2);
    EXPECT_EQ(view.byTierPlot()->stackTotal(0), 5.0);
    EXPECT_EQ(view.byTierPlot()->stackTotal(1), 3.0);
}

TEST(CostViewTest, SpendStacksPerGroupAndBudgetsShowTheirShare)
{
    ensureApplication();
    CostView view;
    view.resize(1200, 700);
    view.show();
    const CostQuery query = view.query(10 * 3'600'000 + 42);
    EXPECT_EQ(query.groupBy, QStringLiteral("agent"));
    EXPECT_EQ(query.bucketMs, 3'600'000) << "24 hours in hourly buckets";
    EXPECT_EQ(query.toUnixMs - query.fromUnixMs, 24 * 3'600'000);
    CostBreakdown breakdown;
    breakdown.setLines({{QStringLiteral("alpha"), 2'000'000, query.fromUnixMs}, {QStringLiteral("beta"), 500'000, query.fromUnixMs}},
                       query.bucketMs, query.fromUnixMs, query.toUnixMs);
    view.setSpend(breakdown);
    view.spendPlot()->replotNow();
    EXPECT_EQ(view.spendPlot()->seriesCount(), 2);
    EXPECT_EQ(view.spendPlot()->stackTotal(0), 2.5);
    EXPECT_TRUE(view.totalsText().contains(QStringLiteral("$2.5000")));

    view.setBudgets({BudgetInfo{QStringLiteral("alpha"), 10'000'000, 9'000'000, 1'000'000, 500'000, 1}});
    EXPECT_EQ(view.budgetTable()->item(0, 3)->text(), QStringLiteral("90%"));
    EXPECT_EQ(view.budgetTable()->item(0, 6)->text(), QStringLiteral("1"));
    EXPECT_EQ(view.budgetPlot()->stackTotal(0), 10.0) << "spent + left = the day's budget";
}

} // namespace
