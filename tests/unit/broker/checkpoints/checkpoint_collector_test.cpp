// Retention of checkpoints over a real SQLite event store and the broker's own checkpoint
// directory: what live sessions, sessions ended within the retention and archived post-mortems
// name survives, with every chunk it uses; what expired sessions alone named is collected; blobs
// younger than the grace period, or used by a checkpoint within it, survive unreferenced; a
// manifest that cannot be read stops every chunk deletion of that pass. Time is the pass's "now",
// so nothing sleeps: blobs and events are stamped with the real clock, and a pass "8 days later"
// is collect(now + 8 days).

#include "broker/checkpoints/checkpoint_collector.h"
#include "broker/checkpoints/local_blob_store.h"
#include "broker/store/sqlite_event_store.h"
#include "checkpoint/sha256.h"
#include "common/clock.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <fstream>
#include <future>
#include <sys/stat.h>
#include <unistd.h>

namespace paddock::checkpoints {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kHourMs = 3'600'000;
constexpr int64_t kDayMs = 24 * kHourMs;

class CheckpointCollectorTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = fs::temp_directory_path() / ("paddock-collect-" + std::to_string(::getpid()) + "-"
                                             + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
        auto events = store::openSqliteEventStore(m_dir / "broker.db");
        ASSERT_TRUE(events) << events.error().message;
        m_events = std::move(*events);
        auto local = LocalBlobStore::open(m_dir / "checkpoints");
        ASSERT_TRUE(local) << local.error().message;
        auto guarded = std::make_unique<GuardedBlobStore>(std::move(*local));
        m_blobs = guarded.get();
        m_store = std::make_unique<CheckpointStore>(std::move(guarded), "broker");
        m_collector = std::make_unique<CheckpointCollector>(*m_store, *m_blobs, *m_events, CollectorOptions{});
        m_now = nowUnixMs();
    }

    void TearDown() override
    {
        m_collector.reset();
        m_events->close();
        fs::remove_all(m_dir);
    }

    // A manifest of one file per content (one chunk each), stored with its chunks; its id.
    std::string storeManifest(const std::vector<std::string> &contents)
    {
        checkpoint::Manifest manifest;
        for (size_t i = 0; i < contents.size(); ++i) {
            const std::string hash = checkpoint::sha256Hex(contents[i]);
            EXPECT_TRUE(m_store->putChunk(hash, contents[i]));
            checkpoint::Entry entry;
            entry.path = "f" + std::to_string(i);
            entry.mode = 0644;
            entry.size = static_cast<int64_t>(contents[i].size());
            entry.chunks = {hash};
            manifest.entries.push_back(entry);
        }
        EXPECT_TRUE(manifest.normalise());
        const std::string text = manifest.toJson();
        const std::string id = checkpoint::sha256Hex(text);
        EXPECT_TRUE(m_store->putManifest(id, text, manifest));
        return id;
    }

    // A session whose log names each manifest in a checkpoint event; ended (succeeded) or live.
    std::string session(const std::vector<std::string> &manifests, bool ended, int fillerEvents = 0)
    {
        store::AppendRequest request;
        request.sessionId = "s-" + std::to_string(++m_sessions);
        request.expectedLastSeq = 0;
        request.events.push_back({core::kind::SessionCreated,
                                  json{{"goal", "g"}, {"model", "scripted"}, {"tier", "lite"}}.dump()});
        for (int i = 0; i < fillerEvents; ++i)
            request.events.push_back({"note", "{}"});
        for (const auto &id : manifests)
            request.events.push_back({core::kind::Checkpoint, json{{"manifest", id}, {"store", "broker"}}.dump()});
        if (ended)
            request.events.push_back({core::kind::StateChanged, json{{"status", "succeeded"}, {"reason", "done"}}.dump()});
        auto appended = m_events->appendSync(std::move(request));
        EXPECT_TRUE(appended) << appended.error().message;
        return appended ? appended->state.id : std::string();
    }

    // Looked at on disk: the guard's exists() would count as a use.
    fs::path fileOf(const std::string &key) const { return m_dir / "checkpoints" / key; }
    bool hasManifest(const std::string &id) const { return fs::exists(fileOf(CheckpointStore::manifestKey(id))); }
    bool hasChunk(const std::string &content) const
    {
        return fs::exists(fileOf(CheckpointStore::chunkKey(checkpoint::sha256Hex(content))));
    }

    // Makes a blob look stored `ageMs` before the real now (a broker that ran long ago).
    void age(const std::string &key, int64_t ageMs)
    {
        const int64_t at = nowUnixMs() - ageMs;
        const timespec times[2] = {{at / 1000, (at % 1000) * 1'000'000}, {at / 1000, (at % 1000) * 1'000'000}};
        ASSERT_EQ(::utimensat(AT_FDCWD, fileOf(key).c_str(), times, 0), 0);
    }

