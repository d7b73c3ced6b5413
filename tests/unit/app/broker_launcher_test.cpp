// First run's launcher: which way it starts the broker given what the machine has (planLaunch with
// the probes' answers injected), how it reads systemctl, how it tells a live socket from a dead one,
// and the systemd path's commands and failures with a stand-in systemctl (no user systemd runs
// where these tests run; the direct path runs the real paddockd in tests/gui/first_run_test).

#include "app/broker_launcher.h"
#include "tests/support/qt_wait.h"

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QThread>

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <functional>

using namespace paddock::console;

namespace {

const QString kDefault = QStringLiteral("/run/user/1000/paddock/broker.sock");
const QString kLogs = QStringLiteral("/home/ada/.local/state/paddock");

LaunchEnvironment withSystemd()
{
    LaunchEnvironment env;
    env.systemdUser = true;
    env.brokerUnit = true;
    env.poolUnit = true;
    env.brokerBinary = QStringLiteral("/usr/bin/paddockd");
    env.poolBinary = QStringLiteral("/usr/bin/paddock-pool");
    return env;
}

LaunchEnvironment withoutSystemd()
{
    LaunchEnvironment env = withSystemd();
    env.systemdUser = false;
    env.brokerUnit = false;
    env.poolUnit = false;
    return env;
}

using paddock::test::waitFor;

TEST(PlanLaunch, SystemdUnitsWhenTheUserManagerKnowsTheBroker)
{
    const LaunchPlan plan = planLaunch(withSystemd(), kDefault, kDefault, kLogs);
    EXPECT_EQ(plan.method, LaunchPlan::Method::Systemd);
    EXPECT_EQ(plan.units, (QStringList{QStringLiteral("paddockd.service"), QStringLiteral("paddock-pool.service")}));
    EXPECT_TRUE(plan.processes.isEmpty());
    EXPECT_TRUE(plan.notes.isEmpty());
}

TEST(PlanLaunch, SystemdStartsThePoolUnitOnlyWhenItExists)
{
    LaunchEnvironment env = withSystemd();
    env.poolUnit = false;
    const LaunchPlan plan = planLaunch(env, kDefault, kDefault, kLogs);
    EXPECT_EQ(plan.method, LaunchPlan::Method::Systemd);
    EXPECT_EQ(plan.units, QStringList{QStringLiteral("paddockd.service")});
    ASSERT_EQ(plan.notes.size(), 1);
    EXPECT_TRUE(plan.notes.first().contains(QLatin1String("paddock-pool"))) << plan.notes.first().toStdString();
}

TEST(PlanLaunch, NoLocalPoolWhenOneAnswersOrTheUserHasABrokerConfig)
{
    LaunchEnvironment answering = withSystemd();
    answering.localPoolAnswers = true;
    LaunchEnvironment configured = withSystemd();
    configured.userBrokerConfig = true;
    for (const LaunchEnvironment &env : {answering, configured}) {
        const LaunchPlan units = planLaunch(env, kDefault, kDefault, kLogs);
        EXPECT_EQ(units.units, QStringList{QStringLiteral("paddockd.service")});
        EXPECT_TRUE(units.notes.isEmpty());
        LaunchEnvironment direct = env;
        direct.systemdUser = false;
        const LaunchPlan processes = planLaunch(direct, kDefault, kDefault, kLogs);
        ASSERT_EQ(processes.processes.size(), 1);
        EXPECT_EQ(processes.processes.first().name, QStringLiteral("paddockd"));
    }
}

TEST(PlanLaunch, DirectWithoutAUserManagerOrWithoutTheUnit)
{
    LaunchEnvironment noUnit = withSystemd();
    noUnit.brokerUnit = false;
    for (const LaunchEnvironment &env : {withoutSystemd(), noUnit}) {
        const LaunchPlan plan = planLaunch(env, kDefault, kDefault, kLogs);
        EXPECT_EQ(plan.method, LaunchPlan::Method::Direct);
        EXPECT_TRUE(plan.units.isEmpty());
        ASSERT_EQ(plan.processes.size(), 2);
        // paddockd exactly as with no arguments: the user's broker.toml or the embedded default.
        EXPECT_EQ(plan.processes.at(0).program, QStringLiteral("/usr/bin/paddockd"));
        EXPECT_TRUE(plan.processes.at(0).arguments.isEmpty());
        EXPECT_EQ(plan.processes.at(0).logFile, kLogs + QStringLiteral("/paddockd.log"));
        EXPECT_EQ(plan.processes.at(1).program, QStringLiteral("/usr/bin/paddock-pool"));
        EXPECT_EQ(plan.processes.at(1).logFile, kLogs + QStringLiteral("/paddock-pool.log"));
    }
}

TEST(PlanLaunch, AnotherSocketOfTheUserIsStartedDirectlyOnThatSocket)
{
    const QString other = QStringLiteral("/home/ada/paddock/test.sock");
    const LaunchPlan plan = planLaunch(withSystemd(), other, kDefault, kLogs);
    EXPECT_EQ(plan.method, LaunchPlan::Method::Direct);
    ASSERT_FALSE(plan.processes.isEmpty());
    EXPECT_EQ(plan.processes.first().arguments, (QStringList{QStringLiteral("--socket"), other}));
}

TEST(PlanLaunch, DirectWithoutThePoolBinaryStartsTheBrokerAndSaysSo)
{
    LaunchEnvironment env = withoutSystemd();
    env.poolBinary.clear();
    const LaunchPlan plan = planLaunch(env, kDefault, kDefault, kLogs);
    EXPECT_EQ(plan.method, LaunchPlan::Method::Direct);
    ASSERT_EQ(plan.processes.size(), 1);
    ASSERT_EQ(plan.notes.size(), 1);
    EXPECT_TRUE(plan.notes.first().contains(QLatin1String("install the paddock-pool package")));
}

TEST(PlanLaunch, NothingToStartNamesTheBinaryAndThePackage)
{
    LaunchEnvironment env = withoutSystemd();
    env.brokerBinary.clear();
    const LaunchPlan plan = planLaunch(env, kDefault, kDefault, kLogs);
    EXPECT_EQ(plan.method, LaunchPlan::Method::None);
    EXPECT_TRUE(plan.error.contains(QLatin1String("paddockd"))) << plan.error.toStdString();
    EXPECT_TRUE(plan.error.contains(QLatin1String("apt install paddock-broker"))) << plan.error.toStdString();
    // The unit needs no binary of ours on PATH.
    LaunchEnvironment unitOnly = withSystemd();
    unitOnly.brokerBinary.clear();
    EXPECT_EQ(planLaunch(unitOnly, kDefault, kDefault, kLogs).method, LaunchPlan::Method::Systemd);
}

TEST(LoadedUnits, ReadsSystemctlShow)
{
    const QString out = QStringLiteral("Id=paddockd.service\nLoadState=loaded\n\nId=paddock-pool.service\n"
                                       "LoadState=not-found\n");
    EXPECT_EQ(loadedUnits(out), QStringList{QStringLiteral("paddockd.service")});
    EXPECT_EQ(loadedUnits(QStringLiteral("LoadState=loaded\n")), QStringList{});
    EXPECT_EQ(loadedUnits(QStringLiteral("Id=paddock-pool.service\nLoadState=masked\n")), QStringList{});
}

TEST(SocketAnswers, OnlyWhileSomeoneListens)
{
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    const QString path = dir.filePath(QStringLiteral("broker.sock"));
    EXPECT_FALSE(BrokerLauncher::socketAnswers(path));   // no file

    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const QByteArray name = QFile::encodeName(path);
    std::memcpy(addr.sun_path, name.constData(), size_t(name.size()));
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr *>(&addr), sizeof(addr)), 0) << std::strerror(errno);
    ASSERT_EQ(::listen(fd, 4), 0);
    EXPECT_TRUE(BrokerLauncher::socketAnswers(path));
    ::close(fd);
    // The file a dead broker leaves behind: connection refused, so nobody answers.
    ASSERT_TRUE(QFile::exists(path));
    EXPECT_FALSE(BrokerLauncher::socketAnswers(path));
}

