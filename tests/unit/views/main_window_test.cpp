// The window over FakeConsoleClient and the real models, offscreen, driven with QTest keys:
// Ctrl+. cancels, Ctrl+P pauses, Enter opens a session and follows its tail, a broken connection
// is reported once and marks the data stale, the pools page shows local execution.

#include "app/client/fake_console_client.h"
#include "app/main_window.h"
#include "models/pools_model.h"
#include "models/session_table_model.h"
#include "models/trace_model.h"
#include "views/session_view.h"
#include "views/sessions_view.h"
#include "views/trace_view.h"
#include "views_test_support.h"

#include <QAction>
#include <QDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTableView>
#include <QTest>

#include <gtest/gtest.h>

using namespace paddock::console;
using namespace paddock::console::test;

namespace {

class MainWindowTest : public ::testing::Test, public ApplicationGuard {
protected:
    MainWindowTest()
        : window(&client, MainWindow::Options{.persistSettings = false})
    {
    }

    void SetUp() override
    {
        window.connectToBroker(QStringLiteral("unix:/fake/broker.sock"));
        client.pushSessions({session(QStringLiteral("s-hello"), QStringLiteral("Write and run a C program"), SessionStatus::Running, QStringLiteral("hello-c")),
                             session(QStringLiteral("s-done"), QStringLiteral("Clean the data pipeline"), SessionStatus::Succeeded, QStringLiteral("data-pipeline"))});
        window.resize(1280, 800);
        window.show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
        window.activateWindow();
    }

    void selectInTable(const QString &id)
    {
        window.sessionsView()->selectSession(id);
        window.sessionsView()->tableView()->setFocus();
    }

