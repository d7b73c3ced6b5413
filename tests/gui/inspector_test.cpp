// The sandbox inspector and the Pools view, offscreen, in the real window over FakeConsoleClient,
// driven with QTest input: a failed session opens its sandbox from the sessions table, a file of
// its snapshot is read and downloaded, a command runs in the debug shell, the session is retried
// on another tier; the Pools view shows latency, refill, idle cost, health over time and local
// execution; the sandbox card plots live samples.

#include "app/client/fake_console_client.h"
#include "app/main_window.h"
#include "app/screenshot_runner.h"
#include "models/pools_model.h"
#include "models/post_mortem_model.h"
#include "models/session_table_model.h"
#include "models/snapshot_files_model.h"
#include "models/trace_model.h"
#include "views/debug_shell_panel.h"
#include "views/pool_charts.h"
#include "views/pools_view.h"
#include "views/resource_curve_plot.h"
#include "views/sandbox_card.h"
#include "views/sandbox_inspector.h"
#include "views/session_view.h"
#include "views/sessions_view.h"
#include "views/snapshot_browser.h"

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QDir>
#include <QImage>
#include <QSignalSpy>
#include <QTest>
#include <QTimer>
#include <QToolBar>
#include <QTreeView>

#include <gtest/gtest.h>

#include <limits>

using namespace paddock::console;

namespace {

void ensureApplication()
{
    static QApplication *app = [] {
        if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
            qputenv("QT_QPA_PLATFORM", "offscreen");
        static int argc = 1;
        static char name[] = "paddock_inspector_test";
        static char *argv[] = {name, nullptr};
        return new QApplication(argc, argv);
    }();
    Q_UNUSED(app);
}

struct ApplicationGuard {
    ApplicationGuard() { ensureApplication(); }
};

SessionInfo session(const QString &id, SessionStatus status, const QString &playbook)
{
    SessionInfo s;
    s.id = id;
    s.agent = QStringLiteral("default");
    s.goal = QStringLiteral("Build it");
    s.playbook = playbook;
    s.model = QStringLiteral("scripted");
    s.tier = QStringLiteral("lite");
    s.pool = QStringLiteral("local");
    s.sandboxId = QStringLiteral("sb-oom");
    s.status = status;
    s.statusReason = status == SessionStatus::Failed ? QStringLiteral("command killed: oom_killed") : QString();
    s.createdUnixMs = 1'700'000'000'000;
    s.updatedUnixMs = 1'700'000'030'000;
    s.lastSeq = 9;
    return s;
}

PostMortemInfo oomPostMortem()
{
    PostMortemInfo pm;
    pm.pool = QStringLiteral("local");
    pm.sandboxId = QStringLiteral("sb-oom");
    pm.sessionId = QStringLiteral("s-fail");
    pm.tier = QStringLiteral("lite");
    pm.runtime = QStringLiteral("bwrap");
    pm.reason = QStringLiteral("oom_killed");
    pm.exitCode = -1;
    pm.signal = 9;
    pm.argv = {QStringLiteral("/bin/sh"), QStringLiteral("-c"), QStringLiteral("python3 grow.py")};
    pm.durationMs = 4200;
    pm.lastStdout = "allocating 48 MiB\nallocating 56 MiB\n";
    pm.lastStderr = "Killed\n";
    pm.stdoutBytes = 36;
    pm.stderrBytes = 7;
    const qint64 mib = 1024 * 1024;
    for (int i = 0; i < 5; ++i)
        pm.samples.append({1'700'000'020'000 + i * 1000, 0.9, (16 + i * 12) * mib, 2, i == 4});
    pm.processes = {{4242, 1, QStringLiteral("R"), 63 * mib, QStringLiteral("python3 grow.py")}};
    pm.processesNote = QStringLiteral("taken from the sandbox's cgroup before the kill");
    pm.snapshotRef = QStringLiteral("lite-sb-oom-1");
    pm.snapshotSizeBytes = 900;
    pm.timeUnixMs = 1'700'000'024'500;
    pm.memoryLimitBytes = 64 * mib;
    pm.cpuLimit = 1;
    pm.detail = QStringLiteral("python3 grow.py was OOM killed at 64 MiB");
    return pm;
}

PoolInfo localPool(int warm, bool healthy = true)
{
    PoolInfo p;
    p.name = QStringLiteral("local");
    p.endpoint = QStringLiteral("127.0.0.1:7070");
    p.healthy = healthy;
    p.local = true;
    TierInfo lite{QStringLiteral("lite"), QStringLiteral("bwrap"), warm, 1, 8, 0.9, 2};
    lite.latencyBucketsUs = {250, 500, 1000, 2000, std::numeric_limits<qint64>::max()};
    lite.latencyCounts = {30, 12, 3, 1, 2};
    lite.refillPerSecond = 4;
    lite.pricePerHourUsd = 0.01;
    lite.memoryBytes = 64 * 1024 * 1024;
    lite.cpu = 1;
    TierInfo standard{QStringLiteral("standard"), QStringLiteral("runsc"), 1, 0, 4, 0.5, 0};
    standard.pricePerHourUsd = 0.04;
    p.tiers = {lite, standard};
    return p;
}

class InspectorTest : public ::testing::Test, public ApplicationGuard {
protected:
    InspectorTest() : window(&client, MainWindow::Options{.persistSettings = false}) {}

