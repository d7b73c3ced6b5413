// View tests, offscreen, with QTest input over the real models: filter the sessions table by
// typing, open a session with Enter and with a double-click, group by status, expand a tool
// call's output, follow the tail, the cost plot's dirty flag, the pools view and its checkpoint store card.

#include "models/cost_series.h"
#include "models/pools_model.h"
#include "models/session_filter_proxy.h"
#include "models/session_group_model.h"
#include "models/session_table_model.h"
#include "models/trace_model.h"
#include "views/connection_dialog.h"
#include "views/cost_plot.h"
#include "views/pools_view.h"
#include "views/sandbox_card.h"
#include "views/session_view.h"
#include "views/sessions_view.h"
#include "views/storage_card.h"
#include "views/submit_dialog.h"
#include "views/trace_view.h"
#include "views_test_support.h"

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTableView>
#include <QTest>
#include <QTreeView>

#include <gtest/gtest.h>

using namespace paddock::console;
using namespace paddock::console::test;

namespace {

class SessionsViewTest : public ::testing::Test, public ApplicationGuard {
protected:
    void SetUp() override
    {
        ensureApplication();
        table.applyChanges({session(QStringLiteral("s-hello"), QStringLiteral("Write and run a C program"), SessionStatus::Running, QStringLiteral("hello-c")),
                            session(QStringLiteral("s-pipe"), QStringLiteral("Clean the data pipeline"), SessionStatus::Succeeded, QStringLiteral("data-pipeline")),
                            session(QStringLiteral("s-fail"), QStringLiteral("Build the broken project"), SessionStatus::Failed, QStringLiteral("failing-build"))});
        proxy.setSourceModel(&table);
        groups.setSourceModel(&proxy);
        view.setModels(&table, &proxy, &groups);
        view.resize(1000, 500);
        view.show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
    }

    SessionTableModel table;
    SessionFilterProxy proxy;
    SessionGroupModel groups;
    SessionsView view;
};

TEST_F(SessionsViewTest, TypingInTheSearchBoxFiltersTheTable)
{
    EXPECT_EQ(view.tableView()->model()->rowCount(), 3);
    view.focusSearch();
    QTest::keyClicks(view.searchEdit(), QStringLiteral("pipeline"));
    EXPECT_EQ(view.tableView()->model()->rowCount(), 1);
    EXPECT_EQ(view.tableView()->model()->index(0, 0).data(SessionTableModel::SessionIdRole).toString(), u"s-pipe");

    view.searchEdit()->clear();
    EXPECT_EQ(view.tableView()->model()->rowCount(), 3);
}

TEST_F(SessionsViewTest, StatusFilterKeepsOnlyThatStatus)
{
    const int failed = view.statusCombo()->findText(QStringLiteral("Failed"));
    ASSERT_GE(failed, 0);
    view.statusCombo()->setCurrentIndex(failed);
    ASSERT_EQ(view.tableView()->model()->rowCount(), 1);
    EXPECT_EQ(view.tableView()->model()->index(0, 0).data(SessionTableModel::SessionIdRole).toString(), u"s-fail");
    view.statusCombo()->setCurrentIndex(0);
    EXPECT_EQ(view.tableView()->model()->rowCount(), 3);
}

TEST_F(SessionsViewTest, EnterOpensTheCurrentSession)
{
    QSignalSpy opened(&view, &SessionsView::openSessionRequested);
    view.selectSession(QStringLiteral("s-fail"));
    view.tableView()->setFocus();
    EXPECT_EQ(view.currentSessionId(), u"s-fail");
    QTest::keyClick(view.tableView(), Qt::Key_Return);
    ASSERT_EQ(opened.count(), 1);
    EXPECT_EQ(opened.at(0).at(0).toString(), u"s-fail");
}

TEST_F(SessionsViewTest, KeyboardNavigationMovesTheSelection)
{
    view.tableView()->setFocus();
    view.tableView()->setCurrentIndex(view.tableView()->model()->index(0, 0));
    const QString first = view.currentSessionId();
    QTest::keyClick(view.tableView(), Qt::Key_Down);
    const QString second = view.currentSessionId();
    EXPECT_FALSE(second.isEmpty());
    EXPECT_NE(first, second);
}

TEST_F(SessionsViewTest, DoubleClickOpensTheSession)
{
    QSignalSpy opened(&view, &SessionsView::openSessionRequested);
    QTableView *tableView = view.tableView();
    const QModelIndex index = tableView->model()->index(1, SessionTableModel::Goal);
    const QPoint center = tableView->visualRect(index).center();
    // A double-click is a press/release/double-click sequence; QTest::mouseDClick alone sends only
    // the last event, which item views ignore without the press before it.
    QTest::mouseClick(tableView->viewport(), Qt::LeftButton, {}, center);
    QTest::mouseDClick(tableView->viewport(), Qt::LeftButton, {}, center);
    ASSERT_EQ(opened.count(), 1);
    EXPECT_EQ(opened.at(0).at(0).toString(), index.data(SessionTableModel::SessionIdRole).toString());
}

TEST_F(SessionsViewTest, GroupByStatusShowsATreeAndEnterOpensAChild)
{
    QSignalSpy opened(&view, &SessionsView::openSessionRequested);
    view.setGrouped(true);
    ASSERT_TRUE(view.isGrouped());
    ASSERT_TRUE(view.treeView()->isVisible());
    view.selectSession(QStringLiteral("s-hello"));
    EXPECT_EQ(view.currentSessionId(), u"s-hello");
    QTest::keyClick(view.treeView(), Qt::Key_Return);
    ASSERT_EQ(opened.count(), 1);
    EXPECT_EQ(opened.at(0).at(0).toString(), u"s-hello");
    view.setGrouped(false);
    EXPECT_EQ(view.currentSessionId(), u"s-hello");
}

class SessionViewTest : public ::testing::Test, public ApplicationGuard {
protected:
    void SetUp() override
    {
        ensureApplication();
        view.setModels(&trace, &cost);
        view.resize(1280, 700);
        trace.setSession(QStringLiteral("s-hello"));
        view.showSession(session(QStringLiteral("s-hello"), QStringLiteral("Say hello"), SessionStatus::Succeeded));
        const QList<EventRecord> events = sampleTrace();
        trace.appendEvents(events);
        cost.addEvents(events);
        view.addEvents(events);
        view.show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
    }

