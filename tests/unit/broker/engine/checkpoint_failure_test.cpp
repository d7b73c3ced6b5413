// When the checkpoint store cannot keep or give back a workspace, the session says why and loses
// nothing: a full store (a real tmpfs, root only) pauses the session before the step's result is
// recorded, and the step, resumed, is answered under the same idempotency key; an S3 endpoint that
// refuses makes the step wait, saying so once in the log (checkpoint.waiting), its result not
// recorded; a checkpoint whose chunk is damaged in the store pauses the session that needs it on
// another pool, naming the chunk. The real engine, SQLite store, scripted model and checkpoint store; the pools are the
// shared fake (it speaks the checkpoint protocol).

#include "broker/checkpoints/s3_blob_store.h"
#include "tests/support/engine_fixture.h"
#include "tests/support/fake_pool_client.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <sys/mount.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace paddock::engine {
namespace {

using nlohmann::json;
using test::FakePoolClient;
namespace fs = std::filesystem;

constexpr const char *kTwoCommands = R"(
name = "two"
goal = "two commands"
[[step]]
tool = "run_command"
command = "echo one >> lines.txt"
[[step]]
tool = "run_command"
command = "echo two >> lines.txt"
)";

class CheckpointFailureTest : public test::EngineFixture {
protected:
    void SetUp() override
    {
        EngineFixture::SetUp();
        auto a = std::make_unique<FakePoolClient>("a");
        m_a = a.get();
        m_a->setTier("lite", 1, 0, 8);
        m_a->setSnapshots(true);
        m_pools.add(std::move(a), false);
    }

    void TearDown() override
    {
        m_small.reset();
        if (m_mounted)
            ::umount2((m_dir / "small").c_str(), MNT_DETACH);
        EngineFixture::TearDown();
    }

    // A checkpoint store on a 64 KiB tmpfs, filled to the last byte by `filler`.
    void fullStore()
    {
        fs::create_directories(m_dir / "small");
        ASSERT_EQ(::mount("tmpfs", (m_dir / "small").c_str(), "tmpfs", 0, "size=64k"), 0) << std::strerror(errno);
        m_mounted = true;
        auto blobs = checkpoints::LocalBlobStore::open(m_dir / "small" / "store");
        ASSERT_TRUE(blobs);
        m_smallStore = std::make_unique<checkpoints::CheckpointStore>(std::move(*blobs), "broker");
        m_small = std::make_unique<checkpoints::Checkpointer>(*m_smallStore);
        std::ofstream filler(m_dir / "small" / "filler");
        const std::string block(4096, 'x');
        while (filler.write(block.data(), block.size()))
            ;
    }

    std::vector<std::string> execKeys() const
    {
        std::vector<std::string> out;
        for (const auto &spec : m_a->execs())
            out.push_back(spec.idempotencyKey);
        return out;
    }

    FakePoolClient *m_a = nullptr;
    bool m_mounted = false;
    std::unique_ptr<checkpoints::CheckpointStore> m_smallStore;
    std::unique_ptr<checkpoints::Checkpointer> m_small;
};

TEST_F(CheckpointFailureTest, AFullStorePausesTheSessionAndTheStepIsRecordedOnceThereIsRoom)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "mounting a small tmpfs needs root";
    ASSERT_NO_FATAL_FAILURE(fullStore());
    const std::string id = submit(kTwoCommands);
    EngineOptions options;
    options.checkpointer = m_small.get();
    auto engine = makeEngine(options);
    runUntilIdle(engine);

    const auto paused = session(id);
    EXPECT_EQ(paused.status, core::SessionStatus::Paused);
    EXPECT_NE(paused.statusReason.find("could not be kept"), std::string::npos) << paused.statusReason;
    EXPECT_NE(paused.statusReason.find("free space"), std::string::npos) << paused.statusReason;
    auto log = events(id);
    EXPECT_EQ(count(log, core::kind::ToolResult), 0) << "no result without its checkpoint";
    EXPECT_EQ(count(log, core::kind::Checkpoint), 0);
    ASSERT_EQ(m_a->execCount(), 1);

    // Room again; resumed, the step is asked of the pool under the same key (a real pool answers
    // from its record of the run instead of running it again) and recorded with its checkpoint.
    fs::remove(m_dir / "small" / "filler");
    store::AppendRequest resume;
    resume.sessionId = id;
    resume.events.push_back({core::kind::StateChanged, json{{"status", "running"}}.dump(), 0});
    ASSERT_TRUE(m_store->appendSync(resume));
    runUntilIdle(engine);
    EXPECT_EQ(session(id).status, core::SessionStatus::Succeeded);
    const auto keys = execKeys();
    ASSERT_GE(keys.size(), 2u);
    EXPECT_EQ(keys[0], keys[1]) << "the paused step is the same run, not a new one";
    log = events(id);
    EXPECT_EQ(count(log, core::kind::ToolResult), count(log, core::kind::ToolCall)) << "each call answered once";
    EXPECT_EQ(count(log, core::kind::Checkpoint), 2) << "one per command";
}