    FakeConsoleClient client;
    MainWindow window;
};

TEST_F(MainWindowTest, CtrlPeriodCancelsTheSelectedSession)
{
    selectInTable(QStringLiteral("s-hello"));
    client.clearCalls();
    QTest::keyClick(window.sessionsView()->tableView(), Qt::Key_Period, Qt::ControlModifier);
    EXPECT_TRUE(client.calls().contains(u"cancel s-hello")) << client.calls().join(u", ").toStdString();
}

TEST_F(MainWindowTest, CancelIsDisabledForAFinishedSession)
{
    selectInTable(QStringLiteral("s-done"));
    EXPECT_FALSE(window.cancelAction()->isEnabled());
    client.clearCalls();
    QTest::keyClick(window.sessionsView()->tableView(), Qt::Key_Period, Qt::ControlModifier);
    EXPECT_FALSE(client.calls().contains(u"cancel s-done"));
}

TEST_F(MainWindowTest, AViewerSeesCancelDisabledWithTheReasonAndTheStatusBarNamesThePrincipal)
{
    selectInTable(QStringLiteral("s-hello"));
    ASSERT_TRUE(window.cancelAction()->isEnabled()) << "before the broker says who we are, nothing is disabled";

    client.setPermissions(Permissions(QStringLiteral("vera"), QStringLiteral("viewer"), QStringLiteral("unix"),
                                      {QStringLiteral("ListSessions"), QStringLiteral("GetSession"),
                                       QStringLiteral("WhoAmI")}));
    EXPECT_FALSE(window.cancelAction()->isEnabled());
    const QString tip = window.cancelAction()->toolTip();
    EXPECT_TRUE(tip.contains(u"vera") && tip.contains(u"viewer") && tip.contains(u"CancelSession")) << tip.toStdString();
    EXPECT_FALSE(window.pauseResumeAction()->isEnabled());
    EXPECT_TRUE(window.pauseResumeAction()->toolTip().contains(u"PauseSession"));
    EXPECT_FALSE(window.submitAction()->isEnabled());
    auto *principal = window.findChild<QLabel *>(QStringLiteral("principalLabel"));
    ASSERT_NE(principal, nullptr);
    EXPECT_TRUE(principal->isVisible());
    EXPECT_EQ(principal->text(), u"vera · viewer");

    client.clearCalls();
    QTest::keyClick(window.sessionsView()->tableView(), Qt::Key_Period, Qt::ControlModifier);
    EXPECT_FALSE(client.calls().contains(u"cancel s-hello")) << "the shortcut must not bypass the role";

    // An engineer may.
    client.setPermissions(Permissions(QStringLiteral("erin"), QStringLiteral("engineer"), QStringLiteral("token"),
                                      {QStringLiteral("CancelSession"), QStringLiteral("PauseSession"),
                                       QStringLiteral("SubmitSession")}));
    EXPECT_TRUE(window.cancelAction()->isEnabled());
    EXPECT_EQ(window.cancelAction()->toolTip(), u"Cancel the session (Ctrl+.)");
}

TEST_F(MainWindowTest, CtrlPPausesThenResumes)
{
    selectInTable(QStringLiteral("s-hello"));
    client.clearCalls();
    QTest::keyClick(window.sessionsView()->tableView(), Qt::Key_P, Qt::ControlModifier);
    EXPECT_TRUE(client.calls().contains(u"pause s-hello"));
    SessionInfo paused = session(QStringLiteral("s-hello"), QStringLiteral("Write and run a C program"), SessionStatus::Paused);
    paused.lastSeq = 9;
    client.pushSessions({paused});
    EXPECT_EQ(window.pauseResumeAction()->text().remove(u'&'), u"Resume");
    QTest::keyClick(window.sessionsView()->tableView(), Qt::Key_P, Qt::ControlModifier);
    EXPECT_TRUE(client.calls().contains(u"resume s-hello"));
}

TEST_F(MainWindowTest, EnterOpensTheSessionAndItsTraceFollowsTheTail)
{
    selectInTable(QStringLiteral("s-hello"));
    QTest::keyClick(window.sessionsView()->tableView(), Qt::Key_Return);
    ASSERT_EQ(window.currentPage(), MainWindow::Page::Session);
    EXPECT_EQ(window.sessionView()->sessionId(), u"s-hello");
    EXPECT_EQ(client.followedFrom(QStringLiteral("s-hello")), 1);

    client.pushEvents(QStringLiteral("s-hello"), sampleTrace());
    EXPECT_EQ(window.traceModel()->rowCount(), int(sampleTrace().size()));
    // Cancel from the session page acts on the open session.
    client.clearCalls();
    QTest::keyClick(window.sessionView()->traceView(), Qt::Key_Period, Qt::ControlModifier);
    EXPECT_TRUE(client.calls().contains(u"cancel s-hello"));

    // Ctrl+1 goes back; the trace stays for Ctrl+2.
    QTest::keyClick(&window, Qt::Key_1, Qt::ControlModifier);
    EXPECT_EQ(window.currentPage(), MainWindow::Page::Sessions);
    QTest::keyClick(&window, Qt::Key_2, Qt::ControlModifier);
    EXPECT_EQ(window.currentPage(), MainWindow::Page::Session);
}

TEST_F(MainWindowTest, CtrlFFocusesTheSearchAndTypingFilters)
{
    QTest::keyClick(&window, Qt::Key_F, Qt::ControlModifier);
    EXPECT_TRUE(window.sessionsView()->searchEdit()->hasFocus());
    QTest::keyClicks(window.sessionsView()->searchEdit(), QStringLiteral("pipeline"));
    EXPECT_EQ(window.sessionsView()->tableView()->model()->rowCount(), 1);
}

TEST_F(MainWindowTest, ABrokenConnectionIsReportedOnceAndMarksDataStale)
{
    int messages = 0;
    QObject::connect(window.statusBar(), &QStatusBar::messageChanged, &window, [&](const QString &m) {
        if (!m.isEmpty())
            ++messages;
    });
    client.setConnectionState(ConnectionState::Broken, QStringLiteral("broker unreachable: connection refused"));
    const QString first = window.connectionText();
    EXPECT_TRUE(first.contains(u"connection refused")) << first.toStdString();
    EXPECT_TRUE(window.sessionModel()->isStale());
    // The client retries: Connecting, Broken, Connecting, Broken... The label keeps the first report.
    for (int i = 0; i < 5; ++i) {
        client.setConnectionState(ConnectionState::Connecting, QStringLiteral("reconnecting"));
        client.setConnectionState(ConnectionState::Broken, QStringLiteral("broker unreachable: attempt %1").arg(i));
    }
    EXPECT_EQ(window.connectionText(), first);
    EXPECT_EQ(messages, 0);
    for (QWidget *top : QApplication::topLevelWidgets())   // no dialogs
        EXPECT_FALSE(top->isVisible() && qobject_cast<QDialog *>(top)) << top->metaObject()->className();
    // The data is still there.
    EXPECT_EQ(window.sessionModel()->rowCount(), 2);

    client.setConnectionState(ConnectionState::Connected, QStringLiteral("connected"));
    EXPECT_FALSE(window.sessionModel()->isStale());
    EXPECT_TRUE(window.connectionText().startsWith(u"Connected"));
}

TEST_F(MainWindowTest, PoolsPageAndLocalExecution)
{
    PoolInfo pool;
    pool.name = QStringLiteral("local");
    pool.endpoint = QStringLiteral("127.0.0.1:7701");
    pool.healthy = true;
    pool.local = true;
    pool.tiers = {TierInfo{QStringLiteral("lite"), QStringLiteral("bwrap"), 2, 0, 8, 1.0, 0}};
    client.pushPools({pool}, true);
    QTest::keyClick(&window, Qt::Key_3, Qt::ControlModifier);
    EXPECT_EQ(window.currentPage(), MainWindow::Page::Pools);
    EXPECT_EQ(window.poolsModel()->poolCount(), 1);
    auto *local = window.findChild<QLabel *>(QStringLiteral("localExecutionLabel"));
    ASSERT_NE(local, nullptr);
    EXPECT_TRUE(local->isVisible());
}

TEST_F(MainWindowTest, EveryFrequentActionHasAShortcutShownInAMenu)
{
    QStringList inMenus;
    for (QAction *menu : window.menuBar()->actions()) {
        for (QAction *action : menu->menu()->actions()) {
            if (!action->shortcut().isEmpty())
                inMenus << action->shortcut().toString();
        }
    }
    for (const char *shortcut : {"Ctrl+N", "Ctrl+F", "Ctrl+1", "Ctrl+2", "Ctrl+3", "Ctrl+.", "Ctrl+P", "F5"})
        EXPECT_TRUE(inMenus.contains(QString::fromLatin1(shortcut))) << shortcut << " in " << inMenus.join(u' ').toStdString();
}

TEST(MainWindowSettingsTest, LayoutGroupingPageAndThemeAreRemembered)
{
    ensureApplication();
    // Test mode: QSettings and QStandardPaths write under ~/.qttest, not the user's configuration.
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName(QStringLiteral("PaddockTest"));
    QApplication::setApplicationName(QStringLiteral("main_window_test"));
    QSettings().clear();
    {
        FakeConsoleClient client;
        MainWindow window(&client);
        window.resize(1100, 700);
        window.show();
        window.sessionsView()->setGrouped(true);
        window.showPage(MainWindow::Page::Pools);
        window.close();
    }
    {
        FakeConsoleClient client;
        MainWindow window(&client);
        EXPECT_TRUE(window.sessionsView()->isGrouped());
        EXPECT_EQ(window.currentPage(), MainWindow::Page::Pools);
        EXPECT_EQ(window.size(), QSize(1100, 700));
    }
    QSettings().clear();
}

} // namespace
