// paddockctl storage and storage collect [--dry-run]: the command line, the pure formatting, and the
// commands against the broker paddockd runs (tests/support/in_process_broker.h) with a real
// checkpoint directory: a live session's checkpoint is kept, an old manifest nothing names is what a
// collection frees, and the figures after it say so.

#include "cli/app.h"
#include "cli/exit_codes.h"
#include "cli/storage_commands.h"

#include "broker/checkpoints/checkpoint_store.h"
#include "broker/checkpoints/local_blob_store.h"
#include "checkpoint/sha256.h"
#include "common/clock.h"
#include "tests/support/in_process_broker.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace paddock::cli {
namespace {

namespace fs = std::filesystem;

struct CliRun {
    int code = 0;
    std::string out;
    std::string err;
};

TEST(StorageCommands, ParseShowAndCollect)
{
    std::ostringstream out, err;
    auto show = parseCommandLine({"storage", "--output", "json"}, out, err);
    ASSERT_TRUE(show.invocation) << err.str();
    EXPECT_EQ(show.invocation->command, Command::Storage);
    EXPECT_EQ(show.invocation->output, OutputFormat::Json);
    auto collect = parseCommandLine({"storage", "collect"}, out, err);
    ASSERT_TRUE(collect.invocation) << err.str();
    EXPECT_EQ(collect.invocation->command, Command::StorageCollect);
    EXPECT_FALSE(collect.invocation->dryRun);
    auto dry = parseCommandLine({"storage", "collect", "--dry-run"}, out, err);
    ASSERT_TRUE(dry.invocation) << err.str();
    EXPECT_TRUE(dry.invocation->dryRun);
    EXPECT_EQ(parseCommandLine({"storage", "--dry-run"}, out, err).exitCode, toInt(ExitCode::Usage));
}

TEST(StorageCommands, SizesAndCountsReadLikeAPerson)
{
    EXPECT_EQ(formatByteSize(512), "512 B");
    EXPECT_EQ(formatByteSize(12 * 1024), "12 KiB");
    EXPECT_EQ(formatByteSize(310LL << 20), "310 MiB");
    EXPECT_EQ(formatByteSize(1288490188LL), "1.2 GiB");
    EXPECT_EQ(formatCount(3401), "3,401");
    EXPECT_EQ(formatCount(212), "212");
    EXPECT_EQ(formatCount(1234567), "1,234,567");
}

TEST(StorageCommands, TheFiguresInOneParagraph)
{
    v1::StorageInfo storage;
    storage.set_store("broker");
    storage.set_where("the broker's checkpoint directory /var/lib/paddock/checkpoints");
    storage.set_retention_hours(168);
    storage.set_chunks(3401);
    storage.set_chunk_bytes(1200LL << 20);
    storage.set_manifests(212);
    storage.set_bytes_stored(1288490188LL);
    storage.set_logical_bytes(6227702579LL);
    storage.set_dedup_ratio(4.84);
    storage.mutable_would_free()->set_chunks_freed(41);
    storage.mutable_would_free()->set_chunk_bytes_freed(310LL << 20);
    storage.mutable_would_free()->set_manifests_freed(30);
    EXPECT_EQ(formatStorage(storage),
              "checkpoints: the broker's checkpoint directory /var/lib/paddock/checkpoints\n"
              "  1.2 GiB stored in 3,401 chunks and 212 manifests\n"
              "  5.8 GiB of workspaces (dedup 4.8x)\n"
              "  collection would free 310 MiB (41 chunks, 30 manifests)\n"
              "  ended sessions kept 168 h\n");
    storage.mutable_last_collection()->set_time_unix_ms(0);
    storage.mutable_would_free()->set_problem("no chunk was collected: ...");
    const std::string text = formatStorage(storage, true);
    EXPECT_NE(text.find("last collection 1970-01-01 00:00 UTC: freed 0 B (0 chunks, 0 manifests)"), std::string::npos)
        << text;
    EXPECT_NE(text.find("warning: no chunk was collected"), std::string::npos) << text;
}

class StorageAgainstBroker : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = fs::temp_directory_path() / ("paddock-cli-storage-" + std::to_string(::getpid()));
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
        m_broker = std::make_unique<test::InProcessBroker>(m_dir);
        ASSERT_TRUE(m_broker->start());
        auto blobs = checkpoints::LocalBlobStore::open(m_dir / "checkpoints");
        ASSERT_TRUE(blobs) << blobs.error().message;
        m_store = std::make_unique<checkpoints::CheckpointStore>(std::move(*blobs), "broker");
    }

    void TearDown() override
    {
        m_broker->stop();
        fs::remove_all(m_dir);
    }

    // A manifest of one file, stored with its chunk, written `ageMs` ago.
    std::string storeManifest(const std::string &content, int64_t ageMs)
    {
        const std::string hash = checkpoint::sha256Hex(content);
        EXPECT_TRUE(m_store->putChunk(hash, content));
        checkpoint::Manifest manifest;
        manifest.entries.push_back({"file", checkpoint::EntryType::File, 0644, 0, 0,
                                    static_cast<int64_t>(content.size()), 0, {}, {hash}});
        const std::string text = manifest.toJson();
        const std::string id = checkpoint::sha256Hex(text);
        EXPECT_TRUE(m_store->putManifest(id, text, manifest));
        using checkpoints::CheckpointStore;
        for (const auto &key : {CheckpointStore::chunkKey(hash), CheckpointStore::manifestKey(id)}) {
            const int64_t at = nowUnixMs() - ageMs;
            const timespec times[2] = {{at / 1000, 0}, {at / 1000, 0}};
            EXPECT_EQ(::utimensat(AT_FDCWD, (m_dir / "checkpoints" / key).c_str(), times, 0), 0);
        }
        return id;
    }

    CliRun run(std::vector<std::string> args)
    {
        args.insert(args.begin(), {"--broker", m_broker->address()});
        std::ostringstream out, err;
        CliRun result;
        result.code = runCli(args, Environment{}, out, err);
        result.out = out.str();
        result.err = err.str();
        return result;
    }

    fs::path m_dir;
    std::unique_ptr<test::InProcessBroker> m_broker;
    std::unique_ptr<checkpoints::CheckpointStore> m_store;
};

