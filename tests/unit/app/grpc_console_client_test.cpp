// GrpcConsoleClient against the real broker services on a unix socket in a temporary directory, with the
// real SQLite store. Events are appended straight to the store so the tests know exactly what the
// client must deliver. Waits are bounded event-loop loops; nothing asserts on wall-clock time.

#include "app/client/grpc_console_client.h"
#include "tests/support/qt_wait.h"

#include "broker/core/event.h"
#include "tests/support/fake_pool_client.h"
#include "tests/support/in_process_broker.h"
#include "tests/support/scripted_session_service.h"

#include "rpc/broker_stubs.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QThread>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace paddock::console {
namespace {

using namespace std::chrono_literals;

constexpr const char *kPlaybook = R"(
name = "one"
goal = "say hello"
[[step]]
tool = "run_command"
command = "echo hello"
)";

// Runs the event loop until pred holds or timeoutMs pass (a bound for a hung test, not a budget).
using paddock::test::waitFor;

// Keeps the event loop running for a while (to let retries happen), asserting nothing about time.
void spin(int ms)
{
    waitFor([] { return false; }, ms);
}

// A pool whose sandbox sb-1 has a new sample at each GetSamples until it is released.
std::unique_ptr<test::FakePoolClient> samplingPool()
{
    auto pool = std::make_unique<test::FakePoolClient>("sampling");
    auto next = std::make_shared<std::atomic<int64_t>>(0);   // the newest sample's time
    pool->setSamplesHook([next](const std::string &sandboxId,
                                int64_t afterUnixMs) -> Result<std::vector<pool_client::ResourcePoint>> {
        if (sandboxId != "sb-1")
            return fail(ErrorCode::NotFound, "no sandbox '" + sandboxId + "' on this pool");
        const int64_t last = *next += 1000;
        std::vector<pool_client::ResourcePoint> out;
        for (int64_t t = (afterUnixMs / 1000 + 1) * 1000; t <= last; t += 1000)
            out.push_back({t, 0.5, 1'000'000 + t, 3});
        return out;
    });
    return pool;
}

// The in-process broker plus what these tests do to it.
class Broker {
public:
    explicit Broker(std::filesystem::path dir) : m_broker(std::move(dir), PADDOCK_PLAYBOOK_DIR) {}

    std::string address() const { return m_broker.address(); }

    void openStore()
    {
        auto opened = m_broker.openStore();
        ASSERT_TRUE(opened) << opened.error().message;
    }

    void start()
    {
        auto started = m_broker.start();
        ASSERT_TRUE(started) << started.error().message;
        m_stub = std::make_unique<rpc::BrokerStubs>(m_broker.newChannel());
    }

    // Like a broker shutting down: streams end with UNAVAILABLE, the store closes.
    void stop()
    {
        m_stub.reset();
        m_broker.stop();
    }

    std::string submit()
    {
        v1::SubmitSessionRequest request;
        request.set_playbook_toml(kPlaybook);
        v1::Session session;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + 20s);
        auto status = m_stub->sessions->SubmitSession(&context, request, &session);
        EXPECT_TRUE(status.ok()) << status.error_message();
        return session.id();
    }

    void append(const std::string &id, int n, int batch = 250)
    {
        for (int done = 0; done < n; done += batch) {
            store::AppendRequest request;
            request.sessionId = id;
            for (int i = 0; i < std::min(batch, n - done); ++i)
                request.events.push_back({"test.tick", nlohmann::json{{"i", done + i}}.dump()});
            auto appended = m_broker.store().appendSync(std::move(request));
            ASSERT_TRUE(appended) << appended.error().message;
        }
    }

    void setStatus(const std::string &id, const char *status)
    {
        store::AppendRequest request;
        request.sessionId = id;
        request.events.push_back({core::kind::StateChanged, nlohmann::json{{"status", status}}.dump()});
        ASSERT_TRUE(m_broker.store().appendSync(std::move(request)));
    }

    placement::PoolSet &pools() { return m_broker.pools(); }   // before start()

private:
    test::InProcessBroker m_broker;
    std::unique_ptr<rpc::BrokerStubs> m_stub;
};

class GrpcConsoleClientTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        // Short: a unix socket path has at most 107 characters.
        static int counter = 0;
        m_dir = std::filesystem::temp_directory_path()
            / ("pcc-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
        m_broker = std::make_unique<Broker>(m_dir);
        m_client = std::make_unique<GrpcConsoleClient>();
        m_client->setReconnectBackoff(20, 200);
        QObject::connect(m_client.get(), &ConsoleClient::connectionStateChanged, m_client.get(),
                         [this](ConnectionState state, const QString &) { m_states.append(state); });
        QObject::connect(m_client.get(), &ConsoleClient::sessionsChanged, m_client.get(), [this] {
            for (const SessionInfo &s : m_client->takeSessionChanges())
                m_sessions.insert(s.id, s);
        });
        QObject::connect(m_client.get(), &ConsoleClient::eventsArrived, m_client.get(), [this](const QString &id) {
            ++m_eventNotifications;
            m_events[id].append(m_client->takeEvents(id));
        });
        QObject::connect(m_client.get(), &ConsoleClient::actionFinished, m_client.get(),
                         [this](const QString &action, bool ok, const QString &message, const QString &id) {
                             m_actions.append({action, ok, message, id});
                         });
    }

    void TearDown() override
    {
        m_client.reset();
        m_broker.reset();
        std::filesystem::remove_all(m_dir);
    }

    QString address() const { return QString::fromStdString(m_broker->address()); }

    bool connected()
    {
        return waitFor([this] { return m_client->connectionState() == ConnectionState::Connected; });
    }

    // The received events of a session are exactly 1..n in order.
    void expectDense(const QString &id, qint64 n)
    {
        const QList<EventRecord> &events = m_events[id];
        ASSERT_EQ(events.size(), n);
        for (qsizetype i = 0; i < events.size(); ++i)
            ASSERT_EQ(events.at(i).seq, i + 1) << "gap or repeat at " << i;
    }

    struct Action {
        QString action;
        bool ok;
        QString message;
        QString sessionId;
    };

    std::filesystem::path m_dir;
    std::unique_ptr<Broker> m_broker;
    std::unique_ptr<GrpcConsoleClient> m_client;
    QList<ConnectionState> m_states;
    QHash<QString, SessionInfo> m_sessions;
    QHash<QString, QList<EventRecord>> m_events;
    int m_eventNotifications = 0;
    QList<Action> m_actions;
};

TEST_F(GrpcConsoleClientTest, WatchGivesTheInitialSessionsThenChanges)
{
    m_broker->start();
    const auto a = QString::fromStdString(m_broker->submit());
    const auto b = QString::fromStdString(m_broker->submit());
    m_client->connectToBroker(address());
    ASSERT_TRUE(connected());
    ASSERT_TRUE(waitFor([&] { return m_sessions.contains(a) && m_sessions.contains(b); }));
    EXPECT_EQ(m_sessions.value(a).status, SessionStatus::Queued);
    EXPECT_EQ(m_sessions.value(a).goal, QStringLiteral("say hello"));

    m_broker->setStatus(a.toStdString(), "running");
    ASSERT_TRUE(waitFor([&] { return m_sessions.value(a).status == SessionStatus::Running; }));
    EXPECT_EQ(m_sessions.value(a).lastSeq, 3);   // session.created, env.decision, state.changed
    EXPECT_EQ(m_states, (QList<ConnectionState>{ConnectionState::Connecting, ConnectionState::Connected}));
}

TEST_F(GrpcConsoleClientTest, FollowGivesHistoryThenTheLiveTailWithNoGapAcrossAReconnect)
{
    m_broker->start();
    const std::string id = m_broker->submit();
    const QString qid = QString::fromStdString(id);
    m_broker->append(id, 3000);   // after the submit's session.created and env.decision
    m_client->connectToBroker(address());
    ASSERT_TRUE(connected());
    m_client->followSession(qid, 1);
    ASSERT_TRUE(waitFor([&] { return m_events[qid].size() == 3002; }));
    EXPECT_LT(m_eventNotifications, 3002 / 10) << "notifications should be coalesced, not one per event";

    m_broker->append(id, 1000);   // live
    ASSERT_TRUE(waitFor([&] { return m_events[qid].size() == 4002; }));

    // The broker goes away; events are committed while it is down; it comes back on the same socket.
    m_broker->stop();
    ASSERT_TRUE(waitFor([&] { return m_client->connectionState() == ConnectionState::Broken; }));
    spin(500);   // several reconnect attempts fail meanwhile
    m_broker->openStore();
    m_broker->append(id, 2000);
    m_broker->start();
    ASSERT_TRUE(connected());
    m_broker->append(id, 500);
    m_broker->setStatus(id, "succeeded");
    ASSERT_TRUE(waitFor([&] { return m_events[qid].size() >= 6503; }));
    spin(200);
    expectDense(qid, 6503);
    EXPECT_EQ(m_states, (QList<ConnectionState>{ConnectionState::Connecting, ConnectionState::Connected,
                                                ConnectionState::Broken, ConnectionState::Connected}))
        << "a broken connection is reported once, not once per retry";
}

