// GrpcConsoleClient (headless, no window) with a list of brokers: two paddockd processes on one
// PostgreSQL database (tests/integration/postgres_brokers.h). The client connects to the first,
// follows a session and watches the session list; the first broker gets kill -9; the client moves
// to the second by itself, its follow resumes after the last seq it had (every seq of the log
// exactly once, in order), its session list carries on without a row going back, and a submit
// through it carries a request_id the broker deduplicates.

#include "app/client/grpc_console_client.h"
#include "tests/integration/postgres_brokers.h"
#include "tests/support/qt_wait.h"
#include "tests/support/started_postgres.h"

#include <QCoreApplication>
#include <gtest/gtest.h>

#include <map>
#include <numeric>

namespace paddock::console {
namespace {

using paddock::test::waitFor;

constexpr int kWaitMs = 60'000;

class ConsoleFailoverTest : public test::FreshPostgresTest {
protected:
    ConsoleFailoverTest() : FreshPostgresTest("console") {}

    void SetUp() override
    {
        const auto missing = test::missingBinaries({"paddockd", "paddockctl"});
        if (!missing.empty())
            GTEST_SKIP() << "not built: " << missing.front();
        FreshPostgresTest::SetUp();
        if (IsSkipped() || HasFatalFailure())
            return;
        m_dir = std::make_unique<test::TempDir>("paddock-console-failover");
        m_brokers = std::make_unique<test::PostgresBrokers>(*m_dir, conninfo(), 2);
        auto started = m_brokers->start(0);
        ASSERT_TRUE(started) << started.error().message;

        m_client = std::make_unique<GrpcConsoleClient>();
        m_client->setReconnectBackoff(50, 500);
        m_client->setNotifyInterval(20);
        QObject::connect(m_client.get(), &ConsoleClient::eventsArrived, m_client.get(), [this](const QString &id) {
            for (const EventRecord &event : m_client->takeEvents(id))
                m_seqs.push_back(event.seq);
        });
        QObject::connect(m_client.get(), &ConsoleClient::sessionsChanged, m_client.get(), [this] {
            for (const SessionInfo &session : m_client->takeSessionChanges()) {
                auto &row = m_rows[session.id.toStdString()];
                if (session.lastSeq < row.lastSeq)
                    ++m_rowsBack;
                row = session;
            }
        });
        QObject::connect(m_client.get(), &ConsoleClient::actionFinished, m_client.get(),
                         [this](const QString &action, bool ok, const QString &message, const QString &sessionId) {
                             if (action == QStringLiteral("submit"))
                                 m_submits.push_back({ok, message.toStdString(), sessionId.toStdString()});
                         });
    }

    void TearDown() override
    {
        if (HasFailure() && m_brokers)
            std::cerr << m_brokers->logs();
        m_client.reset();
        m_brokers.reset();
    }

    struct Submitted {
        bool ok = false;
        std::string message;
        std::string sessionId;
    };

