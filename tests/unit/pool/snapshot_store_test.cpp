// Workspace snapshots for real: libarchive archives in a temporary directory. A round trip keeps
// files, directories, symlinks, modes and binary content; a damaged archive and an archive with
// escaping entries (absolute paths, "..", symlinks out of the workspace) are refused with the ref
// named and the workspace left exactly as it was.

#include "pool/snapshot/snapshot_store.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;
using paddock::pool::SnapshotStore;

namespace {

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
    std::ofstream(p, std::ios::binary) << s;
}

// path -> "f:<content>", "d", or "l:<target>": a tree compared without following links.
std::map<std::string, std::string> tree(const fs::path &root)
{
    std::map<std::string, std::string> out;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
        const auto rel = fs::relative(it->path(), root).string();
        if (it->is_symlink())
            out[rel] = "l:" + fs::read_symlink(it->path()).string();
        else if (it->is_directory())
            out[rel] = "d";
        else
            out[rel] = "f:" + slurp(it->path());
    }
    return out;
}

class SnapshotStoreTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/paddock-snapshot-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
        auto store = SnapshotStore::open(m_dir / "snapshots");
        ASSERT_TRUE(store) << store.error().message;
        m_store = std::move(*store);
        fs::create_directories(m_dir / "ws");
        fs::create_directories(m_dir / "scratch");
    }
    void TearDown() override
    {
        std::error_code ec;
        fs::remove_all(m_dir, ec);
    }

    void fillWorkspace()
    {
        spit(m_dir / "ws/hello.txt", "hello\n");
        std::string binary;
        for (int i = 0; i < 300000; ++i)
            binary.push_back(static_cast<char>(i * 7 % 256));
        spit(m_dir / "ws/src/data.bin", binary);
        spit(m_dir / "ws/src/deep/er/main.c", "int main(void) { return 0; }\n");
        fs::create_directories(m_dir / "ws/empty");
        fs::create_symlink("src/deep", m_dir / "ws/shortcut");
        ::chmod((m_dir / "ws/hello.txt").c_str(), 0755);
    }

    // An archive written by hand, for what the pool would never write.
    std::string craft(const std::string &ref, const std::vector<std::tuple<std::string, int, std::string>> &entries)
    {
        const fs::path path = m_dir / "snapshots" / (ref + ".tar.zst");
        struct archive *a = archive_write_new();
        archive_write_add_filter_zstd(a);
        archive_write_set_format_pax_restricted(a);
        EXPECT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
        for (const auto &[name, type, data] : entries) {
            archive_entry *e = archive_entry_new();
            archive_entry_set_pathname(e, name.c_str());
            archive_entry_set_filetype(e, static_cast<unsigned>(type));
            archive_entry_set_perm(e, 0644);
            if (type == AE_IFLNK) {
                archive_entry_set_symlink(e, data.c_str());
            } else if (type == AE_IFREG) {
                archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
            }
            archive_write_header(a, e);
            if (type == AE_IFREG)
                archive_write_data(a, data.data(), data.size());
            archive_entry_free(e);
        }
        archive_write_close(a);
        archive_write_free(a);
        return ref;
    }

    fs::path m_dir;
    std::unique_ptr<SnapshotStore> m_store;
};

} // namespace

