#include "app/broker_launcher.h"

#include "common/paths.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QStandardPaths>
#include <QTimer>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace paddock::console {

namespace {

constexpr int kPollIntervalMs = 100;
constexpr int kUnitCheckIntervalMs = 1000;
constexpr int kSystemctlTimeoutMs = 10'000;
constexpr int kLoopbackConnectWaitMs = 200;
constexpr int kLogTailLines = 12;

const QString kBrokerUnit = QStringLiteral("paddockd.service");
const QString kPoolUnit = QStringLiteral("paddock-pool.service");

QString journalHint(const QString &unit)
{
    return QStringLiteral("journalctl --user -u %1").arg(unit);
}

// A detached process is not our child: gone means no such pid, or a zombie nobody reaped yet.
bool processGone(qint64 pid)
{
    if (::kill(pid_t(pid), 0) != 0)
        return errno == ESRCH;
    QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
    if (!stat.open(QIODevice::ReadOnly))
        return false;
    const QByteArray text = stat.read(512);
    const int close = text.lastIndexOf(')');
    return close >= 0 && close + 2 < text.size() && (text.at(close + 2) == 'Z' || text.at(close + 2) == 'X');
}

} // namespace

LaunchPlan planLaunch(const LaunchEnvironment &env, const QString &socketPath, const QString &defaultSocketPath,
                      const QString &logDir)
{
    LaunchPlan plan;
    const bool defaultSocket = socketPath == defaultSocketPath;
    // The local pool belongs to the embedded default; a user's broker.toml names its own pools.
    const bool wantPool = !env.userBrokerConfig && !env.localPoolAnswers;

    // The unit runs paddockd with no arguments, so it listens on the default socket only.
    if (defaultSocket && env.systemdUser && env.brokerUnit) {
        plan.method = LaunchPlan::Method::Systemd;
        plan.units << kBrokerUnit;
        if (wantPool && env.poolUnit)
            plan.units << kPoolUnit;
        else if (wantPool)
            plan.notes << QCoreApplication::translate("BrokerLauncher",
                                                      "paddock-pool.service is not installed: sessions wait until a pool "
                                                      "answers on 127.0.0.1:7701 (install the paddock-pool package).");
        return plan;
    }

    if (env.brokerBinary.isEmpty()) {
        plan.error = QCoreApplication::translate(
            "BrokerLauncher",
            "paddockd (the broker) was not found next to the console or on PATH. Install the paddock-broker "
            "package (sudo apt install paddock-broker), or put paddockd on PATH, then try again.");
        return plan;
    }
    plan.method = LaunchPlan::Method::Direct;
    LaunchProcess broker{QStringLiteral("paddockd"), env.brokerBinary, {}, QDir(logDir).filePath(QStringLiteral("paddockd.log"))};
    if (!defaultSocket)
        broker.arguments << QStringLiteral("--socket") << socketPath;
    plan.processes << broker;
    if (wantPool) {
        if (env.poolBinary.isEmpty())
            plan.notes << QCoreApplication::translate(
                "BrokerLauncher", "paddock-pool was not found next to the console or on PATH: sessions wait until a "
                                  "pool answers on 127.0.0.1:7701 (install the paddock-pool package).");
        else
            plan.processes << LaunchProcess{QStringLiteral("paddock-pool"), env.poolBinary, {},
                                            QDir(logDir).filePath(QStringLiteral("paddock-pool.log"))};
    }
    return plan;
}

QStringList loadedUnits(const QString &output)
{
    QStringList loaded;
    QString id;
    const QStringList lines = output.split(u'\n');
    for (const QString &raw : lines) {
        const QString line = raw.trimmed();
        if (line.isEmpty()) {
            id.clear();
        } else if (line.startsWith(QLatin1String("Id="))) {
            id = line.mid(3);
        } else if (line == QLatin1String("LoadState=loaded") && !id.isEmpty()) {
            loaded << id;
        }
    }
    return loaded;
}

BrokerLauncher::BrokerLauncher(QObject *parent)
    : QObject(parent)
{
    m_pollTimer = new QTimer(this);
    m_pollTimer->setInterval(kPollIntervalMs);
    connect(m_pollTimer, &QTimer::timeout, this, &BrokerLauncher::poll);
}

BrokerLauncher::~BrokerLauncher()
{
    // The processes started are detached on purpose: the broker outlives the console.
    if (m_systemctl) {
        m_systemctl->disconnect(this);
        m_systemctl->kill();
        m_systemctl->waitForFinished(1000);
    }
}