    void SetUp() override
    {
        window.connectToBroker(QStringLiteral("unix:/fake/broker.sock"));
        client.pushSessions({session(QStringLiteral("s-fail"), SessionStatus::Failed, QStringLiteral("oom-demo")),
                             session(QStringLiteral("s-ok"), SessionStatus::Succeeded, QStringLiteral("hello-c"))});
        client.pushPools({localPool(3)}, true);
        client.setPostMortems({oomPostMortem()});
        SnapshotFile src{QStringLiteral("src"), true};
        SnapshotFile grow{QStringLiteral("src/grow.py"), false, false, {}, 62, 0644, 1'700'000'010'000};
        SnapshotFile blob{QStringLiteral("data.bin"), false, false, {}, 6, 0644, 1'700'000'010'000};
        client.setSnapshot(QStringLiteral("local"), QStringLiteral("lite-sb-oom-1"), {src, grow, blob},
                           {{QStringLiteral("src/grow.py"), QByteArray("chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))\n")},
                            {QStringLiteral("data.bin"), QByteArray("\x00\x01\x02\xff\xfe\xfd", 6)}});
        window.resize(1280, 800);
        window.show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(&window));
        window.activateWindow();
    }

    // Opens the failed session's sandbox from the sessions table: select its row with a click,
    // then the context menu's action (the same QAction the menu shows).
    void openFailedFromTable()
    {
        QTableView *table = window.sessionsView()->tableView();
        window.sessionsView()->selectSession(QStringLiteral("s-fail"));
        const QModelIndex index = table->currentIndex();
        ASSERT_TRUE(index.isValid());
        QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualRect(index).center());
        ASSERT_EQ(window.currentSessionId(), QStringLiteral("s-fail"));
        ASSERT_TRUE(table->actions().contains(window.inspectAction()));
        ASSERT_TRUE(window.inspectAction()->isEnabled());
        window.inspectAction()->trigger();
    }

    FakeConsoleClient client;
    MainWindow window;
};

TEST_F(InspectorTest, AFailedSessionOpensItsSandboxFromTheSessionsTable)
{
    EXPECT_EQ(window.sessionsView()->tableView()->contextMenuPolicy(), Qt::ActionsContextMenu);
    client.clearCalls();
    openFailedFromTable();
    EXPECT_EQ(window.currentPage(), MainWindow::Page::Inspector);
    EXPECT_TRUE(client.calls().contains(u"postmortems s-fail")) << client.calls().join(u", ").toStdString();
    EXPECT_TRUE(client.calls().contains(u"postmortem local sb-oom"));
    SandboxInspector *inspector = window.inspector();
    EXPECT_EQ(inspector->postMortem().sandboxId, QStringLiteral("sb-oom"));
    const QString header = inspector->headerText();
    EXPECT_TRUE(header.contains(QStringLiteral("Out of memory"))) << header.toStdString();
    EXPECT_TRUE(header.contains(QStringLiteral("signal 9 (SIGKILL)")));
    EXPECT_TRUE(header.contains(QStringLiteral("$ /bin/sh -c python3 grow.py")));
    EXPECT_TRUE(inspector->outputText().contains(QStringLiteral("Killed")));
    // The curve up to the failure reaches the limit.
    inspector->resourcePlot()->replotNow();
    EXPECT_EQ(inspector->resourcePlot()->pointCount(), 5);
    EXPECT_TRUE(inspector->resourcePlot()->summaryText().contains(QStringLiteral("of 64 MiB"))) << inspector->resourcePlot()->summaryText().toStdString();
    // The snapshot was listed.
    EXPECT_TRUE(client.calls().contains(u"files local lite-sb-oom-1"));
    EXPECT_EQ(window.snapshotFilesModel()->fileCount(), 2);
}

