#pragma once
// --screenshots DIR: opens each view of a connected window, waits for its data, saves a PNG of the
// window at 1280x800 and quits. Used by scripts/run (under Xvfb when there is no display) and by
// tests/gui/screenshot_test.
//
// Threads: GUI thread only. It polls the models on a timer rather than blocking, so the client's
// batches keep arriving while it waits.

#include <QDir>
#include <QElapsedTimer>
#include <QObject>
#include <QStringList>

class QTimer;

namespace paddock::console {

class MainWindow;

class ScreenshotRunner : public QObject {
    Q_OBJECT

public:
    static constexpr int kWidth = 1280;
    static constexpr int kHeight = 800;

    ScreenshotRunner(MainWindow *window, const QString &directory, QObject *parent = nullptr);

    // Waits at most this long for each view's data; a view whose data never came is still saved,
    // and the exit code says so.
    void setTimeoutMs(int ms) { m_timeoutMs = ms; }
    void start();

    QStringList savedFiles() const { return m_saved; }

signals:
    // exitCode 0: every view had its data; 2: some view was saved without (see stderr).
    void finished(int exitCode);

private:
    enum class Step {
        Connect, Sessions, Grouped, OpenSession, Session, SessionDark, Pools, PoolsDark,
        Inspector, InspectorLoaded, InspectorFiles, InspectorFile, InspectorShell, InspectorShellRan, InspectorDark,
        Reviews, ReviewItem, Decisions, Cost, Dialogs, Done
    };
    void tick();
    // One function per Step, called by tick() on every tick while that step is current: each waits
    // for what its view needs (returning to be called again), saves its shot and moves on with next().
    void stepConnect();
    void stepSessions();
    void stepGrouped();
    void stepOpenSession();
    void stepSession();
    void stepSessionDark();
    void stepPools();
    void stepPoolsDark();
    void stepInspector();
    void stepInspectorLoaded();
    void stepInspectorFiles();
    void stepInspectorFile();
    void stepInspectorShell();
    void stepInspectorShellRan();
    void stepInspectorDark();
    void stepReviews();
    void stepReviewItem();
    void stepDecisions();
    void stepCost();
    void stepDialogs();
    bool waitFor(bool ready, const char *what);
    // Like waitFor, for views whose data the broker may not offer (an older broker): giving up
    // says so on stderr without counting as missing data when the broker refused the call.
    bool waitForOptional(bool ready, bool brokerRefused, const char *what);
    // For the governance views: a broker (or a client) without the calls is said as not offered,
    // and an answer with nothing in it (after a while) is saved as it is; neither counts as
    // missing data.
    bool waitForGovernance(bool ready, bool answered, bool notOffered, const char *what);
    void next(Step step);
    bool save(const QString &name, QWidget *widget = nullptr);
    QString pickSession() const;

    MainWindow *m_window;
    QDir m_dir;
    QTimer *m_timer = nullptr;
    QElapsedTimer m_stepClock;
    QElapsedTimer m_settleClock;
    Step m_step = Step::Connect;
    int m_timeoutMs = 60000;
    int m_stableTicks = 0;
    int m_lastCount = -1;
    bool m_missingData = false;
    QStringList m_saved;
};

} // namespace paddock::console
