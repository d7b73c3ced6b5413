// MainWindow: its construction, settings, the connection to the broker and the sessions it shows.
// Its actions and menus are in main_window_actions.cpp, the sandbox inspector page in
// main_window_inspector.cpp.
//
// Threads: GUI thread only (see main_window.h).

#include "app/main_window.h"

#include "app/broker_launcher.h"
#include "app/client/console_client.h"
#include "app/governance_controller.h"
#include "models/cost_series.h"
#include "models/pools_model.h"
#include "models/post_mortem_model.h"
#include "models/snapshot_files_model.h"
#include "models/session_filter_proxy.h"
#include "models/session_group_model.h"
#include "models/session_table_model.h"
#include "models/trace_model.h"
#include "views/connection_dialog.h"
#include "views/cost_view.h"
#include "views/decisions_view.h"
#include "views/first_run_banner.h"
#include "views/review_queue_view.h"
#include "views/debug_shell_panel.h"
#include "views/pools_view.h"
#include "views/sandbox_inspector.h"
#include "views/session_view.h"
#include "views/sessions_view.h"
#include "views/submit_dialog.h"
#include "views/theme.h"
#include "views/trace_view.h"

#include <QAction>
#include <QActionGroup>
#include <QCloseEvent>
#include <QDir>
#include <QLabel>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTimer>
#include <QVBoxLayout>

// Q_INIT_RESOURCE must be called outside any namespace; the .qrc is in a static library.
static void initConsoleResources() { Q_INIT_RESOURCE(console); }