TEST_F(GrpcConsoleClientTest, HistoryComesInOnePieceOfTheSizeAsked)
{
    m_broker->start();
    const std::string id = m_broker->submit();
    m_broker->append(id, 100);
    m_client->connectToBroker(address());
    ASSERT_TRUE(connected());
    QList<EventRecord> history;
    bool answered = false;
    QObject::connect(m_client.get(), &ConsoleClient::historyArrived, m_client.get(),
                     [&](const QString &, const QList<EventRecord> &events) {
                         history = events;
                         answered = true;
                     });
    m_client->fetchHistory(QString::fromStdString(id), 10, 20);
    ASSERT_TRUE(waitFor([&] { return answered; }));
    ASSERT_EQ(history.size(), 20);
    EXPECT_EQ(history.first().seq, 10);
    EXPECT_EQ(history.last().seq, 29);
    EXPECT_EQ(history.first().kind, QStringLiteral("test.tick"));

    answered = false;
    m_client->fetchHistory(QStringLiteral("no-such-session"), 1, 20);
    ASSERT_TRUE(waitFor([&] { return answered; })) << "a failed fetch is answered too (empty)";
    EXPECT_TRUE(history.isEmpty());
}

TEST_F(GrpcConsoleClientTest, ActionsRoundTripAndReportTheBrokersRefusal)
{
    m_broker->start();
    m_client->connectToBroker(address());
    ASSERT_TRUE(connected());
    SubmitRequest request;
    request.playbookToml = QString::fromUtf8(kPlaybook);
    m_client->submitSession(request);
    ASSERT_TRUE(waitFor([&] { return m_actions.size() == 1; }));
    ASSERT_TRUE(m_actions.at(0).ok) << qPrintable(m_actions.at(0).message);
    const QString id = m_actions.at(0).sessionId;
    EXPECT_FALSE(id.isEmpty());

    m_client->pauseSession(id);
    ASSERT_TRUE(waitFor([&] { return m_actions.size() == 2; }));
    EXPECT_TRUE(m_actions.at(1).ok) << qPrintable(m_actions.at(1).message);
    EXPECT_EQ(m_actions.at(1).action, QStringLiteral("pause"));
    m_client->resumeSession(id);
    ASSERT_TRUE(waitFor([&] { return m_actions.size() == 3; }));
    EXPECT_TRUE(m_actions.at(2).ok) << qPrintable(m_actions.at(2).message);
    m_client->cancelSession(id);
    ASSERT_TRUE(waitFor([&] { return m_actions.size() == 4; }));
    EXPECT_TRUE(m_actions.at(3).ok) << qPrintable(m_actions.at(3).message);
    ASSERT_TRUE(waitFor([&] { return m_sessions.value(id).status == SessionStatus::Cancelled; }));

    m_client->cancelSession(QStringLiteral("no-such-session"));
    ASSERT_TRUE(waitFor([&] { return m_actions.size() == 5; }));
    EXPECT_FALSE(m_actions.at(4).ok);
    EXPECT_TRUE(m_actions.at(4).message.contains(QStringLiteral("no-such-session"))) << qPrintable(m_actions.at(4).message);
    m_client->resumeSession(id);   // cancelled: the broker refuses
    ASSERT_TRUE(waitFor([&] { return m_actions.size() == 6; }));
    EXPECT_FALSE(m_actions.at(5).ok);
    m_client->submitSession({});
    ASSERT_TRUE(waitFor([&] { return m_actions.size() == 7; }));
    EXPECT_FALSE(m_actions.at(6).ok);
    EXPECT_EQ(m_actions.at(6).action, QStringLiteral("submit"));
}