TEST_F(CheckpointFailureTest, AnS3EndpointThatRefusesMakesTheStepWaitAndSaySoOnce)
{
    // A port nobody listens on: bound, then closed.
    const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
    socklen_t length = sizeof addr;
    ASSERT_EQ(::getsockname(probe, reinterpret_cast<sockaddr *>(&addr), &length), 0);
    ::close(probe);
    const auto credentials = m_dir / "s3.credentials";
    std::ofstream(credentials) << "";
    fs::permissions(credentials, fs::perms::owner_read | fs::perms::owner_write);
    std::ofstream(credentials) << "[default]\naws_access_key_id = KEY\naws_secret_access_key = SECRET\n";
    checkpoints::S3Options s3;
    s3.endpoint = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    s3.bucket = "checkpoints";
    s3.credentialsFile = credentials;
    s3.timeoutMs = 2000;
    auto bucket = checkpoints::S3BlobStore::open(s3);
    ASSERT_TRUE(bucket) << bucket.error().message;
    checkpoints::CheckpointStore store(std::move(*bucket), "s3");
    checkpoints::Checkpointer checkpointer(store);
    const std::string id = submit(kTwoCommands);
    EngineOptions options;
    options.checkpointer = &checkpointer;
    auto engine = makeEngine(options);
    takeSteps(engine, 6);   // the claim with the model turn, the command (waits), and retries of it

    const auto log = events(id);
    EXPECT_EQ(count(log, core::kind::ToolResult), 0) << "no result without its checkpoint";
    ASSERT_EQ(count(log, core::kind::CheckpointWaiting), 1) << "said once, not once per retry";
    const json waiting = payloadsOf(log, core::kind::CheckpointWaiting)[0];
    EXPECT_EQ(waiting["store"], "s3");
    EXPECT_EQ(waiting["code"], "unavailable");
    EXPECT_NE(waiting["reason"].get<std::string>().find(s3.endpoint), std::string::npos) << waiting.dump();
    EXPECT_EQ(session(id).status, core::SessionStatus::Running) << "waiting, not failed";
    const auto keys = execKeys();
    ASSERT_GE(keys.size(), 2u) << "the step was retried";
    EXPECT_TRUE(std::all_of(keys.begin(), keys.end(), [&](const std::string &k) { return k == keys[0]; }))
        << "every retry is the same run";
}

TEST_F(CheckpointFailureTest, ADamagedCheckpointPausesTheSessionThatNeedsItNamingTheChunk)
{
    placement::PoolSetOptions lostFast;
    lostFast.lostAfterMs = 1;
    m_pools.setOptions(lostFast);
    auto b = std::make_unique<FakePoolClient>("b");
    FakePoolClient *poolB = b.get();
    poolB->setTier("lite", 0, 1, 1);   // full: the session starts on a
    poolB->setSnapshots(true);
    m_pools.add(std::move(b), false);
    m_a->setDownAfterExecs(2);
    const std::string id = submit(kTwoCommands);
    auto engine = makeEngine();
    // One command recorded with its checkpoint on a, the second lost with a; b is full meanwhile.
    for (int i = 0; i < 50 && count(events(id), core::kind::SandboxLost) == 0; ++i) {
        takeSteps(engine, 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    auto log = events(id);
    ASSERT_EQ(count(log, core::kind::SandboxLost), 1);
    ASSERT_EQ(count(log, core::kind::Checkpoint), 1);
    const std::string manifest = payloadsOf(log, core::kind::Checkpoint)[0]["manifest"];
    auto stored = m_checkpointStore->getManifest(manifest);
    ASSERT_TRUE(stored);
    const std::string chunk = stored->entries[0].chunks[0];
    std::ofstream(m_dir / "checkpoints" / checkpoints::CheckpointStore::chunkKey(chunk), std::ios::trunc) << "rot";

    poolB->setTier("lite", 1, 0, 8);
    // Placement reads each pool's status at most kStatusMaxAgeMs old: let b's room show.
    std::this_thread::sleep_for(std::chrono::milliseconds(placement::PoolSet::kStatusMaxAgeMs + 100));
    runUntilIdle(engine);
    const auto paused = session(id);
    EXPECT_EQ(paused.status, core::SessionStatus::Paused);
    EXPECT_NE(paused.statusReason.find("cannot be restored"), std::string::npos) << paused.statusReason;
    EXPECT_NE(paused.statusReason.find(chunk), std::string::npos) << "names the chunk: " << paused.statusReason;
    EXPECT_NE(paused.statusReason.find(stored->entries[0].path), std::string::npos) << paused.statusReason;
    log = events(id);
    EXPECT_EQ(count(log, core::kind::SandboxMoved), 0) << "no move into a workspace that is not there";
    EXPECT_EQ(count(log, core::kind::ToolResult), 1) << "what was recorded stays";
    EXPECT_TRUE(poolB->claims().size() >= 1u);
    EXPECT_EQ(poolB->releases().size(), poolB->claims().size()) << "the claim that could not be restored went back";
}

} // namespace
} // namespace paddock::engine
