#pragma once
// The console's window: wires a ConsoleClient to the models and the models to the views, and owns
// every action (with its shortcut, shown in the menus) so each has exactly one. It is defined in
// main_window.cpp, main_window_actions.cpp (actions and menus) and main_window_inspector.cpp (the
// sandbox inspector page).
//
// Threads: GUI thread only. The client does its I/O on its own threads and hands data over as
// "notify, then pull"; everything here runs in the GUI thread's event loop.

#include "models/console_types.h"
#include "models/permissions.h"
#include "models/sandbox_types.h"

#include <QMainWindow>
#include <QPointer>

class QAction;
class QActionGroup;
class QLabel;
class QStackedWidget;
class QTimer;

namespace paddock::console {

class BrokerLauncher;
class ConsoleClient;
class CostSeries;
class CostView;
class DecisionsView;
class FirstRunBanner;
class GovernanceController;
class ReviewQueueView;
class PoolsModel;
class PoolsView;
class PostMortemListModel;
class SandboxInspector;
class SnapshotFilesModel;
class SessionFilterProxy;
class SessionGroupModel;
class SessionTableModel;
class SessionView;
class SessionsView;
class TraceModel;

class MainWindow : public QMainWindow {
    Q_OBJECT

public:
    enum class Page { Sessions = 0, Session = 1, Pools = 2, Inspector = 3, Reviews = 4, Decisions = 5, Cost = 6 };
    static constexpr int kPageCount = 7;

    struct Options {
        bool persistSettings = true;   // read and write QSettings (layout, theme, broker)
    };

    // The client is not owned and must outlive the window.
    explicit MainWindow(ConsoleClient *client, QWidget *parent = nullptr) : MainWindow(client, Options{}, parent) {}
    MainWindow(ConsoleClient *client, Options options, QWidget *parent = nullptr);
    ~MainWindow() override;

    // Connects to address; an empty address means the last one used, else the local socket.
    void connectToBroker(const QString &address = {});

    void showPage(Page page);
    Page currentPage() const;
    void openSession(const QString &id);
    // The session the actions act on: the open one on the Session page, the selected one elsewhere.
    QString currentSessionId() const;
    // The sandbox inspector on a session's failure: the post-mortem its trace names, else the
    // newest the pools kept for it.
    void inspectSession(const QString &id);
    // The inspector on one post-mortem.
    void inspectPostMortem(const QString &pool, const QString &sandboxId);

    SessionsView *sessionsView() const { return m_sessionsView; }
    SessionView *sessionView() const { return m_sessionView; }
    PoolsView *poolsView() const { return m_poolsView; }
    SandboxInspector *inspector() const { return m_inspector; }
    ReviewQueueView *reviewQueueView() const { return m_reviewView; }
    DecisionsView *decisionsView() const { return m_decisionsView; }
    CostView *costView() const { return m_costView; }
    GovernanceController *governance() const { return m_governance; }
    // First run: the offer to start the local broker when nothing answers on its socket, and what
    // starts it (tests set its options: where it looks for paddockd, no systemd).
    FirstRunBanner *firstRunBanner() const { return m_firstRun; }
    BrokerLauncher *brokerLauncher() const { return m_launcher; }
    PostMortemListModel *failuresModel() const { return m_failuresModel; }
    SnapshotFilesModel *snapshotFilesModel() const { return m_filesModel; }
    SessionTableModel *sessionModel() const { return m_sessionModel; }
    TraceModel *traceModel() const { return m_traceModel; }
    CostSeries *costSeries() const { return m_costSeries; }
    PoolsModel *poolsModel() const { return m_poolsModel; }
    QString connectionText() const;

    QAction *submitAction() const { return m_submitAction; }
    QAction *cancelAction() const { return m_cancelAction; }
    QAction *pauseResumeAction() const { return m_pauseResumeAction; }
    QAction *openAction() const { return m_openAction; }
    QAction *refreshAction() const { return m_refreshAction; }
    QAction *inspectAction() const { return m_inspectAction; }
    QAction *overrideTierAction() const { return m_overrideAction; }
    QAction *pageAction(Page page) const { return m_pageActions[int(page)]; }

public slots:
    void submitSession();
    void cancelCurrentSession();
    void pauseOrResumeCurrentSession();
    void refresh();
    void chooseBroker();

protected:
    void closeEvent(QCloseEvent *event) override;
    void changeEvent(QEvent *event) override;

private:
    static constexpr int kStatusMessageMs = 8000;

