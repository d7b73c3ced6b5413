// Checkpoints of a workspace for real, without sandboxes: WorkspaceCheckpoints over temporary
// directories, and a stand-in for the broker that stores each checkpoint as the broker does (the
// delta applied to its base, the inline and pending chunks kept by hash, then a commit) and
// restores one from what it stored. An unchanged workspace reads no file; a change sends its entry
// and only its new chunks; a restore reproduces the tree (symlinks as symlinks, never followed)
// and makes the next checkpoint incremental; damaged, missing or mismatched input is refused with
// the workspace left as it was.

#include "checkpoint/manifest.h"
#include "checkpoint/sha256.h"
#include "pool/snapshot/workspace_checkpoint.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;
using paddock::checkpoint::EntryType;
using paddock::pool::CheckpointChunkView;
using paddock::pool::OwnerMap;
using paddock::pool::TakenCheckpoint;
using paddock::pool::WorkspaceCheckpoints;

namespace {

constexpr int64_t kMiB = 1 << 20;

std::string slurp(const fs::path &p)
{
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void spit(const fs::path &p, const std::string &s)
{
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}

// Bytes that do not repeat within a chunk, so every chunk has a hash of its own.
std::string noise(size_t n, uint32_t seed)
{
    std::string out(n, '\0');
    uint32_t x = seed * 2654435761u + 1;
    for (auto &c : out) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        c = static_cast<char>(x);
    }
    return out;
}

// path -> "<type> <mode> <content or target>", compared without following links.
std::map<std::string, std::string> tree(const fs::path &root)
{
    std::map<std::string, std::string> out;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
        struct stat st{};
        ::lstat(it->path().c_str(), &st);
        const std::string mode = std::to_string(st.st_mode & 07777);
        const auto rel = fs::relative(it->path(), root).string();
        if (S_ISLNK(st.st_mode))
            out[rel] = "l " + fs::read_symlink(it->path()).string();
        else if (S_ISDIR(st.st_mode))
            out[rel] = "d " + mode;
        else
            out[rel] = "f " + mode + " " + slurp(it->path());
    }
    return out;
}