TEST_F(InspectorTest, TheSessionViewHasTheButtonAndTheTraceNamesThePostMortem)
{
    window.openSession(QStringLiteral("s-fail"));
    client.pushEvents(QStringLiteral("s-fail"),
                      {EventRecord{1, 1'700'000'024'600, QStringLiteral("tool.result"),
                                   R"({"name":"run_command","command":"python3 grow.py","exit_code":-1,"signal":9,"reason":"oom_killed","post_mortem":{"pool":"local","sandbox_id":"sb-oom"}})",
                                   0}});
    ASSERT_TRUE(window.sessionView()->toolBar()->actions().contains(window.inspectAction()));
    client.clearCalls();
    QTest::keyClick(&window, Qt::Key_I, Qt::ControlModifier);
    EXPECT_EQ(window.currentPage(), MainWindow::Page::Inspector);
    // Straight to the post-mortem the trace names, no search.
    EXPECT_FALSE(client.calls().contains(u"postmortems s-fail")) << client.calls().join(u", ").toStdString();
    EXPECT_TRUE(client.calls().contains(u"postmortem local sb-oom"));
}

TEST_F(InspectorTest, TheFailedCommandsPeakAndCpuTimeComeFromItsResult)
{
    window.openSession(QStringLiteral("s-fail"));
    client.pushEvents(QStringLiteral("s-fail"),
                      {EventRecord{1, 1'700'000'024'600, QStringLiteral("tool.result"),
                                   R"({"name":"run_command","command":"python3 grow.py","exit_code":-1,"signal":9,"reason":"oom_killed",)"
                                   R"("duration_ms":4200,"peak_memory_bytes":67108864,"peak_memory_scope":"command","cpu_time_ms":3900,)"
                                   R"("post_mortem":{"pool":"local","sandbox_id":"sb-oom"}})",
                                   0}});
    QTest::keyClick(&window, Qt::Key_I, Qt::ControlModifier);
    SandboxInspector *inspector = window.inspector();
    ASSERT_TRUE(QTest::qWaitFor([&] { return inspector->postMortem().sandboxId == u"sb-oom"; }));
    // Samples fell inside this command: the curve has them, and the result's figures are said too.
    EXPECT_EQ(inspector->commandResourcesText(), QStringLiteral("The command, from its result: peak 64 MiB, CPU 3.9 s"));
    // Another failure, of no command in this trace: no figures.
    PostMortemInfo other = oomPostMortem();
    other.sandboxId = QStringLiteral("sb-other");
    inspector->showPostMortem(other);
    EXPECT_EQ(inspector->commandResourcesText(), QString());
}