TEST(LocalSocketPath, TheUsersOwnSocketsOnly)
{
    EXPECT_EQ(BrokerLauncher::localSocketPath(QStringLiteral("broker.example.com:7700")), QString());
    EXPECT_EQ(BrokerLauncher::localSocketPath(QStringLiteral("unix:") + BrokerLauncher::defaultSocketPath()),
              BrokerLauncher::defaultSocketPath());
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    const QString mine = dir.filePath(QStringLiteral("not-yet/broker.sock"));
    EXPECT_EQ(BrokerLauncher::localSocketPath(mine), mine);
    EXPECT_EQ(BrokerLauncher::localSocketPath(QStringLiteral("unix:") + mine), mine);

    // Someone else's directory: no offer to start a broker there.
    QString theirs;
    if (::getuid() == 0) {
        const QString other = dir.filePath(QStringLiteral("other"));
        ASSERT_TRUE(QDir().mkpath(other));
        ASSERT_EQ(::chown(QFile::encodeName(other).constData(), 65534, 65534), 0);
        theirs = other + QStringLiteral("/broker.sock");
    } else {
        theirs = QStringLiteral("/nonexistent-paddock-dir/broker.sock");   // "/" is root's
    }
    EXPECT_EQ(BrokerLauncher::localSocketPath(theirs), QString());
}

