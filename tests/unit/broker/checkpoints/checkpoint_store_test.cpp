// The broker's checkpoint store over real files: keys hold whole bytes or nothing, every read is
// checked against its name, and the Checkpointer stores a pool's checkpoint (the shared fake pool
// client speaks the protocol) so that a damaged chunk is named and the checkpoint before it still
// restores. A full disk is a real tmpfs of 256 KiB (root only; skipped otherwise).

#include "broker/checkpoints/checkpointer.h"
#include "broker/checkpoints/local_blob_store.h"
#include "checkpoint/sha256.h"
#include "tests/support/fake_pool_client.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <sys/mount.h>
#include <unistd.h>

namespace paddock::checkpoints {
namespace {

namespace fs = std::filesystem;

class CheckpointStoreTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = fs::temp_directory_path() / ("paddock-ckpt-" + std::to_string(::getpid()) + "-"
                                             + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(m_dir);
        auto blobs = LocalBlobStore::open(m_dir / "store");
        ASSERT_TRUE(blobs) << blobs.error().message;
        m_blobs = blobs->get();
        m_store = std::make_unique<CheckpointStore>(std::move(*blobs), "broker");
        m_pool.setSnapshots(true);
        m_pool.setTier("lite", 1, 0, 8);
    }

    void TearDown() override
    {
        if (m_mounted)
            ::umount2((m_dir / "small").c_str(), MNT_DETACH);
        fs::remove_all(m_dir);
    }

    fs::path chunkFile(const std::string &hash) const { return m_dir / "store" / CheckpointStore::chunkKey(hash); }

    std::string claim()
    {
        auto claimed = m_pool.claim("lite", "s1", "");
        EXPECT_TRUE(claimed);
        return claimed ? claimed->sandboxId : std::string();
    }

    fs::path m_dir;
    LocalBlobStore *m_blobs = nullptr;
    std::unique_ptr<CheckpointStore> m_store;
    test::FakePoolClient m_pool{"p"};
    bool m_mounted = false;
};

TEST_F(CheckpointStoreTest, BlobsRoundTripAndTemporaryFilesAreNeverListed)
{
    const std::string binary("a\0b\xff", 4);
    ASSERT_TRUE(m_blobs->put("chunks/ab/one", binary));
    ASSERT_TRUE(m_blobs->put("manifests/two", "m"));
    std::ofstream(m_dir / "store" / "manifests" / "three.tmp-0123") << "half";
    EXPECT_EQ(*m_blobs->get("chunks/ab/one"), binary);
    EXPECT_TRUE(*m_blobs->exists("manifests/two"));
    EXPECT_FALSE(*m_blobs->exists("manifests/none"));
    auto listed = m_blobs->list("manifests/");
    ASSERT_TRUE(listed);
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].key, "manifests/two");
    ASSERT_TRUE(m_blobs->remove("manifests/two"));
    ASSERT_TRUE(m_blobs->remove("manifests/two"));   // gone already: fine
    EXPECT_EQ(m_blobs->get("manifests/two").error().code, ErrorCode::NotFound);
    EXPECT_EQ(m_blobs->put("../escape", "x").error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(m_blobs->put("UPPER", "x").error().code, ErrorCode::InvalidArgument);
}

TEST_F(CheckpointStoreTest, AChunkThatDoesNotHashToItsNameIsRefusedOnTheWayInAndOut)
{
    const std::string data = "the agent's work";
    const std::string hash = checkpoint::sha256Hex(data);
    auto refused = m_store->putChunk(hash, "something else");
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::DataLoss);
    EXPECT_FALSE(*m_store->hasChunk(hash));
    ASSERT_TRUE(*m_store->putChunk(hash, data));
    EXPECT_FALSE(*m_store->putChunk(hash, data)) << "stored once";
    std::ofstream(chunkFile(hash), std::ios::trunc) << "the agent's";   // truncated on disk
    auto read = m_store->getChunk(hash);
    ASSERT_FALSE(read);
    EXPECT_EQ(read.error().code, ErrorCode::DataLoss);
    EXPECT_NE(read.error().message.find(hash), std::string::npos) << read.error().message;
    fs::remove(chunkFile(hash));
    EXPECT_EQ(m_store->getChunk(hash).error().code, ErrorCode::DataLoss);
}