    // The constructor's set-up, in its order. createActions() ends with createThemeActions() and
    // addActionsToViews(); wireGovernance() and wireInspector() are declared with their pages below.
    void createModels();
    void createPages();   // the stacked pages under the first-run banner
    void createStatusBar();
    void createActions();
    void createThemeActions();
    void addActionsToViews();   // the views' toolbars and the sessions' context menus
    void createMenus();
    void wireClient();
    void wireViews();
    void startPoolsRefresh();
    void restoreSettings();
    void saveSettings();
    void updateActions();
    // Enables action when enabled holds and the principal's role allows method; otherwise the
    // tooltip says why (the role), or shows tip.
    void gateAction(QAction *action, const QString &method, bool enabled, const QString &tip);
    void onPermissionsChanged(const Permissions &permissions);
    void onConnectionState(ConnectionState state, const QString &detail);
    // Shows the first-run offer when the target is this user's unix socket and nothing answers there.
    void offerBrokerStart();
    void startLocalBroker();
    void onSessionsChanged();
    void onEventsArrived(const QString &sessionId);
    void onPoolsChanged(const QList<PoolInfo> &pools, bool localExecution);
    void onActionFinished(const QString &action, bool ok, const QString &message, const QString &sessionId);
    void setStale(bool stale);
    void followOpenSession(qint64 fromSeq);
    void applyTheme(int mode);
    void wireInspector();
    void updateInspectorTiers();
    void onPostMortemsListed(const QString &sessionId, const QList<PostMortemInfo> &list, const QStringList &poolErrors,
                             const QString &error);
    void onPostMortemArrived(const PostMortemInfo &postMortem, const QString &error);
    void retryOnTier(const QString &tier);
    void wireGovernance();
    void updateReviewBadge(int pending);

    ConsoleClient *m_client;
    Options m_options;

    SessionTableModel *m_sessionModel = nullptr;
    SessionFilterProxy *m_sessionProxy = nullptr;
    SessionGroupModel *m_groupModel = nullptr;
    TraceModel *m_traceModel = nullptr;
    CostSeries *m_costSeries = nullptr;
    PoolsModel *m_poolsModel = nullptr;
    PostMortemListModel *m_failuresModel = nullptr;
    SnapshotFilesModel *m_filesModel = nullptr;
    QList<TierInfo> m_offeredTiers;        // by the healthy pools, for the submit dialog

    QStackedWidget *m_pages = nullptr;
    SessionsView *m_sessionsView = nullptr;
    SessionView *m_sessionView = nullptr;
    PoolsView *m_poolsView = nullptr;
    SandboxInspector *m_inspector = nullptr;
    ReviewQueueView *m_reviewView = nullptr;
    DecisionsView *m_decisionsView = nullptr;
    CostView *m_costView = nullptr;
    GovernanceController *m_governance = nullptr;
    FirstRunBanner *m_firstRun = nullptr;
    BrokerLauncher *m_launcher = nullptr;
    QString m_launchSummary;   // what the launcher started, told once the client connects

    QLabel *m_connectionLabel = nullptr;
    QLabel *m_principalLabel = nullptr;   // "ada · admin" from WhoAmI
    bool m_typedToken = false;            // credentials were typed in the dialog: do not reload them
    QLabel *m_localLabel = nullptr;
    QTimer *m_poolsTimer = nullptr;

    QAction *m_submitAction = nullptr;
    QAction *m_connectAction = nullptr;
    QAction *m_quitAction = nullptr;
    QAction *m_openAction = nullptr;
    QAction *m_pauseResumeAction = nullptr;
    QAction *m_cancelAction = nullptr;
    QAction *m_searchAction = nullptr;
    QAction *m_groupAction = nullptr;
    QAction *m_followAction = nullptr;
    QAction *m_detailsAction = nullptr;
    QAction *m_refreshAction = nullptr;
    QAction *m_backAction = nullptr;
    QAction *m_inspectAction = nullptr;
    QAction *m_overrideAction = nullptr;
    QAction *m_pageActions[kPageCount] = {};
    QActionGroup *m_themeGroup = nullptr;

    QString m_openSessionId;
    QString m_pendingInspectSession;   // a session whose post-mortems were asked for
    QString m_requestedPool;           // the post-mortem asked for (GetPostMortem in flight or shown)
    QString m_requestedSandbox;
    ConnectionState m_connectionState = ConnectionState::Disconnected;
    bool m_brokenReported = false;
    bool m_everConnected = false;
};

} // namespace paddock::console
