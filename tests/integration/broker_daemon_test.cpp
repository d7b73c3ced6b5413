// paddockd as a process: its socket is private, a second broker is refused, a local pool needs
// consent, and SIGTERM drains in order (exit 0, WAL checkpointed into the database, socket gone,
// followers told where to resume, everything there after a restart).

#include "tests/integration/daemons_fixture.h"

#include <sys/stat.h>

namespace paddock::test {
namespace {

class Shutdown : public DaemonsTest {};
class BrokerDaemon : public DaemonsTest {};

TEST_F(BrokerDaemon, SocketIsPrivateToItsUser)
{
    struct stat socketStat {};
    ASSERT_EQ(::stat(m_broker->socketPath.c_str(), &socketStat), 0);
    EXPECT_EQ(socketStat.st_mode & 0777, 0600u);
    struct stat dirStat {};
    ASSERT_EQ(::stat(m_broker->socketPath.parent_path().c_str(), &dirStat), 0);
    EXPECT_EQ(dirStat.st_mode & 0777, 0700u);
}

TEST_F(BrokerDaemon, SecondBrokerOnTheSameSocketIsRefused)
{
    auto second = Daemon::start({binaryPath("paddockd").string(), "--data-dir", (*m_dir / "other").string(),
                                 "--socket", m_broker->socketPath.string(), "--pool", "local=" + m_pool->endpoint,
                                 "--allow-local-execution"},
                                *m_dir / "second.log");
    ASSERT_TRUE(second) << second.error().message;
    const auto exit = second->waitExit(20s);
    ASSERT_TRUE(exit.has_value());
    EXPECT_EQ(*exit, 3);
    EXPECT_NE(second->logText().find("another broker is already listening"), std::string::npos) << second->logText();
    EXPECT_EQ(cli({"ls"}).exitCode, 0) << "the first broker must keep serving";
}

TEST_F(BrokerDaemon, LocalPoolNeedsConsent)
{
    auto broker = Daemon::start({binaryPath("paddockd").string(), "--data-dir", (*m_dir / "other").string(),
                                 "--socket", (*m_dir / "other.sock").string(), "--config",
                                 writeFile("broker.toml", "[[pool]]\nname = \"here\"\nendpoint = \"" + m_pool->endpoint
                                                              + "\"\n").string()},
                                *m_dir / "local.log");
    ASSERT_TRUE(broker) << broker.error().message;
    const auto exit = broker->waitExit(20s);
    ASSERT_TRUE(exit.has_value());
    EXPECT_EQ(*exit, 3);
    EXPECT_NE(broker->logText().find("allow_local_execution"), std::string::npos) << broker->logText();
}

TEST_F(Shutdown, SigtermCommitsCheckpointsAndKeepsEverything)
{
    const std::string id = submitAndFollow({"--playbook", "hello-c"});
    ASSERT_FALSE(id.empty());
    const CliResult before = cli({"events", id, "--output", "json"});
    ASSERT_EQ(before.exitCode, 0) << before.err;

    EXPECT_EQ(m_broker->daemon.terminate(), 0) << m_broker->daemon.logTail();
    const auto wal = *m_dir / "broker" / "broker.db-wal";
    std::error_code ec;
    const auto walSize = std::filesystem::file_size(wal, ec);
    EXPECT_TRUE(ec || walSize == 0) << "the WAL still holds " << walSize << " bytes after SIGTERM";
    EXPECT_FALSE(std::filesystem::exists(m_broker->socketPath)) << "the socket was left behind";

    auto restarted = startBroker(*m_dir, m_pool->endpoint);
    ASSERT_TRUE(restarted) << restarted.error().message;
    m_broker = std::make_unique<BrokerProcess>(std::move(*restarted));
    const CliResult after = cli({"events", id, "--output", "json"});
    ASSERT_EQ(after.exitCode, 0) << after.err;
    EXPECT_EQ(after.out, before.out);
}

TEST_F(Shutdown, FollowersAreToldWhereToResume)
{
    // A session that sleeps keeps a follower attached while the broker stops.
    const auto playbook = writeFile("slow.toml", "name = \"slow\"\ngoal = \"wait\"\n[[step]]\ntool = \"run_command\"\n"
                                                 "command = \"sleep 30\"\n");
    const CliResult submitted = cli({"submit", "--playbook", playbook.string(), "--output", "json"});
    ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
    const std::string id = nlohmann::json::parse(submitted.out)["id"].get<std::string>();

    pid_t follower = 0;
    auto followerLog = *m_dir / "follow.log";
    auto daemon = Daemon::start({binaryPath("paddockctl").string(), "--broker", m_broker->address, "events", id, "-f"},
                                followerLog);
    ASSERT_TRUE(daemon) << daemon.error().message;
    follower = daemon->pid();
    ASSERT_GT(follower, 0);
    std::this_thread::sleep_for(500ms);

    EXPECT_EQ(m_broker->daemon.terminate(), 0) << m_broker->daemon.logTail();
    const auto exit = daemon->waitExit(20s);
    ASSERT_TRUE(exit.has_value()) << "the follower did not notice the broker stopping";
    EXPECT_EQ(*exit, 4) << daemon->logText();
    EXPECT_NE(daemon->logText().find("seq"), std::string::npos) << daemon->logText();
}

} // namespace
} // namespace paddock::test
