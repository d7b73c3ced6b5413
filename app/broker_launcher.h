#pragma once
// First run: starts the user's broker when nothing answers on the console's local socket. No
// widgets here; the window shows the offer, the progress and the outcome (views/first_run_banner.h).
//
// How (planLaunch decides, BrokerLauncher does it):
// - with a systemd user manager that knows paddockd.service, and the default socket:
//   `systemctl --user start paddockd.service [paddock-pool.service]`;
// - otherwise paddockd runs directly, detached in its own session (QProcess::startDetached does
//   setsid), found next to the console's executable first, then on PATH, with no arguments (the
//   user's broker.toml or the embedded default), or `--socket PATH` for another socket of this user.
//   Its stdout and stderr are appended to $XDG_STATE_HOME/paddock/paddockd.log.
// - the local pool (paddock-pool, or its unit) only for the embedded default (no broker.toml, whose
//   pools are the user's to run) and only when nothing listens on 127.0.0.1:7701 yet.
// Ready means the socket accepts a connection; then the window reconnects its client.
//
// Threads: GUI thread only. Nothing here blocks: systemctl runs as a QProcess with signals, the
// socket is polled with non-blocking connects on a timer (a loopback connect answers at once).
//
// Known limits: a detached process is not our child, so its exit code is unknown: "exited early"
// means its pid is gone (or a zombie), and the log's tail says why. A unit that fails after
// systemctl returned is seen by polling `systemctl --user is-active` once a second.

#include <QElapsedTimer>
#include <QObject>
#include <QStringList>

#include <functional>

class QProcess;
class QTimer;

namespace paddock::console {

// What this machine offers, as probed (BrokerLauncher::probe) or as a test says.
struct LaunchEnvironment {
    bool systemdUser = false;        // `systemctl --user` answers
    bool brokerUnit = false;         // and knows paddockd.service
    bool poolUnit = false;           // and knows paddock-pool.service
    QString brokerBinary;            // paddockd found (next to the console, then PATH); empty: not found
    QString poolBinary;              // paddock-pool, likewise
    bool userBrokerConfig = false;   // $XDG_CONFIG_HOME/paddock/broker.toml exists (not the embedded default)
    bool localPoolAnswers = false;   // something listens on the embedded default's pool address
};

struct LaunchProcess {
    QString name;        // "paddockd"
    QString program;     // its path
    QStringList arguments;
    QString logFile;
};

struct LaunchPlan {
    enum class Method { None, Systemd, Direct };
    Method method = Method::None;
    QStringList units;                // Systemd: the units to start, the broker's first
    QList<LaunchProcess> processes;   // Direct: the processes to start, the broker first
    QString error;                    // None: what is missing and how to fix it
    QStringList notes;                // worth telling, not failures ("paddock-pool was not found: …")
};

// socketPath: where the console looks for the broker; defaultSocketPath: where paddockd listens
// with no arguments; logDir: where direct processes write their output.
LaunchPlan planLaunch(const LaunchEnvironment &env, const QString &socketPath, const QString &defaultSocketPath,
                      const QString &logDir);

// `systemctl --user show --property=Id,LoadState UNIT...` output -> the units that are loaded.
QStringList loadedUnits(const QString &systemctlShowOutput);

class BrokerLauncher : public QObject {
    Q_OBJECT

public:
    static constexpr quint16 kLocalPoolPort = 7701;   // the embedded default's pool, on 127.0.0.1

    struct Options {
        QString siblingDir;           // looked in first; empty: the console's own directory
        QStringList searchPath;       // then these; empty: $PATH
        QString systemctl = QStringLiteral("systemctl");   // empty: never use systemd
        QString logDir;               // empty: $XDG_STATE_HOME/paddock (~/.local/state/paddock)
        int timeoutMs = 20'000;       // for the socket to answer
        quint16 localPoolPort = kLocalPoolPort;
    };

    explicit BrokerLauncher(QObject *parent = nullptr);
    ~BrokerLauncher() override;

    void setOptions(const Options &options) { m_options = options; }
    const Options &options() const { return m_options; }

    // The socket path of address when it is a unix socket this user could start a broker on:
    // the default one, or one whose nearest existing directory belongs to this user. Empty otherwise.
    static QString localSocketPath(const QString &address);
    // Something accepts a connection on the unix socket at path.
    static bool socketAnswers(const QString &path);
    // Something accepts a connection on 127.0.0.1:port.
    static bool loopbackAnswers(quint16 port);
    // Where paddockd listens with no arguments.
    static QString defaultSocketPath();
    QString logDir() const;

    // Probes, plans and starts; answers with ready() or failed(). Ignored while one is running.
    void start(const QString &socketPath);
    bool isRunning() const { return m_phase != Phase::Idle; }
    const LaunchPlan &plan() const { return m_plan; }
    // The pids of the processes started directly (empty for systemd), for the tests.
    QList<qint64> startedPids() const;

signals:
    // For people: what is happening now ("Starting paddockd (log: …)…").
    void progress(const QString &text);
    // The socket answers. summary: what was started and where its logs are.
    void ready(const QString &summary);
    // error: the problem and the fix; details: the log's last lines, or systemctl's output.
    void failed(const QString &error, const QString &details);

private:
    enum class Phase { Idle, Probing, Starting, Waiting };
    LaunchEnvironment probeLocal() const;
    // Runs `systemctl --user arguments`; done gets whether it ran to an exit, its code and output.
    void runSystemctl(const QStringList &arguments,
                      std::function<void(bool ran, int exitCode, const QString &out, const QString &err)> done);
    void probeSystemd();
    void onProbed();
    void startUnits();
    void startProcesses();
    void poll();
    void checkUnit();
    void fail(const QString &error, const QString &details = {});
    void finish();
    QString logTail(int index) const;
    QString findBinary(const QString &name) const;

    Options m_options;
    Phase m_phase = Phase::Idle;
    QString m_socketPath;
    LaunchEnvironment m_env;
    LaunchPlan m_plan;
    QProcess *m_systemctl = nullptr;   // the probe, start or is-active in flight
    QTimer *m_pollTimer = nullptr;
    QElapsedTimer m_waiting;
    qint64 m_lastUnitCheckMs = -1;
    struct Started {
        qint64 pid = 0;
        qint64 logOffset = 0;   // the log's size before this run: the tail shows this run only
    };
    QList<Started> m_started;
};

} // namespace paddock::console