int64_t mtimeMs(const fs::path &p)
{
    struct stat st{};
    ::lstat(p.c_str(), &st);
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

// What the broker keeps: manifests by id, chunks by hash.
class BrokerStandIn {
public:
    // Stores checkpoint t of ws: its manifest, its inline and pending chunks; then commits it.
    std::string store(WorkspaceCheckpoints &ws, const TakenCheckpoint &t)
    {
        auto delta = checkpoint::Delta::parse(t.delta);
        EXPECT_TRUE(delta) << (delta ? "" : delta.error().message);
        if (!delta)
            return {};
        EXPECT_EQ(delta->base, t.base);
        const checkpoint::Manifest empty;
        auto manifest = checkpoint::apply(t.base.empty() ? empty : manifests.at(t.base), *delta);
        EXPECT_TRUE(manifest) << (manifest ? "" : manifest.error().message);
        if (!manifest)
            return {};
        for (const auto &c : t.chunks)
            keep(c.hash, c.data);
        std::vector<std::string> wanted;
        for (const auto &p : t.pending)
            wanted.push_back(p.hash);
        while (!wanted.empty()) {
            auto got = ws.readChunks(t.token, wanted);
            EXPECT_TRUE(got) << (got ? "" : got.error().message);
            if (!got || got->empty())
                return {};
            for (const auto &c : *got)
                keep(c.hash, c.data);
            wanted.erase(wanted.begin(), wanted.begin() + static_cast<std::ptrdiff_t>(got->size()));
        }
        for (const auto &hash : manifest->chunkHashes())
            EXPECT_TRUE(chunks.contains(hash)) << "the checkpoint never sent chunk " << hash;
        const std::string id = manifest->id();
        manifests[id] = *manifest;
        auto committed = ws.commit(t.token, id);
        EXPECT_TRUE(committed) << (committed ? "" : committed.error().message);
        return id;
    }

    // Restores manifest id into ws with every chunk it asks for but `withhold`.
    Status restore(WorkspaceCheckpoints &ws, const std::string &id, const std::string &withhold = {})
    {
        auto begun = ws.beginRestore(id, manifests.at(id).toJson());
        if (!begun)
            return std::unexpected(begun.error());
        std::vector<CheckpointChunkView> views;
        for (const auto &hash : begun->missing)
            if (hash != withhold)
                views.push_back({hash, chunks.at(hash)});
        if (auto put = ws.putRestoreChunks(begun->token, views); !put)
            return put;
        auto done = ws.finishRestore(begun->token);
        if (!done)
            return std::unexpected(done.error());
        lastRestore = *done;
        return {};
    }

    std::map<std::string, checkpoint::Manifest> manifests;
    std::map<std::string, std::string> chunks;
    pool::RestoreDone lastRestore;

private:
    void keep(const std::string &hash, const std::string &data)
    {
        EXPECT_EQ(checkpoint::sha256Hex(data), hash);
        chunks[hash] = data;
    }
};

std::set<std::string> hashesOf(const TakenCheckpoint &t)
{
    std::set<std::string> out;
    for (const auto &c : t.chunks)
        out.insert(c.hash);
    for (const auto &p : t.pending)
        out.insert(p.hash);
    return out;
}

class WorkspaceCheckpointTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/paddock-checkpoint-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
        fs::create_directories(ws("a"));
        fs::create_directories(ws("b"));
    }
    void TearDown() override
    {
        m_sandboxes.clear();   // their spools go first
        std::error_code ec;
        fs::remove_all(m_dir, ec);
    }

    fs::path ws(const std::string &sandbox) const { return m_dir / sandbox / "workspace"; }
    fs::path spool(const std::string &sandbox) const { return m_dir / "spool" / sandbox; }

    WorkspaceCheckpoints &sandbox(const std::string &name, OwnerMap owners = {})
    {
        auto &slot = m_sandboxes[name];
        if (!slot)
            slot = std::make_unique<WorkspaceCheckpoints>(
                pool::CheckpointPaths{ws(name), m_dir / name / "scratch", spool(name)}, owners);
        return *slot;
    }

    // hello.txt (0755), src/main.c, src/big.bin (3.5 MiB), empty/, shortcut -> src
    void fill(const std::string &name)
    {
        spit(ws(name) / "hello.txt", "hello\n");
        spit(ws(name) / "src/main.c", "int main(void) { return 0; }\n");
        spit(ws(name) / "src/big.bin", noise(3 * kMiB + kMiB / 2, 7));
        fs::create_directories(ws(name) / "empty");
        fs::create_symlink("src", ws(name) / "shortcut");
        ::chmod((ws(name) / "hello.txt").c_str(), 0755);
        ::chmod((ws(name) / "empty").c_str(), 0750);
    }

    // Past the racy margin: what was written before this is trusted by its stat key.
    static void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(60)); }

    // The first checkpoint of a filled workspace, stored: its manifest id.
    std::string storedFull(const std::string &name)
    {
        fill(name);
        settle();
        auto t = sandbox(name).take("");
        EXPECT_TRUE(t) << (t ? "" : t.error().message);
        return t ? m_broker.store(sandbox(name), *t) : std::string();
    }

    fs::path m_dir;
    BrokerStandIn m_broker;
    std::map<std::string, std::unique_ptr<WorkspaceCheckpoints>> m_sandboxes;
};

} // namespace