TEST_F(StorageAgainstBroker, ShowsTheStoreCollectsWhatNothingKeepsAndSaysSo)
{
    constexpr int64_t kTenDaysMs = 10LL * 24 * 3'600'000;
    const std::string kept = storeManifest(std::string(3000, 'k'), kTenDaysMs);
    storeManifest(std::string(2000, 'o'), kTenDaysMs);
    store::AppendRequest live;
    live.sessionId = "s-live";
    live.expectedLastSeq = 0;
    live.events.push_back({core::kind::SessionCreated, R"({"goal":"g","model":"scripted","tier":"lite"})"});
    live.events.push_back({core::kind::Checkpoint, nlohmann::json{{"manifest", kept}}.dump()});
    ASSERT_TRUE(m_broker->store().appendSync(std::move(live)));

    const CliRun shown = run({"storage"});
    ASSERT_EQ(shown.code, 0) << shown.err;
    EXPECT_NE(shown.out.find("checkpoints: the broker's checkpoint directory " + (m_dir / "checkpoints").string()),
              std::string::npos) << shown.out;
    EXPECT_NE(shown.out.find("stored in 2 chunks and 2 manifests"), std::string::npos) << shown.out;
    EXPECT_NE(shown.out.find("4.9 KiB of workspaces (dedup 1.0x)"), std::string::npos) << shown.out;
    EXPECT_NE(shown.out.find("collection would free"), std::string::npos) << shown.out;
    EXPECT_NE(shown.out.find("(1 chunk, 1 manifest)"), std::string::npos) << shown.out;
    EXPECT_NE(shown.out.find("ended sessions kept 168 h"), std::string::npos) << shown.out;

    const CliRun json = run({"storage", "--output", "json"});
    ASSERT_EQ(json.code, 0) << json.err;
    const auto figures = nlohmann::json::parse(json.out);
    EXPECT_EQ(figures["store"], "broker");
    EXPECT_EQ(figures["chunk_bytes"], 5000);
    EXPECT_EQ(figures["logical_bytes"], 5000);
    EXPECT_EQ(figures["would_free"]["chunk_bytes_freed"], 2000);
    EXPECT_TRUE(figures["last_collection"].is_null());

    const CliRun dry = run({"storage", "collect", "--dry-run"});
    ASSERT_EQ(dry.code, 0) << dry.err;
    EXPECT_NE(dry.out.find("a collection now would free"), std::string::npos) << dry.out;
    EXPECT_NE(dry.out.find("kept 1 chunk and 1 manifest for 1 live session and 0 ended"), std::string::npos) << dry.out;

    const CliRun collected = run({"storage", "collect"});
    ASSERT_EQ(collected.code, 0) << collected.err;
    EXPECT_TRUE(collected.out.starts_with("collected 2.2 KiB (1 chunk, 1 manifest)")) << collected.out;
    EXPECT_TRUE(*m_store->hasChunk(checkpoint::sha256Hex(std::string(3000, 'k'))));
    EXPECT_FALSE(*m_store->hasChunk(checkpoint::sha256Hex(std::string(2000, 'o'))));

    const CliRun after = run({"storage"});
    ASSERT_EQ(after.code, 0) << after.err;
    EXPECT_NE(after.out.find("collection would free 0 B (0 chunks, 0 manifests)"), std::string::npos) << after.out;
    EXPECT_NE(after.out.find("last collection"), std::string::npos) << after.out;
}

} // namespace
} // namespace paddock::cli
