// SIGTERM drains the broker in order: the process exits 0, the WAL is checkpointed into the database
// (nothing left in broker.db-wal), the socket is gone, and a restart finds every session as it was.

#include "tests/integration/daemons_fixture.h"

namespace paddock::test {
namespace {

class Shutdown : public DaemonsTest {};

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