QString BrokerLauncher::defaultSocketPath() { return QString::fromStdString(paddock::defaultBrokerSocketPath().string()); }

QString BrokerLauncher::localSocketPath(const QString &address)
{
    QString path;
    if (address.contains(u','))
        return {};   // a team's brokers: never one for the console to start
    if (address.startsWith(QLatin1String("unix:")))
        path = address.mid(5);
    else if (address.startsWith(u'/'))
        path = address;
    else
        return {};
    while (path.startsWith(QLatin1String("//")))
        path.remove(0, 1);
    if (!path.startsWith(u'/'))
        return {};
    if (path == defaultSocketPath())
        return path;
    // Another socket: only where this user may put one (their own directory).
    QDir dir = QFileInfo(path).absoluteDir();
    while (!dir.exists() && !dir.isRoot())
        dir.setPath(QFileInfo(dir.absolutePath()).absolutePath());
    const QFileInfo info(dir.absolutePath());
    return info.exists() && info.ownerId() == ::getuid() ? path : QString();
}

bool BrokerLauncher::socketAnswers(const QString &path)
{
    const QByteArray name = QFile::encodeName(path);
    sockaddr_un addr{};
    if (name.isEmpty() || size_t(name.size()) >= sizeof(addr.sun_path))
        return false;
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.constData(), size_t(name.size()));
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return false;
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr *>(&addr), sizeof(addr));
    // EAGAIN: the listener's backlog is full; someone is there.
    const bool answers = rc == 0 || errno == EAGAIN || errno == EINPROGRESS;
    ::close(fd);
    return answers;
}

bool BrokerLauncher::loopbackAnswers(quint16 port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool answers = ::connect(fd, reinterpret_cast<const sockaddr *>(&addr), sizeof(addr)) == 0;
    if (!answers && errno == EINPROGRESS) {
        // Loopback answers at once in practice; the wait only bounds the odd slow kernel.
        pollfd p{fd, POLLOUT, 0};
        int error = 0;
        socklen_t length = sizeof(error);
        answers = ::poll(&p, 1, kLoopbackConnectWaitMs) == 1
            && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
    }
    ::close(fd);
    return answers;
}

QString BrokerLauncher::logDir() const
{
    if (!m_options.logDir.isEmpty())
        return m_options.logDir;
    return QString::fromStdString((paddock::xdgStateHome() / "paddock").string());
}

QString BrokerLauncher::findBinary(const QString &name) const
{
    const QString sibling =
        m_options.siblingDir.isEmpty() ? QCoreApplication::applicationDirPath() : m_options.siblingDir;
    const QString found = QStandardPaths::findExecutable(name, {sibling});
    return found.isEmpty() ? QStandardPaths::findExecutable(name, m_options.searchPath) : found;
}

LaunchEnvironment BrokerLauncher::probeLocal() const
{
    LaunchEnvironment env;
    env.brokerBinary = findBinary(QStringLiteral("paddockd"));
    env.poolBinary = findBinary(QStringLiteral("paddock-pool"));
    env.userBrokerConfig =
        QFileInfo::exists(QString::fromStdString((paddock::defaultConfigDir() / "broker.toml").string()));
    env.localPoolAnswers = loopbackAnswers(m_options.localPoolPort);
    return env;
}

QList<qint64> BrokerLauncher::startedPids() const
{
    QList<qint64> pids;
    for (const Started &started : m_started)
        pids << started.pid;
    return pids;
}

void BrokerLauncher::start(const QString &socketPath)
{
    if (isRunning())
        return;
    m_socketPath = socketPath;
    m_plan = {};
    m_started.clear();
    m_phase = Phase::Probing;
    emit progress(tr("Looking for the broker's unit and binaries…"));
    m_env = probeLocal();
    probeSystemd();
}

void BrokerLauncher::runSystemctl(const QStringList &arguments,
                                  std::function<void(bool ran, int exitCode, const QString &out, const QString &err)> done)
{
    auto *process = new QProcess(this);
    m_systemctl = process;
    process->setProgram(m_options.systemctl);
    process->setArguments(QStringList{QStringLiteral("--user")} + arguments);
    process->setStandardInputFile(QProcess::nullDevice());
    auto *timeout = new QTimer(process);
    timeout->setSingleShot(true);
    connect(timeout, &QTimer::timeout, process, &QProcess::kill);
    auto handled = std::make_shared<bool>(false);
    auto finish = [this, process, handled, done](bool ran) {
        if (std::exchange(*handled, true))
            return;
        const QString out = QString::fromLocal8Bit(process->readAllStandardOutput());
        QString err = QString::fromLocal8Bit(process->readAllStandardError()).trimmed();
        if (!ran && err.isEmpty())
            err = process->errorString();
        const int code = ran ? process->exitCode() : -1;
        m_systemctl = nullptr;
        process->deleteLater();
        done(ran, code, out, err);
    };
    connect(process, &QProcess::finished, this,
            [finish](int, QProcess::ExitStatus status) { finish(status == QProcess::NormalExit); });
    connect(process, &QProcess::errorOccurred, this, [finish](QProcess::ProcessError error) {
        if (error == QProcess::FailedToStart)
            finish(false);
    });
    timeout->start(kSystemctlTimeoutMs);
    process->start();
}