TEST_F(WorkspaceCheckpointTest, AFullListingThenAnUnchangedCheckpointThatReadsNoFile)
{
    fill("a");
    settle();
    auto full = sandbox("a").take("");
    ASSERT_TRUE(full) << full.error().message;
    EXPECT_EQ(full->base, "");
    EXPECT_FALSE(full->unchanged);
    EXPECT_EQ(full->filesScanned, 3);
    EXPECT_EQ(full->filesHashed, 3);
    EXPECT_EQ(full->bytesHashed, 6 + 29 + 3 * kMiB + kMiB / 2);
    EXPECT_EQ(full->skipped, 0);
    EXPECT_EQ(full->chunks.size(), 2u);    // hello.txt, main.c
    EXPECT_EQ(full->pending.size(), 4u);   // big.bin's
    const std::string id = m_broker.store(sandbox("a"), *full);
    ASSERT_FALSE(id.empty());
    EXPECT_EQ(m_broker.manifests[id].entries.size(), 6u);
    EXPECT_EQ(sandbox("a").baseId(), id);

    auto same = sandbox("a").take(id);
    ASSERT_TRUE(same) << same.error().message;
    EXPECT_EQ(same->base, id);
    EXPECT_TRUE(same->unchanged);
    EXPECT_EQ(same->filesScanned, 3);
    EXPECT_EQ(same->filesHashed, 0);
    EXPECT_EQ(same->bytesHashed, 0);
    EXPECT_TRUE(same->chunks.empty());
    EXPECT_TRUE(same->pending.empty());
    auto delta = checkpoint::Delta::parse(same->delta);
    ASSERT_TRUE(delta);
    EXPECT_TRUE(delta->empty());
    EXPECT_LT(same->token.size() + same->base.size() + same->delta.size(), 4096u);
}

TEST_F(WorkspaceCheckpointTest, AThreeAndAHalfMiBFileIsFourChunks)
{
    const std::string big = noise(3 * kMiB + kMiB / 2, 3);
    spit(ws("a") / "big.bin", big);
    auto t = sandbox("a").take("");
    ASSERT_TRUE(t) << t.error().message;
    ASSERT_EQ(t->pending.size(), 4u);
    for (int i = 0; i < 4; ++i) {
        const int64_t size = i < 3 ? kMiB : kMiB / 2;
        EXPECT_EQ(t->pending[i].size, size);
        EXPECT_EQ(t->pending[i].hash, checkpoint::sha256Hex(std::string_view(big).substr(i * kMiB, size)));
    }
    const std::string id = m_broker.store(sandbox("a"), *t);
    const auto &entry = m_broker.manifests[id].entries.at(0);
    EXPECT_EQ(entry.size, 3 * kMiB + kMiB / 2);
    EXPECT_EQ(entry.chunks.size(), 4u);
}