TEST_F(CheckpointStoreTest, TakeStoresOnlyWhatIsNewAndTheNextCheckpointIsADelta)
{
    const std::string sandbox = claim();
    Checkpointer checkpointer(*m_store);
    auto first = checkpointer.take(m_pool, sandbox, "");
    ASSERT_TRUE(first) << first.error().error.message;
    EXPECT_EQ(first->base, "");
    EXPECT_EQ(first->files, 1);
    EXPECT_EQ(first->chunksNew, 1);
    auto second = checkpointer.take(m_pool, sandbox, first->manifestId);
    ASSERT_TRUE(second) << second.error().error.message;
    EXPECT_EQ(second->base, first->manifestId) << "the pool held the base: a delta";
    EXPECT_EQ(second->files, 2);
    EXPECT_EQ(second->changed, 1);
    EXPECT_EQ(second->chunksNew, 1);
    auto manifest = m_store->getManifest(second->manifestId);
    ASSERT_TRUE(manifest) << manifest.error().message;
    EXPECT_EQ(manifest->entries.size(), 2u);
    for (const auto &hash : manifest->chunkHashes())
        EXPECT_TRUE(fs::exists(chunkFile(hash))) << "the manifest's chunks are stored before it";
}

// A blob store over real files that counts the existence checks made of each key, or throws on
// them (a bug below the checkpointer).
class CountingBlobStore final : public BlobStore {
public:
    explicit CountingBlobStore(std::unique_ptr<BlobStore> inner) : m_inner(std::move(inner)) {}
    std::string describe() const override { return m_inner->describe(); }
    Status put(const std::string &key, std::string_view bytes) override { return m_inner->put(key, bytes); }
    Result<std::string> get(const std::string &key) override { return m_inner->get(key); }
    Result<bool> exists(const std::string &key) override
    {
        ++asked[key];
        if (throwOnExists)
            throw std::runtime_error("exists() broke");
        return m_inner->exists(key);
    }
    Result<std::vector<BlobInfo>> list(const std::string &prefix) override { return m_inner->list(prefix); }
    Status remove(const std::string &key) override { return m_inner->remove(key); }

    std::map<std::string, int> asked;
    bool throwOnExists = false;

private:
    std::unique_ptr<BlobStore> m_inner;
};

TEST_F(CheckpointStoreTest, ATakeAsksTheStoreAboutEachNewChunkOnce)
{
    // Each existence check is a HEAD on an object store: a chunk the take just stored (or found
    // stored) is not asked about again when the manifest is checked.
    auto blobs = LocalBlobStore::open(m_dir / "counted");
    ASSERT_TRUE(blobs) << blobs.error().message;
    auto counting = std::make_unique<CountingBlobStore>(std::move(*blobs));
    CountingBlobStore *counted = counting.get();
    CheckpointStore store(std::move(counting), "broker");
    Checkpointer checkpointer(store);
    const std::string sandbox = claim();
    auto first = checkpointer.take(m_pool, sandbox, "");
    ASSERT_TRUE(first) << first.error().error.message;
    auto second = checkpointer.take(m_pool, sandbox, first->manifestId);
    ASSERT_TRUE(second) << second.error().error.message;
    EXPECT_EQ(first->chunksNew + second->chunksNew, 2);
    auto manifest = store.getManifest(second->manifestId);
    ASSERT_TRUE(manifest) << manifest.error().message;
    for (const auto &hash : manifest->chunkHashes())
        EXPECT_EQ(counted->asked[CheckpointStore::chunkKey(hash)], 1) << "chunk " << hash;
}

