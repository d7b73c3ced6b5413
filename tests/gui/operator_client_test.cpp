// GrpcConsoleClient's operator calls (post-mortems, snapshot files, downloads, debug shells)
// against the real broker service in this process (tests/support/in_process_broker) with no pool
// behind it: every call is answered once, through the coalesced tick, with an error a person can
// act on; a failed download leaves no file, whole or partial. And ListPools' health history reaches
// the console's PoolInfo. Last, with a pool behind it that then stops answering: the post-mortem it
// kept is listed and its workspace read from the broker's archive and checkpoint store.

#include "app/client/grpc_console_client.h"
#include "tests/support/qt_wait.h"

#include "tests/support/fake_pool_client.h"
#include "tests/support/in_process_broker.h"

#include "common/clock.h"

#include <nlohmann/json.hpp>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QThread>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

namespace paddock::console {
namespace {

using paddock::test::waitFor;

class OperatorClientTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        static int counter = 0;
        m_dir = std::filesystem::temp_directory_path() / ("poc-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
        m_broker = std::make_unique<test::InProcessBroker>(m_dir);
        ASSERT_TRUE(m_broker->start().has_value());
        m_client = std::make_unique<GrpcConsoleClient>();
        m_client->connectToBroker(QString::fromStdString(m_broker->address()));
        ASSERT_TRUE(waitFor([this] { return m_client->connectionState() == ConnectionState::Connected; }));
    }

    void TearDown() override
    {
        m_client.reset();
        m_broker.reset();
        std::filesystem::remove_all(m_dir);
    }