TEST_F(WorkspaceCheckpointTest, OneChangedFileSendsItsEntryAndOnlyItsNewChunk)
{
    const std::string id = storedFull("a");
    ASSERT_FALSE(id.empty());
    // One byte of big.bin's third chunk, in place.
    std::string after = slurp(ws("a") / "src/big.bin");
    const int64_t at = 2 * kMiB + 100;
    after[at] = static_cast<char>(after[at] ^ 0x5a);
    {
        std::fstream f(ws("a") / "src/big.bin", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(at);
        f.put(after[at]);
    }
    auto t = sandbox("a").take(id);
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_FALSE(t->unchanged);
    EXPECT_EQ(t->filesHashed, 1);
    auto delta = checkpoint::Delta::parse(t->delta);
    ASSERT_TRUE(delta);
    EXPECT_EQ(delta->base, id);
    ASSERT_EQ(delta->changed.size(), 1u) << t->delta;
    EXPECT_EQ(delta->changed[0].path, "src/big.bin");
    EXPECT_TRUE(delta->removed.empty());
    EXPECT_EQ(hashesOf(*t), std::set<std::string>{checkpoint::sha256Hex(std::string_view(after).substr(2 * kMiB, kMiB))});

    const std::string next = m_broker.store(sandbox("a"), *t);
    auto again = sandbox("a").take(next);
    ASSERT_TRUE(again);
    EXPECT_TRUE(again->unchanged);
}

TEST_F(WorkspaceCheckpointTest, ADeletedFileIsARemovedPath)
{
    const std::string id = storedFull("a");
    fs::remove(ws("a") / "src/main.c");
    auto t = sandbox("a").take(id);
    ASSERT_TRUE(t) << t.error().message;
    auto delta = checkpoint::Delta::parse(t->delta);
    ASSERT_TRUE(delta);
    EXPECT_EQ(delta->removed, std::vector<std::string>{"src/main.c"});
    for (const auto &e : delta->changed)
        EXPECT_EQ(e.type, EntryType::Dir) << e.path;   // src's mtime, nothing else
    EXPECT_TRUE(hashesOf(*t).empty());
    EXPECT_EQ(t->filesHashed, 0);
}

TEST_F(WorkspaceCheckpointTest, AChmodChangesTheEntryAndSendsNoChunk)
{
    const std::string id = storedFull("a");
    ::chmod((ws("a") / "hello.txt").c_str(), 0600);
    auto t = sandbox("a").take(id);
    ASSERT_TRUE(t) << t.error().message;
    auto delta = checkpoint::Delta::parse(t->delta);
    ASSERT_TRUE(delta);
    ASSERT_EQ(delta->changed.size(), 1u) << t->delta;
    EXPECT_EQ(delta->changed[0].path, "hello.txt");
    EXPECT_EQ(delta->changed[0].mode, 0600u);
    EXPECT_TRUE(delta->removed.empty());
    EXPECT_TRUE(hashesOf(*t).empty());
}

TEST_F(WorkspaceCheckpointTest, AWriteThatKeepsTheSizeAndTheMtimeIsStillSeen)
{
    spit(ws("a") / "note.txt", "aaaa");
    settle();
    auto t = sandbox("a").take("");
    ASSERT_TRUE(t);
    const std::string id = m_broker.store(sandbox("a"), *t);
    // The agent's trick: same size, same inode, the old mtime put back. The ctime still moves.
    struct stat before{};
    ::stat((ws("a") / "note.txt").c_str(), &before);
    {
        std::fstream f(ws("a") / "note.txt", std::ios::in | std::ios::out | std::ios::binary);
        f << "bbbb";
    }
    const timespec times[2] = {before.st_atim, before.st_mtim};
    ASSERT_EQ(::utimensat(AT_FDCWD, (ws("a") / "note.txt").c_str(), times, 0), 0);
    auto after = sandbox("a").take(id);
    ASSERT_TRUE(after);
    EXPECT_FALSE(after->unchanged);
    EXPECT_EQ(hashesOf(*after), std::set<std::string>{checkpoint::sha256Hex("bbbb")});
}

TEST_F(WorkspaceCheckpointTest, AFileWrittenJustBeforeACheckpointIsNotReadByTheNext)
{
    // The step's command wrote it a moment ago: within the clock's tick, its key could miss a
    // write made right after the scan's stat, so the scan reads it once that tick has passed.
    spit(ws("a") / "fresh.txt", "just written");
    auto t = sandbox("a").take("");
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->filesHashed, 1);
    const std::string id = m_broker.store(sandbox("a"), *t);
    auto same = sandbox("a").take(id);
    ASSERT_TRUE(same);
    EXPECT_TRUE(same->unchanged);
    EXPECT_EQ(same->filesHashed, 0);
    spit(ws("a") / "fresh.txt", "written again");
    auto changed = sandbox("a").take(id);
    ASSERT_TRUE(changed);
    EXPECT_EQ(hashesOf(*changed), std::set<std::string>{checkpoint::sha256Hex("written again")});
}

TEST_F(WorkspaceCheckpointTest, AnotherBaseGetsAFullListing)
{
    const std::string id = storedFull("a");
    auto t = sandbox("a").take(checkpoint::sha256Hex("a base this pool never held"));
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->base, "");
    EXPECT_FALSE(t->unchanged);
    EXPECT_EQ(t->filesHashed, 3);
    EXPECT_EQ(hashesOf(*t).size(), 6u);   // every chunk, the broker fetching what it lacks
    EXPECT_EQ(m_broker.store(sandbox("a"), *t), id);
}

