// First run: the console in this process (offscreen) with empty XDG directories in a temporary
// directory, so no broker answers on its default socket. It offers to start one; the test clicks
// Start and the launcher starts the build's real paddockd (found on PATH through a link in the
// temporary directory), detached; the console connects and shows the broker's (empty) sessions.
// Then: no paddockd anywhere, and a paddockd whose config is broken: each failure says what and
// how to fix it. systemd is switched off here (the stand-in tests of tests/unit/app cover it).
//
// PADDOCK_SCREENSHOTS_OUT=dir saves first-run.png (the offer), first-run-error.png (no paddockd) and
// first-run-exited.png (paddockd's log tail) there.

#include "app/broker_launcher.h"
#include "app/client/grpc_console_client.h"
#include "app/main_window.h"
#include "models/session_table_model.h"
#include "views/first_run_banner.h"

#include "tests/integration/harness.h"
#include "tests/unit/views/views_test_support.h"

#include <QFile>
#include <QPushButton>
#include <QStatusBar>
#include <QTest>

#include <gtest/gtest.h>

#include <csignal>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <memory>

using namespace paddock::console;
namespace fs = std::filesystem;

namespace {

using test::ensureApplication;
using test::waitFor;

// Gone: no such pid, or a zombie (it was detached, so its parent is not us and may reap it late).
bool processGone(qint64 pid)
{
    if (::kill(pid_t(pid), 0) != 0)
        return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    return close != std::string::npos && close + 2 < text.size() && (text[close + 2] == 'Z' || text[close + 2] == 'X');
}

void saveShot(QWidget *window, const char *name)
{
    const QByteArray out = qgetenv("PADDOCK_SCREENSHOTS_OUT");
    if (out.isEmpty())
        return;
    fs::create_directories(out.toStdString());
    QApplication::processEvents();   // the banner's new text is laid out before the grab
    EXPECT_TRUE(window->grab().save(QString::fromLocal8Bit(out) + u'/' + QString::fromLatin1(name)));
}

class FirstRunTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ensureApplication();
        if (!paddock::test::missingBinaries({"paddockd"}).empty())
            GTEST_SKIP() << "not built: " << paddock::test::binaryPath("paddockd");
        m_dir = std::make_unique<paddock::test::TempDir>("pfirst");
        for (const char *name : {"XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "PATH",
                                 "PADDOCK_BROKER"})
            m_saved.emplace_back(name, qgetenv(name));
        for (const char *sub : {"run", "config", "data", "state", "bin", "empty"})
            fs::create_directories(*m_dir / sub);
        fs::permissions(*m_dir / "run", fs::perms::owner_all, fs::perm_options::replace);
        setEnv("XDG_RUNTIME_DIR", *m_dir / "run");
        setEnv("XDG_CONFIG_HOME", *m_dir / "config");
        setEnv("XDG_DATA_HOME", *m_dir / "data");
        setEnv("XDG_STATE_HOME", *m_dir / "state");
        qunsetenv("PADDOCK_BROKER");
    }

    void TearDown() override
    {
        m_window.reset();
        m_client.reset();
        // The broker was detached on purpose (it outlives the console): stop it as a user would.
        for (qint64 pid : m_pids)
            ::kill(pid_t(pid), SIGTERM);
        for (qint64 pid : m_pids) {
            if (!waitFor([pid] { return processGone(pid); }, 15'000)) {
                ADD_FAILURE() << "pid " << pid << " did not stop on SIGTERM";
                ::kill(pid_t(pid), SIGKILL);
            }
        }
        if (HasFailure() && m_dir) {
            std::ifstream log(*m_dir / "state/paddock/paddockd.log");
            std::cerr << "---- paddockd.log ----\n" << log.rdbuf() << '\n';
        }
        for (const auto &[name, value] : m_saved) {
            if (value.isNull())
                qunsetenv(name.c_str());
            else
                qputenv(name.c_str(), value);
        }
        m_dir.reset();
    }

    static void setEnv(const char *name, const fs::path &value) { qputenv(name, QByteArray::fromStdString(value.string())); }

    // The window on the default address, with the launcher looking only where the test says and
    // never at systemd; returns when the offer is shown.
    void openConsole()
    {
        m_client = std::make_unique<GrpcConsoleClient>();
        m_client->setReconnectBackoff(50, 500);
        m_window = std::make_unique<MainWindow>(m_client.get(), MainWindow::Options{false});
        BrokerLauncher::Options options;
        options.siblingDir = QString::fromStdString((*m_dir / "empty").string());
        options.systemctl.clear();
        m_window->brokerLauncher()->setOptions(options);
        m_window->show();
        m_window->connectToBroker();
        ASSERT_TRUE(waitFor([this] { return banner()->state() == FirstRunBanner::State::Offer; }))
            << "no offer; connection: " << m_window->connectionText().toStdString();
    }

    FirstRunBanner *banner() const { return m_window->firstRunBanner(); }

    // Clicks Start and waits for the launcher to end (ready or failed).
    void clickStart()
    {
        ASSERT_TRUE(banner()->startButton()->isVisible());
        ASSERT_TRUE(banner()->startButton()->isEnabled());
        QTest::mouseClick(banner()->startButton(), Qt::LeftButton);
        EXPECT_NE(banner()->state(), FirstRunBanner::State::Offer);
        ASSERT_TRUE(waitFor([this] { return !m_window->brokerLauncher()->isRunning(); }, 40'000));
        m_pids = m_window->brokerLauncher()->startedPids();
    }

    std::unique_ptr<paddock::test::TempDir> m_dir;
    std::vector<std::pair<std::string, QByteArray>> m_saved;
    std::unique_ptr<GrpcConsoleClient> m_client;
    std::unique_ptr<MainWindow> m_window;
    QList<qint64> m_pids;
};

TEST_F(FirstRunTest, StartsTheBrokerAndConnects)
{
    // The build's paddockd on PATH, and nothing else of ours (no paddock-pool: the test must not
    // take 127.0.0.1:7701).
    fs::create_symlink(paddock::test::binaryPath("paddockd"), *m_dir / "bin/paddockd");
    setEnv("PATH", (*m_dir / "bin").string() + ":/usr/bin:/bin");
    ASSERT_NO_FATAL_FAILURE(openConsole());
    EXPECT_EQ(banner()->text(), QStringLiteral("No broker is running on this machine."));
    EXPECT_TRUE(banner()->connectButton()->isVisible());
    // What Start does, with the log it will write.
    EXPECT_TRUE(banner()->explanation().contains(QString::fromStdString((*m_dir / "state/paddock/paddockd.log").string())))
        << banner()->explanation().toStdString();
    EXPECT_NE(m_client->connectionState(), ConnectionState::Connected);
    // Never connected: nothing is stale, the offer is the message.
    EXPECT_FALSE(m_window->sessionModel()->isStale());
    EXPECT_TRUE(m_window->connectionText().startsWith(QLatin1String("No broker answers")))
        << m_window->connectionText().toStdString();
    saveShot(m_window.get(), "first-run.png");

    ASSERT_NO_FATAL_FAILURE(clickStart());
    ASSERT_EQ(m_pids.size(), 1) << banner()->text().toStdString() << "\n" << banner()->details().toStdString();
    // The real paddockd, through the link on PATH.
    std::error_code ec;
    EXPECT_TRUE(fs::equivalent(fs::read_symlink("/proc/" + std::to_string(m_pids.first()) + "/exe", ec),
                               paddock::test::binaryPath("paddockd"), ec))
        << ec.message();
    // Detached: its own session, so closing the console's terminal does not take the broker along.
    EXPECT_NE(::getsid(pid_t(m_pids.first())), ::getsid(0));
    ASSERT_TRUE(waitFor([this] { return m_client->connectionState() == ConnectionState::Connected; }, 30'000))
        << banner()->text().toStdString() << "\n" << m_window->connectionText().toStdString();
    EXPECT_EQ(banner()->state(), FirstRunBanner::State::Hidden);
    EXPECT_FALSE(banner()->isVisible());
    EXPECT_EQ(m_window->currentPage(), MainWindow::Page::Sessions);
    EXPECT_EQ(m_window->sessionModel()->rowCount(), 0);
    EXPECT_TRUE(m_window->connectionText().startsWith(QLatin1String("Connected to unix:")))
        << m_window->connectionText().toStdString();
    // Its log is where the status bar says, and the broker's own output went there.
    const fs::path log = *m_dir / "state/paddock/paddockd.log";
    EXPECT_TRUE(m_window->statusBar()->currentMessage().contains(QString::fromStdString(log.string())))
        << m_window->statusBar()->currentMessage().toStdString();
    // No paddock-pool anywhere it looked (unless a pool already answered on 7701): said, not fatal.
    EXPECT_EQ(m_window->brokerLauncher()->plan().processes.size(), 1);
    for (const QString &note : m_window->brokerLauncher()->plan().notes)
        EXPECT_TRUE(m_window->statusBar()->currentMessage().contains(note)) << note.toStdString();
    ASSERT_TRUE(fs::exists(log));
    EXPECT_GT(fs::file_size(log), 0u);
}

TEST_F(FirstRunTest, AMissingBrokerBinaryNamesItAndTheFix)
{
    setEnv("PATH", *m_dir / "empty");
    ASSERT_NO_FATAL_FAILURE(openConsole());
    ASSERT_NO_FATAL_FAILURE(clickStart());
    EXPECT_TRUE(m_pids.isEmpty());
    EXPECT_EQ(banner()->state(), FirstRunBanner::State::Failed);
    EXPECT_TRUE(banner()->isVisible());
    const QString text = banner()->text();
    EXPECT_TRUE(text.contains(QLatin1String("paddockd"))) << text.toStdString();
    EXPECT_TRUE(text.contains(QLatin1String("install paddock-broker"))) << text.toStdString();
    // Both ways on stay open.
    EXPECT_TRUE(banner()->startButton()->isEnabled());
    EXPECT_TRUE(banner()->connectButton()->isEnabled());
    EXPECT_NE(m_client->connectionState(), ConnectionState::Connected);
    saveShot(m_window.get(), "first-run-error.png");
}

TEST_F(FirstRunTest, ABrokerThatExitsShowsItsLog)
{
    fs::create_symlink(paddock::test::binaryPath("paddockd"), *m_dir / "bin/paddockd");
    setEnv("PATH", (*m_dir / "bin").string() + ":/usr/bin:/bin");
    // The user's broker.toml is what paddockd reads with no arguments; this one is not TOML.
    fs::create_directories(*m_dir / "config/paddock");
    std::ofstream(*m_dir / "config/paddock/broker.toml") << "pools = [ this is not toml\n";
    ASSERT_NO_FATAL_FAILURE(openConsole());
    ASSERT_NO_FATAL_FAILURE(clickStart());
    EXPECT_EQ(banner()->state(), FirstRunBanner::State::Failed);
    const QString text = banner()->text();
    EXPECT_TRUE(text.contains(QLatin1String("paddockd exited"))) << text.toStdString();
    EXPECT_TRUE(text.contains(QString::fromStdString((*m_dir / "state/paddock/paddockd.log").string())))
        << text.toStdString();
    // The log's tail: what paddockd said about its config.
    EXPECT_TRUE(banner()->details().contains(QLatin1String("broker.toml"))) << banner()->details().toStdString();
    EXPECT_NE(m_client->connectionState(), ConnectionState::Connected);
    saveShot(m_window.get(), "first-run-exited.png");
}

} // namespace