    std::unique_ptr<test::TempDir> m_dir;
    std::unique_ptr<test::PostgresBrokers> m_brokers;
    std::unique_ptr<GrpcConsoleClient> m_client;
    std::vector<int64_t> m_seqs;                 // every seq the follow delivered, in order
    std::map<std::string, SessionInfo> m_rows;   // the session list as the client handed it over
    int m_rowsBack = 0;                          // rows that went back to an older seq
    std::vector<Submitted> m_submits;
};

TEST_F(ConsoleFailoverTest, TheClientMovesToTheNextBrokerAndMissesNothing)
{
    // The log up to the kill, through A; the session ends paused (no engine appends while B starts).
    const std::string id = m_brokers->submit(0);
    ASSERT_FALSE(id.empty());
    for (int i = 0; i < 2; ++i)
        m_brokers->pauseAndResume(0, id);
    ASSERT_EQ(m_brokers->cli(0, {"pause", id}).exitCode, 0);
    const auto beforeKill = m_brokers->seqs(0, id);
    ASSERT_GE(beforeKill.size(), 7u);

    const QString a = QString::fromStdString(m_brokers->address(0));
    const QString b = QString::fromStdString(m_brokers->address(1));
    m_client->connectToBroker(a + QLatin1Char(',') + b);
    ASSERT_TRUE(waitFor([&] { return m_client->connectionState() == ConnectionState::Connected; }, kWaitMs));
    EXPECT_EQ(m_client->endpoint(), a);
    EXPECT_EQ(m_client->address(), a + QLatin1Char(',') + b);
    m_client->followSession(QString::fromStdString(id), 1);
    ASSERT_TRUE(waitFor([&] { return m_seqs.size() >= beforeKill.size(); }, kWaitMs)) << m_seqs.size();
    ASSERT_TRUE(waitFor([&] { return m_rows.count(id) && m_rows[id].lastSeq == static_cast<qint64>(beforeKill.size()); },
                        kWaitMs));

    auto started = m_brokers->start(1);
    ASSERT_TRUE(started) << started.error().message;
    std::vector<ConnectionState> states;
    QObject::connect(m_client.get(), &ConsoleClient::connectionStateChanged, m_client.get(),
                     [&](ConnectionState state, const QString &) { states.push_back(state); });
    m_brokers->kill9(0);
    ASSERT_TRUE(waitFor([&] { return m_client->connectionState() == ConnectionState::Connected && m_client->endpoint() == b; },
                        kWaitMs))
        << "the client did not move to " << b.toStdString();
    EXPECT_EQ(states, (std::vector<ConnectionState>{ConnectionState::Broken, ConnectionState::Connected}))
        << "one break, reported once, then connected to the other broker";

    // Appended through B after the move: the follow and the list go on.
    for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(m_brokers->cli(1, {"resume", id}).exitCode, 0);
        ASSERT_EQ(m_brokers->cli(1, {"pause", id}).exitCode, 0);
    }
    ASSERT_EQ(m_brokers->cli(1, {"cancel", id}).exitCode, 0);
    const auto stored = m_brokers->seqs(1, id);
    ASSERT_GE(stored.size(), beforeKill.size() + 5);
    ASSERT_TRUE(waitFor([&] { return m_seqs.size() >= stored.size(); }, kWaitMs))
        << m_seqs.size() << " of " << stored.size();
    EXPECT_EQ(m_seqs, stored) << "every seq once, in order, across the move";
    ASSERT_TRUE(waitFor([&] { return m_rows[id].status == SessionStatus::Cancelled; }, kWaitMs));
    EXPECT_EQ(m_rows[id].lastSeq, static_cast<qint64>(stored.size()));
    EXPECT_EQ(m_rowsBack, 0) << "no row of the list went back to an older state";

    // A submit through the client carries a request_id: the same one twice is one session.
    SubmitRequest request;
    request.playbook = QStringLiteral("hello-c");
    request.requestId = QStringLiteral("console-failover-1");
    m_client->submitSession(request);
    m_client->submitSession(request);
    ASSERT_TRUE(waitFor([&] { return m_submits.size() == 2; }, kWaitMs));
    ASSERT_TRUE(m_submits[0].ok) << m_submits[0].message;
    ASSERT_TRUE(m_submits[1].ok) << m_submits[1].message;
    EXPECT_EQ(m_submits[0].sessionId, m_submits[1].sessionId);
    const test::CliResult listed = m_brokers->cli(1, {"ls", "--all", "--output", "json"});
    ASSERT_EQ(listed.exitCode, 0) << listed.err;
    EXPECT_EQ(nlohmann::json::parse(listed.out).size(), 2u) << listed.out;
}

TEST_F(ConsoleFailoverTest, ASubmitWithNoBrokerAnsweringWaitsForOne)
{
    const QString a = QString::fromStdString(m_brokers->address(0));
    const QString b = QString::fromStdString(m_brokers->address(1));
    m_client->connectToBroker(a + QLatin1Char(',') + b);
    ASSERT_TRUE(waitFor([&] { return m_client->connectionState() == ConnectionState::Connected; }, kWaitMs));
    m_brokers->kill9(0);
    ASSERT_TRUE(waitFor([&] { return m_client->connectionState() == ConnectionState::Broken; }, kWaitMs));

    // Sent once a broker of the list answers: B, started after the submit.
    SubmitRequest request;
    request.playbook = QStringLiteral("hello-c");
    m_client->submitSession(request);
    auto started = m_brokers->start(1);
    ASSERT_TRUE(started) << started.error().message;
    ASSERT_TRUE(waitFor([&] { return m_submits.size() == 1; }, kWaitMs));
    EXPECT_TRUE(m_submits[0].ok) << m_submits[0].message;
    EXPECT_EQ(m_client->endpoint(), b);
}

} // namespace
} // namespace paddock::console

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