TEST_F(SnapshotStoreTest, RoundTripKeepsFilesDirectoriesSymlinksAndModes)
{
    fillWorkspace();
    const auto before = tree(m_dir / "ws");
    auto snap = m_store->create(m_dir / "ws", "lite-abc");
    ASSERT_TRUE(snap) << snap.error().message;
    EXPECT_EQ(snap->ref, "lite-abc-1");
    EXPECT_GT(snap->sizeBytes, 0);
    EXPECT_EQ(snap->fileCount, 8);   // hello.txt src src/data.bin src/deep src/deep/er src/deep/er/main.c empty shortcut
    EXPECT_TRUE(fs::exists(m_dir / "snapshots/lite-abc-1.tar.zst"));
    auto second = m_store->create(m_dir / "ws", "lite-abc");
    ASSERT_TRUE(second);
    EXPECT_EQ(second->ref, "lite-abc-2");

    // The workspace changes; the restore puts the snapshot's content back, and only it.
    spit(m_dir / "ws/hello.txt", "changed");
    spit(m_dir / "ws/new-file", "x");
    fs::remove_all(m_dir / "ws/src");
    auto restored = m_store->restore("lite-abc-1", m_dir / "ws", m_dir / "scratch");
    ASSERT_TRUE(restored) << restored.error().message;
    EXPECT_EQ(tree(m_dir / "ws"), before);
    struct stat st{};
    ASSERT_EQ(::stat((m_dir / "ws/hello.txt").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0755u);
    EXPECT_TRUE(fs::is_empty(m_dir / "scratch")) << "staging and the old content are cleaned up";
}

TEST_F(SnapshotStoreTest, ListsAndReadsFilesStraightFromTheArchive)
{
    fillWorkspace();
    auto snap = m_store->create(m_dir / "ws", "lite-x");
    ASSERT_TRUE(snap);
    auto all = m_store->list(snap->ref, "");
    ASSERT_TRUE(all) << all.error().message;
    std::map<std::string, pool::SnapshotFile> byPath;
    for (const auto &e : *all)
        byPath[e.path] = e;
    ASSERT_TRUE(byPath.count("src/deep/er/main.c"));
    EXPECT_TRUE(byPath["src"].isDir);
    EXPECT_TRUE(byPath["shortcut"].isSymlink);
    EXPECT_EQ(byPath["shortcut"].symlinkTarget, "src/deep");
    EXPECT_EQ(byPath["src/data.bin"].size, 300000);

    auto src = m_store->list(snap->ref, "/src/deep");
    ASSERT_TRUE(src);
    ASSERT_EQ(src->size(), 3u);   // src/deep, src/deep/er, src/deep/er/main.c
    EXPECT_EQ(m_store->list(snap->ref, "nope").error().code, ErrorCode::NotFound);

    auto file = m_store->read(snap->ref, "src/deep/er/main.c", 0, 0);
    ASSERT_TRUE(file) << file.error().message;
    EXPECT_EQ(file->content, "int main(void) { return 0; }\n");
    EXPECT_TRUE(file->eof);

    // Chunks with offsets give back the binary file byte for byte.
    const std::string want = slurp(m_dir / "ws/src/data.bin");
    std::string got;
    for (int64_t off = 0;;) {
        auto chunk = m_store->read(snap->ref, "src/data.bin", off, 70000);
        ASSERT_TRUE(chunk);
        EXPECT_EQ(chunk->size, 300000);
        got += chunk->content;
        off += static_cast<int64_t>(chunk->content.size());
        if (chunk->eof)
            break;
    }
    EXPECT_EQ(got, want);

    EXPECT_EQ(m_store->read(snap->ref, "src", 0, 0).error().code, ErrorCode::FailedPrecondition);
    EXPECT_EQ(m_store->read(snap->ref, "missing.txt", 0, 0).error().code, ErrorCode::NotFound);
}

TEST_F(SnapshotStoreTest, UnknownAndMalformedRefs)
{
    auto r = m_store->restore("lite-nothing-1", m_dir / "ws", m_dir / "scratch");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::NotFound);
    EXPECT_NE(r.error().message.find("lite-nothing-1"), std::string::npos);
    EXPECT_EQ(m_store->list("../../etc/passwd", "").error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(m_store->read(".hidden", "x", 0, 0).error().code, ErrorCode::InvalidArgument);
}

TEST_F(SnapshotStoreTest, TruncatedOrCorruptArchiveIsRefusedAndTheWorkspaceKept)
{
    fillWorkspace();
    auto snap = m_store->create(m_dir / "ws", "lite-c");
    ASSERT_TRUE(snap);
    spit(m_dir / "ws/after.txt", "written after the snapshot");
    const auto workspace = tree(m_dir / "ws");
    const fs::path archivePath = m_dir / "snapshots" / (snap->ref + ".tar.zst");
    const std::string bytes = slurp(archivePath);

    // Truncated: caught by the size written beside it.
    spit(archivePath, bytes.substr(0, bytes.size() / 2));
    auto r = m_store->restore(snap->ref, m_dir / "ws", m_dir / "scratch");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(r.error().message.find("snapshot '" + snap->ref + "' is damaged"), std::string::npos) << r.error().message;
    EXPECT_EQ(tree(m_dir / "ws"), workspace);

    // Same size, bytes flipped in the middle: the checksum.
    std::string flipped = bytes;
    for (size_t i = flipped.size() / 2; i < flipped.size() / 2 + 64; ++i)
        flipped[i] = static_cast<char>(~flipped[i]);
    spit(archivePath, flipped);
    r = m_store->restore(snap->ref, m_dir / "ws", m_dir / "scratch");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("checksum"), std::string::npos) << r.error().message;
    EXPECT_EQ(tree(m_dir / "ws"), workspace);

    // Without the meta file, libarchive itself finds the truncation: still refused, nothing lost.
    fs::remove(m_dir / "snapshots" / (snap->ref + ".meta"));
    spit(archivePath, bytes.substr(0, bytes.size() - 40));
    r = m_store->restore(snap->ref, m_dir / "ws", m_dir / "scratch");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(r.error().message.find(snap->ref), std::string::npos);
    EXPECT_EQ(tree(m_dir / "ws"), workspace);
    EXPECT_FALSE(m_store->list(snap->ref, ""));
    EXPECT_TRUE(fs::is_empty(m_dir / "scratch"));
}