    std::filesystem::path m_dir;
    std::unique_ptr<test::InProcessBroker> m_broker;
    std::unique_ptr<GrpcConsoleClient> m_client;
};

TEST_F(OperatorClientTest, EveryOperatorCallIsAnsweredWithAClearError)
{
    int answers = 0;
    QString listError;
    QString postMortemError;
    PostMortemInfo asked;
    QString filesError;
    QString readError;
    QString shellError;
    QString execError;
    QObject::connect(m_client.get(), &ConsoleClient::postMortemsListed, m_client.get(),
                     [&](const QString &session, const QList<PostMortemInfo> &list, const QStringList &, const QString &error) {
                         ++answers;
                         EXPECT_EQ(session, QStringLiteral("s-none"));
                         // No pool: nothing to list, or the broker says it cannot.
                         EXPECT_TRUE(list.isEmpty());
                         listError = error;
                     });
    QObject::connect(m_client.get(), &ConsoleClient::postMortemArrived, m_client.get(),
                     [&](const PostMortemInfo &pm, const QString &error) {
                         ++answers;
                         asked = pm;
                         postMortemError = error;
                     });
    QObject::connect(m_client.get(), &ConsoleClient::snapshotFilesListed, m_client.get(),
                     [&](const QString &, const QString &, const QList<SnapshotFile> &files, const QString &error) {
                         ++answers;
                         EXPECT_TRUE(files.isEmpty());
                         filesError = error;
                     });
    QObject::connect(m_client.get(), &ConsoleClient::snapshotFileRead, m_client.get(),
                     [&](const QString &, const QString &, const QString &path, const QByteArray &content, qint64,
                         const QString &error) {
                         ++answers;
                         EXPECT_EQ(path, QStringLiteral("src/main.c"));
                         EXPECT_TRUE(content.isEmpty());
                         readError = error;
                     });
    QObject::connect(m_client.get(), &ConsoleClient::debugShellOpened, m_client.get(),
                     [&](const DebugShellInfo &shell, const QString &error) {
                         ++answers;
                         EXPECT_TRUE(shell.shellId.isEmpty());
                         shellError = error;
                     });
    QObject::connect(m_client.get(), &ConsoleClient::debugExecFinished, m_client.get(),
                     [&](const QString &shellId, int, int, const QString &error) {
                         ++answers;
                         EXPECT_EQ(shellId, QStringLiteral("shell-none"));
                         execError = error;
                     });
    m_client->listPostMortems(QStringLiteral("s-none"));
    m_client->getPostMortem(QStringLiteral("nowhere"), QStringLiteral("sb-1"));
    m_client->listSnapshotFiles(QStringLiteral("nowhere"), QStringLiteral("ref-1"), QString());
    m_client->readSnapshotFile(QStringLiteral("nowhere"), QStringLiteral("ref-1"), QStringLiteral("src/main.c"), 1024);
    m_client->openDebugShell(QStringLiteral("nowhere"), QStringLiteral("sb-1"), QStringLiteral("lite"));
    m_client->debugExec(QStringLiteral("shell-none"), QStringLiteral("ls"));
    ASSERT_TRUE(waitFor([&] { return answers >= 6; })) << answers << " of 6 answers";
    EXPECT_EQ(asked.pool, QStringLiteral("nowhere"));
    EXPECT_EQ(asked.sandboxId, QStringLiteral("sb-1"));
    EXPECT_TRUE(postMortemError.contains(QStringLiteral("sb-1"))) << postMortemError.toStdString();
    EXPECT_TRUE(filesError.contains(QStringLiteral("ref-1"))) << filesError.toStdString();
    EXPECT_TRUE(readError.contains(QStringLiteral("src/main.c"))) << readError.toStdString();
    EXPECT_TRUE(shellError.contains(QStringLiteral("debug shell"))) << shellError.toStdString();
    EXPECT_TRUE(execError.contains(QStringLiteral("did not run"))) << execError.toStdString();
    if (!listError.isEmpty()) {
        EXPECT_TRUE(listError.startsWith(QStringLiteral("could not list post-mortems"))) << listError.toStdString();
    }
    QCoreApplication::processEvents();
    EXPECT_EQ(answers, 6);   // once each
}

TEST_F(OperatorClientTest, AFailedDownloadLeavesNoFile)
{
    const QString target = QString::fromStdString((m_dir / "main.c").string());
    int finished = 0;
    bool ok = true;
    QString message;
    int id = 0;
    QObject::connect(m_client.get(), &ConsoleClient::downloadFinished, m_client.get(), [&](int done, bool success, const QString &text) {
        EXPECT_EQ(done, id);
        ++finished;
        ok = success;
        message = text;
    });
    id = m_client->downloadSnapshotFile(QStringLiteral("nowhere"), QStringLiteral("ref-1"), QStringLiteral("src/main.c"), target);
    EXPECT_GT(id, 0);
    ASSERT_TRUE(waitFor([&] { return finished > 0; }));
    EXPECT_FALSE(ok);
    EXPECT_TRUE(message.contains(QStringLiteral("src/main.c"))) << message.toStdString();
    EXPECT_FALSE(std::filesystem::exists(m_dir / "main.c"));
    EXPECT_FALSE(std::filesystem::exists(m_dir / "main.c.part"));
}

TEST_F(OperatorClientTest, NotConnectedIsSaidNotHung)
{
    m_client->disconnectFromBroker();
    GrpcConsoleClient idle;
    QString error;
    QObject::connect(&idle, &ConsoleClient::postMortemArrived, &idle,
                     [&](const PostMortemInfo &, const QString &e) { error = e; });
    idle.getPostMortem(QStringLiteral("local"), QStringLiteral("sb-1"));
    ASSERT_TRUE(waitFor([&] { return !error.isEmpty(); }));
    EXPECT_TRUE(error.contains(QStringLiteral("connect first")));
    // A sample watch while not connected starts nothing and delivers nothing.
    int batches = 0;
    QObject::connect(&idle, &ConsoleClient::sandboxSamplesArrived, &idle,
                     [&](const QString &, const QList<ResourcePoint> &) { ++batches; });
    idle.watchSandboxSamples(QStringLiteral("local"), QStringLiteral("sb-1"));
    QCoreApplication::processEvents();
    EXPECT_EQ(batches, 0);
}

} // namespace
} // namespace paddock::console

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}