    TraceModel trace;
    CostSeries cost;
    SessionView view;
};

TEST_F(SessionViewTest, EnterOnAToolCallExpandsItsOutput)
{
    EXPECT_FALSE(view.isDetailsExpanded());
    const int callRow = trace.rowOfSeq(5);
    ASSERT_GE(callRow, 0);
    view.traceView()->setFocus();
    view.traceView()->setCurrentIndex(view.traceView()->indexOfRow(callRow));
    QTest::keyClick(view.traceView(), Qt::Key_Return);
    ASSERT_TRUE(view.isDetailsExpanded());
    EXPECT_TRUE(view.detailsText().contains(u"hello-from-sandbox")) << view.detailsText().toStdString();

    // Enter again folds it away.
    QTest::keyClick(view.traceView(), Qt::Key_Return);
    EXPECT_FALSE(view.isDetailsExpanded());
}

TEST_F(SessionViewTest, DoubleClickOnAToolResultExpandsItsOutput)
{
    const int resultRow = trace.rowOfSeq(6);
    const QPoint center = view.traceView()->visualRect(view.traceView()->indexOfRow(resultRow, TraceModel::Summary)).center();
    QTest::mouseClick(view.traceView()->viewport(), Qt::LeftButton, {}, center);
    QTest::mouseDClick(view.traceView()->viewport(), Qt::LeftButton, {}, center);
    ASSERT_TRUE(view.isDetailsExpanded());
    EXPECT_TRUE(view.detailsText().contains(u"hello-from-sandbox"));
}

// Cost and checkpoint rows fold into their step's row; "Every event" shows them, and the event the
// user was on stays selected across the toggle, both ways.
TEST_F(SessionViewTest, EveryEventShowsTheFoldedRowsAndKeepsTheSelection)
{
    trace.appendEvents({event(8, QStringLiteral("cost"), {{QStringLiteral("kind"), QStringLiteral("storage")}}, 40)});
    QCheckBox *every = view.everyEventBox();
    ASSERT_NE(every, nullptr);
    EXPECT_FALSE(every->isChecked());
    EXPECT_TRUE(trace.foldBookkeeping());
    ASSERT_EQ(trace.rowCount(), 7);
    const int host = trace.rowOfSeq(7);
    EXPECT_EQ(trace.rowOfSeq(8), host);
    EXPECT_TRUE(trace.index(host, TraceModel::Summary).data().toString().endsWith(u"+ cost $0.0000"));
    EXPECT_EQ(trace.index(host, TraceModel::Cost).data().toString(), QStringLiteral("$0.0001"));

    view.traceView()->setCurrentIndex(view.traceView()->indexOfRow(host, TraceModel::Summary));
    QTest::mouseClick(every, Qt::LeftButton, {}, QPoint(8, every->height() / 2));
    ASSERT_TRUE(every->isChecked());
    EXPECT_FALSE(trace.foldBookkeeping());
    ASSERT_EQ(trace.rowCount(), 8);
    EXPECT_EQ(view.traceView()->currentIndex().data(TraceModel::SeqRole).toLongLong(), 7);

    // On the cost row, folding again selects the row it goes into.
    view.traceView()->setCurrentIndex(view.traceView()->indexOfRow(trace.rowOfSeq(8), TraceModel::Summary));
    every->setChecked(false);
    EXPECT_TRUE(trace.foldBookkeeping());
    EXPECT_EQ(view.traceView()->currentIndex().data(TraceModel::SeqRole).toLongLong(), 7);

    // The model's own toggle shows in the box.
    trace.setFoldBookkeeping(false);
    EXPECT_TRUE(every->isChecked());
}

// The open details pane follows its row: a running command's output as it folds into the call's
// row, then the result; scrolled to its end it stays there, scrolled up it stays put.
TEST_F(SessionViewTest, TheOpenDetailsPaneFollowsARunningCommandsOutput)
{
    auto output = [](qint64 seq, qint64 offset, const QString &text) {
        return event(seq, QStringLiteral("tool.output"),
                     {{QStringLiteral("call_id"), QStringLiteral("c2")}, {QStringLiteral("stream"), QStringLiteral("stdout")},
                      {QStringLiteral("offset"), offset}, {QStringLiteral("bytes"), qint64(text.size())}, {QStringLiteral("text"), text}});
    };
    QString lines;
    for (int i = 0; i < 200; ++i)
        lines += QStringLiteral("line %1\n").arg(i);
    trace.appendEvents({event(8, QStringLiteral("tool.call"),
                              {{QStringLiteral("call_id"), QStringLiteral("c2")}, {QStringLiteral("name"), QStringLiteral("run_command")},
                               {QStringLiteral("arguments"), QJsonObject{{QStringLiteral("command"), QStringLiteral("make")}}}}),
                        output(9, 0, lines)});
    const int callRow = trace.rowOfSeq(8);
    ASSERT_EQ(trace.rowOfSeq(9), callRow);
    view.traceView()->setCurrentIndex(view.traceView()->indexOfRow(callRow));
    view.setDetailsExpanded(true);
    ASSERT_TRUE(view.detailsText().contains(u"line 199")) << view.detailsText().toStdString();
    auto *details = view.findChild<QPlainTextEdit *>(QStringLiteral("traceDetails"));
    ASSERT_NE(details, nullptr);
    QScrollBar *bar = details->verticalScrollBar();
    ASSERT_GT(bar->maximum(), 0);

    // Scrolled to its end: more output comes, the pane shows it and stays at the end.
    bar->setValue(bar->maximum());
    trace.appendEvents({output(10, lines.size(), QStringLiteral("second part\n"))});
    ASSERT_TRUE(QTest::qWaitFor([&] { return view.detailsText().contains(u"second part"); }, 5000))
        << view.detailsText().toStdString();
    EXPECT_EQ(bar->value(), bar->maximum());

    // Scrolled up: the result comes (a row of its own), the pane shows the call with it and stays put.
    bar->setValue(3);
    const QString before = view.detailsText();
    trace.appendEvents({event(11, QStringLiteral("tool.result"),
                              {{QStringLiteral("call_id"), QStringLiteral("c2")}, {QStringLiteral("name"), QStringLiteral("run_command")},
                               {QStringLiteral("command"), QStringLiteral("make")}, {QStringLiteral("exit_code"), 2},
                               {QStringLiteral("stdout"), lines + QStringLiteral("second part\n")},
                               {QStringLiteral("stderr"), QStringLiteral("make: *** [all] Error 2\n")},
                               {QStringLiteral("duration_ms"), 1200}})});
    ASSERT_TRUE(QTest::qWaitFor([&] { return view.detailsText() != before; }, 5000));
    EXPECT_EQ(view.detailsText(), trace.detailsWithResult(callRow));
    EXPECT_TRUE(view.detailsText().contains(u"Error 2")) << view.detailsText().toStdString();
    EXPECT_EQ(bar->value(), 3);
}

TEST_F(SessionViewTest, SandboxCardShowsTheClaim)
{
    EXPECT_TRUE(view.sandboxCard()->findChild<QLabel *>() != nullptr);
    const QString state = view.sandboxCard()->stateText();
    EXPECT_FALSE(state.isEmpty());
    bool sawSandbox = false;
    for (QLabel *label : view.sandboxCard()->findChildren<QLabel *>())
        sawSandbox = sawSandbox || label->text() == u"sb-42";
    EXPECT_TRUE(sawSandbox);
}

// A command shorter than the sampling period: the card says what its result reports until a sample
// falls inside it.
TEST_F(SessionViewTest, SandboxCardShowsTheFiguresOfACommandBetweenSamples)
{
    SandboxCard *card = view.sandboxCard();
    auto *line = card->findChild<QLabel *>(QStringLiteral("commandResources"));
    ASSERT_NE(line, nullptr);
    EXPECT_EQ(card->commandResourcesText(), QString()) << "the sample trace's command reports no figures";
    EXPECT_FALSE(line->isVisible());

    const EventRecord result =
        event(8, QStringLiteral("tool.result"),
              {{QStringLiteral("call_id"), QStringLiteral("c2")}, {QStringLiteral("name"), QStringLiteral("run_command")},
               {QStringLiteral("command"), QStringLiteral("dd if=/dev/zero of=/dev/null bs=64M count=1")},
               {QStringLiteral("exit_code"), 0}, {QStringLiteral("duration_ms"), 40},
               {QStringLiteral("peak_memory_bytes"), 70696960}, {QStringLiteral("peak_memory_scope"), QStringLiteral("command")},
               {QStringLiteral("cpu_time_ms"), 59.0}});
    trace.appendEvents({result});
    view.addEvents({result});
    EXPECT_EQ(card->commandResourcesText(),
              QStringLiteral("dd if=/dev/zero of=/dev/null bs=64M count=1 ran between samples: peak 67 MiB, CPU 59 ms"));
    EXPECT_TRUE(line->isVisible());

    // A sample taken while it ran: the curve shows it.
    ResourcePoint inside;
    inside.timeUnixMs = result.timeUnixMs - 10;
    inside.memoryBytes = 70 << 20;
    card->addSamples(QStringLiteral("sb-42"), {inside});
    EXPECT_EQ(card->samples().size(), 1);
    EXPECT_EQ(card->commandResourcesText(), QString());
    EXPECT_FALSE(line->isVisible());
}

TEST_F(SessionViewTest, CostPlotTakesTheSeriesOnlyWhenVisible)
{
    QTest::qWait(250);
    EXPECT_EQ(view.costPlot()->pointCount(), cost.size());
    view.hide();
    EventRecord more = event(8, QStringLiteral("model.response"), {}, 5000);
    trace.appendEvents({more});
    cost.addEvents({more});
    QTest::qWait(250);
    // Hidden: the series stays dirty, the plot untouched.
    EXPECT_TRUE(cost.isDirty());
    view.show();
    QTest::qWait(250);
    EXPECT_FALSE(cost.isDirty());
    EXPECT_EQ(view.costPlot()->pointCount(), cost.size());
}

// Laid out, with something to scroll, and at the end.
bool atBottom(TraceView &view)
{
    const QScrollBar *bar = view.verticalScrollBar();
    return bar->maximum() > 0 && bar->value() == bar->maximum();
}

TEST(TraceViewTest, FollowsTheTailUntilTheUserScrollsUp)
{
    ensureApplication();
    TraceModel trace;
    trace.setSession(QStringLiteral("s"));
    TraceView view;
    view.setTraceModel(&trace);
    view.resize(900, 400);
    view.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));

    QList<EventRecord> batch;
    for (int seq = 1; seq <= 2000; ++seq)
        batch << event(seq, QStringLiteral("tool.call"), {{QStringLiteral("call_id"), QString::number(seq)}});
    trace.appendEvents(batch);
    ASSERT_TRUE(QTest::qWaitFor([&] { return atBottom(view); }));
    EXPECT_TRUE(view.isFollowing());

    // The user scrolls up: following stops and new rows do not move the view.
    QTest::keyClick(&view, Qt::Key_PageUp);
    EXPECT_FALSE(view.isFollowing());
    const int value = view.verticalScrollBar()->value();
    batch.clear();
    for (int seq = 2001; seq <= 2100; ++seq)
        batch << event(seq, QStringLiteral("tool.call"), {});
    trace.appendEvents(batch);
    QTest::qWait(250);
    EXPECT_EQ(view.verticalScrollBar()->value(), value);

    // End follows again.
    QTest::keyClick(&view, Qt::Key_End);
    EXPECT_TRUE(view.isFollowing());
    EXPECT_TRUE(QTest::qWaitFor([&] { return atBottom(view); }));
}

