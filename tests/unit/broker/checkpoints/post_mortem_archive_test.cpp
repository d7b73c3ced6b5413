// The post-mortem archive: a pool's post-mortems are copied into the checkpoint store (a real
// directory) with the checkpoint of the workspace at the failure, and are still listed and read
// once the pool stops answering, also by an archive that starts afresh over the same store.

#include "broker/checkpoints/local_blob_store.h"
#include "broker/checkpoints/post_mortem_archive.h"
#include "tests/support/fake_pool_client.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

namespace paddock::checkpoints {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

core::Event ev(int64_t seq, const char *kind, int64_t timeUnixMs, const json &payload = json::object())
{
    core::Event e;
    e.sessionId = "s1";
    e.seq = seq;
    e.kind = kind;
    e.timeUnixMs = timeUnixMs;
    e.payload = payload.dump();
    return e;
}

const std::string kFirst(64, 'a');
const std::string kAtFailure(64, 'b');
const std::string kLater(64, 'c');

std::vector<core::Event> sessionLog()
{
    // Times in seconds since the session began, as milliseconds.
    return {ev(1, core::kind::SessionCreated, 100'000),
            ev(2, core::kind::ToolResult, 200'000, {{"call_id", "c1"}}),
            ev(3, core::kind::Checkpoint, 200'000, {{"manifest", kFirst}}),
            ev(4, core::kind::ToolCall, 300'000, {{"call_id", "c2"}}),
            ev(5, core::kind::ToolResult, 450'100, {{"call_id", "c2"}, {"exit_code", 137}}),
            ev(6, core::kind::Checkpoint, 450'100, {{"manifest", kAtFailure}}),
            ev(7, core::kind::ToolCall, 500'000, {{"call_id", "c3"}}),
            ev(8, core::kind::ToolResult, 600'000, {{"call_id", "c3"}}),
            ev(9, core::kind::Checkpoint, 600'000, {{"manifest", kLater}})};
}

TEST(ManifestAtFailure, IsTheCheckpointRecordedWithTheFailedResult)
{
    const auto log = sessionLog();
    EXPECT_EQ(manifestAtFailure(log, 450'000), kAtFailure) << "the failure precedes its result by a little";
    EXPECT_EQ(manifestAtFailure(log, 250'000), kFirst) << "no result within seconds: the checkpoint before";
    EXPECT_EQ(manifestAtFailure(log, 150'000), "") << "no checkpoint yet, and the next result is another step's";
    EXPECT_EQ(manifestAtFailure(log, 900'000), kLater) << "a sandbox that died after the last result";
    // A failed command that changed nothing has no checkpoint of its own: the one before.
    std::vector<core::Event> unchanged(log.begin(), log.begin() + 5);
    unchanged.push_back(ev(6, core::kind::ToolCall, 500'000, {{"call_id", "c3"}}));
    EXPECT_EQ(manifestAtFailure(unchanged, 450'000), kFirst);
}

class PostMortemArchiveTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = fs::temp_directory_path() / ("paddock-pm-archive-" + std::to_string(::getpid()));
        fs::remove_all(m_dir);
        m_store = openStore();
        auto pool = std::make_unique<test::FakePoolClient>("east");
        m_east = pool.get();
        m_pools.add(std::move(pool), false);
        pool_client::PostMortemInfo pm;
        pm.sandboxId = "lite-1";
        pm.sessionId = "s1";
        pm.tier = "lite";
        pm.reason = "oom_killed";
        pm.exitCode = 137;
        pm.lastStderr = "Killed";
        pm.argv = {"/bin/sh", "-c", "python eat.py"};
        pm.samples = {{1000, 0.5, 512 << 20, 3}};
        pm.processes = {{42, 1, "R", 400 << 20, "python eat.py"}};
        pm.snapshotRef = "lite-1-1";
        pm.timeUnixMs = 450'000;
        m_east->addPostMortem(pm);
    }

    void TearDown() override { fs::remove_all(m_dir); }

    std::unique_ptr<CheckpointStore> openStore()
    {
        auto blobs = LocalBlobStore::open(m_dir);
        EXPECT_TRUE(blobs);
        return std::make_unique<CheckpointStore>(std::move(*blobs), "broker");
    }

    PostMortemArchive::LogReader logReader()
    {
        return [](const std::string &) -> Result<std::vector<core::Event>> { return sessionLog(); };
    }

    fs::path m_dir;
    std::unique_ptr<CheckpointStore> m_store;
    placement::PoolSet m_pools;
    test::FakePoolClient *m_east = nullptr;
};

TEST_F(PostMortemArchiveTest, APostMortemOutlivesItsPool)
{
    PostMortemArchive archive(*m_store, m_pools, logReader());
    auto copied = archive.copyNow();
    ASSERT_TRUE(copied) << copied.error().message;
    EXPECT_EQ(*copied, 1);
    EXPECT_EQ(*archive.copyNow(), 0) << "copied once";
    m_east->setDown(true);

    auto listed = archive.list("s1", "", 0);
    ASSERT_TRUE(listed) << listed.error().message;
    ASSERT_EQ(listed->size(), 1u);
    const ArchivedPostMortem &pm = (*listed)[0];
    EXPECT_EQ(pm.info.pool, "east");
    EXPECT_EQ(pm.info.reason, "oom_killed");
    EXPECT_EQ(pm.info.lastStderr, "Killed") << "the full record, output tails included";
    ASSERT_EQ(pm.info.processes.size(), 1u);
    EXPECT_EQ(pm.info.processes[0].command, "python eat.py");
    ASSERT_EQ(pm.info.samples.size(), 1u);
    EXPECT_EQ(pm.manifest, kAtFailure);
    EXPECT_TRUE(archive.list("other", "", 0)->empty());

    // A broker restarted over the same store reads what was archived.
    auto reopened = openStore();
    PostMortemArchive fresh(*reopened, m_pools, logReader());
    auto got = fresh.get("east", "lite-1");
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_EQ(got->manifest, kAtFailure);
    EXPECT_EQ(got->info.argv, (std::vector<std::string>{"/bin/sh", "-c", "python eat.py"}));
    auto missing = fresh.get("east", "lite-9");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::NotFound);

    // Past retention, the archived copy goes (its checkpoint is then collected like any other).
    EXPECT_EQ(*fresh.expire(450'000), 0) << "taken at 450 000: not older than that";
    EXPECT_EQ(*fresh.expire(450'001), 1);
    EXPECT_TRUE(fresh.list("", "", 0)->empty());
    EXPECT_TRUE(m_store->blobs().list("post-mortems/")->empty());
}

} // namespace
} // namespace paddock::checkpoints