    CollectionReport collect(int64_t nowUnixMs, bool dryRun = false)
    {
        auto report = m_collector->collect(nowUnixMs, dryRun);
        EXPECT_TRUE(report) << report.error().message;
        return report ? *report : CollectionReport{};
    }

    fs::path m_dir;
    std::unique_ptr<store::EventStore> m_events;
    GuardedBlobStore *m_blobs = nullptr;
    std::unique_ptr<CheckpointStore> m_store;
    std::unique_ptr<CheckpointCollector> m_collector;
    int64_t m_now = 0;
    int m_sessions = 0;
};

TEST_F(CheckpointCollectorTest, ALiveSessionKeepsEveryManifestItNamedAndTheirChunks)
{
    const std::string first = storeManifest({"alpha", "beta"});
    const std::string second = storeManifest({"alpha", "gamma"});
    const std::string orphan = storeManifest({"lost"});
    session({first, second}, false);

    const auto report = collect(m_now + 30 * kDayMs);
    EXPECT_TRUE(hasManifest(first));
    EXPECT_TRUE(hasManifest(second));
    for (const char *content : {"alpha", "beta", "gamma"})
        EXPECT_TRUE(hasChunk(content)) << content;
    EXPECT_FALSE(hasManifest(orphan));
    EXPECT_FALSE(hasChunk("lost"));
    EXPECT_EQ(report.liveSessions, 1);
    EXPECT_EQ(report.manifestsKept, 2);
    EXPECT_EQ(report.chunksKept, 3);
    EXPECT_EQ(report.manifestsFreed, 1);
    EXPECT_EQ(report.chunksFreed, 1);
    EXPECT_EQ(report.chunkBytesFreed, 4);
    EXPECT_TRUE(report.chunksSwept);
    EXPECT_TRUE(report.problem.empty()) << report.problem;
}

TEST_F(CheckpointCollectorTest, AnEndedSessionKeepsItsCheckpointsForTheRetentionOnly)
{
    const std::string manifest = storeManifest({"kept a while"});
    session({manifest}, true);

    const auto within = collect(m_now + 2 * kHourMs);
    EXPECT_EQ(within.retainedSessions, 1);
    EXPECT_TRUE(hasManifest(manifest));
    EXPECT_TRUE(hasChunk("kept a while"));

    const auto after = collect(m_now + 8 * kDayMs);
    EXPECT_EQ(after.expiredSessions, 1);
    EXPECT_FALSE(hasManifest(manifest));
    EXPECT_FALSE(hasChunk("kept a while"));
    ASSERT_TRUE(m_collector->lastCollection());
    EXPECT_EQ(m_collector->lastCollection()->manifestsFreed, 1);
}

TEST_F(CheckpointCollectorTest, AnExpiredSessionsCheckpointGoesButAChunkAKeptOneSharesStays)
{
    const std::string expired = storeManifest({"shared", "only old"});
    const std::string live = storeManifest({"shared", "only live"});
    session({expired}, true);
    session({live}, false);

    // A dry run says what would go and deletes nothing.
    const auto dry = collect(m_now + 8 * kDayMs, true);
    EXPECT_TRUE(dry.dryRun);
    EXPECT_EQ(dry.manifestsFreed, 1);
    EXPECT_EQ(dry.chunksFreed, 1);
    EXPECT_EQ(dry.chunkBytesFreed, 8);
    EXPECT_TRUE(hasManifest(expired));
    EXPECT_TRUE(hasChunk("only old"));
    EXPECT_FALSE(m_collector->lastCollection());

    const auto report = collect(m_now + 8 * kDayMs);
    EXPECT_FALSE(hasManifest(expired));
    EXPECT_FALSE(hasChunk("only old"));
    EXPECT_TRUE(hasChunk("shared"));
    EXPECT_TRUE(hasManifest(live));
    EXPECT_TRUE(hasChunk("only live"));
    EXPECT_EQ(report.expiredSessions, 1);
    EXPECT_EQ(report.liveSessions, 1);
    EXPECT_EQ(report.chunksKept, 2);
}