TEST(TraceViewTest, ScrollingToTheTopAsksForOlderHistory)
{
    ensureApplication();
    TraceModel trace;
    trace.setSession(QStringLiteral("s"));
    trace.setTailStart(5001);
    QList<EventRecord> batch;
    for (int seq = 5001; seq <= 5500; ++seq)
        batch << event(seq, QStringLiteral("tool.call"), {});
    trace.appendEvents(batch);
    TraceView view;
    view.setTraceModel(&trace);
    view.resize(900, 400);
    view.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
    QSignalSpy needed(&trace, &TraceModel::historyNeeded);
    ASSERT_TRUE(QTest::qWaitFor([&] { return atBottom(view); }));
    // Following the tail with the last row in sight must not page history in.
    QTest::qWait(150);
    EXPECT_EQ(needed.count(), 0);
    view.setCurrentIndex(view.indexOfRow(trace.rowCount() - 1));
    QTest::keyClick(&view, Qt::Key_Home);
    ASSERT_GE(needed.count(), 1) << "value " << view.verticalScrollBar()->value() << " can " << trace.canFetchMore({});
    EXPECT_EQ(needed.at(0).at(0).toLongLong() + needed.at(0).at(1).toInt(), 5001);

    // The page arrives: the rows the user was on stay under them.
    const int firstVisibleSeq = view.indexAt(QPoint(5, 5)).data(TraceModel::SeqRole).toInt();
    batch.clear();
    for (int seq = 1; seq <= 5000; ++seq)
        batch << event(seq, QStringLiteral("tool.call"), {});
    trace.prependHistory(batch);
    QTest::qWait(50);
    EXPECT_EQ(view.indexAt(QPoint(5, 5)).data(TraceModel::SeqRole).toInt(), firstVisibleSeq);
}