TEST_F(GrpcConsoleClientTest, AMissingBrokerIsBrokenOnceThenConnectedWhenItAppears)
{
    bool pools = false;
    QObject::connect(m_client.get(), &ConsoleClient::poolsChanged, m_client.get(),
                     [&](const QList<PoolInfo> &, bool) { pools = true; });
    m_client->connectToBroker(address());
    ASSERT_TRUE(waitFor([&] { return m_client->connectionState() == ConnectionState::Broken; }));
    spin(600);   // retries with backoff meanwhile
    m_broker->start();
    ASSERT_TRUE(connected());
    EXPECT_EQ(m_states, (QList<ConnectionState>{ConnectionState::Connecting, ConnectionState::Broken,
                                                ConnectionState::Connected}));
    ASSERT_TRUE(waitFor([&] { return pools; })) << "pools are listed on connect";
    m_client->disconnectFromBroker();
    EXPECT_EQ(m_client->connectionState(), ConnectionState::Disconnected);
}

TEST_F(GrpcConsoleClientTest, RefreshingThePoolsBringsTheCheckpointStoresFigures)
{
    m_broker->start();
    QList<CheckpointStorage> answers;
    QStringList errors;
    QObject::connect(m_client.get(), &ConsoleClient::storageChanged, m_client.get(),
                     [&](const CheckpointStorage &storage, const QString &error) {
                         answers << storage;
                         errors << error;
                     });
    m_client->connectToBroker(address());
    ASSERT_TRUE(connected());
    ASSERT_TRUE(waitFor([&] { return !answers.isEmpty(); })) << "the figures come with the pools on connect";
    EXPECT_TRUE(errors.first().isEmpty()) << errors.first().toStdString();
    EXPECT_EQ(answers.first().store, QStringLiteral("broker"));
    EXPECT_TRUE(answers.first().where.startsWith(QStringLiteral("the broker's checkpoint directory "))) << answers.first().where.toStdString();
    EXPECT_EQ(answers.first().retentionHours, 168);
    EXPECT_EQ(answers.first().chunks, 0);
    EXPECT_GT(answers.first().computedUnixMs, 0);
}

TEST_F(GrpcConsoleClientTest, SampleWatchDeliversLiveSamplesUntilTheSandboxIsReleased)
{
    auto pool = samplingPool();
    test::FakePoolClient *sampling = pool.get();
    m_broker->pools().add(std::move(pool), false);
    m_broker->start();
    QList<ResourcePoint> samples;
    const auto connection = QObject::connect(m_client.get(), &ConsoleClient::sandboxSamplesArrived, m_client.get(),
                     [&](const QString &sandboxId, const QList<ResourcePoint> &batch) {
                         EXPECT_EQ(sandboxId, QStringLiteral("sb-1"));
                         samples.append(batch);
                     });
    EXPECT_TRUE(m_client->canWatchSandboxSamples());
    m_client->connectToBroker(address());
    ASSERT_TRUE(connected());
    m_client->watchSandboxSamples(QStringLiteral("sampling"), QStringLiteral("sb-1"));
    ASSERT_TRUE(waitFor([&] { return samples.size() >= 2; })) << "got " << samples.size();
    for (qsizetype i = 0; i < samples.size(); ++i) {
        EXPECT_EQ(samples.at(i).timeUnixMs, 1000 * (i + 1)) << "each sample once, oldest first";
        EXPECT_EQ(samples.at(i).memoryBytes, 1'000'000 + 1000 * (i + 1));
        EXPECT_DOUBLE_EQ(samples.at(i).cpuCores, 0.5);
        EXPECT_EQ(samples.at(i).pids, 3);
    }
    // Released: the stream ends and nothing more arrives.
    ASSERT_TRUE(sampling->release("sb-1"));
    spin(2500);
    const qsizetype after = samples.size();
    spin(1500);
    EXPECT_EQ(samples.size(), after);
    // An empty id stops watching without a call.
    m_client->watchSandboxSamples(QString(), QString());
    QObject::disconnect(connection);
}

TEST_F(GrpcConsoleClientTest, TheDefaultAddressIsTheBrokersSocket)
{
    EXPECT_TRUE(GrpcConsoleClient::defaultAddress().startsWith(QStringLiteral("unix:/")));
    EXPECT_TRUE(GrpcConsoleClient::defaultAddress().endsWith(QStringLiteral("paddock/broker.sock")));
}

