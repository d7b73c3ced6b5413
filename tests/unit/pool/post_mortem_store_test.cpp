// Post-mortem records on disk: kept across a reopen (a pool restart), newest first, filtered by
// session, dropped (with their snapshots, through onDrop) after the retention period or beyond
// the count limit; binary output survives the JSON file.

#include "pool/core/post_mortem_store.h"

#include "common/clock.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;
using paddock::pool::PostMortemRecord;
using paddock::pool::PostMortemStore;

namespace {

class PostMortemStoreTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/paddock-pm-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
    }
    void TearDown() override
    {
        std::error_code ec;
        fs::remove_all(m_dir, ec);
    }
    std::unique_ptr<PostMortemStore> open(int64_t retentionMs = 3600 * 1000, size_t maxCount = 100)
    {
        PostMortemStore::Options o;
        o.dir = m_dir / "pm";
        o.retentionMs = retentionMs;
        o.maxCount = maxCount;
        o.onDrop = [this](const PostMortemRecord &r) { m_dropped.insert(r.snapshotRef); };
        auto s = PostMortemStore::open(o);
        EXPECT_TRUE(s) << s.error().message;
        return s ? std::move(*s) : nullptr;
    }
    static PostMortemRecord record(const std::string &id, const std::string &session, int64_t time)
    {
        PostMortemRecord r;
        r.sandboxId = id;
        r.sessionId = session;
        r.reason = "oom_killed";
        r.timeUnixMs = time;
        r.snapshotRef = id + "-1";
        return r;
    }
    fs::path m_dir;
    std::set<std::string> m_dropped;
};

} // namespace

TEST_F(PostMortemStoreTest, SurvivesReopenWithEveryField)
{
    PostMortemRecord r = record("lite-aa", "s1", nowUnixMs());
    r.exitCode = -1;
    r.signal = 9;
    r.argv = {"sh", "-c", "tail /dev/zero"};
    r.lastStdout = std::string("\0\xff\x80 binary\n", 11);
    r.lastStderr = "Killed\n";
    r.stdoutBytes = 1 << 20;
    r.samples = {{1000, 1 << 20, 500, 3, -1, {}}, {2000, 60 << 20, 900000, 4, 7 << 20, {100, 80, 400000}}};
    r.processes = {{42, 1, "S", 4096, "/run/paddock/paddock-sandbox-init --listen-fd 3"}};
    r.processesNote = "after the OOM kill";
    r.memoryLimitBytes = 64 << 20;
    r.detail = "killed";
    {
        auto store = open();
        ASSERT_TRUE(store->save(r));
    }
    auto store = open();
    auto got = store->get("lite-aa");
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_EQ(PostMortemStore::toJson(*got), PostMortemStore::toJson(r));
    EXPECT_EQ(got->lastStdout, r.lastStdout);
    ASSERT_EQ(got->samples.size(), 2u);
    EXPECT_EQ(got->samples[1].memoryBytes, 60 << 20);
    EXPECT_EQ(got->samples[0].diskBytes, -1);
    EXPECT_EQ(got->samples[1].diskBytes, 7 << 20);
    EXPECT_FALSE(got->samples[0].throttling.known());
    EXPECT_EQ(got->samples[1].throttling.periods, 100);
    EXPECT_EQ(got->samples[1].throttling.throttledPeriods, 80);
    EXPECT_EQ(got->samples[1].throttling.throttledUs, 400000);
    ASSERT_EQ(got->processes.size(), 1u);
    EXPECT_EQ(got->processes[0].pid, 42);
    EXPECT_EQ(store->get("lite-nope").error().code, ErrorCode::NotFound);
}

TEST_F(PostMortemStoreTest, ListsNewestFirstAndFiltersBySession)
{
    auto store = open();
    const int64_t now = nowUnixMs();
    ASSERT_TRUE(store->save(record("a", "s1", now - 3000)));
    ASSERT_TRUE(store->save(record("b", "s2", now - 2000)));
    ASSERT_TRUE(store->save(record("c", "s1", now - 1000)));
    auto all = store->list("", 0);
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[0].sandboxId, "c");
    EXPECT_EQ(all[2].sandboxId, "a");
    auto s1 = store->list("s1", 0);
    ASSERT_EQ(s1.size(), 2u);
    EXPECT_EQ(s1[0].sandboxId, "c");
    EXPECT_EQ(s1[1].sandboxId, "a");
    EXPECT_EQ(store->list("", 1).size(), 1u);
}

TEST_F(PostMortemStoreTest, RetentionDropsOldOnesWithTheirSnapshots)
{
    const int64_t hour = 3600 * 1000;
    const int64_t now = nowUnixMs();
    {
        auto store = open(72 * hour);
        ASSERT_TRUE(store->save(record("fresh", "s", now - hour)));
        ASSERT_TRUE(store->save(record("old", "s", now - 71 * hour)));
        EXPECT_EQ(store->size(), 2u);
        // Two hours later "old" is past 72 hours.
        EXPECT_EQ(store->prune(now + 2 * hour), 1u);
        EXPECT_EQ(store->size(), 1u);
        EXPECT_EQ(m_dropped, std::set<std::string>{"old-1"});
        EXPECT_FALSE(fs::exists(m_dir / "pm/old.json"));
        EXPECT_TRUE(store->get("fresh"));
    }
    // A record past its retention when the pool starts is dropped at open.
    {
        std::ofstream(m_dir / "pm/ancient.json") << PostMortemStore::toJson(record("ancient", "s", now - 100 * hour));
    }
    m_dropped.clear();
    auto store = open(72 * hour);
    EXPECT_EQ(store->size(), 1u);
    EXPECT_EQ(m_dropped, std::set<std::string>{"ancient-1"});
}

TEST_F(PostMortemStoreTest, CountLimitDropsTheOldestAndAReplacedSnapshotGoes)
{
    auto store = open(3600 * 1000, 2);
    const int64_t now = nowUnixMs();
    ASSERT_TRUE(store->save(record("a", "s", now - 3)));
    ASSERT_TRUE(store->save(record("b", "s", now - 2)));
    ASSERT_TRUE(store->save(record("c", "s", now - 1)));
    EXPECT_EQ(store->size(), 2u);
    EXPECT_FALSE(store->get("a"));
    EXPECT_EQ(m_dropped, std::set<std::string>{"a-1"});
    // A newer failure of the same sandbox replaces its post-mortem; the old snapshot goes.
    auto again = record("c", "s", now);
    again.snapshotRef = "c-2";
    ASSERT_TRUE(store->save(again));
    EXPECT_TRUE(m_dropped.count("c-1"));
    EXPECT_EQ(store->get("c")->snapshotRef, "c-2");
}

TEST_F(PostMortemStoreTest, UnreadableFileIsMovedAsideNotFatal)
{
    fs::create_directories(m_dir / "pm");
    std::ofstream(m_dir / "pm/broken.json") << "{ not json";
    auto store = open();
    ASSERT_TRUE(store);
    EXPECT_EQ(store->size(), 0u);
    EXPECT_TRUE(fs::exists(m_dir / "pm/broken.json.bad"));
    EXPECT_EQ(store->save(record("../evil", "s", nowUnixMs())).error().code, ErrorCode::InvalidArgument);
}