TEST_F(WorkspaceCheckpointTest, ARestoreReproducesTheTreeAndTheNextCheckpointIsIncremental)
{
    const std::string id = storedFull("a");
    ASSERT_FALSE(id.empty());
    spit(ws("b") / "old.txt", "replaced by the restore");
    auto restored = m_broker.restore(sandbox("b"), id);
    ASSERT_TRUE(restored) << restored.error().message;
    EXPECT_EQ(tree(ws("b")), tree(ws("a")));
    EXPECT_FALSE(fs::exists(ws("b") / "old.txt"));
    EXPECT_TRUE(fs::is_symlink(ws("b") / "shortcut"));
    for (const char *p : {"hello.txt", "src/big.bin", "empty", "src"})
        EXPECT_EQ(mtimeMs(ws("b") / p), mtimeMs(ws("a") / p)) << p;
    EXPECT_EQ(m_broker.lastRestore.fileCount, 6);
    EXPECT_EQ(m_broker.lastRestore.bytes, 6 + 29 + 3 * kMiB + kMiB / 2);
    EXPECT_EQ(sandbox("b").baseId(), id);

    auto t = sandbox("b").take(id);
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->base, id);
    EXPECT_TRUE(t->unchanged) << t->delta;
    EXPECT_TRUE(hashesOf(*t).empty());
    EXPECT_LE(t->filesHashed, 1);   // hello.txt, whose ctime the swap's rename moved; not what is below

    spit(ws("b") / "src/main.c", "int main(void) { return 1; }\n");
    auto changed = sandbox("b").take(id);
    ASSERT_TRUE(changed);
    auto delta = checkpoint::Delta::parse(changed->delta);
    ASSERT_TRUE(delta);
    ASSERT_EQ(delta->changed.size(), 1u) << changed->delta;
    EXPECT_EQ(delta->changed[0].path, "src/main.c");
    EXPECT_EQ(hashesOf(*changed), std::set<std::string>{checkpoint::sha256Hex("int main(void) { return 1; }\n")});
}

TEST_F(WorkspaceCheckpointTest, ASymlinkOutOfTheWorkspaceIsRecordedAndNeverFollowed)
{
    fs::create_symlink("/etc", ws("a") / "etc");
    fs::create_symlink("/etc/passwd", ws("a") / "passwd");
    fs::create_symlink("../..", ws("a") / "up");
    spit(ws("a") / "real.txt", "mine");
    auto t = sandbox("a").take("");
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->filesScanned, 1);
    EXPECT_EQ(t->bytesHashed, 4);
    const std::string id = m_broker.store(sandbox("a"), *t);
    std::map<std::string, std::string> links;
    for (const auto &e : m_broker.manifests[id].entries) {
        EXPECT_FALSE(e.path.starts_with("etc/") || e.path.starts_with("up/")) << e.path << " was followed";
        if (e.type == EntryType::Symlink)
            links[e.path] = e.target;
    }
    EXPECT_EQ(links, (std::map<std::string, std::string>{{"etc", "/etc"}, {"passwd", "/etc/passwd"}, {"up", "../.."}}));

    // Restored as symlinks: nothing written through them.
    const std::string passwd = slurp("/etc/passwd");
    ASSERT_TRUE(m_broker.restore(sandbox("b"), id));
    EXPECT_EQ(fs::read_symlink(ws("b") / "etc"), "/etc");
    EXPECT_EQ(fs::read_symlink(ws("b") / "passwd"), "/etc/passwd");
    EXPECT_EQ(slurp("/etc/passwd"), passwd);

    // A manifest that would write through a symlink is refused before anything is written.
    const fs::path outside = m_dir / "outside";
    fs::create_directories(outside);
    checkpoint::Manifest through;
    through.entries.push_back({.path = "l", .type = EntryType::Symlink, .mode = 0777, .target = outside.string()});
    through.entries.push_back({.path = "l/x", .type = EntryType::File, .mode = 0644, .size = 4,
                               .chunks = {checkpoint::sha256Hex("evil")}});
    auto begun = sandbox("b").beginRestore(through.id(), through.toJson());
    ASSERT_FALSE(begun);
    EXPECT_EQ(begun.error().code, ErrorCode::InvalidArgument);
    EXPECT_TRUE(fs::is_empty(outside));
}

