// The harness itself, on plain system programs: the integration tests trust it to start, stop and
// reap processes and to report exit codes faithfully.
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <fstream>

namespace paddock::test {
namespace {

TEST(Harness, TempDirIsRemoved)
{
    std::filesystem::path kept;
    {
        TempDir dir;
        kept = dir.path();
        std::ofstream(dir / "file") << "x";
        EXPECT_TRUE(std::filesystem::exists(dir / "file"));
    }
    if (!std::getenv("PADDOCK_KEEP_TEST_DIRS")) {
        EXPECT_FALSE(std::filesystem::exists(kept));
    }
}

TEST(Harness, FreePortIsOnLoopbackRange)
{
    const int port = freeLoopbackPort();
    EXPECT_GT(port, 0);
    EXPECT_LT(port, 65536);
}

TEST(Harness, DaemonLogsAndReportsItsExitCode)
{
    TempDir dir;
    auto daemon = Daemon::start({"/bin/sh", "-c", "echo out; echo err >&2; echo $HARNESS_VAR; exit 3"},
                                dir / "log", {{"HARNESS_VAR", "from-env"}});
    ASSERT_TRUE(daemon) << daemon.error().message;
    EXPECT_EQ(daemon->waitExit(10s), 3);
    const std::string log = daemon->logText();
    EXPECT_NE(log.find("out\n"), std::string::npos) << log;
    EXPECT_NE(log.find("err\n"), std::string::npos) << log;
    EXPECT_NE(log.find("from-env\n"), std::string::npos) << log;
}

TEST(Harness, TerminateAndKill)
{
    TempDir dir;
    auto polite = Daemon::start({"/bin/sleep", "60"}, dir / "polite.log");
    ASSERT_TRUE(polite);
    EXPECT_TRUE(polite->running());
    EXPECT_EQ(polite->terminate(5s), 128 + SIGTERM);
    EXPECT_FALSE(polite->running());

    auto stubborn = Daemon::start({"/bin/sh", "-c", "trap '' TERM; sleep 60 & wait"}, dir / "stubborn.log");
    ASSERT_TRUE(stubborn);
    std::this_thread::sleep_for(100ms);   // let the shell install its trap
    EXPECT_EQ(stubborn->terminate(300ms), 128 + SIGKILL);

    auto killed = Daemon::start({"/bin/sleep", "60"}, dir / "killed.log");
    ASSERT_TRUE(killed);
    const pid_t pid = killed->pid();
    killed->kill9();
    EXPECT_FALSE(killed->running());
    EXPECT_NE(::kill(pid, 0), 0);   // reaped, not a zombie
}

TEST(Harness, MissingBinaryIsNamed)
{
    TempDir dir;
    auto daemon = Daemon::start({"/nonexistent/paddockd"}, dir / "log");
    ASSERT_FALSE(daemon);
    EXPECT_NE(daemon.error().message.find("/nonexistent/paddockd"), std::string::npos);
    EXPECT_EQ(missingBinaries({"definitely-not-built"}), std::vector<std::string>{"definitely-not-built"});
}

TEST(Harness, HealthWaitGivesUpAndNamesTheAddress)
{
    const std::string target = "127.0.0.1:" + std::to_string(freeLoopbackPort());
    const auto started = std::chrono::steady_clock::now();
    auto healthy = waitForHealthy(target, 500ms);
    ASSERT_FALSE(healthy);
    EXPECT_NE(healthy.error().message.find(target), std::string::npos) << healthy.error().message;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST(Harness, HealthWaitStopsWhenTheDaemonDies)
{
    TempDir dir;
    auto daemon = Daemon::start({"/bin/sh", "-c", "echo dying; exit 2"}, dir / "log");
    ASSERT_TRUE(daemon);
    auto healthy = waitForHealthy("127.0.0.1:1", 30s, &*daemon);
    ASSERT_FALSE(healthy);
    EXPECT_NE(healthy.error().message.find("exited (status 2)"), std::string::npos) << healthy.error().message;
    EXPECT_NE(healthy.error().message.find("dying"), std::string::npos);
}

TEST(Harness, RunCliCapturesOutputAndExitCode)
{
    if (!missingBinaries({"paddockctl"}).empty())
        GTEST_SKIP() << "not built: " << binaryPath("paddockctl");
    const CliResult version = runCli({"--version"});
    EXPECT_EQ(version.exitCode, 0);
    EXPECT_NE(version.out.find("paddockctl"), std::string::npos);

    const CliResult usage = runCli({"no-such-command"});
    EXPECT_EQ(usage.exitCode, 2);
    EXPECT_FALSE(usage.err.empty());
}

} // namespace
} // namespace paddock::test

namespace paddock::test {
namespace {

// The pool alone: startPool's command line and the health wait against a real gRPC server.
TEST(Harness, PoolStartsAndAnswersHealthChecks)
{
    if (!missingBinaries({"paddock-pool", "paddock-sandbox-init"}).empty())
        GTEST_SKIP() << "not built: " << binaryPath("paddock-pool");
    TempDir dir;
    auto pool = startPool(dir);
    ASSERT_TRUE(pool) << pool.error().message;
    EXPECT_TRUE(pool->daemon.running());
    EXPECT_TRUE(waitForHealthy(pool->endpoint, 5s));
    const int status = pool->daemon.terminate();
    EXPECT_EQ(status, 0) << "SIGTERM should drain and exit cleanly; log:\n" << pool->daemon.logTail();
}

} // namespace
} // namespace paddock::test