TEST(PoolsViewTest, ShowsPoolsTiersAndLocalExecution)
{
    ensureApplication();
    PoolsModel model;
    PoolsView view;
    view.setModel(&model);
    PoolInfo pool;
    pool.name = QStringLiteral("local");
    pool.endpoint = QStringLiteral("127.0.0.1:7701");
    pool.healthy = true;
    pool.local = true;
    pool.tiers = {TierInfo{QStringLiteral("lite"), QStringLiteral("bwrap"), 2, 1, 8, 0.9, 0}};
    model.setPools({pool}, true);
    view.resize(1000, 400);
    view.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
    QTreeView *tree = view.treeView();
    ASSERT_EQ(tree->model()->rowCount(), 1);
    const QModelIndex poolIndex = tree->model()->index(0, 0);
    EXPECT_TRUE(tree->isExpanded(poolIndex));
    EXPECT_EQ(tree->model()->rowCount(poolIndex), 1);
    auto *banner = view.findChild<QLabel *>(QStringLiteral("localExecutionBanner"));
    ASSERT_NE(banner, nullptr);
    EXPECT_TRUE(banner->isVisible());
}

TEST(PoolsViewTest, TheCheckpointStoreCardAppearsWithTheFigures)
{
    ensureApplication();
    PoolsModel model;
    PoolsView view;
    view.setModel(&model);
    view.resize(1000, 400);
    view.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
    StorageCard *card = view.storageCard();
    ASSERT_NE(card, nullptr);
    EXPECT_FALSE(card->isVisible()) << "no figures yet";
    model.setStorageError(QStringLiteral("could not read the checkpoint store's figures: unimplemented"));
    EXPECT_FALSE(card->isVisible()) << "a broker without the call has no card";

    CheckpointStorage storage;
    storage.where = QStringLiteral("the broker's checkpoint directory /srv/checkpoints");
    storage.retentionHours = 168;
    storage.chunks = 12;
    storage.manifests = 3;
    storage.bytesStored = 3 << 20;
    storage.logicalBytes = 9 << 20;
    storage.dedupRatio = 3.0;
    storage.freeableBytes = 1 << 20;
    model.setStorage(storage);
    EXPECT_TRUE(card->isVisible());
    EXPECT_EQ(card->whereText(), storage.where);
    EXPECT_EQ(card->figuresText(), QStringLiteral("3.0 MiB stored · 9.0 MiB of workspaces · dedup 3.0x · collection would free 1.0 MiB"));
    EXPECT_TRUE(card->warningText().isEmpty());
    model.setStorageError(QStringLiteral("could not read the checkpoint store's figures: deadline exceeded"));
    EXPECT_TRUE(card->isVisible());
    EXPECT_EQ(card->warningText(), QStringLiteral("Not refreshed: could not read the checkpoint store's figures: deadline exceeded"));
}