// A stand-in for systemctl that answers `show` as a user manager with paddockd.service would,
// records the commands it is given and answers `start` and `is-active` as told.
class SystemdLauncherTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_TRUE(m_dir.isValid());
        m_oldRuntime = qgetenv("XDG_RUNTIME_DIR");
        qputenv("XDG_RUNTIME_DIR", QFile::encodeName(m_dir.filePath(QStringLiteral("run"))));
        QDir().mkpath(m_dir.filePath(QStringLiteral("empty")));
    }
    void TearDown() override { qputenv("XDG_RUNTIME_DIR", m_oldRuntime); }

    QString writeSystemctl(int startExit, const QString &activeState)
    {
        const QString script = m_dir.filePath(QStringLiteral("systemctl"));
        QFile file(script);
        EXPECT_TRUE(file.open(QIODevice::WriteOnly));
        file.write(QStringLiteral(R"(#!/bin/sh
echo "$*" >> '%1'
case "$2" in
show) printf 'Id=paddockd.service\nLoadState=loaded\n\nId=paddock-pool.service\nLoadState=not-found\n' ;;
start) if [ %2 -ne 0 ]; then echo "Job for paddockd.service failed because the control process exited with error code." >&2; fi; exit %2 ;;
is-active) echo %3 ;;
esac
)")
                       .arg(commandsFile())
                       .arg(startExit)
                       .arg(activeState)
                       .toUtf8());
        file.close();
        file.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
        return script;
    }
    QString commandsFile() const { return m_dir.filePath(QStringLiteral("commands")); }
    QStringList commands() const
    {
        QFile file(commandsFile());
        if (!file.open(QIODevice::ReadOnly))
            return {};
        return QString::fromUtf8(file.readAll()).split(u'\n', Qt::SkipEmptyParts);
    }

    // Runs the launcher to its end; returns the error (empty: ready).
    QString run(const QString &systemctl, QString *details)
    {
        BrokerLauncher launcher;
        BrokerLauncher::Options options;
        options.systemctl = systemctl;
        options.siblingDir = m_dir.filePath(QStringLiteral("empty"));
        options.searchPath = {m_dir.filePath(QStringLiteral("empty"))};
        options.timeoutMs = 15'000;
        launcher.setOptions(options);
        QString error;
        bool done = false;
        QObject::connect(&launcher, &BrokerLauncher::failed, [&](const QString &e, const QString &d) {
            error = e;
            *details = d;
            done = true;
        });
        QObject::connect(&launcher, &BrokerLauncher::ready, [&] { done = true; });
        launcher.start(BrokerLauncher::defaultSocketPath());
        EXPECT_TRUE(waitFor([&] { return done; }));
        EXPECT_EQ(launcher.plan().method, LaunchPlan::Method::Systemd);
        EXPECT_TRUE(launcher.startedPids().isEmpty());
        return error;
    }

    QTemporaryDir m_dir;
    QByteArray m_oldRuntime;
};

