// The checkpoint manifest (checkpoint/manifest.h): ids that name content, parsing that refuses what
// a restore could be tricked by, and deltas that rebuild the manifest they were taken from.

#include "checkpoint/manifest.h"
#include "checkpoint/sha256.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace paddock::checkpoint {
namespace {

using nlohmann::json;

Entry file(const std::string &path, const std::string &content, uint32_t mode = 0644)
{
    Entry e{path, EntryType::File, mode, 0, 0, static_cast<int64_t>(content.size()), 1000, "", {}};
    if (!content.empty())
        e.chunks.push_back(sha256Hex(content));
    return e;
}

Entry dir(const std::string &path) { return {path, EntryType::Dir, 0755, 0, 0, 0, 1000, "", {}}; }

Entry link(const std::string &path, const std::string &target) { return {path, EntryType::Symlink, 0777, 0, 0, 0, 1000, target, {}}; }

Manifest sample()
{
    Manifest m{{file("src/main.c", "int main(){}"), dir("src"), file("README", "hi"), link("latest", "src/main.c")}};
    EXPECT_TRUE(m.normalise());
    return m;
}

std::string withEntry(const json &entry)
{
    return json{{"format", "paddock.manifest.v1"}, {"entries", json::array({entry})}}.dump();
}

TEST(Manifest, SortsParentsFirstAndRoundTripsWithAStableId)
{
    const Manifest m = sample();
    ASSERT_EQ(m.entries.size(), 4u);
    EXPECT_EQ(m.entries[0].path, "README");
    EXPECT_EQ(m.entries[2].path, "src");
    EXPECT_EQ(m.entries[3].path, "src/main.c");
    auto parsed = Manifest::parse(m.toJson());
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(parsed->entries, m.entries);
    EXPECT_EQ(parsed->id(), m.id());
    EXPECT_EQ(m.id(), sha256Hex(m.toJson()));
    EXPECT_EQ(m.fileBytes(), 14);
    EXPECT_EQ(m.chunkHashes().size(), 2u);
}

TEST(Manifest, AChangedModeIsAnotherManifest)
{
    Manifest a = sample();
    Manifest b = sample();
    b.entries[0].mode = 0600;
    EXPECT_NE(a.id(), b.id());
}

TEST(Manifest, RefusesPathsARestoreCouldBeTrickedBy)
{
    for (const char *path : {"/etc/passwd", "../outside", "a/../../b", "a//b", "./a", "a/.", ""}) {
        auto parsed = Manifest::parse(withEntry({{"path", path}, {"type", "dir"}, {"mode", 493}}));
        ASSERT_FALSE(parsed) << path;
        EXPECT_EQ(parsed.error().code, ErrorCode::InvalidArgument);
    }
}

TEST(Manifest, RefusesAnEntryUnderASymlinkOrWithoutItsDirectory)
{
    Manifest underLink{{link("l", "/etc"), file("l/passwd", "root")}};
    auto result = underLink.normalise();
    ASSERT_FALSE(result);
    EXPECT_NE(result.error().message.find("not a directory"), std::string::npos) << result.error().message;
    Manifest orphan{{file("missing/a", "x")}};
    EXPECT_FALSE(orphan.normalise());
    Manifest twice{{file("a", "x"), file("a", "y")}};
    EXPECT_FALSE(twice.normalise());
}

TEST(Manifest, RefusesChunkListsThatDoNotAddUp)
{
    json entry{{"path", "big"}, {"type", "file"}, {"mode", 420}, {"size", kChunkBytes + 1},
               {"chunks", json::array({sha256Hex("x")})}};
    auto parsed = Manifest::parse(withEntry(entry));
    ASSERT_FALSE(parsed);
    EXPECT_NE(parsed.error().message.find("1 chunks for"), std::string::npos) << parsed.error().message;
    entry["size"] = 1;
    entry["chunks"] = json::array({"not-a-hash"});
    EXPECT_FALSE(Manifest::parse(withEntry(entry)));
    entry["chunks"] = json::array({sha256Hex("x")});
    EXPECT_TRUE(Manifest::parse(withEntry(entry)));
    EXPECT_FALSE(Manifest::parse("{\"format\":\"something else\",\"entries\":[]}"));
    EXPECT_FALSE(Manifest::parse("not json"));
}

TEST(Manifest, AFieldOfTheWrongTypeIsRefusedNotThrown)
{
    // What a hostile pool may send: found by fuzz_checkpoint_manifest ({"format": [...]} threw).
    for (const char *text : {R"({"format":[{"path":"a"}]})", R"({"format":1,"entries":[]})"}) {
        auto manifest = Manifest::parse(text);
        ASSERT_FALSE(manifest) << text;
        EXPECT_EQ(manifest.error().code, ErrorCode::InvalidArgument);
        EXPECT_FALSE(Delta::parse(text)) << text;
    }
    const json delta{{"format", json::parse(Delta{}.toJson())["format"]}, {"base", 5}, {"changed", json::array()},
                     {"removed", json::array()}};
    auto parsed = Delta::parse(delta.dump());
    ASSERT_FALSE(parsed);
    EXPECT_NE(parsed.error().message.find("base"), std::string::npos) << parsed.error().message;
}

TEST(Manifest, ANumberOutOfRangeOrNotWholeIsRefused)
{
    // Found by fuzz_checkpoint_manifest: a mode of 1e47 was cast to uint32_t (undefined behaviour).
    for (const json &mode : {json(1e47), json(420.5), json(-1), json(int64_t{1} << 40)}) {
        auto parsed = Manifest::parse(withEntry({{"path", "src"}, {"type", "dir"}, {"mode", mode}}));
        ASSERT_FALSE(parsed) << mode;
        EXPECT_NE(parsed.error().message.find("'mode'"), std::string::npos) << parsed.error().message;
    }
    auto size = Manifest::parse(withEntry({{"path", "a"}, {"type", "file"}, {"mode", 0644}, {"size", 1e30},
                                           {"chunks", json::array()}}));
    ASSERT_FALSE(size);
    EXPECT_NE(size.error().message.find("'size'"), std::string::npos) << size.error().message;
    EXPECT_TRUE(Manifest::parse(withEntry({{"path", "src"}, {"type", "dir"}, {"mode", 0755}, {"uid", 4294967295u}})));
}

TEST(Manifest, DropsSetIdBits)
{
    auto parsed = Manifest::parse(withEntry({{"path", "tool"}, {"type", "file"}, {"mode", 04755}, {"size", 0},
                                             {"chunks", json::array()}}));
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(parsed->entries[0].mode, 0755u);
}

TEST(Delta, DiffThenApplyRebuildsTheTarget)
{
    const Manifest from = sample();
    Manifest to{{file("README", "hello"), dir("src"), dir("src/lib"), file("src/lib/x.c", "x"), file("new", "n")}};
    ASSERT_TRUE(to.normalise());
    Delta delta = diff(from, to);
    delta.base = from.id();
    EXPECT_EQ(delta.removed, (std::vector<std::string>{"latest", "src/main.c"}));
    EXPECT_EQ(delta.changed.size(), 4u);   // README changed; src/lib, src/lib/x.c and new added
    auto parsed = Delta::parse(delta.toJson());
    ASSERT_TRUE(parsed) << parsed.error().message;
    auto rebuilt = apply(from, *parsed);
    ASSERT_TRUE(rebuilt) << rebuilt.error().message;
    EXPECT_EQ(rebuilt->id(), to.id());
}

TEST(Delta, RemovingADirectoryRemovesWhatItHeld)
{
    Delta delta;
    delta.removed = {"src"};
    auto after = apply(sample(), delta);
    ASSERT_TRUE(after) << after.error().message;
    for (const auto &e : after->entries)
        EXPECT_FALSE(e.path.starts_with("src")) << e.path;
}

TEST(Delta, AnUnchangedWorkspaceIsAnEmptyDelta)
{
    EXPECT_TRUE(diff(sample(), sample()).empty());
}

TEST(Delta, RefusesADeltaThatLeavesAnOrphan)
{
    Delta delta;
    delta.changed = {file("nowhere/a", "x")};
    EXPECT_FALSE(apply(sample(), delta));
    EXPECT_FALSE(Delta::parse(R"({"format":"paddock.delta.v1","base":"xyz","changed":[],"removed":[]})"));
    EXPECT_FALSE(Delta::parse(R"({"format":"paddock.delta.v1","base":"","changed":[],"removed":["../x"]})"));
}

} // namespace
} // namespace paddock::checkpoint