// A unix socket that accepts connections (the kernel's backlog) and never says a word: a broker
// that hangs.
class SilentSocket {
public:
    explicit SilentSocket(const std::filesystem::path &path) : m_path(path)
    {
        m_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
        m_ok = m_fd >= 0 && ::bind(m_fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) == 0
            && ::listen(m_fd, 16) == 0;
    }
    ~SilentSocket()
    {
        if (m_fd >= 0)
            ::close(m_fd);
        std::filesystem::remove(m_path);
    }
    bool ok() const { return m_ok; }
    QString address() const { return QStringLiteral("unix:") + QString::fromStdString(m_path.string()); }

private:
    std::filesystem::path m_path;
    int m_fd = -1;
    bool m_ok = false;
};

TEST_F(GrpcConsoleClientTest, AListSkipsABrokerThatIsDown)
{
    m_broker->start();
    const QString down = QStringLiteral("unix:") + QString::fromStdString((m_dir / "nobody.sock").string());
    m_client->connectToBroker(down + QStringLiteral(", ") + address());
    ASSERT_TRUE(connected());
    EXPECT_EQ(m_client->endpoint(), address());
    EXPECT_EQ(m_client->address(), down + QStringLiteral(", ") + address());
    EXPECT_EQ(GrpcConsoleClient::splitAddress(m_client->address()), (QStringList{down, address()}));
}

TEST_F(GrpcConsoleClientTest, AListMovesPastABrokerThatAcceptsAndNeverAnswers)
{
    m_broker->start();
    SilentSocket silent(m_dir / "silent.sock");
    ASSERT_TRUE(silent.ok());
    m_client->connectToBroker(silent.address() + QLatin1Char(',') + address());
    ASSERT_TRUE(waitFor([&] { return m_client->connectionState() == ConnectionState::Connected; }, 60'000));
    EXPECT_EQ(m_client->endpoint(), address());
    EXPECT_EQ(m_states, (QList<ConnectionState>{ConnectionState::Connecting, ConnectionState::Broken,
                                                ConnectionState::Connected}));
}

TEST_F(GrpcConsoleClientTest, ASubmitThatGetsNoAnswerIsSentAgainWithTheSameId)
{
    test::ScriptedBroker scripted(m_dir / "scripted.sock");
    ASSERT_TRUE(scripted.serving());
    using Answer = test::ScriptedSessionService::Answer;
    scripted.service().script({Answer::Unavailable, Answer::Unavailable});
    m_client->connectToBroker(QString::fromStdString(scripted.address()));
    ASSERT_TRUE(connected());

    SubmitRequest request;
    request.playbook = QStringLiteral("hello-c");
    request.requestId = QStringLiteral("click-1");
    m_client->submitSession(request);
    ASSERT_TRUE(waitFor([&] { return m_actions.size() == 1; }));
    EXPECT_TRUE(m_actions.at(0).ok) << qPrintable(m_actions.at(0).message);
    EXPECT_EQ(m_actions.at(0).sessionId, QStringLiteral("s-scripted-click-1"));
    const auto submits = scripted.service().submits();
    ASSERT_EQ(submits.size(), 3u);
    for (const auto &submit : submits)
        EXPECT_EQ(submit.request_id(), "click-1");

    // With no id given, the client makes one (a UUID), the same for every attempt.
    scripted.service().script({Answer::Unavailable});
    SubmitRequest noId;
    noId.playbook = QStringLiteral("hello-c");
    m_client->submitSession(noId);
    ASSERT_TRUE(waitFor([&] { return m_actions.size() == 2; }));
    const auto all = scripted.service().submits();
    ASSERT_EQ(all.size(), 5u);
    EXPECT_EQ(all[3].request_id().size(), 36u) << all[3].request_id();
    EXPECT_EQ(all[4].request_id(), all[3].request_id());

    // A broker that never answers: the client gives up after its attempts, naming the request id.
    scripted.service().script(std::vector<Answer>(10, Answer::Unavailable));
    m_client->submitSession(request);
    ASSERT_TRUE(waitFor([&] { return m_actions.size() == 3; }));
    EXPECT_FALSE(m_actions.at(2).ok);
    EXPECT_TRUE(m_actions.at(2).message.contains(QStringLiteral("could not submit the session")))
        << qPrintable(m_actions.at(2).message);
    EXPECT_EQ(scripted.service().submits().size(), 9u) << "four attempts";
}

} // namespace
} // namespace paddock::console

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
