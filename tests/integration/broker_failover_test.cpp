// Issue 17, the clients' side of several brokers, with paddockd processes and paddockctl as users
// run them:
// - `paddockctl --broker A,B events ID -f` follows a session through broker A; A gets kill -9
//   while B (the same PostgreSQL database, tests/integration/postgres_brokers.h) stays up; the
//   follow goes on through B and prints every seq of the log exactly once, in order, to its end
//   (what B appends after the move, and what A appended that the follow had not printed yet);
// - a submit's request_id holds across brokers and restarts: the same id through broker A, then
//   (A killed with kill -9) through broker B, then through A restarted, is one session; the same id
//   with another request is refused naming that session;
// - the same on one broker with its SQLite store, killed with kill -9 between the two submits.
//
// No wall-clock assertion: every wait is bounded and generous.

#include "tests/integration/daemons_fixture.h"
#include "tests/integration/postgres_brokers.h"
#include "tests/support/started_postgres.h"

#include <numeric>
#include <thread>

namespace paddock::test {
namespace {

// Polls until pred holds or timeout passes; whether it held.
bool eventually(const std::function<bool()> &pred, std::chrono::milliseconds timeout)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline)
            return false;
        std::this_thread::sleep_for(50ms);
    }
    return true;
}

std::vector<int64_t> oneTo(int64_t last)
{
    std::vector<int64_t> out(static_cast<size_t>(last));
    std::iota(out.begin(), out.end(), 1);
    return out;
}

class BrokerFailover : public FreshPostgresTest {
protected:
    BrokerFailover() : FreshPostgresTest("failover") {}

    void SetUp() override
    {
        PADDOCK_SKIP_IF_MISSING((std::vector<std::string>{"paddockd", "paddockctl"}));
        FreshPostgresTest::SetUp();
        if (IsSkipped() || HasFatalFailure())
            return;
        m_dir = std::make_unique<TempDir>("paddock-failover");
        m_brokers = std::make_unique<PostgresBrokers>(*m_dir, conninfo(), 2);
        startBroker(0);
    }

    void startBroker(int i)
    {
        auto started = m_brokers->start(i);
        ASSERT_TRUE(started) << started.error().message;
    }

    void TearDown() override
    {
        if (HasFailure() && m_brokers)
            std::cerr << m_brokers->logs();
        m_brokers.reset();
    }

    std::unique_ptr<TempDir> m_dir;
    std::unique_ptr<PostgresBrokers> m_brokers;
};

TEST_F(BrokerFailover, AFollowMovesToTheNextBrokerAndPrintsEverySeqOnce)
{
    // The session's log up to the kill is written through A (its engine may add sandbox.waiting
    // events: no pool answers); it ends paused, so no broker's engine appends to it while B starts.
    const std::string id = m_brokers->submit(0);
    ASSERT_FALSE(id.empty());
    for (int i = 0; i < 3; ++i)
        m_brokers->pauseAndResume(0, id);
    ASSERT_EQ(m_brokers->cli(0, {"pause", id}).exitCode, 0);
    const auto beforeKill = m_brokers->seqs(0, id);
    ASSERT_GE(beforeKill.size(), 9u);
    ASSERT_EQ(beforeKill, oneTo(static_cast<int64_t>(beforeKill.size())));

    // B is in the list before it runs: a follow's list names a team's brokers, up or not.
    const auto followLog = *m_dir / "follow.log";
    auto follower = Daemon::start({binaryPath("paddockctl").string(), "--broker",
                                   m_brokers->address(0) + "," + m_brokers->address(1), "events", id, "-f", "--output",
                                   "json"},
                                  followLog);
    ASSERT_TRUE(follower) << follower.error().message;
    ASSERT_TRUE(eventually([&] { return PostgresBrokers::seqsIn(follower->logText()).size() >= beforeKill.size(); },
                           60s))
        << follower->logText();

    startBroker(1);
    ASSERT_FALSE(HasFatalFailure());
    m_brokers->kill9(0);
    // What comes next is appended through B, the broker that stays.
    for (int i = 0; i < 2; ++i) {
        const CliResult resumed = m_brokers->cli(1, {"resume", id});
        ASSERT_EQ(resumed.exitCode, 0) << resumed.err;
        const CliResult paused = m_brokers->cli(1, {"pause", id});
        ASSERT_EQ(paused.exitCode, 0) << paused.err;
    }
    const CliResult cancelled = m_brokers->cli(1, {"cancel", id});
    ASSERT_EQ(cancelled.exitCode, 0) << cancelled.err;

    const auto exit = follower->waitExit(120s);
    ASSERT_TRUE(exit.has_value()) << "the follow did not end with the session:\n" << follower->logText();
    EXPECT_EQ(*exit, 7) << "a cancelled session ends the follow with 7:\n" << follower->logText();

    const auto stored = m_brokers->seqs(1, id);
    ASSERT_GE(stored.size(), beforeKill.size() + 5) << "four pauses and resumes and the cancel after the kill";
    ASSERT_EQ(stored, oneTo(static_cast<int64_t>(stored.size())));
    EXPECT_EQ(PostgresBrokers::seqsIn(follower->logText()), stored)
        << "every seq once, in order, across the move:\n" << follower->logText();
    EXPECT_NE(follower->logText().find("lost the broker at " + m_brokers->address(0)), std::string::npos)
        << follower->logText();
    EXPECT_NE(follower->logText().find("following session " + id + " on " + m_brokers->address(1) + " from seq "
                                       + std::to_string(beforeKill.size() + 1)),
              std::string::npos)
        << follower->logText();
}

