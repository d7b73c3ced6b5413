// MainWindow, continued: its actions and menus. The window owns every action (with its shortcut,
// shown in the menus) so each has exactly one; the views' toolbars and context menus show the same
// QAction objects. updateActions() enables them for the current session and the principal's role.
//
// Threads: GUI thread only, like the rest of MainWindow (see main_window.h).

#include "app/main_window.h"

#include "app/client/console_client.h"
#include "app/governance_controller.h"
#include "models/session_table_model.h"
#include "views/session_view.h"
#include "views/sessions_view.h"
#include "views/theme.h"
#include "views/trace_view.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QMenuBar>
#include <QMessageBox>
#include <QTableView>
#include <QToolBar>
#include <QTreeView>

namespace paddock::console {

void MainWindow::createActions()
{
    auto make = [this](const QString &text, const QKeySequence &shortcut, auto slot) {
        auto *action = new QAction(text, this);
        if (!shortcut.isEmpty())
            action->setShortcut(shortcut);
        action->setShortcutContext(Qt::WindowShortcut);
        connect(action, &QAction::triggered, this, slot);
        addAction(action);
        return action;
    };
    m_submitAction = make(tr("&Submit session…"), QKeySequence(Qt::CTRL | Qt::Key_N), &MainWindow::submitSession);
    m_submitAction->setToolTip(tr("Submit a session from a playbook or a goal (Ctrl+N)"));
    m_connectAction = make(tr("&Connect to broker…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O), &MainWindow::chooseBroker);
    m_quitAction = make(tr("&Quit"), QKeySequence::Quit, &MainWindow::close);
    m_quitAction->setMenuRole(QAction::QuitRole);

    m_openAction = make(tr("&Open session"), QKeySequence(Qt::CTRL | Qt::Key_O), [this] {
        const QString id = m_sessionsView->currentSessionId();
        if (!id.isEmpty())
            openSession(id);
    });
    m_openAction->setToolTip(tr("Open the selected session (Enter or Ctrl+O)"));
    m_pauseResumeAction = make(tr("&Pause"), QKeySequence(Qt::CTRL | Qt::Key_P), &MainWindow::pauseOrResumeCurrentSession);
    m_cancelAction = make(tr("&Cancel session"), QKeySequence(Qt::CTRL | Qt::Key_Period), &MainWindow::cancelCurrentSession);
    m_cancelAction->setToolTip(tr("Cancel the session (Ctrl+.)"));
    m_inspectAction = make(tr("&Inspect sandbox"), QKeySequence(Qt::CTRL | Qt::Key_I), [this] {
        const QString id = currentSessionId();
        if (!id.isEmpty())
            inspectSession(id);
    });
    m_inspectAction->setToolTip(tr("Open the sandbox inspector on this session's failure: post-mortem, resources, "
                                   "snapshot files, debug shell (Ctrl+I)"));
    m_overrideAction = make(tr("Override &tier…"), QKeySequence(Qt::CTRL | Qt::Key_T), [this] {
        m_governance->overrideTier(currentSessionId());
    });
    m_overrideAction->setToolTip(tr("Move the session to another tier at its next step, with a reason (Ctrl+T)"));
    m_backAction = make(tr("&Back to sessions"), QKeySequence(Qt::ALT | Qt::Key_Left), [this] { showPage(Page::Sessions); });

    m_searchAction = make(tr("&Find session…"), QKeySequence::Find, [this] {
        showPage(Page::Sessions);
        m_sessionsView->focusSearch();
    });
    m_groupAction = make(tr("&Group by status"), QKeySequence(Qt::CTRL | Qt::Key_G), [this](bool checked) {
        m_sessionsView->setGrouped(checked);
    });
    m_groupAction->setCheckable(true);
    m_followAction = make(tr("&Follow tail"), QKeySequence(Qt::CTRL | Qt::Key_End), [this](bool checked) {
        m_sessionView->traceView()->setFollowing(checked);
    });
    m_followAction->setCheckable(true);
    m_followAction->setChecked(true);
    m_detailsAction = make(tr("Show &details"), QKeySequence(Qt::CTRL | Qt::Key_D), [this] {
        m_sessionView->setDetailsExpanded(!m_sessionView->isDetailsExpanded());
    });
    m_refreshAction = make(tr("&Refresh"), QKeySequence::Refresh, &MainWindow::refresh);
    if (m_refreshAction->shortcut() != QKeySequence(Qt::Key_F5))
        m_refreshAction->setShortcuts({QKeySequence(Qt::Key_F5), m_refreshAction->shortcut()});

    auto *pageGroup = new QActionGroup(this);
    const QString names[kPageCount] = {tr("&Sessions"), tr("S&ession"),    tr("&Pools"), tr("Sandbox &inspector"),
                                       tr("Review &queue"), tr("&Decisions"), tr("&Cost")};
    for (int i = 0; i < kPageCount; ++i) {
        m_pageActions[i] = make(names[i], QKeySequence(Qt::CTRL | (Qt::Key_1 + i)), [this, i] { showPage(Page(i)); });
        m_pageActions[i]->setCheckable(true);
        pageGroup->addAction(m_pageActions[i]);
    }
    m_pageActions[0]->setChecked(true);

    createThemeActions();
    addActionsToViews();
}

void MainWindow::createThemeActions()
{
    m_themeGroup = new QActionGroup(this);
    const QList<QPair<ThemeMode, QString>> themes = {
        {ThemeMode::System, tr("&System")}, {ThemeMode::Light, tr("&Light")}, {ThemeMode::Dark, tr("&Dark")}};
    for (const auto &[mode, text] : themes) {
        auto *action = new QAction(text, m_themeGroup);
        action->setCheckable(true);
        action->setData(int(mode));
        connect(action, &QAction::triggered, this, [this, mode] { applyTheme(int(mode)); });
    }
    m_themeGroup->actions().first()->setChecked(true);
}

void MainWindow::addActionsToViews()
{
    m_sessionsView->toolBar()->addAction(m_submitAction);
    m_sessionsView->toolBar()->addAction(m_openAction);
    m_sessionsView->toolBar()->addAction(m_pauseResumeAction);
    m_sessionsView->toolBar()->addAction(m_cancelAction);
    m_sessionsView->toolBar()->addAction(m_inspectAction);
    m_sessionsView->toolBar()->addAction(m_overrideAction);
    m_sessionView->toolBar()->addAction(m_backAction);
    m_sessionView->toolBar()->addAction(m_pauseResumeAction);
    m_sessionView->toolBar()->addAction(m_cancelAction);
    m_sessionView->toolBar()->addAction(m_inspectAction);
    m_sessionView->toolBar()->addAction(m_overrideAction);

    // Right-click on a session: the same actions, so a failed one is one click from its sandbox.
    for (QAbstractItemView *view : {static_cast<QAbstractItemView *>(m_sessionsView->tableView()),
                                    static_cast<QAbstractItemView *>(m_sessionsView->treeView())}) {
        view->setContextMenuPolicy(Qt::ActionsContextMenu);
        view->addAction(m_openAction);
        view->addAction(m_inspectAction);
        view->addAction(m_overrideAction);
        view->addAction(m_pauseResumeAction);
        view->addAction(m_cancelAction);
    }
}

void MainWindow::createMenus()
{
    QMenu *file = menuBar()->addMenu(tr("&File"));
    file->addAction(m_submitAction);
    file->addAction(m_connectAction);
    file->addSeparator();
    file->addAction(m_quitAction);

    QMenu *session = menuBar()->addMenu(tr("&Session"));
    session->addAction(m_openAction);
    session->addAction(m_pauseResumeAction);
    session->addAction(m_cancelAction);
    session->addAction(m_inspectAction);
    session->addAction(m_overrideAction);
    session->addSeparator();
    session->addAction(m_followAction);
    session->addAction(m_detailsAction);
    session->addAction(m_backAction);

    QMenu *view = menuBar()->addMenu(tr("&View"));
    for (QAction *page : m_pageActions)
        view->addAction(page);
    view->addSeparator();
    view->addAction(m_searchAction);
    view->addAction(m_groupAction);
    view->addAction(m_refreshAction);
    view->addSeparator();
    QMenu *theme = view->addMenu(tr("&Theme"));
    theme->addActions(m_themeGroup->actions());

    QMenu *help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About Paddock"), this, [this] {
        QMessageBox::about(this, tr("About Paddock"),
                           tr("<h3>Paddock %1</h3><p>A console for fleets of AI agents: sessions live, their traces, "
                              "costs and sandboxes.</p><p>Broker: %2</p>")
                               .arg(QApplication::applicationVersion(), m_client->address().toHtmlEscaped()));
    });
}

void MainWindow::gateAction(QAction *action, const QString &method, bool enabled, const QString &tip)
{
    const QString refused = m_client->permissions().reason(method);
    action->setEnabled(enabled && refused.isEmpty());
    action->setToolTip(refused.isEmpty() ? tip : refused);
}

void MainWindow::updateActions()
{
    const QString id = currentSessionId();
    const int row = id.isEmpty() ? -1 : m_sessionModel->rowOf(id);
    const SessionStatus status = row >= 0 ? m_sessionModel->sessionAt(row).status : SessionStatus::Unknown;
    const bool connected = m_connectionState == ConnectionState::Connected;
    const bool live = row >= 0 && !isTerminal(status);
    m_openAction->setEnabled(row >= 0 && currentPage() != Page::Session);
    gateAction(m_cancelAction, QStringLiteral("CancelSession"), connected && live, tr("Cancel the session (Ctrl+.)"));
    const bool paused = status == SessionStatus::Paused;
    m_pauseResumeAction->setText(paused ? tr("&Resume") : tr("&Pause"));
    gateAction(m_pauseResumeAction, paused ? QStringLiteral("ResumeSession") : QStringLiteral("PauseSession"),
               connected && live, paused ? tr("Resume the session (Ctrl+P)") : tr("Pause the session (Ctrl+P)"));
    gateAction(m_submitAction, QStringLiteral("SubmitSession"), connected,
               tr("Submit a session from a playbook or a goal (Ctrl+N)"));
    m_pageActions[int(Page::Session)]->setEnabled(!m_openSessionId.isEmpty());
    m_inspectAction->setEnabled(row >= 0 && connected);
    m_inspectAction->setText(status == SessionStatus::Failed ? tr("&Inspect failed sandbox") : tr("&Inspect sandbox"));
    gateAction(m_overrideAction, QStringLiteral("OverrideTier"), connected && live,
               tr("Move the session to another tier at its next step, with a reason (Ctrl+T)"));
    m_followAction->setEnabled(currentPage() == Page::Session);
    m_detailsAction->setEnabled(currentPage() == Page::Session);
    m_backAction->setEnabled(currentPage() != Page::Sessions);
}

} // namespace paddock::console