TEST(DialogsTest, SubmitDialogBuildsARequest)
{
    ensureApplication();
    SubmitDialog dialog;
    dialog.setSource(SubmitDialog::Source::Goal);
    dialog.goalEdit()->setText(QStringLiteral("Fix the flaky test"));
    EXPECT_EQ(dialog.tierCombo()->count(), 1) << "no tiers before the pools have said which they offer";
    dialog.setTiers({TierInfo{QStringLiteral("lite"), QStringLiteral("bwrap")},
                     TierInfo{QStringLiteral("heavy"), QStringLiteral("runsc")},
                     TierInfo{QStringLiteral("lite"), QStringLiteral("bwrap")}});
    EXPECT_EQ(dialog.tierCombo()->count(), 3) << "the default and each tier once";
    dialog.tierCombo()->setCurrentIndex(dialog.tierCombo()->findData(QStringLiteral("heavy")));
    dialog.accept();
    EXPECT_EQ(dialog.result(), QDialog::Accepted);
    EXPECT_EQ(dialog.request().goal, u"Fix the flaky test");
    EXPECT_EQ(dialog.request().tier, u"heavy");
    EXPECT_EQ(dialog.request().model, u"openai") << "a goal needs a model that takes goals; scripted takes playbooks";
    EXPECT_TRUE(dialog.request().playbook.isEmpty());

    SubmitDialog byName;
    byName.playbookCombo()->setCurrentText(QStringLiteral("inspect"));
    byName.accept();
    EXPECT_EQ(byName.request().playbook, u"inspect");

    // A request id per click: a UUID, another one for the next click (the client sends the same
    // id with each retry of one submit).
    EXPECT_EQ(dialog.request().requestId.size(), 36) << dialog.request().requestId.toStdString();
    const QString first = byName.request().requestId;
    byName.accept();
    EXPECT_NE(byName.request().requestId, first);
}

