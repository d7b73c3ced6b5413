#include "app/screenshot_runner.h"

#include "app/governance_controller.h"
#include "app/main_window.h"
#include "models/cost_breakdown.h"
#include "models/decision_table_model.h"
#include "models/review_queue_model.h"
#include "models/pools_model.h"
#include "models/post_mortem_model.h"
#include "models/snapshot_files_model.h"
#include "models/session_table_model.h"
#include "models/trace_model.h"
#include "views/connection_dialog.h"
#include "views/cost_view.h"
#include "views/decisions_view.h"
#include "views/override_dialog.h"
#include "views/review_queue_view.h"
#include "views/debug_shell_panel.h"
#include "views/sandbox_inspector.h"
#include "views/snapshot_browser.h"
#include "views/session_view.h"
#include "views/sessions_view.h"
#include "views/stacked_bar_plot.h"
#include "views/submit_dialog.h"
#include "views/theme.h"
#include "views/trace_view.h"

#include <QApplication>
#include <QComboBox>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTreeView>
#include <QTableView>
#include <QTimer>

#include <cstdio>
#include <functional>

namespace paddock::console {

namespace {
constexpr int kTickMs = 100;
// Data counts as settled when it has not changed for this many ticks (the demo sessions finish
// within seconds; a shot mid-run is fine, a shot of an empty table is not).
constexpr int kSettleTicks = 15;
// The inspector needs a failure the pools kept; an older broker has no such API.
constexpr int kInspectorTimeoutMs = 20000;
// How long an empty governance answer (no review items, decisions or costs) is given to fill.
constexpr int kGovernanceSettleMs = 8000;
} // namespace

ScreenshotRunner::ScreenshotRunner(MainWindow *window, const QString &directory, QObject *parent)
    : QObject(parent)
    , m_window(window)
    , m_dir(directory)
{
    m_timer = new QTimer(this);
    m_timer->setInterval(kTickMs);
    connect(m_timer, &QTimer::timeout, this, &ScreenshotRunner::tick);
}

void ScreenshotRunner::start()
{
    if (!m_dir.exists() && !QDir().mkpath(m_dir.path())) {
        std::fprintf(stderr, "paddock: cannot create the screenshot directory %s\n", qPrintable(m_dir.path()));
        QTimer::singleShot(0, this, [this] { emit finished(1); });
        return;
    }
    m_window->resize(kWidth, kHeight);
    m_window->show();
    next(Step::Connect);
    m_timer->start();
}

void ScreenshotRunner::next(Step step)
{
    m_step = step;
    m_stepClock.start();
    m_stableTicks = 0;
    m_lastCount = -1;
}

bool ScreenshotRunner::waitFor(bool ready, const char *what)
{
    if (ready)
        return true;
    if (m_stepClock.elapsed() < m_timeoutMs)
        return false;
    std::fprintf(stderr, "paddock: screenshots: gave up waiting for %s after %d ms; saving the view as it is\n", what,
                 m_timeoutMs);
    m_missingData = true;
    return true;
}

bool ScreenshotRunner::waitForOptional(bool ready, bool brokerRefused, const char *what)
{
    if (ready)
        return true;
    if (m_stepClock.elapsed() < qMin(m_timeoutMs, kInspectorTimeoutMs) && !brokerRefused)
        return false;
    std::fprintf(stderr, "paddock: screenshots: %s %s; saving the view as it is\n", what,
                 brokerRefused ? "is refused by the broker" : "did not come");
    if (!brokerRefused)
        m_missingData = true;
    return true;
}

bool ScreenshotRunner::waitForGovernance(bool ready, bool answered, bool notOffered, const char *what)
{
    if (ready)
        return true;
    if (notOffered) {
        std::fprintf(stderr, "paddock: screenshots: %s: not offered by this broker yet; saving the view as it is\n", what);
        return true;
    }
    if (answered && m_stepClock.elapsed() >= kGovernanceSettleMs) {
        std::fprintf(stderr, "paddock: screenshots: %s: the broker has none; saving the view as it is\n", what);
        return true;
    }
    return waitForOptional(false, false, what);
}

bool ScreenshotRunner::save(const QString &name, QWidget *widget)
{
    QWidget *target = widget ? widget : m_window;
    QApplication::processEvents();
    const QImage image = target->grab().toImage();
    const QString path = m_dir.filePath(name);
    if (!image.save(path)) {
        std::fprintf(stderr, "paddock: cannot write %s\n", qPrintable(path));
        m_missingData = true;
        return false;
    }
    m_saved << path;
    std::printf("saved %s (%dx%d)\n", qPrintable(path), image.width(), image.height());
    std::fflush(stdout);
    return true;
}

QString ScreenshotRunner::pickSession() const
{
    // The most telling trace: a command running (the long-build demo, its span growing on the
    // timeline), else the hello-c demo (write, compile, run), else the session with the most steps.
    const SessionTableModel *model = m_window->sessionModel();
    QString best;
    QString helloC;
    qint64 bestSteps = -1;
    for (int row = 0; row < model->rowCount(); ++row) {
        const SessionInfo &s = model->sessionAt(row);
        if (s.status == SessionStatus::Running && s.lastEventKind.startsWith(u"tool."))
            return s.id;
        if (s.playbook == u"hello-c" && s.steps > 0)
            helloC = s.id;
        if (s.steps > bestSteps) {
            bestSteps = s.steps;
            best = s.id;
        }
    }
    return helloC.isEmpty() ? best : helloC;
}

void ScreenshotRunner::tick()
{
    switch (m_step) {
    case Step::Connect: stepConnect(); return;
    case Step::Sessions: stepSessions(); return;
    case Step::Grouped: stepGrouped(); return;
    case Step::OpenSession: stepOpenSession(); return;
    case Step::Session: stepSession(); return;
    case Step::SessionDark: stepSessionDark(); return;
    case Step::Pools: stepPools(); return;
    case Step::PoolsDark: stepPoolsDark(); return;
    case Step::Inspector: stepInspector(); return;
    case Step::InspectorLoaded: stepInspectorLoaded(); return;
    case Step::InspectorFiles: stepInspectorFiles(); return;
    case Step::InspectorFile: stepInspectorFile(); return;
    case Step::InspectorShell: stepInspectorShell(); return;
    case Step::InspectorShellRan: stepInspectorShellRan(); return;
    case Step::InspectorDark: stepInspectorDark(); return;
    case Step::Reviews: stepReviews(); return;
    case Step::ReviewItem: stepReviewItem(); return;
    case Step::Decisions: stepDecisions(); return;
    case Step::Cost: stepCost(); return;
    case Step::Dialogs: stepDialogs(); return;
    case Step::Done: return;
    }
}

void ScreenshotRunner::stepConnect()
{
    const int sessions = m_window->sessionModel()->rowCount();
    if (!waitFor(sessions > 0, "sessions from the broker"))
        return;
    // Settle: wait until no session has changed for a while (or the timeout).
    qint64 sum = 0;
    bool allDone = sessions > 0;
    for (int row = 0; row < sessions; ++row) {
        const SessionInfo &s = m_window->sessionModel()->sessionAt(row);
        sum += s.lastSeq;
        allDone = allDone && isTerminal(s.status);
    }
    if (int(sum) == m_lastCount)
        ++m_stableTicks;
    else
        m_stableTicks = 0;
    m_lastCount = int(sum);
    if (sessions > 0 && !allDone && m_stableTicks < kSettleTicks && m_stepClock.elapsed() < m_timeoutMs)
        return;
    m_window->showPage(MainWindow::Page::Sessions);
    m_window->sessionsView()->tableView()->selectRow(0);
    next(Step::Sessions);
}

void ScreenshotRunner::stepSessions()
{
    if (m_stepClock.elapsed() < 300)
        return;
    save(QStringLiteral("sessions.png"));
    m_window->sessionsView()->setGrouped(true);
    next(Step::Grouped);
}

void ScreenshotRunner::stepGrouped()
{
    if (m_stepClock.elapsed() < 300)
        return;
    save(QStringLiteral("sessions-grouped.png"));
    m_window->sessionsView()->setGrouped(false);
    m_window->openSession(pickSession());
    next(Step::OpenSession);
}

void ScreenshotRunner::stepOpenSession()
{
    const int rows = m_window->traceModel()->rowCount();
    if (rows == m_lastCount && rows > 0)
        ++m_stableTicks;
    else
        m_stableTicks = 0;
    m_lastCount = rows;
    if (!waitFor(rows > 0 && m_stableTicks >= 5, "the session's trace"))
        return;
    // Show a tool call with its output expanded, as a user would read it: the running one (the
    // last call), else hello-c's ./hello. Selecting it selects its span on the timeline.
    TraceModel *trace = m_window->traceModel();
    const int current = m_window->sessionModel()->rowOf(m_window->sessionView()->sessionId());
    const bool running = current >= 0 && m_window->sessionModel()->sessionAt(current).status == SessionStatus::Running;
    int row = -1;
    for (int r = 0; r < trace->rowCount(); ++r) {
        const QModelIndex index = trace->index(r, 0);
        if (index.data(TraceModel::KindRole).toString() == u"tool.call") {
            row = r;
            const QString summary = index.data(TraceModel::SummaryRole).toString();
            if (summary.contains(u"./") && !running)
                break;
        }
    }
    TraceView *view = m_window->sessionView()->traceView();
    if (row >= 0) {
        view->setCurrentIndex(view->indexOfRow(row));
        m_window->sessionView()->setDetailsExpanded(true);
    }
    next(Step::Session);
}

void ScreenshotRunner::stepSession()
{
    // The plot replots on its 100 ms timer; give it a few.
    if (m_stepClock.elapsed() < 500)
        return;
    save(QStringLiteral("session.png"));
    Theme::apply(ThemeMode::Dark);
    next(Step::SessionDark);
}

void ScreenshotRunner::stepSessionDark()
{
    if (m_stepClock.elapsed() < 500)
        return;
    save(QStringLiteral("session-dark.png"));
    Theme::apply(ThemeMode::System);
    m_window->showPage(MainWindow::Page::Pools);
    next(Step::Pools);
}

void ScreenshotRunner::stepPools()
{
    if (!waitFor(m_window->poolsModel()->poolCount() > 0, "the broker's pools"))
        return;
    // The checkpoint store's card; an older broker (or one without a store) refuses the figures.
    const PoolsModel *pools = m_window->poolsModel();
    if (!waitForOptional(pools->hasStorage(), !pools->hasStorage() && !pools->storageError().isEmpty(),
                         "the checkpoint store's figures"))
        return;
    if (m_stepClock.elapsed() < 400)
        return;
    save(QStringLiteral("pools.png"));
    Theme::apply(ThemeMode::Dark);
    next(Step::PoolsDark);
}

void ScreenshotRunner::stepPoolsDark()
{
    if (m_stepClock.elapsed() < 400)
        return;
    save(QStringLiteral("pools-dark.png"));
    Theme::apply(ThemeMode::System);
    m_window->showPage(MainWindow::Page::Inspector);   // asks for the recent failures
    next(Step::Inspector);
}

void ScreenshotRunner::stepInspector()
{
    SandboxInspector *inspector = m_window->inspector();
    const bool refused = inspector->findChild<QLabel *>(QStringLiteral("failuresStatus"))->text().startsWith(u"could not");
    const bool any = m_window->failuresModel()->rowCount() > 0;
    if (!waitForOptional(any, refused, "the pools' post-mortems"))
        return;
    if (!any) {
        save(QStringLiteral("inspector.png"));
        m_window->showPage(MainWindow::Page::Reviews);
        next(Step::Reviews);
        return;
    }
    // The newest failed command with a snapshot shows the most (a build that failed left its
    // files; an OOM or a timeout of the decision demos leaves an empty workspace), else the
    // newest failure with a snapshot.
    int row = -1;
    int withSnapshot = -1;
    for (int r = 0; r < m_window->failuresModel()->rowCount() && row < 0; ++r) {
        const PostMortemInfo &candidate = m_window->failuresModel()->postMortemAt(r);
        if (candidate.snapshotRef.isEmpty())
            continue;
        if (withSnapshot < 0)
            withSnapshot = r;
        if (candidate.reason == u"nonzero_exit")
            row = r;
    }
    if (row < 0)
        row = qMax(withSnapshot, 0);
    const PostMortemInfo &pm = m_window->failuresModel()->postMortemAt(row);
    m_window->inspectPostMortem(pm.pool, pm.sandboxId);
    inspector->showTab(SandboxInspector::ResourcesTab);
    next(Step::InspectorLoaded);
}

void ScreenshotRunner::stepInspectorLoaded()
{
    const PostMortemInfo pm = m_window->inspector()->postMortem();
    if (!waitFor(!pm.reason.isEmpty(), "the post-mortem"))
        return;
    if (m_stepClock.elapsed() < 500)
        return;
    save(QStringLiteral("inspector.png"));
    m_window->inspector()->showTab(SandboxInspector::FilesTab);
    next(Step::InspectorFiles);
}

void ScreenshotRunner::stepInspectorFiles()
{
    SnapshotFilesModel *files = m_window->snapshotFilesModel();
    const QString ref = m_window->inspector()->postMortem().snapshotRef;
    // Listed (an empty workspace lists nothing, and that is its data too).
    const bool listed = files->fileCount() > 0 || (!ref.isEmpty() && files->snapshotRef() == ref);
    if (!ref.isEmpty() && !waitForOptional(listed, false, "the snapshot's files"))
        return;
    // The first file, depth first: what the failed command was working on.
    std::function<QModelIndex(const QModelIndex &)> firstFile = [&](const QModelIndex &parent) -> QModelIndex {
        for (int r = 0; r < files->rowCount(parent); ++r) {
            const QModelIndex child = files->index(r, 0, parent);
            if (!child.data(SnapshotFilesModel::IsDirRole).toBool())
                return child;
        }
        for (int r = 0; r < files->rowCount(parent); ++r) {
            const QModelIndex found = firstFile(files->index(r, 0, parent));
            if (found.isValid())
                return found;
        }
        return {};
    };
    const QModelIndex file = firstFile({});
    if (file.isValid())
        m_window->inspector()->snapshotBrowser()->selectPath(file.data(SnapshotFilesModel::PathRole).toString());
    next(Step::InspectorFile);
}

void ScreenshotRunner::stepInspectorFile()
{
    SnapshotBrowser *browser = m_window->inspector()->snapshotBrowser();
    const bool shown = browser->currentPath().isEmpty() || !browser->noteText().startsWith(u"Reading");
    if (!waitForOptional(shown, false, "the snapshot file"))
        return;
    if (m_stepClock.elapsed() < 300)
        return;
    save(QStringLiteral("inspector-files.png"));
    m_window->inspector()->showTab(SandboxInspector::ShellTab);
    DebugShellPanel *shell = m_window->inspector()->debugShell();
    if (shell->openButton()->isEnabled())
        shell->openButton()->click();
    next(Step::InspectorShell);
}

void ScreenshotRunner::stepInspectorShell()
{
    DebugShellPanel *shell = m_window->inspector()->debugShell();
    const bool failed = shell->transcript().contains(u"could not open");
    if (!waitForOptional(!shell->shellId().isEmpty() || failed, false, "the debug shell"))
        return;
    if (!shell->shellId().isEmpty()) {
        shell->commandEdit()->setText(QStringLiteral("ls -la && tail -n 3 *.log 2>/dev/null; id -un"));
        QMetaObject::invokeMethod(shell->commandEdit(), "returnPressed");
    }
    next(Step::InspectorShellRan);
}

void ScreenshotRunner::stepInspectorShellRan()
{
    DebugShellPanel *shell = m_window->inspector()->debugShell();
    if (!waitForOptional(shell->shellId().isEmpty() || !shell->isBusy(), false, "the debug shell's command"))
        return;
    if (m_stepClock.elapsed() < 300)
        return;
    save(QStringLiteral("inspector-shell.png"));
    if (!shell->shellId().isEmpty())
        shell->openButton()->click();   // close it: the sandbox goes back
    m_window->inspector()->showTab(SandboxInspector::ResourcesTab);
    Theme::apply(ThemeMode::Dark);
    next(Step::InspectorDark);
}

void ScreenshotRunner::stepInspectorDark()
{
    if (m_stepClock.elapsed() < 500)
        return;
    save(QStringLiteral("inspector-dark.png"));
    Theme::apply(ThemeMode::System);
    m_window->showPage(MainWindow::Page::Reviews);
    next(Step::Reviews);
}

void ScreenshotRunner::stepReviews()
{
    ReviewQueueView *view = m_window->reviewQueueView();
    const bool refused = !m_window->governance()->available() || view->queueStatusText().contains(u"UNIMPLEMENTED");
    const int items = m_window->governance()->reviewModel()->itemCount();
    const bool answered = view->queueStatusText().startsWith(u"Nothing waits");
    if (!waitForGovernance(items > 0, answered, refused, "the review queue"))
        return;
    if (items > 0) {
        // A diff shows the most; else the first item.
        const ReviewQueueModel *model = m_window->governance()->reviewModel();
        QString pick = model->itemAt(0).id;
        for (int row = 0; row < model->itemCount(); ++row) {
            if (model->itemAt(row).changeFormat == u"diff") {
                pick = model->itemAt(row).id;
                break;
            }
        }
        view->selectItems({pick});
    }
    next(Step::ReviewItem);
}

void ScreenshotRunner::stepReviewItem()
{
    ReviewQueueView *view = m_window->reviewQueueView();
    const bool none = view->currentItemId().isEmpty();
    if (!none && !waitForOptional(!view->detailText().contains(u"Reading the full change"), false, "the review item's change"))
        return;
    if (m_stepClock.elapsed() < 400)
        return;
    save(QStringLiteral("reviews.png"));
    m_window->showPage(MainWindow::Page::Decisions);
    next(Step::Decisions);
}

void ScreenshotRunner::stepDecisions()
{
    DecisionsView *view = m_window->decisionsView();
    const bool refused = !m_window->governance()->available() || view->statusText().contains(u"UNIMPLEMENTED");
    if (m_stepClock.elapsed() < 600)
        return;
    const bool answered = view->statusText().startsWith(u"No environment decisions");
    if (!waitForGovernance(m_window->governance()->decisionModel()->decisionCount() > 0, answered, refused, "the decisions"))
        return;
    // The first over- or under-allocated decision, so its tint and fitting tier show.
    const DecisionTableModel *model = m_window->governance()->decisionModel();
    for (int row = 0; row < model->decisionCount(); ++row) {
        if (DecisionTableModel::allocation(model->decisionAt(row)) != 0) {
            view->tableView()->selectRow(row);
            break;
        }
    }
    view->byTierPlot()->replotNow();
    view->byChooserPlot()->replotNow();
    save(QStringLiteral("decisions.png"));
    // A demo's spend is minutes old: the last hour shows it in minute buckets, not one sliver
    // of a day.
    m_window->costView()->rangeCombo()->setCurrentIndex(0);
    m_window->showPage(MainWindow::Page::Cost);
    next(Step::Cost);
}

void ScreenshotRunner::stepCost()
{
    CostView *view = m_window->costView();
    const bool refused = !m_window->governance()->available() || view->spendStatusText().contains(u"UNIMPLEMENTED");
    if (m_stepClock.elapsed() < 600)
        return;
    // The answer to the range picked above (the totals name their range).
    const bool answered = view->totalsText().contains(view->rangeCombo()->currentText());
    if (!waitForGovernance(answered && m_window->governance()->costBreakdown().totalMicros() > 0, answered, refused,
                           "the cost summary"))
        return;
    view->spendPlot()->replotNow();
    view->budgetPlot()->replotNow();
    save(QStringLiteral("cost.png"));
    next(Step::Dialogs);
}

void ScreenshotRunner::stepDialogs()
{
    SubmitDialog submit(m_window);
    submit.setSource(SubmitDialog::Source::Goal);
    submit.goalEdit()->setText(QStringLiteral("Find the flaky test in the parser suite and fix it"));
    // What the demo pools offer, with their prices and limits.
    QList<TierInfo> tiers;
    for (int row = 0; row < m_window->poolsModel()->rowCount(); ++row) {
        const PoolInfo pool = m_window->poolsModel()->index(row, 0).data(PoolsModel::PoolInfoRole).value<PoolInfo>();
        tiers += pool.tiers;
    }
    if (tiers.isEmpty())
        tiers << TierInfo{QStringLiteral("lite"), QStringLiteral("bwrap")};
    submit.setTiers(tiers);
    submit.tierCombo()->setCurrentIndex(1);
    submit.show();
    save(QStringLiteral("submit-dialog.png"), &submit);
    submit.hide();
    ConnectionDialog connection(m_window);
    connection.show();
    save(QStringLiteral("connection-dialog.png"), &connection);
    connection.hide();
    if (m_window->sessionModel()->rowCount() > 0) {
        OverrideDialog override(m_window->sessionModel()->sessionAt(0), tiers, m_window);
        override.reasonEdit()->setText(QStringLiteral("the test suite needs more memory than lite has"));
        override.show();
        save(QStringLiteral("override-dialog.png"), &override);
        override.hide();
    }
    next(Step::Done);
    m_timer->stop();
    emit finished(m_missingData ? 2 : 0);
}

} // namespace paddock::console