TEST_F(SnapshotStoreTest, EntriesLeadingOutsideTheWorkspaceAreRefused)
{
    spit(m_dir / "ws/keep.txt", "mine");
    const auto workspace = tree(m_dir / "ws");
    const std::vector<std::pair<std::string, std::vector<std::tuple<std::string, int, std::string>>>> cases = {
        {"absolute", {{"/tmp/paddock-escape-abs", AE_IFREG, "x"}}},
        {"dotdot", {{"a/../../escape", AE_IFREG, "x"}}},
        {"symlink-absolute", {{"link", AE_IFLNK, "/etc"}}},
        {"symlink-up", {{"a", AE_IFDIR, ""}, {"a/link", AE_IFLNK, "../../outside"}}},
        {"through-symlink", {{"ok", AE_IFLNK, "."}, {"ok/../../x", AE_IFREG, "x"}}},
    };
    for (const auto &[name, entries] : cases) {
        const std::string ref = craft("evil-" + name, entries);
        auto r = m_store->restore(ref, m_dir / "ws", m_dir / "scratch");
        ASSERT_FALSE(r) << name;
        EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition) << name;
        EXPECT_NE(r.error().message.find("snapshot '" + ref + "' cannot be restored"), std::string::npos) << r.error().message;
        EXPECT_EQ(tree(m_dir / "ws"), workspace) << name;
    }
    EXPECT_FALSE(fs::exists("/tmp/paddock-escape-abs"));
    EXPECT_FALSE(fs::exists(m_dir / "escape"));
    EXPECT_FALSE(fs::exists(m_dir / "outside"));
    // A symlink inside the workspace pointing within it is fine.
    const std::string ok = craft("fine", {{"d", AE_IFDIR, ""}, {"d/f", AE_IFREG, "x"}, {"d/l", AE_IFLNK, "f"}, {"up", AE_IFLNK, "d/../d/f"}});
    auto r = m_store->restore(ok, m_dir / "ws", m_dir / "scratch");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(fs::read_symlink(m_dir / "ws/d/l"), "f");
    EXPECT_FALSE(fs::exists(m_dir / "ws/keep.txt")) << "a restore replaces the content";
}

TEST_F(SnapshotStoreTest, ASymlinkOutOfTheWorkspaceIsArchivedNotFollowed)
{
    spit(m_dir / "outside/secret", "host file");
    fs::create_symlink(m_dir / "outside", m_dir / "ws/escape");
    fs::create_symlink(m_dir / "outside/secret", m_dir / "ws/secret-link");
    auto snap = m_store->create(m_dir / "ws", "lite-l");
    ASSERT_TRUE(snap) << snap.error().message;
    auto files = m_store->list(snap->ref, "");
    ASSERT_TRUE(files);
    ASSERT_EQ(files->size(), 2u);
    for (const auto &f : *files) {
        EXPECT_TRUE(f.isSymlink) << f.path;
        EXPECT_EQ(f.size, 0);
    }
    // And such a snapshot is refused on restore: its links lead out of the workspace.
    auto r = m_store->restore(snap->ref, m_dir / "ws", m_dir / "scratch");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("outside the workspace"), std::string::npos);
}

TEST_F(SnapshotStoreTest, RemoveDeletesArchiveAndMeta)
{
    spit(m_dir / "ws/a", "a");
    auto snap = m_store->create(m_dir / "ws", "s");
    ASSERT_TRUE(snap);
    m_store->remove(snap->ref);
    EXPECT_EQ(m_store->list(snap->ref, "").error().code, ErrorCode::NotFound);
    EXPECT_TRUE(fs::is_empty(m_dir / "snapshots"));
}

TEST_F(SnapshotStoreTest, PruneDeletesOldSnapshotsExceptTheKeptOnes)
{
    spit(m_dir / "ws/a", "a");
    auto old1 = m_store->create(m_dir / "ws", "old");
    auto old2 = m_store->create(m_dir / "ws", "old");
    auto fresh = m_store->create(m_dir / "ws", "new");
    ASSERT_TRUE(old1 && old2 && fresh);
    const auto hourAgo = fs::file_time_type::clock::now() - std::chrono::hours(2);
    fs::last_write_time(m_dir / "snapshots" / (old1->ref + ".tar.zst"), hourAgo);
    fs::last_write_time(m_dir / "snapshots" / (old2->ref + ".tar.zst"), hourAgo);
    const int64_t cutoff = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count() - 3600 * 1000;
    // old2 is held (a post-mortem's, say): only old1 goes.
    EXPECT_EQ(m_store->prune(cutoff, [&](const std::string &ref) { return ref == old2->ref; }), 1u);
    EXPECT_EQ(m_store->list(old1->ref, "").error().code, ErrorCode::NotFound);
    EXPECT_TRUE(m_store->list(old2->ref, ""));
    EXPECT_TRUE(m_store->list(fresh->ref, ""));
    EXPECT_FALSE(fs::exists(m_dir / "snapshots" / (old1->ref + ".meta")));
}