TEST_F(InspectorTest, ReadsAFileOfTheSnapshotAndDownloadsIt)
{
    openFailedFromTable();
    SandboxInspector *inspector = window.inspector();
    inspector->showTab(SandboxInspector::FilesTab);
    SnapshotBrowser *browser = inspector->snapshotBrowser();
    QTreeView *tree = browser->treeView();
    QApplication::processEvents();
    // Keyboard: into the tree, down to src/grow.py.
    tree->setFocus();
    const QModelIndex grow = window.snapshotFilesModel()->indexOfPath(QStringLiteral("src/grow.py"));
    ASSERT_TRUE(grow.isValid());
    tree->expand(grow.parent());
    QTest::mouseClick(tree->viewport(), Qt::LeftButton, {}, tree->visualRect(grow).center());
    EXPECT_EQ(browser->currentPath(), QStringLiteral("src/grow.py"));
    EXPECT_TRUE(client.calls().contains(u"read local lite-sb-oom-1 src/grow.py"));
    EXPECT_TRUE(browser->viewerText().contains(QStringLiteral("bytearray(8 << 20)"))) << browser->viewerText().toStdString();
    EXPECT_EQ(browser->noteText(), QStringLiteral("text, 62 B"));

    // A binary file reads as hex.
    QTest::keyClick(tree, Qt::Key_Down);
    ASSERT_EQ(browser->currentPath(), QStringLiteral("data.bin"));
    EXPECT_EQ(browser->noteText(), QStringLiteral("binary, 6 bytes"));
    EXPECT_TRUE(browser->viewerText().startsWith(QStringLiteral("00000000  00 01 02 ff fe fd")));

    // Download, with progress, to the file the (replaced) save dialog names.
    QTemporaryDir dir;
    const QString target = dir.filePath(QStringLiteral("grow.py"));
    browser->setSaveFileChooser([&](const QString &suggested) {
        EXPECT_TRUE(suggested.endsWith(QStringLiteral("grow.py")));
        return target;
    });
    tree->setCurrentIndex(grow);
    client.setDownloadChunkSize(16);
    client.setAutoFlush(false);
    QTest::mouseClick(browser->downloadButton(), Qt::LeftButton);
    EXPECT_TRUE(browser->progressBar()->isVisibleTo(browser));
    EXPECT_FALSE(browser->downloadButton()->isEnabled());
    // Moving to a directory meanwhile: once the download ends there is still nothing to download.
    tree->setCurrentIndex(grow.parent());
    client.flush();
    EXPECT_FALSE(browser->progressBar()->isVisibleTo(browser));
    EXPECT_FALSE(browser->downloadButton()->isEnabled());
    EXPECT_TRUE(browser->noteText().startsWith(QStringLiteral("saved"))) << browser->noteText().toStdString();
    QFile saved(target);
    ASSERT_TRUE(saved.open(QIODevice::ReadOnly));
    EXPECT_EQ(saved.readAll(), QByteArray("chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))\n"));
}

TEST_F(InspectorTest, RunsACommandInTheDebugShell)
{
    openFailedFromTable();
    SandboxInspector *inspector = window.inspector();
    inspector->showTab(SandboxInspector::ShellTab);
    DebugShellPanel *shell = inspector->debugShell();
    client.setExecHandler([](const QString &line) {
        if (line.startsWith(u"printf"))
            return FakeConsoleClient::ExecResult{"no newline", {}, 0};
        return FakeConsoleClient::ExecResult{"grow.py\n", line.contains(u"missing") ? QByteArray("no such file\n") : QByteArray(),
                                             line.contains(u"missing") ? 1 : 0};
    });
    // Open on another tier than the failed one.
    const int standard = shell->tierCombo()->findData(QStringLiteral("standard"));
    ASSERT_GE(standard, 0);
    shell->tierCombo()->setCurrentIndex(standard);
    EXPECT_FALSE(shell->commandEdit()->isEnabled());
    QTest::mouseClick(shell->openButton(), Qt::LeftButton);
    EXPECT_TRUE(client.calls().contains(u"shell local sb-oom standard")) << client.calls().join(u", ").toStdString();
    ASSERT_EQ(shell->shellId(), QStringLiteral("shell-1"));
    ASSERT_TRUE(shell->commandEdit()->isEnabled());
    QTest::keyClicks(shell->commandEdit(), QStringLiteral("ls src"));
    QTest::keyClick(shell->commandEdit(), Qt::Key_Return);
    EXPECT_TRUE(client.calls().contains(u"exec shell-1 ls src"));
    EXPECT_TRUE(shell->transcript().contains(QStringLiteral("$ ls src\ngrow.py\n# exit 0"))) << shell->transcript().toStdString();
    QTest::keyClicks(shell->commandEdit(), QStringLiteral("cat missing"));
    QTest::keyClick(shell->commandEdit(), Qt::Key_Return);
    EXPECT_TRUE(shell->transcript().contains(QStringLiteral("no such file\n# exit 1")));
    // Output without a final newline: the exit still starts a line of its own.
    QTest::keyClicks(shell->commandEdit(), QStringLiteral("printf x"));
    QTest::keyClick(shell->commandEdit(), Qt::Key_Return);
    EXPECT_TRUE(shell->transcript().contains(QStringLiteral("no newline\n# exit 0\n"))) << shell->transcript().toStdString();
    // Up recalls the last command.
    QTest::keyClick(shell->commandEdit(), Qt::Key_Up);
    EXPECT_EQ(shell->commandEdit()->text(), QStringLiteral("printf x"));
    QTest::mouseClick(shell->openButton(), Qt::LeftButton);   // now "Close shell"
    EXPECT_TRUE(client.calls().contains(u"close shell-1"));
    EXPECT_TRUE(shell->shellId().isEmpty());
    EXPECT_FALSE(shell->commandEdit()->isEnabled());
}