TEST_F(CheckpointCollectorTest, BlobsYoungerThanTheGracePeriodSurviveUnreferenced)
{
    // A checkpoint in progress: chunks and manifest stored, its event not appended yet.
    const std::string inProgress = storeManifest({"being written"});
    const auto report = collect(m_now + 10 * 60'000);
    EXPECT_TRUE(hasManifest(inProgress));
    EXPECT_TRUE(hasChunk("being written"));
    EXPECT_EQ(report.keptForGrace, 1);   // the manifest; its chunk is kept as one it names
    EXPECT_EQ(report.chunksKept, 1);
    EXPECT_EQ(report.manifestsFreed + report.chunksFreed, 0);

    // A young chunk no manifest names yet (the manifest is not stored yet) stays too.
    const std::string loose = checkpoint::sha256Hex("loose");
    ASSERT_TRUE(m_store->putChunk(loose, "loose"));
    collect(m_now + 30 * 60'000);
    EXPECT_TRUE(hasChunk("loose"));
    EXPECT_NE(m_blobs->lastUsedUnixMs(CheckpointStore::chunkKey(loose)), 0);
}

TEST_F(CheckpointCollectorTest, AnOldChunkACheckpointJustFoundStoredIsNotCollected)
{
    // Two chunks stored a week ago by a broker since restarted (no use remembered), named by nothing.
    const std::string found = checkpoint::sha256Hex("found again");
    const std::string forgotten = checkpoint::sha256Hex("forgotten");
    for (const auto &[hash, content] : {std::pair{found, "found again"}, std::pair{forgotten, "forgotten"}}) {
        fs::create_directories(fileOf(CheckpointStore::chunkKey(hash)).parent_path());
        std::ofstream(fileOf(CheckpointStore::chunkKey(hash))) << content;
        age(CheckpointStore::chunkKey(hash), 7 * kDayMs);
    }
    // A checkpoint now finds one of them stored and will name it in a manifest it has not stored yet.
    ASSERT_TRUE(*m_store->hasChunk(found));

    const auto report = collect(nowUnixMs());
    EXPECT_TRUE(hasChunk("found again"));
    EXPECT_FALSE(hasChunk("forgotten"));
    EXPECT_EQ(report.chunksFreed, 1);
    EXPECT_EQ(report.keptForGrace, 1);
}

TEST_F(CheckpointCollectorTest, AManifestThatCannotBeReadStopsEveryChunkDeletionOfThatPass)
{
    const std::string expired = storeManifest({"expired's own"});
    const std::string live = storeManifest({"live's own"});
    session({expired}, true);
    session({live}, false);
    std::ofstream(fileOf(CheckpointStore::manifestKey(live)), std::ios::trunc) << "{\"damaged\":";

    const auto report = collect(m_now + 8 * kDayMs);
    EXPECT_FALSE(report.chunksSwept);
    EXPECT_NE(report.problem.find(live), std::string::npos) << report.problem;
    EXPECT_NE(report.problem.find("no chunk was collected"), std::string::npos) << report.problem;
    EXPECT_EQ(report.chunksFreed, 0);
    EXPECT_TRUE(hasChunk("expired's own"));
    EXPECT_TRUE(hasChunk("live's own"));
    // The expired session's manifest is proven unreferenced: it goes.
    EXPECT_FALSE(hasManifest(expired));
    EXPECT_EQ(report.manifestsFreed, 1);
    // The damaged one is kept: a session names it.
    EXPECT_TRUE(fs::exists(fileOf(CheckpointStore::manifestKey(live))));
}

TEST_F(CheckpointCollectorTest, AnArchivedPostMortemKeepsTheCheckpointItNames)
{
    const std::string manifest = storeManifest({"at the failure"});
    session({manifest}, true);
    ASSERT_TRUE(m_blobs->put("post-mortems/p/sb-1-1.json", json{{"session_id", "s-1"}, {"manifest", manifest}}.dump()));

    const auto report = collect(m_now + 8 * kDayMs);
    EXPECT_TRUE(hasManifest(manifest));
    EXPECT_TRUE(hasChunk("at the failure"));
    EXPECT_EQ(report.manifestsKept, 1);

    // One that cannot be read may name anything: nothing is deleted.
    const std::string orphan = storeManifest({"orphan"});
    ASSERT_TRUE(m_blobs->put("post-mortems/p/sb-2-2.json", "not json"));
    auto refused = m_collector->collect(m_now + 8 * kDayMs, false);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::DataLoss);
    EXPECT_NE(refused.error().message.find("post-mortems/p/sb-2-2.json"), std::string::npos);
    EXPECT_TRUE(hasManifest(orphan));
}

TEST_F(CheckpointCollectorTest, RetentionZeroKeepsEndedSessionsCheckpointsForever)
{
    CollectorOptions options;
    options.retentionHours = 0;
    CheckpointCollector forever(*m_store, *m_blobs, *m_events, options);
    const std::string manifest = storeManifest({"forever"});
    session({manifest}, true);
    auto report = forever.collect(m_now + 3650 * kDayMs, false);
    ASSERT_TRUE(report);
    EXPECT_EQ(report->retainedSessions, 1);
    EXPECT_TRUE(hasManifest(manifest));
    EXPECT_TRUE(hasChunk("forever"));
}

TEST_F(CheckpointCollectorTest, EverySessionAndEveryEventIsReadPageByPage)
{
    // The live session is the oldest (the last page of sessions) and names its manifest after
    // more events than one page of its log.
    const std::string manifest = storeManifest({"deep in the log"});
    session({manifest}, false, 1200);
    for (int i = 0; i < 205; ++i)
        session({}, true);
    const auto report = collect(m_now + 8 * kDayMs);
    EXPECT_EQ(report.liveSessions, 1);
    EXPECT_EQ(report.retainedSessions + report.expiredSessions, 205);
    EXPECT_TRUE(hasManifest(manifest));
    EXPECT_TRUE(hasChunk("deep in the log"));
}

TEST_F(CheckpointCollectorTest, ALogIsReadFromWhereTheLastPassLeftOff)
{
    const std::string first = storeManifest({"first"});
    const std::string id = session({first}, false);
    collect(m_now + 2 * kHourMs);
    // The session goes on after the pass: a new checkpoint, then it ends.
    const std::string second = storeManifest({"second"});
    store::AppendRequest more;
    more.sessionId = id;
    more.events.push_back({core::kind::Checkpoint, json{{"manifest", second}}.dump()});
    more.events.push_back({core::kind::StateChanged, json{{"status", "failed"}, {"reason", "r"}}.dump()});
    ASSERT_TRUE(m_events->appendSync(std::move(more)));

    const auto report = collect(m_now + 3 * kHourMs);
    EXPECT_EQ(report.retainedSessions, 1);
    EXPECT_EQ(report.manifestsKept, 2);
    EXPECT_TRUE(hasManifest(first));
    EXPECT_TRUE(hasManifest(second));
    EXPECT_TRUE(hasChunk("second"));
    const auto expired = collect(m_now + 8 * kDayMs);
    EXPECT_EQ(expired.manifestsFreed, 2);
    EXPECT_FALSE(hasChunk("first"));
}

TEST_F(CheckpointCollectorTest, FiguresCountTheStoreAndWhatACollectionWouldFree)
{
    const std::string content(1000, 'x');
    const std::string one = storeManifest({content, "a"});
    const std::string two = storeManifest({content, "b"});
    session({one}, false);
    session({two}, true);

    auto figures = m_collector->figures(m_now + 8 * kDayMs);
    ASSERT_TRUE(figures) << figures.error().message;
    EXPECT_EQ(figures->chunks, 3);
    EXPECT_EQ(figures->chunkBytes, 1002);
    EXPECT_EQ(figures->manifests, 2);
    EXPECT_GT(figures->manifestBytes, 0);
    EXPECT_EQ(figures->bytesStored(), 1002 + figures->manifestBytes);
    EXPECT_EQ(figures->logicalBytes, 2002);
    EXPECT_NEAR(figures->dedupRatio(), 2002.0 / 1002.0, 1e-9);
    EXPECT_TRUE(figures->wouldFree.dryRun);
    EXPECT_EQ(figures->wouldFree.manifestsFreed, 1);
    EXPECT_EQ(figures->wouldFree.chunksFreed, 1);
    EXPECT_EQ(figures->wouldFree.chunkBytesFreed, 1);
    EXPECT_TRUE(hasManifest(two));   // only counted
}

TEST_F(CheckpointCollectorTest, RequestsRunOnTheCollectorsThreadAndStopAnswersTheRest)
{
    CollectorOptions options;
    options.firstPassDelayMs = 3'600'000;   // no background pass during the test
    CheckpointCollector collector(*m_store, *m_blobs, *m_events, options);
    std::promise<Result<StorageFigures>> notRunning;
    collector.figuresLater([&](Result<StorageFigures> figures) { notRunning.set_value(std::move(figures)); });
    EXPECT_EQ(notRunning.get_future().get().error().code, ErrorCode::Unavailable);

    collector.start();
    storeManifest({"counted"});
    std::promise<Result<StorageFigures>> figures;
    collector.figuresLater([&](Result<StorageFigures> answer) { figures.set_value(std::move(answer)); });
    auto counted = figures.get_future().get();
    ASSERT_TRUE(counted) << counted.error().message;
    EXPECT_EQ(counted->chunks, 1);
    std::promise<Result<CollectionReport>> collected;
    collector.collectLater(true, [&](Result<CollectionReport> report) { collected.set_value(std::move(report)); });
    auto report = collected.get_future().get();
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_TRUE(report->dryRun);
    collector.stop();
    std::promise<Result<CollectionReport>> late;
    collector.collectLater(false, [&](Result<CollectionReport> answer) { late.set_value(std::move(answer)); });
    EXPECT_EQ(late.get_future().get().error().code, ErrorCode::Unavailable);
}

} // namespace
} // namespace paddock::checkpoints