TEST_F(SystemdLauncherTest, AFailedStartNamesTheCommandAndTheJournal)
{
    QString details;
    const QString error = run(writeSystemctl(1, QStringLiteral("failed")), &details);
    EXPECT_TRUE(error.contains(QLatin1String("systemctl --user start paddockd.service"))) << error.toStdString();
    EXPECT_TRUE(error.contains(QLatin1String("journalctl --user -u paddockd.service"))) << error.toStdString();
    EXPECT_TRUE(details.contains(QLatin1String("Job for paddockd.service failed"))) << details.toStdString();
    const QStringList issued = commands();
    ASSERT_GE(issued.size(), 2);
    EXPECT_TRUE(issued.at(0).startsWith(QLatin1String("--user show"))) << issued.at(0).toStdString();
    // The pool's unit is not installed: only the broker's is started.
    EXPECT_EQ(issued.at(1), QStringLiteral("--user start paddockd.service"));
}

TEST_F(SystemdLauncherTest, AUnitThatStopsBeforeTheSocketAnswersIsReported)
{
    QString details;
    const QString error = run(writeSystemctl(0, QStringLiteral("failed")), &details);
    EXPECT_TRUE(error.contains(QLatin1String("paddockd.service is failed"))) << error.toStdString();
    EXPECT_TRUE(error.contains(QLatin1String("journalctl --user -u paddockd.service"))) << error.toStdString();
    EXPECT_TRUE(commands().contains(QStringLiteral("--user is-active paddockd.service")));
}

TEST_F(SystemdLauncherTest, NoUserManagerMeansDirect)
{
    // systemctl that cannot reach a user manager, as here: "Failed to connect to bus". Its stdout
    // names the broker's unit as loaded all the same: the exit code alone must rule systemd out.
    const QString script = m_dir.filePath(QStringLiteral("systemctl"));
    QFile file(script);
    ASSERT_TRUE(file.open(QIODevice::WriteOnly));
    file.write("#!/bin/sh\nprintf 'Id=paddockd.service\\nLoadState=loaded\\n'\n"
               "echo 'Failed to connect to bus: No medium found' >&2\nexit 1\n");
    file.close();
    file.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);

    BrokerLauncher launcher;
    BrokerLauncher::Options options;
    options.systemctl = script;
    options.siblingDir = m_dir.filePath(QStringLiteral("empty"));
    options.searchPath = {m_dir.filePath(QStringLiteral("empty"))};
    launcher.setOptions(options);
    QString error;
    QObject::connect(&launcher, &BrokerLauncher::failed, [&](const QString &e, const QString &) { error = e; });
    launcher.start(BrokerLauncher::defaultSocketPath());
    ASSERT_TRUE(waitFor([&] { return !launcher.isRunning(); }));
    // Direct, and no paddockd anywhere it looks.
    EXPECT_EQ(launcher.plan().method, LaunchPlan::Method::None);
    EXPECT_TRUE(error.contains(QLatin1String("paddock-broker"))) << error.toStdString();
}

} // namespace

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