TEST_F(CheckpointStoreTest, AStageThatThrowsEndsTheTakeWithAnAnswer)
{
    // Otherwise a parked step would wait for its checkpoint forever (and stop() with it).
    auto blobs = LocalBlobStore::open(m_dir / "throwing");
    ASSERT_TRUE(blobs) << blobs.error().message;
    auto throwing = std::make_unique<CountingBlobStore>(std::move(*blobs));
    throwing->throwOnExists = true;
    CheckpointStore store(std::move(throwing), "broker");
    Checkpointer checkpointer(store);
    auto taken = checkpointer.take(m_pool, claim(), "");
    ASSERT_FALSE(taken);
    EXPECT_EQ(taken.error().error.code, ErrorCode::Internal);
    EXPECT_NE(taken.error().error.message.find("exists() broke"), std::string::npos) << taken.error().error.message;
}

TEST_F(CheckpointStoreTest, ADamagedChunkIsNamedAndTheCheckpointBeforeStillRestores)
{
    const std::string sandbox = claim();
    Checkpointer checkpointer(*m_store);
    auto first = checkpointer.take(m_pool, sandbox, "");
    auto second = checkpointer.take(m_pool, sandbox, first->manifestId);
    ASSERT_TRUE(first && second);
    auto manifest = m_store->getManifest(second->manifestId);
    // The chunk only the second checkpoint has: its second file.
    const std::string onlySecond = manifest->entries[1].chunks[0];
    std::ofstream(chunkFile(onlySecond), std::ios::trunc) << "garbage";
    const std::string other = claim();
    auto broken = checkpointer.restore(m_pool, other, second->manifestId);
    ASSERT_FALSE(broken);
    EXPECT_EQ(broken.error().at, FailedAt::Store);
    EXPECT_EQ(broken.error().error.code, ErrorCode::DataLoss);
    EXPECT_NE(broken.error().error.message.find(onlySecond), std::string::npos) << broken.error().error.message;
    EXPECT_NE(broken.error().error.message.find(manifest->entries[1].path), std::string::npos)
        << "names the file that needs it: " << broken.error().error.message;
    auto earlier = checkpointer.restore(m_pool, other, first->manifestId);
    ASSERT_TRUE(earlier) << earlier.error().error.message;
    EXPECT_EQ(earlier->files, 1);
    EXPECT_EQ(m_pool.workspaceFiles(other).size(), 1u);
}

TEST_F(CheckpointStoreTest, AManifestNamingAMissingChunkCannotBeStored)
{
    // A checkpoint whose manifest names a chunk nobody sent must not become durable.
    const std::string sandbox = claim();
    Checkpointer checkpointer(*m_store);
    auto first = checkpointer.take(m_pool, sandbox, "");
    ASSERT_TRUE(first);
    auto manifest = m_store->getManifest(first->manifestId);
    fs::remove(chunkFile(manifest->entries[0].chunks[0]));
    auto restored = checkpointer.restore(m_pool, claim(), first->manifestId);
    ASSERT_FALSE(restored);
    EXPECT_EQ(restored.error().error.code, ErrorCode::DataLoss);
    EXPECT_NE(restored.error().error.message.find("missing"), std::string::npos) << restored.error().error.message;
}

TEST_F(CheckpointStoreTest, AFullDiskIsResourceExhaustedAndNothingHalfWrittenRemains)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "mounting a small tmpfs needs root";
    fs::create_directories(m_dir / "small");
    ASSERT_EQ(::mount("tmpfs", (m_dir / "small").c_str(), "tmpfs", 0, "size=256k"), 0) << std::strerror(errno);
    m_mounted = true;
    auto blobs = LocalBlobStore::open(m_dir / "small" / "store");
    ASSERT_TRUE(blobs);
    const std::string big(512 * 1024, 'x');
    auto full = (*blobs)->put("chunks/aa/big", big);
    ASSERT_FALSE(full);
    EXPECT_EQ(full.error().code, ErrorCode::ResourceExhausted);
    EXPECT_NE(full.error().message.find("free space"), std::string::npos) << full.error().message;
    EXPECT_FALSE(*(*blobs)->exists("chunks/aa/big"));
    int leftovers = 0;
    for (const auto &e : fs::recursive_directory_iterator(m_dir / "small"))
        leftovers += e.is_regular_file() ? 1 : 0;
    EXPECT_EQ(leftovers, 0) << "the temporary file went with the failed write";
    EXPECT_TRUE((*blobs)->put("chunks/aa/small", "fits"));
}

} // namespace
} // namespace paddock::checkpoints