namespace paddock::console {

namespace {
constexpr int kPoolsRefreshMs = 5000;
// A session opens with its last events; older ones page in when the user scrolls to the top.
constexpr qint64 kOpenTailEvents = 5000;
constexpr int kLaunchSummaryMs = 20'000;   // it names the log files: long enough to read them

const char *const kGeometryKey = "window/geometry";
const char *const kStateKey = "window/state";
const char *const kSessionLayoutKey = "window/sessionLayout";
const char *const kLastPageKey = "window/lastPage";
const char *const kGroupedKey = "sessions/groupByStatus";
const char *const kThemeKey = "appearance/theme";
const char *const kBrokerKey = "connection/broker";
const char *const kTlsCaKey = "connection/tls_ca_file";
const char *const kTokenFileKey = "connection/token_file";   // the file, never the token

QString key(const char *k) { return QString::fromLatin1(k); }
} // namespace

MainWindow::MainWindow(ConsoleClient *client, Options options, QWidget *parent)
    : QMainWindow(parent)
    , m_client(client)
    , m_options(options)
{
    initConsoleResources();
    setWindowTitle(tr("Paddock"));
    setWindowIcon(QIcon(QStringLiteral(":/paddock/icons/paddock-256.png")));
    setObjectName(QStringLiteral("paddockMainWindow"));

    createModels();
    createPages();
    createStatusBar();

    m_governance = new GovernanceController(m_client, m_sessionModel, m_reviewView, m_decisionsView, m_costView, this);
    createActions();
    createMenus();
    wireGovernance();

    wireClient();
    wireViews();
    wireInspector();
    startPoolsRefresh();

    resize(1280, 800);
    restoreSettings();
    onConnectionState(m_client->connectionState(), QString());
    updateActions();
}

void MainWindow::createModels()
{
    m_sessionModel = new SessionTableModel(this);
    m_sessionProxy = new SessionFilterProxy(this);
    m_sessionProxy->setSourceModel(m_sessionModel);
    m_groupModel = new SessionGroupModel(this);
    m_groupModel->setSourceModel(m_sessionProxy);
    m_traceModel = new TraceModel(this);
    m_costSeries = new CostSeries;
    m_poolsModel = new PoolsModel(this);
    m_failuresModel = new PostMortemListModel(this);
    m_filesModel = new SnapshotFilesModel(this);
}

void MainWindow::createPages()
{
    m_pages = new QStackedWidget(this);
    m_sessionsView = new SessionsView(m_pages);
    m_sessionsView->setModels(m_sessionModel, m_sessionProxy, m_groupModel);
    m_sessionView = new SessionView(m_pages);
    m_sessionView->setModels(m_traceModel, m_costSeries);
    m_poolsView = new PoolsView(m_pages);
    m_poolsView->setModel(m_poolsModel);
    m_pages->addWidget(m_sessionsView);
    m_pages->addWidget(m_sessionView);
    m_inspector = new SandboxInspector(m_pages);
    m_inspector->setModels(m_failuresModel, m_filesModel);
    m_pages->addWidget(m_poolsView);
    m_pages->addWidget(m_inspector);
    m_reviewView = new ReviewQueueView(m_pages);
    m_decisionsView = new DecisionsView(m_pages);
    m_costView = new CostView(m_pages);
    m_pages->addWidget(m_reviewView);
    m_pages->addWidget(m_decisionsView);
    m_pages->addWidget(m_costView);
    // The first-run offer sits above every page: whichever page was last open, it is seen.
    m_firstRun = new FirstRunBanner(this);
    m_launcher = new BrokerLauncher(this);
    auto *central = new QWidget(this);
    auto *centralLayout = new QVBoxLayout(central);
    centralLayout->setContentsMargins(0, 0, 0, 0);
    centralLayout->setSpacing(0);
    centralLayout->addWidget(m_firstRun);
    centralLayout->addWidget(m_pages, 1);
    setCentralWidget(central);
}

void MainWindow::createStatusBar()
{
    m_connectionLabel = new QLabel(this);
    m_connectionLabel->setObjectName(QStringLiteral("connectionLabel"));
    m_localLabel = new QLabel(tr("local execution (development mode)"), this);
    m_localLabel->setObjectName(QStringLiteral("localExecutionLabel"));
    m_localLabel->setToolTip(tr("Sandboxes run on this machine. Fine for trying Paddock; a team deployment runs "
                                "pools on execution hosts."));
    m_localLabel->setVisible(false);
    m_principalLabel = new QLabel(this);
    m_principalLabel->setObjectName(QStringLiteral("principalLabel"));
    m_principalLabel->setVisible(false);
    statusBar()->addPermanentWidget(m_localLabel);
    statusBar()->addPermanentWidget(m_principalLabel);
    statusBar()->addPermanentWidget(m_connectionLabel);
}

// The client's notifications, and the first-run offer with the launcher that starts a local broker.
void MainWindow::wireClient()
{
    connect(m_client, &ConsoleClient::connectionStateChanged, this, &MainWindow::onConnectionState);
    connect(m_client, &ConsoleClient::sessionsChanged, this, &MainWindow::onSessionsChanged);
    connect(m_client, &ConsoleClient::eventsArrived, this, &MainWindow::onEventsArrived);
    connect(m_client, &ConsoleClient::historyArrived, this, [this](const QString &id, const QList<EventRecord> &events) {
        if (id == m_openSessionId) {
            m_traceModel->prependHistory(events);
            // CostSeries folds forward only; history before the tail adds no points (see docs/console.md).
        }
    });
    connect(m_client, &ConsoleClient::poolsChanged, this, &MainWindow::onPoolsChanged);
    connect(m_client, &ConsoleClient::storageChanged, this, [this](const CheckpointStorage &storage, const QString &error) {
        if (error.isEmpty())
            m_poolsModel->setStorage(storage);
        else
            m_poolsModel->setStorageError(error);
    });
    connect(m_client, &ConsoleClient::actionFinished, this, &MainWindow::onActionFinished);
    connect(m_client, &ConsoleClient::permissionsChanged, this, &MainWindow::onPermissionsChanged);

    connect(m_firstRun, &FirstRunBanner::startRequested, this, &MainWindow::startLocalBroker);
    connect(m_firstRun, &FirstRunBanner::connectElsewhereRequested, this, &MainWindow::chooseBroker);
    connect(m_launcher, &BrokerLauncher::progress, m_firstRun, &FirstRunBanner::showProgress);
    connect(m_launcher, &BrokerLauncher::failed, m_firstRun, &FirstRunBanner::showError);
    connect(m_launcher, &BrokerLauncher::ready, this, [this](const QString &summary) {
        m_launchSummary = summary;
        m_firstRun->showProgress(tr("The broker answers; connecting…"));
        // The client's backoff may be seconds long by now: try at once.
        m_client->connectToBroker(m_client->address());
    });
}

// The trace asks for history and re-follows after a gap; the views' requests and the page switch.
void MainWindow::wireViews()
{
    connect(m_traceModel, &TraceModel::historyNeeded, this, [this](qint64 fromSeq, int count) {
        if (!m_openSessionId.isEmpty())
            m_client->fetchHistory(m_openSessionId, fromSeq, count);
    });
    connect(m_traceModel, &TraceModel::gapDetected, this, [this](qint64 expectedSeq) {
        // Events went missing between batches: follow again from the first one we lack.
        if (!m_openSessionId.isEmpty()) {
            m_client->unfollowSession(m_openSessionId);
            m_client->followSession(m_openSessionId, expectedSeq);
        }
    });

    connect(m_sessionsView, &SessionsView::openSessionRequested, this, &MainWindow::openSession);
    connect(m_sessionsView, &SessionsView::currentSessionChanged, this, &MainWindow::updateActions);
    connect(m_sessionsView, &SessionsView::groupedChanged, m_groupAction, &QAction::setChecked);
    connect(m_sessionView->traceView(), &TraceView::followingChanged, m_followAction, &QAction::setChecked);
    connect(m_pages, &QStackedWidget::currentChanged, this, [this](int page) {
        if (m_pageActions[page])
            m_pageActions[page]->setChecked(true);
        updateActions();
        if (Page(page) == Page::Pools)
            m_client->refreshPools();
        if (Page(page) == Page::Inspector && m_connectionState == ConnectionState::Connected)
            m_client->listPostMortems(QString());
        m_governance->setVisiblePage(Page(page) == Page::Reviews     ? QStringLiteral("reviews")
                                     : Page(page) == Page::Decisions ? QStringLiteral("decisions")
                                     : Page(page) == Page::Cost      ? QStringLiteral("cost")
                                                                     : QString());
    });
}

void MainWindow::startPoolsRefresh()
{
    // Pools change without notice (warm counts, health); ask while the page is shown.
    m_poolsTimer = new QTimer(this);
    m_poolsTimer->setInterval(kPoolsRefreshMs);
    connect(m_poolsTimer, &QTimer::timeout, this, [this] {
        if (currentPage() == Page::Pools && m_connectionState == ConnectionState::Connected)
            m_client->refreshPools();
    });
    m_poolsTimer->start();
}

MainWindow::~MainWindow()
{
    if (!m_inspector->debugShell()->shellId().isEmpty())
        m_client->closeDebugShell(m_inspector->debugShell()->shellId());
    if (!m_openSessionId.isEmpty())
        m_client->unfollowSession(m_openSessionId);
    delete m_costSeries;
}

void MainWindow::restoreSettings()
{
    ThemeMode mode = ThemeMode::System;
    if (m_options.persistSettings) {
        QSettings settings;
        restoreGeometry(settings.value(key(kGeometryKey)).toByteArray());
        restoreState(settings.value(key(kStateKey)).toByteArray());
        m_sessionView->restoreLayout(settings.value(key(kSessionLayoutKey)).toByteArray());
        m_sessionsView->setGrouped(settings.value(key(kGroupedKey), false).toBool());
        mode = themeModeFromName(settings.value(key(kThemeKey)).toString());
        const int page = settings.value(key(kLastPageKey), 0).toInt();
        // The Session page needs a session; without one, the last page is Sessions.
        showPage(page > int(Page::Session) && page < kPageCount ? Page(page) : Page::Sessions);
    }
    for (QAction *action : m_themeGroup->actions())
        action->setChecked(action->data().toInt() == int(mode));
    if (mode != Theme::mode())
        Theme::apply(mode);
}

void MainWindow::saveSettings()
{
    if (!m_options.persistSettings)
        return;
    QSettings settings;
    settings.setValue(key(kGeometryKey), saveGeometry());
    settings.setValue(key(kStateKey), saveState());
    settings.setValue(key(kSessionLayoutKey), m_sessionView->saveLayout());
    settings.setValue(key(kGroupedKey), m_sessionsView->isGrouped());
    settings.setValue(key(kLastPageKey), int(currentPage()));
    settings.setValue(key(kThemeKey), themeModeName(Theme::mode()));
}

void MainWindow::closeEvent(QCloseEvent *event)
{
    saveSettings();
    event->accept();
}

void MainWindow::changeEvent(QEvent *event)
{
    QMainWindow::changeEvent(event);
    // The system palette changed (light <-> dark) while following it: take the new one.
    if (event->type() == QEvent::ThemeChange && Theme::mode() == ThemeMode::System) {
        Theme::captureSystemPalette();
        Theme::apply(ThemeMode::System);
    }
}

void MainWindow::applyTheme(int mode)
{
    Theme::apply(ThemeMode(mode));
    if (m_options.persistSettings)
        QSettings().setValue(key(kThemeKey), themeModeName(ThemeMode(mode)));
}

void MainWindow::connectToBroker(const QString &address)
{
    QString target = address;
    if (target.isEmpty() && m_options.persistSettings)
        target = QSettings().value(key(kBrokerKey)).toString();
    if (target.isEmpty())
        target = ConnectionDialog::defaultAddress();
    else if (m_options.persistSettings && !address.isEmpty())
        QSettings().setValue(key(kBrokerKey), address);
    // A remote broker's CA and token file are remembered (never the token itself).
    if (m_options.persistSettings && !m_typedToken) {
        const auto credentials = ConnectionDialog::readCredentials(
            target, QSettings().value(key(kTlsCaKey)).toString(), QSettings().value(key(kTokenFileKey)).toString(), {});
        if (!credentials.error.isEmpty())
            statusBar()->showMessage(credentials.error, kStatusMessageMs);
        m_client->setCredentials(credentials.tlsCaPem, credentials.token);
    }
    m_brokenReported = false;
    // Another target (or the same again): the offer is made anew if nothing answers there.
    if (!m_launcher->isRunning() && m_firstRun->state() != FirstRunBanner::State::Starting)
        m_firstRun->dismiss();
    m_client->connectToBroker(target);
}

void MainWindow::offerBrokerStart()
{
    if (m_launcher->isRunning() || m_firstRun->state() != FirstRunBanner::State::Hidden)
        return;
    const QString path = BrokerLauncher::localSocketPath(m_client->address());
    // A remote broker, someone else's socket, or a socket that answers but not as a broker: no offer.
    if (path.isEmpty() || BrokerLauncher::socketAnswers(path))
        return;
    m_firstRun->showOffer(
        path == BrokerLauncher::defaultSocketPath() ? tr("No broker is running on this machine.")
                                                    : tr("No broker is running on %1.").arg(path),
        tr("The broker (paddockd) keeps your agents' sessions. Start it here: its systemd user unit when installed, "
           "otherwise paddockd in the background, logging to %1. Or connect to a broker elsewhere.")
            .arg(QDir(m_launcher->logDir()).filePath(QStringLiteral("paddockd.log"))));
}

void MainWindow::startLocalBroker()
{
    const QString path = BrokerLauncher::localSocketPath(m_client->address());
    if (path.isEmpty() || m_launcher->isRunning())
        return;
    m_launchSummary.clear();
    m_launcher->start(path);
}

void MainWindow::chooseBroker()
{
    ConnectionDialog dialog(this);
    dialog.setAddress(m_client->address());
    if (m_options.persistSettings) {
        dialog.setTlsCaFile(QSettings().value(key(kTlsCaKey)).toString());
        dialog.setTokenFile(QSettings().value(key(kTokenFileKey)).toString());
    }
    if (dialog.exec() != QDialog::Accepted)
        return;
    const QString address = dialog.address();
    if (m_options.persistSettings) {
        QSettings().setValue(key(kBrokerKey), address);
        QSettings().setValue(key(kTlsCaKey), dialog.tlsCaFile());
        QSettings().setValue(key(kTokenFileKey), dialog.tokenFile());
    }
    const auto credentials =
        ConnectionDialog::readCredentials(address, dialog.tlsCaFile(), dialog.tokenFile(), dialog.typedToken());
    m_client->setCredentials(credentials.tlsCaPem, credentials.token);
    m_typedToken = !dialog.typedToken().isEmpty();
    m_client->disconnectFromBroker();
    m_sessionModel->clear();
    m_traceModel->clear();
    m_costSeries->clear();
    m_openSessionId.clear();
    m_sessionView->showSession({});
    connectToBroker(address);
}

void MainWindow::showPage(Page page)
{
    m_pages->setCurrentIndex(int(page));
    m_pages->currentWidget()->setFocus();
    if (page == Page::Session)
        m_sessionView->traceView()->setFocus();
}

MainWindow::Page MainWindow::currentPage() const { return Page(m_pages->currentIndex()); }

QString MainWindow::currentSessionId() const
{
    if (currentPage() == Page::Session)
        return m_openSessionId;
    return m_sessionsView->currentSessionId();
}

void MainWindow::openSession(const QString &id)
{
    const int row = m_sessionModel->rowOf(id);
    if (row < 0)
        return;
    const SessionInfo session = m_sessionModel->sessionAt(row);
    if (id != m_openSessionId) {
        if (!m_openSessionId.isEmpty())
            m_client->unfollowSession(m_openSessionId);
        m_openSessionId = id;
        m_traceModel->setSession(id);
        m_costSeries->clear();
        m_sessionView->showSession(session);
        m_sessionView->setStale(m_sessionModel->isStale());
        followOpenSession(std::max<qint64>(1, session.lastSeq - kOpenTailEvents + 1));
    }
    showPage(Page::Session);
    updateActions();
}

void MainWindow::followOpenSession(qint64 fromSeq)
{
    m_traceModel->setTailStart(fromSeq);
    m_client->followSession(m_openSessionId, fromSeq);
}

void MainWindow::onConnectionState(ConnectionState state, const QString &detail)
{
    const ConnectionState previous = m_connectionState;
    m_connectionState = state;
    const QString address = m_client->address();
    switch (state) {
    case ConnectionState::Disconnected:
        m_connectionLabel->setText(tr("Not connected"));
        break;
    case ConnectionState::Connecting:
        if (!m_brokenReported)
            m_connectionLabel->setText(tr("Connecting to %1…").arg(address));
        break;
    case ConnectionState::Connected:
        // The broker in use, which may be one of several the address lists.
        m_connectionLabel->setText(tr("Connected to %1").arg(m_client->endpoint()));
        m_connectionLabel->setStyleSheet(QString());
        if (m_brokenReported)
            statusBar()->showMessage(tr("Reconnected to %1.").arg(m_client->endpoint()), kStatusMessageMs);
        m_brokenReported = false;
        setStale(false);
        // After a break, the open trace resumes from what it has; the model drops repeats.
        if (previous == ConnectionState::Broken && !m_openSessionId.isEmpty()) {
            m_client->unfollowSession(m_openSessionId);
            followOpenSession(m_traceModel->lastSeq() + 1);
        }
        if (!m_everConnected || previous == ConnectionState::Broken)
            m_client->refreshPools();
        m_everConnected = true;
        if (m_firstRun->state() != FirstRunBanner::State::Hidden && !m_launcher->isRunning()) {
            m_firstRun->dismiss();
            if (!m_launchSummary.isEmpty())
                statusBar()->showMessage(m_launchSummary, kLaunchSummaryMs);
            m_launchSummary.clear();
        }
        break;
    case ConnectionState::Broken:
        // Nothing shown yet (the first run, before any broker answered): nothing can be stale.
        setStale(m_everConnected || m_sessionModel->rowCount() > 0);
        // Once per break: the client retries with backoff and says Connecting/Broken each time.
        if (!m_brokenReported) {
            m_brokenReported = true;
            m_connectionLabel->setText(m_everConnected
                                           ? tr("Connection lost: %1 — reconnecting; data shown may be stale")
                                                 .arg(detail.isEmpty() ? address : detail)
                                           : tr("No broker answers: %1").arg(detail.isEmpty() ? address : detail));
            m_connectionLabel->setStyleSheet(QStringLiteral("color: %1;").arg(Theme::errorColor().name()));
        }
        offerBrokerStart();
        break;
    }
    updateActions();
}

void MainWindow::setStale(bool stale)
{
    m_sessionModel->setStale(stale);
    m_poolsModel->setStale(stale);
    m_sessionView->setStale(stale);
}

void MainWindow::onSessionsChanged()
{
    const QList<SessionInfo> changes = m_client->takeSessionChanges();
    if (changes.isEmpty())
        return;
    m_sessionModel->applyChanges(changes);
    if (!m_openSessionId.isEmpty()) {
        const int row = m_sessionModel->rowOf(m_openSessionId);
        if (row >= 0)
            m_sessionView->updateSession(m_sessionModel->sessionAt(row));
    }
    updateActions();
}

void MainWindow::onEventsArrived(const QString &sessionId)
{
    const QList<EventRecord> events = m_client->takeEvents(sessionId);
    if (sessionId != m_openSessionId || events.isEmpty())
        return;
    m_traceModel->appendEvents(events);
    m_costSeries->addEvents(events);
    m_sessionView->addEvents(events);
}

void MainWindow::onPoolsChanged(const QList<PoolInfo> &pools, bool localExecution)
{
    m_poolsModel->setPools(pools, localExecution);
    m_localLabel->setVisible(localExecution);
    m_offeredTiers.clear();
    for (const auto &pool : pools) {
        if (pool.healthy)
            m_offeredTiers += pool.tiers;
    }
    updateInspectorTiers();
    m_governance->setTiers(m_offeredTiers);
}

void MainWindow::onActionFinished(const QString &action, bool ok, const QString &message, const QString &sessionId)
{
    QString text;
    if (!ok) {
        text = message.isEmpty() ? tr("%1 failed.").arg(action) : message;
    } else if (action == u"submit") {
        text = tr("Submitted session %1.").arg(sessionId);
        m_sessionsView->selectSession(sessionId);
    } else {
        text = message.isEmpty() ? tr("%1: done.").arg(action) : message;
    }
    statusBar()->showMessage(text, kStatusMessageMs);
}

void MainWindow::onPermissionsChanged(const Permissions &permissions)
{
    m_principalLabel->setVisible(permissions.known());
    m_principalLabel->setText(permissions.summary());
    m_principalLabel->setToolTip(permissions.known()
                                     ? tr("The broker knows you as %1 with role %2 (%3).")
                                           .arg(permissions.principal(), permissions.role(),
                                                permissions.via() == u"token" ? tr("bearer token")
                                                                              : tr("your OS user on the unix socket"))
                                     : QString());
    m_inspector->debugShell()->setRefusal(permissions.reason(QStringLiteral("OpenDebugShell")));
    m_governance->setDecideAllowed(permissions.allows(QStringLiteral("DecideReviewItems")),
                                   permissions.reason(QStringLiteral("DecideReviewItems")));
    m_governance->setSelf(permissions.known() ? permissions.principal() : QString());
    m_governance->setOverrideAllowed(permissions.allows(QStringLiteral("OverrideTier")),
                                     permissions.reason(QStringLiteral("OverrideTier")));
    updateActions();
}

void MainWindow::submitSession()
{
    SubmitDialog dialog(this);
    dialog.setTiers(m_offeredTiers);
    if (dialog.exec() != QDialog::Accepted)
        return;
    m_client->submitSession(dialog.request());
    statusBar()->showMessage(tr("Submitting…"), kStatusMessageMs);
}

void MainWindow::cancelCurrentSession()
{
    const QString id = currentSessionId();
    if (id.isEmpty() || !m_cancelAction->isEnabled())
        return;
    m_client->cancelSession(id);
    statusBar()->showMessage(tr("Cancelling %1…").arg(id), kStatusMessageMs);
}

void MainWindow::pauseOrResumeCurrentSession()
{
    const QString id = currentSessionId();
    if (id.isEmpty() || !m_pauseResumeAction->isEnabled())
        return;
    const int row = m_sessionModel->rowOf(id);
    if (row >= 0 && m_sessionModel->sessionAt(row).status == SessionStatus::Paused) {
        m_client->resumeSession(id);
        statusBar()->showMessage(tr("Resuming %1…").arg(id), kStatusMessageMs);
    } else {
        m_client->pauseSession(id);
        statusBar()->showMessage(tr("Pausing %1…").arg(id), kStatusMessageMs);
    }
}

void MainWindow::refresh()
{
    m_client->refreshPools();
    m_governance->refresh();
    if (currentPage() == Page::Inspector && m_connectionState == ConnectionState::Connected)
        m_client->listPostMortems(QString());
    if (m_connectionState == ConnectionState::Broken || m_connectionState == ConnectionState::Disconnected)
        connectToBroker(m_client->address());
    statusBar()->showMessage(tr("Refreshing…"), 2000);
}

QString MainWindow::connectionText() const { return m_connectionLabel->text(); }

// ---- Governance: the review queue, decisions and cost pages ----

void MainWindow::wireGovernance()
{
    connect(m_governance, &GovernanceController::message, this,
            [this](const QString &text) { statusBar()->showMessage(text, kStatusMessageMs); });
    connect(m_governance, &GovernanceController::pendingCountChanged, this, &MainWindow::updateReviewBadge);
    connect(m_governance, &GovernanceController::openSessionRequested, this, &MainWindow::openSession);
    updateReviewBadge(0);
}

void MainWindow::updateReviewBadge(int pending)
{
    QAction *action = m_pageActions[int(Page::Reviews)];
    action->setText(pending > 0 ? tr("Review &queue (%1)").arg(pending) : tr("Review &queue"));
    action->setToolTip(pending > 0 ? tr("%n review item(s) pending (Ctrl+5)", nullptr, pending) : tr("Review queue (Ctrl+5)"));
}

} // namespace paddock::console