TEST(DialogsTest, ConnectionDialogValidatesAddresses)
{
    ensureApplication();
    EXPECT_TRUE(ConnectionDialog::validateAddress(QStringLiteral("unix:/run/x.sock")).isEmpty());
    EXPECT_TRUE(ConnectionDialog::validateAddress(QStringLiteral("/run/x.sock")).isEmpty());
    EXPECT_TRUE(ConnectionDialog::validateAddress(QStringLiteral("broker.example.com:7700")).isEmpty());
    EXPECT_FALSE(ConnectionDialog::validateAddress(QStringLiteral("broker.example.com")).isEmpty());
    EXPECT_FALSE(ConnectionDialog::validateAddress(QStringLiteral("host:99999")).isEmpty());
    EXPECT_FALSE(ConnectionDialog::validateAddress(QStringLiteral("unix:")).isEmpty());
    // A team's brokers, separated by commas: each entry is checked and named.
    EXPECT_TRUE(ConnectionDialog::validateAddress(QStringLiteral("a.example.com:7700, b.example.com:7700")).isEmpty());
    EXPECT_TRUE(ConnectionDialog::validateAddress(QStringLiteral("unix:/run/a.sock,unix:/run/b.sock")).isEmpty());
    EXPECT_TRUE(ConnectionDialog::validateAddress(QStringLiteral("a:1,,b:2")).contains(u"Broker 2 of the list is empty"));
    EXPECT_TRUE(ConnectionDialog::validateAddress(QStringLiteral("a:1,b")).startsWith(u"Broker 2 of the list:"));
    // Credentials are read for a list that names a host:port broker, not for sockets only.
    EXPECT_FALSE(ConnectionDialog::readCredentials(QStringLiteral("unix:/a.sock,b.example.com:7700"),
                                                   QStringLiteral("/nonexistent/ca.pem"), {}, {})
                     .error.isEmpty());
    EXPECT_TRUE(ConnectionDialog::readCredentials(QStringLiteral("unix:/a.sock,/b.sock"),
                                                  QStringLiteral("/nonexistent/ca.pem"), {}, {})
                    .error.isEmpty());
    EXPECT_TRUE(ConnectionDialog::defaultAddress().startsWith(u"unix:") || qEnvironmentVariableIsSet("PADDOCK_BROKER"));
}

} // namespace