void BrokerLauncher::probeSystemd()
{
    if (m_options.systemctl.isEmpty() || QStandardPaths::findExecutable(m_options.systemctl).isEmpty()) {
        onProbed();
        return;
    }
    runSystemctl({QStringLiteral("show"), QStringLiteral("--property=Id,LoadState"), kBrokerUnit, kPoolUnit},
                 [this](bool ran, int exitCode, const QString &out, const QString &) {
                     // "Failed to connect to bus" and the like: no user manager, start directly.
                     m_env.systemdUser = ran && exitCode == 0;
                     if (m_env.systemdUser) {
                         const QStringList loaded = loadedUnits(out);
                         m_env.brokerUnit = loaded.contains(kBrokerUnit);
                         m_env.poolUnit = loaded.contains(kPoolUnit);
                     }
                     onProbed();
                 });
}

void BrokerLauncher::onProbed()
{
    m_plan = planLaunch(m_env, m_socketPath, defaultSocketPath(), logDir());
    switch (m_plan.method) {
    case LaunchPlan::Method::None:
        fail(m_plan.error);
        return;
    case LaunchPlan::Method::Systemd:
        startUnits();
        return;
    case LaunchPlan::Method::Direct:
        startProcesses();
        return;
    }
}

void BrokerLauncher::startUnits()
{
    m_phase = Phase::Starting;
    const QString command = QStringLiteral("systemctl --user start ") + m_plan.units.join(u' ');
    emit progress(tr("Starting the broker: %1…").arg(command));
    runSystemctl(QStringList{QStringLiteral("start")} + m_plan.units,
                 [this, command](bool ran, int exitCode, const QString &out, const QString &err) {
                     if (!ran || exitCode != 0) {
                         fail(tr("“%1” failed. See what the unit says with “%2”, fix it and try again.")
                                  .arg(command, journalHint(kBrokerUnit)),
                              (out.trimmed() + u'\n' + err).trimmed());
                         return;
                     }
                     m_phase = Phase::Waiting;
                     m_waiting.start();
                     m_lastUnitCheckMs = 0;
                     emit progress(tr("Started %1; waiting for the broker to answer on %2…")
                                       .arg(m_plan.units.join(QStringLiteral(" and ")), m_socketPath));
                     m_pollTimer->start();
                 });
}

void BrokerLauncher::startProcesses()
{
    m_phase = Phase::Starting;
    const QString dir = logDir();
    if (const std::string error = paddock::ensurePrivateDirectory(dir.toStdString()); !error.empty()) {
        fail(tr("Cannot create the log directory %1: %2. Make it writable (or set XDG_STATE_HOME) and try again.")
                 .arg(dir, QString::fromStdString(error)));
        return;
    }
    for (const LaunchProcess &launch : std::as_const(m_plan.processes)) {
        {
            QFile log(launch.logFile);
            if (!log.open(QIODevice::WriteOnly | QIODevice::Append)) {
                fail(tr("Cannot write the log file %1: %2. Make it writable and try again.")
                         .arg(launch.logFile, log.errorString()));
                return;
            }
            log.write(QStringLiteral("---- %1: started by the Paddock console: %2 %3\n")
                          .arg(QDateTime::currentDateTime().toString(Qt::ISODate), launch.program,
                               launch.arguments.join(u' '))
                          .toLocal8Bit());
        }
        Started started;
        started.logOffset = QFileInfo(launch.logFile).size();
        QProcess process;
        process.setProgram(launch.program);
        process.setArguments(launch.arguments);
        process.setStandardInputFile(QProcess::nullDevice());
        process.setStandardOutputFile(launch.logFile, QIODevice::Append);
        process.setStandardErrorFile(launch.logFile, QIODevice::Append);
        // Not the console's directory: the daemon may outlive it, and should not pin it.
        process.setWorkingDirectory(QDir::homePath());
        emit progress(tr("Starting %1 (log: %2)…").arg(launch.name, launch.logFile));
        if (!process.startDetached(&started.pid)) {
            fail(tr("Cannot start %1: %2. Check that it is executable, or reinstall the paddock-broker package.")
                     .arg(launch.program, process.errorString()));
            return;
        }
        m_started << started;
    }
    m_phase = Phase::Waiting;
    m_waiting.start();
    emit progress(tr("Started paddockd (pid %1); waiting for it to answer on %2 (log: %3)…")
                      .arg(m_started.first().pid)
                      .arg(m_socketPath, m_plan.processes.first().logFile));
    m_pollTimer->start();
}