TEST_F(BrokerFailover, ARequestIdMakesOneSessionAcrossBrokersAndRestarts)
{
    startBroker(1);
    ASSERT_FALSE(HasFatalFailure());
    const std::string id = m_brokers->submit(0, "nightly-build-1");
    ASSERT_FALSE(id.empty());
    m_brokers->kill9(0);
    EXPECT_EQ(m_brokers->submit(1, "nightly-build-1"), id) << "the retry through the other broker";
    auto restarted = m_brokers->start(0);
    ASSERT_TRUE(restarted) << restarted.error().message;
    EXPECT_EQ(m_brokers->submit(0, "nightly-build-1"), id) << "the retry through the restarted broker";

    const CliResult listed = m_brokers->cli(1, {"ls", "--all", "--output", "json"});
    ASSERT_EQ(listed.exitCode, 0) << listed.err;
    EXPECT_EQ(nlohmann::json::parse(listed.out).size(), 1u) << listed.out;

    // The same id with another request: refused, naming the session the id belongs to.
    const CliResult other = m_brokers->cli(1, {"submit", "--playbook", "hello-c", "--tag", "other", "--request-id",
                                               "nightly-build-1"});
    EXPECT_EQ(other.exitCode, 6) << other.err;
    EXPECT_NE(other.err.find("request_id 'nightly-build-1' was used for session " + id), std::string::npos) << other.err;
}

// One broker on its SQLite store (the embedded default), killed with kill -9 between two submits of
// one request id.
class SubmitAcrossACrash : public ::testing::Test {
protected:
    void SetUp() override
    {
        PADDOCK_SKIP_IF_MISSING((std::vector<std::string>{"paddockd", "paddockctl"}));
        m_dir = std::make_unique<TempDir>("paddock-submit-crash");
        m_pool = "127.0.0.1:" + std::to_string(freeLoopbackPort());   // nobody: sessions stay queued
        startBrokerProcess();
    }

    void TearDown() override
    {
        if (HasFailure() && m_broker)
            std::cerr << "---- paddockd log (tail) ----\n" << m_broker->daemon.logTail(60);
        if (m_broker)
            m_broker->daemon.terminate();
    }

    void startBrokerProcess()
    {
        auto broker = startBroker(*m_dir, m_pool);
        ASSERT_TRUE(broker) << broker.error().message;
        m_broker = std::make_unique<BrokerProcess>(std::move(*broker));
    }

    std::string submit(const std::string &requestId)
    {
        const CliResult result = runCli({"--broker", m_broker->address, "submit", "--playbook", "hello-c", "--output",
                                         "json", "--request-id", requestId});
        EXPECT_EQ(result.exitCode, 0) << result.err;
        const auto session = nlohmann::json::parse(result.out, nullptr, false);
        return session.is_object() ? session.value("id", std::string()) : std::string();
    }

    std::unique_ptr<TempDir> m_dir;
    std::string m_pool;
    std::unique_ptr<BrokerProcess> m_broker;
};

TEST_F(SubmitAcrossACrash, TheSameIdAfterAKillIsTheSameSession)
{
    const std::string id = submit("retry-after-crash");
    ASSERT_FALSE(id.empty());
    m_broker->daemon.kill9();
    m_broker.reset();
    startBrokerProcess();
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_EQ(submit("retry-after-crash"), id);
    EXPECT_NE(submit("another-request"), id);
    const CliResult listed = runCli({"--broker", m_broker->address, "ls", "--all", "--output", "json"});
    ASSERT_EQ(listed.exitCode, 0) << listed.err;
    EXPECT_EQ(nlohmann::json::parse(listed.out).size(), 2u) << listed.out;
}

} // namespace
} // namespace paddock::test