TEST_F(InspectorTest, RetriesTheSessionOnAnotherTier)
{
    openFailedFromTable();
    SandboxInspector *inspector = window.inspector();
    // Another tier than the failed one is preselected.
    EXPECT_EQ(inspector->retryTierCombo()->currentData().toString(), QStringLiteral("standard"));
    EXPECT_TRUE(inspector->retryText().contains(QStringLiteral("playbook oom-demo"))) << inspector->retryText().toStdString();
    QTest::mouseClick(inspector->retryButton(), Qt::LeftButton);
    const SubmitRequest submitted = client.lastSubmit();
    EXPECT_EQ(submitted.playbook, QStringLiteral("oom-demo"));
    EXPECT_EQ(submitted.tier, QStringLiteral("standard"));
    EXPECT_TRUE(submitted.tags.contains(u"retry-of:s-fail"));
}

TEST_F(InspectorTest, RecentFailuresListOpensOneAndErrorsAreSaid)
{
    window.showPage(MainWindow::Page::Inspector);
    EXPECT_TRUE(client.calls().contains(u"postmortems "));
    ASSERT_EQ(window.failuresModel()->rowCount(), 1);
    QTableView *failures = window.inspector()->failuresView();
    QTest::mouseClick(failures->viewport(), Qt::LeftButton, {}, failures->visualRect(window.failuresModel()->index(0, 1)).center());
    EXPECT_EQ(window.inspector()->postMortem().sandboxId, QStringLiteral("sb-oom"));

    // A session without post-mortems says so.
    client.clearCalls();
    window.inspectSession(QStringLiteral("s-ok"));
    EXPECT_TRUE(window.inspector()->headerText().contains(QStringLiteral("left no post-mortem"))) << window.inspector()->headerText().toStdString();
    // A pool that refuses says why.
    client.failNextOperatorCall(QStringLiteral("could not read the post-mortem: pool local unreachable"));
    window.inspectPostMortem(QStringLiteral("local"), QStringLiteral("sb-oom"));
    EXPECT_TRUE(window.inspector()->headerText().contains(QStringLiteral("pool local unreachable")));
}

TEST_F(InspectorTest, PoolsViewShowsLatencyRefillIdleCostHealthAndLocalExecution)
{
    window.showPage(MainWindow::Page::Pools);
    PoolsView *pools = window.poolsView();
    client.pushPools({localPool(2, false)}, true);
    client.pushPools({localPool(3)}, true);
    QApplication::processEvents();
    EXPECT_TRUE(pools->findChild<QLabel *>(QStringLiteral("localExecutionBanner"))->isVisible());
    EXPECT_TRUE(pools->summaryText().contains(QStringLiteral("idle warm capacity $0.070/h"))) << pools->summaryText().toStdString();
    // The first tier's histogram; its pool's health with the unhealthy poll shaded.
    EXPECT_EQ(pools->latencyPlot()->barCount(), 5);
    EXPECT_TRUE(pools->latencyPlot()->titleText().contains(QStringLiteral("48 claim(s)"))) << pools->latencyPlot()->titleText().toStdString();
    EXPECT_EQ(pools->healthPlot()->unhealthySpans(), 1);
    EXPECT_TRUE(pools->healthPlot()->titleText().contains(QStringLiteral("3 look(s)")));
    // Selecting the standard tier shows its (empty) histogram.
    QTreeView *tree = pools->treeView();
    const QModelIndex standard = tree->model()->index(1, 0, tree->model()->index(0, 0));
    QTest::mouseClick(tree->viewport(), Qt::LeftButton, {}, tree->visualRect(standard).center());
    EXPECT_TRUE(pools->latencyPlot()->titleText().contains(QStringLiteral("standard: no claims yet")));
}