void BrokerLauncher::poll()
{
    if (m_phase != Phase::Waiting)
        return;
    if (socketAnswers(m_socketPath)) {
        finish();
        return;
    }
    const bool direct = m_plan.method == LaunchPlan::Method::Direct;
    if (direct && processGone(m_started.first().pid)) {
        fail(tr("paddockd exited before it answered on %1. Its log %2 ends with the lines below: fix what they "
                "name (or run paddockd in a terminal to see it) and try again.")
                 .arg(m_socketPath, m_plan.processes.first().logFile),
             logTail(0));
        return;
    }
    if (m_waiting.elapsed() > m_options.timeoutMs) {
        const int seconds = m_options.timeoutMs / 1000;
        if (direct)
            fail(tr("paddockd (pid %1) did not answer on %2 within %3 s. It may still be starting; its log %4 ends "
                    "with the lines below.")
                     .arg(m_started.first().pid)
                     .arg(m_socketPath)
                     .arg(seconds)
                     .arg(m_plan.processes.first().logFile),
                 logTail(0));
        else
            fail(tr("%1 did not answer on %2 within %3 s. See “%4”; if the unit uses another socket, connect to it "
                    "with Connect to another….")
                     .arg(kBrokerUnit, m_socketPath)
                     .arg(seconds)
                     .arg(journalHint(kBrokerUnit)));
        return;
    }
    if (!direct && !m_systemctl && m_waiting.elapsed() - m_lastUnitCheckMs >= kUnitCheckIntervalMs) {
        m_lastUnitCheckMs = m_waiting.elapsed();
        checkUnit();
    }
}

void BrokerLauncher::checkUnit()
{
    runSystemctl({QStringLiteral("is-active"), kBrokerUnit}, [this](bool, int, const QString &out, const QString &) {
        const QString state = out.trimmed();
        if (m_phase == Phase::Waiting && (state == u"failed" || state == u"inactive"))
            fail(tr("%1 is %2: it stopped before it answered on %3. See why with “%4”, fix it and try again.")
                     .arg(kBrokerUnit, state, m_socketPath, journalHint(kBrokerUnit)));
    });
}

QString BrokerLauncher::logTail(int index) const
{
    if (index >= m_started.size() || index >= m_plan.processes.size())
        return {};
    QFile log(m_plan.processes.at(index).logFile);
    if (!log.open(QIODevice::ReadOnly) || !log.seek(m_started.at(index).logOffset))
        return {};
    const QStringList lines = QString::fromLocal8Bit(log.readAll()).trimmed().split(u'\n');
    const QString tail = lines.mid(std::max<qsizetype>(0, lines.size() - kLogTailLines)).join(u'\n');
    return tail.isEmpty() ? tr("(the log is empty)") : tail;
}

void BrokerLauncher::fail(const QString &error, const QString &details)
{
    m_pollTimer->stop();
    m_phase = Phase::Idle;
    emit failed(error, details);
}

void BrokerLauncher::finish()
{
    m_pollTimer->stop();
    m_phase = Phase::Idle;
    QStringList parts;
    if (m_plan.method == LaunchPlan::Method::Systemd) {
        parts << tr("Started %1 with systemctl --user (logs: %2).")
                     .arg(m_plan.units.join(QStringLiteral(" and ")), journalHint(kBrokerUnit));
    } else {
        for (int i = 0; i < m_started.size(); ++i) {
            const LaunchProcess &launch = m_plan.processes.at(i);
            if (i > 0 && processGone(m_started.at(i).pid))
                parts << tr("%1 exited at once; its log %2 says why.").arg(launch.name, launch.logFile);
            else
                parts << tr("Started %1 (pid %2, log: %3).").arg(launch.name).arg(m_started.at(i).pid).arg(launch.logFile);
        }
    }
    parts << m_plan.notes;
    emit ready(parts.join(u' '));
}

} // namespace paddock::console