namespace paddock::console {
namespace {

// The console's inspector after a pool host is gone: a session runs on pool east (the shared fake
// pool client, which speaks the checkpoint protocol), a sandbox of it fails, the broker's archive
// copies the post-mortem, then east stops answering. GrpcConsoleClient still lists the
// post-mortem, its snapshot ref is the checkpoint in the broker's store, and the workspace's file
// is listed and read from there (docs/checkpoints.md, "Post-mortems off the host").
TEST(OperatorClientArchiveTest, ThePostMortemOfAPoolThatIsGoneIsListedAndReadFromTheArchive)
{
    const auto dir = std::filesystem::temp_directory_path() / ("poc-archive-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto broker = std::make_unique<test::InProcessBroker>(dir);
    auto east = std::make_unique<test::FakePoolClient>("east");
    test::FakePoolClient *pool = east.get();
    pool->setTier("lite", 1, 0, 8);
    pool->setSnapshots(true);
    broker->pools().add(std::move(east), false);
    broker->runSteps(true);
    ASSERT_TRUE(broker->openStore().has_value());
    store::AppendRequest created;
    created.sessionId = "s-arch";
    created.expectedLastSeq = 0;
    created.events.push_back({core::kind::SessionCreated,
                              R"({"goal":"g","model":"scripted","tier":"lite","playbook_toml":"name = \"one\"\ngoal = \"g\"\n[[step]]\ntool = \"run_command\"\ncommand = \"make\"\n"})",
                              0});
    ASSERT_TRUE(broker->store().appendSync(created));
    ASSERT_TRUE(broker->start().has_value());
    // The command ran and its checkpoint is in the broker's store.
    std::string sandbox;
    ASSERT_TRUE(waitFor([&] {
        auto log = broker->store().readEvents("s-arch", 1, 1000);
        bool checkpointed = false;
        for (const auto &e : log ? *log : std::vector<core::Event>{}) {
            checkpointed |= e.kind == core::kind::Checkpoint;
            if (e.kind == core::kind::SandboxClaimed)
                sandbox = nlohmann::json::parse(e.payload).value("sandbox_id", "");
        }
        return checkpointed;
    }, 20000));
    pool_client::PostMortemInfo failed;
    failed.sandboxId = sandbox;
    failed.sessionId = "s-arch";
    failed.tier = "lite";
    failed.reason = "oom_killed";
    failed.snapshotRef = "east-local-1";
    failed.timeUnixMs = nowUnixMs();
    pool->addPostMortem(failed);
    ASSERT_TRUE(waitFor([&] {
        return std::filesystem::exists(dir / "checkpoints" / "post-mortems" / "east")
            && !std::filesystem::is_empty(dir / "checkpoints" / "post-mortems" / "east");
    }, 20000)) << "the archive copied the post-mortem";
    pool->setDown(true);

    GrpcConsoleClient client;
    client.connectToBroker(QString::fromStdString(broker->address()));
    ASSERT_TRUE(waitFor([&] { return client.connectionState() == ConnectionState::Connected; }));
    QList<PostMortemInfo> listed;
    bool answered = false;
    QObject::connect(&client, &ConsoleClient::postMortemsListed, &client,
                     [&](const QString &, const QList<PostMortemInfo> &list, const QStringList &, const QString &) {
                         listed = list;
                         answered = true;
                     });
    client.listPostMortems(QStringLiteral("s-arch"));
    ASSERT_TRUE(waitFor([&] { return answered; }));
    ASSERT_EQ(listed.size(), 1);
    EXPECT_EQ(listed[0].pool, QStringLiteral("east"));
    const QString ref = listed[0].snapshotRef;
    EXPECT_TRUE(ref.startsWith(QStringLiteral("checkpoint:"))) << ref.toStdString();

    QList<SnapshotFile> files;
    QString filesError;
    bool filesAnswered = false;
    QObject::connect(&client, &ConsoleClient::snapshotFilesListed, &client,
                     [&](const QString &, const QString &, const QList<SnapshotFile> &list, const QString &error) {
                         files = list;
                         filesError = error;
                         filesAnswered = true;
                     });
    client.listSnapshotFiles(QStringLiteral("east"), ref, QString());
    ASSERT_TRUE(waitFor([&] { return filesAnswered; }));
    ASSERT_TRUE(filesError.isEmpty()) << filesError.toStdString();
    ASSERT_EQ(files.size(), 1);
    QByteArray content;
    QString readError;
    bool read = false;
    QObject::connect(&client, &ConsoleClient::snapshotFileRead, &client,
                     [&](const QString &, const QString &, const QString &, const QByteArray &bytes, qint64, const QString &error) {
                         content = bytes;
                         readError = error;
                         read = true;
                     });
    client.readSnapshotFile(QStringLiteral("east"), ref, files[0].path, 1024);
    ASSERT_TRUE(waitFor([&] { return read; }));
    EXPECT_TRUE(readError.isEmpty()) << readError.toStdString();
    EXPECT_EQ(content.toStdString(), sandbox + " 1\n") << "the fake pool's first checkpointed file, from the broker's store";
    broker.reset();
    std::filesystem::remove_all(dir);
}

} // namespace
} // namespace paddock::console