TEST_F(InspectorTest, TheSandboxCardPlotsLiveSamples)
{
    window.openSession(QStringLiteral("s-ok"));
    client.pushEvents(QStringLiteral("s-ok"),
                      {EventRecord{1, 1'700'000'000'000, QStringLiteral("sandbox.claimed"),
                                   R"({"pool":"local","sandbox_id":"sb-live","tier":"lite","warm":true,"claim_ms":1.2})", 0}});
    SandboxCard *card = window.sessionView()->sandboxCard();
    // The session is finished, so nothing is watched; a running one is.
    client.clearCalls();
    client.pushSessions({session(QStringLiteral("s-run"), SessionStatus::Running, QStringLiteral("hello-c"))});
    window.openSession(QStringLiteral("s-run"));
    client.pushEvents(QStringLiteral("s-run"),
                      {EventRecord{1, 1'700'000'000'000, QStringLiteral("sandbox.claimed"),
                                   R"({"pool":"local","sandbox_id":"sb-live","tier":"lite","warm":true,"claim_ms":1.2})", 0}});
    EXPECT_TRUE(client.calls().contains(u"samples local sb-live")) << client.calls().join(u", ").toStdString();
    client.pushSamples(QStringLiteral("sb-live"), {{1'700'000'001'000, 0.5, 8 << 20, 1, false}, {1'700'000'002'000, 0.7, 12 << 20, 1, false}});
    client.pushSamples(QStringLiteral("sb-other"), {{1'700'000'003'000, 0.5, 8 << 20, 1, false}});
    EXPECT_EQ(card->samples().size(), 2);
    card->samplePlot()->replotNow();
    EXPECT_EQ(card->samplePlot()->pointCount(), 2);
    EXPECT_TRUE(card->samplePlot()->summaryText().contains(QStringLiteral("12.0 MiB"))) << card->samplePlot()->summaryText().toStdString();
}

TEST_F(InspectorTest, TheScreenshotRunnerSavesThePoolsAndInspectorViews)
{
    // The runner over the fake: the trace of whichever session it opens is answered here.
    QTimer feeder;
    QObject::connect(&feeder, &QTimer::timeout, &window, [&] {
        for (const QString &id : client.followed()) {
            if (window.traceModel()->rowCount() == 0 && window.sessionView()->sessionId() == id)
                client.pushEvents(id, {EventRecord{1, 1'700'000'000'000, QStringLiteral("session.created"), R"({"goal":"Build it"})", 0}});
        }
    });
    feeder.start(50);
    client.setExecHandler([](const QString &) { return FakeConsoleClient::ExecResult{"total 8\ndrwxr-xr-x 2 sandbox sandbox 4096 src\nsandbox\n", {}, 0}; });
    QTemporaryDir temp;
    const QString dir = qEnvironmentVariableIsEmpty("PADDOCK_INSPECTOR_SHOTS") ? temp.path() : qEnvironmentVariable("PADDOCK_INSPECTOR_SHOTS");
    // The checkpoint store's card in the Pools view: the fake answers what a broker would.
    CheckpointStorage storage;
    storage.store = QStringLiteral("broker");
    storage.where = QStringLiteral("the broker's checkpoint directory /var/lib/paddock/checkpoints");
    storage.retentionHours = 168;
    storage.chunks = 3401;
    storage.manifests = 212;
    storage.bytesStored = 1288490188;
    storage.logicalBytes = 6227702579;
    storage.dedupRatio = 4.8;
    client.pushStorage(storage);
    ScreenshotRunner runner(&window, dir);
    runner.setTimeoutMs(5000);
    QSignalSpy finished(&runner, &ScreenshotRunner::finished);
    runner.start();
    ASSERT_TRUE(finished.wait(60000));
    EXPECT_EQ(finished.first().first().toInt(), 0);
    for (const char *name : {"pools.png", "pools-dark.png", "inspector.png", "inspector-files.png", "inspector-shell.png",
                             "inspector-dark.png"}) {
        QImage image;
        ASSERT_TRUE(image.load(QDir(dir).filePath(QLatin1String(name)))) << name;
        EXPECT_EQ(image.size(), QSize(ScreenshotRunner::kWidth, ScreenshotRunner::kHeight)) << name;
    }
    EXPECT_TRUE(client.calls().contains(u"exec shell-1 ls -la && tail -n 3 *.log 2>/dev/null; id -un"));
    EXPECT_TRUE(client.calls().contains(u"close shell-1"));
}

} // namespace