TEST_F(WorkspaceCheckpointTest, ACorruptChunkIsDataLossAndTheWorkspaceStays)
{
    const std::string id = storedFull("a");
    spit(ws("b") / "mine.txt", "keep me");
    auto begun = sandbox("b").beginRestore(id, m_broker.manifests[id].toJson());
    ASSERT_TRUE(begun) << begun.error().message;
    const std::string &hash = begun->missing.at(0);
    const std::string damaged = m_broker.chunks.at(hash) + "!";
    const CheckpointChunkView bad{hash, damaged};
    auto put = sandbox("b").putRestoreChunks(begun->token, {&bad, 1});
    ASSERT_FALSE(put);
    EXPECT_EQ(put.error().code, ErrorCode::DataLoss);
    EXPECT_NE(put.error().message.find(hash), std::string::npos) << put.error().message;
    EXPECT_FALSE(sandbox("b").finishRestore(begun->token));
    EXPECT_EQ(tree(ws("b")), (std::map<std::string, std::string>{{"mine.txt", "f 420 keep me"}}));
}

TEST_F(WorkspaceCheckpointTest, AMissingChunkAtFinishIsNamedAndTheWorkspaceStays)
{
    const std::string id = storedFull("a");
    spit(ws("b") / "mine.txt", "keep me");
    const std::string mainHash = checkpoint::sha256Hex("int main(void) { return 0; }\n");
    auto restored = m_broker.restore(sandbox("b"), id, mainHash);
    ASSERT_FALSE(restored);
    EXPECT_EQ(restored.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(restored.error().message.find(mainHash), std::string::npos) << restored.error().message;
    EXPECT_NE(restored.error().message.find("src/main.c"), std::string::npos) << restored.error().message;
    EXPECT_EQ(tree(ws("b")), (std::map<std::string, std::string>{{"mine.txt", "f 420 keep me"}}));
}

TEST_F(WorkspaceCheckpointTest, AManifestWhoseIdDoesNotMatchIsInvalidArgument)
{
    const std::string id = storedFull("a");
    const std::string json = m_broker.manifests[id].toJson();
    auto wrong = sandbox("b").beginRestore(checkpoint::sha256Hex("another manifest"), json);
    ASSERT_FALSE(wrong);
    EXPECT_EQ(wrong.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(wrong.error().message.find(id), std::string::npos) << wrong.error().message;
    auto notAnId = sandbox("b").beginRestore("latest", json);
    ASSERT_FALSE(notAnId);
    EXPECT_EQ(notAnId.error().code, ErrorCode::InvalidArgument);
    auto garbage = sandbox("b").beginRestore(checkpoint::sha256Hex("{"), "{");
    ASSERT_FALSE(garbage);
    EXPECT_EQ(garbage.error().code, ErrorCode::InvalidArgument);
}

TEST_F(WorkspaceCheckpointTest, PendingChunksAreReadAtMostThreeMiBACall)
{
    spit(ws("a") / "five.bin", noise(5 * kMiB, 11));
    auto t = sandbox("a").take("");
    ASSERT_TRUE(t);
    ASSERT_EQ(t->pending.size(), 5u);
    std::vector<std::string> all;
    for (const auto &p : t->pending)
        all.push_back(p.hash);
    auto first = sandbox("a").readChunks(t->token, all);
    ASSERT_TRUE(first) << first.error().message;
    EXPECT_EQ(first->size(), 3u);
    EXPECT_EQ(first->at(0).hash, all[0]);
    auto unknown = sandbox("a").readChunks(t->token, {checkpoint::sha256Hex("not pending")});
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ErrorCode::NotFound);
    auto stale = sandbox("a").readChunks("another-token", all);
    ASSERT_FALSE(stale);
    EXPECT_EQ(stale.error().code, ErrorCode::NotFound);
}

TEST_F(WorkspaceCheckpointTest, ACommitOfAnotherManifestIsRefusedAndTheBaseStays)
{
    spit(ws("a") / "x.bin", noise(100 << 10, 5));   // pending, in the spool
    auto t = sandbox("a").take("");
    ASSERT_TRUE(t);
    ASSERT_EQ(t->pending.size(), 1u);
    auto wrong = sandbox("a").commit(t->token, checkpoint::sha256Hex("not this one"));
    ASSERT_FALSE(wrong);
    EXPECT_EQ(wrong.error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(sandbox("a").baseId(), "");
    const std::string id = m_broker.store(sandbox("a"), *t);
    EXPECT_EQ(sandbox("a").baseId(), id);
    EXPECT_TRUE(sandbox("a").commit(t->token, id)) << "a repeated commit succeeds";
    // The pending chunks went with the commit.
    EXPECT_FALSE(fs::exists(spool("a")) && !fs::is_empty(spool("a")));
}

TEST_F(WorkspaceCheckpointTest, FifosAreSkippedAndCounted)
{
    ASSERT_EQ(::mkfifo((ws("a") / "pipe").c_str(), 0600), 0);
    spit(ws("a") / "x.txt", "x");
    auto t = sandbox("a").take("");
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->skipped, 1);
    const std::string id = m_broker.store(sandbox("a"), *t);
    ASSERT_EQ(m_broker.manifests[id].entries.size(), 1u);
    EXPECT_EQ(m_broker.manifests[id].entries[0].path, "x.txt");
}

TEST_F(WorkspaceCheckpointTest, OwnersAreKeptAsTheSandboxSeesThem)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "files cannot be given to other users: the test does not run as root";
    const OwnerMap a{100000, 65536}, b{300000, 65536};
    spit(ws("a") / "user.txt", "u");
    spit(ws("a") / "host.txt", "h");
    ASSERT_EQ(::chown((ws("a") / "user.txt").c_str(), 100007, 100008), 0);
    ASSERT_EQ(::chown((ws("a") / "host.txt").c_str(), 0, 0), 0);
    auto t = sandbox("a", a).take("");
    ASSERT_TRUE(t);
    const std::string id = m_broker.store(sandbox("a", a), *t);
    const auto &entries = m_broker.manifests[id].entries;
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].path, "host.txt");
    EXPECT_EQ(entries[0].uid, 65534u);   // not the sandbox's: nobody inside
    EXPECT_EQ(entries[1].uid, 7u);
    EXPECT_EQ(entries[1].gid, 8u);

    ASSERT_TRUE(m_broker.restore(sandbox("b", b), id));
    struct stat st{};
    ASSERT_EQ(::lstat((ws("b") / "user.txt").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 300007u);
    EXPECT_EQ(st.st_gid, 300008u);
    ASSERT_EQ(::lstat((ws("b") / "host.txt").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 300000u + 65534u);
}

TEST_F(WorkspaceCheckpointTest, ConcurrentCallsForOneSandboxAreSerialised)
{
    fill("a");
    WorkspaceCheckpoints &a = sandbox("a");
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int i = 0; i < 4; ++i)
        threads.emplace_back([&] {
            for (int n = 0; n < 3; ++n)
                if (!a.take(""))
                    failures++;
        });
    for (auto &t : threads)
        t.join();
    EXPECT_EQ(failures.load(), 0);
}
