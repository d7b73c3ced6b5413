#include "broker/secrets/secret_store.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace paddock::secrets {
namespace {

namespace fs = std::filesystem;

class SecretStoreTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        char pattern[] = "/tmp/paddock-secrets-test-XXXXXX";
        ASSERT_NE(::mkdtemp(pattern), nullptr);
        m_dir = pattern;
        m_file = m_dir / "config" / kSecretsFileName;
    }
    void TearDown() override { fs::remove_all(m_dir); }

    void writeText(const std::string &text, fs::perms mode)
    {
        fs::create_directories(m_file.parent_path());
        std::ofstream(m_file) << text;
        fs::permissions(m_file, mode);
    }

    unsigned modeOf(const fs::path &path)
    {
        struct stat st {};
        ::stat(path.c_str(), &st);
        return st.st_mode & 0777;
    }

    fs::path m_dir;
    fs::path m_file;
};

TEST_F(SecretStoreTest, AMissingFileHoldsNoSecrets)
{
    auto store = SecretStore::open(m_file);
    ASSERT_TRUE(store) << store.error().message;
    EXPECT_TRUE((*store)->list().empty());
    EXPECT_TRUE((*store)->snapshot()->redactor.empty());
    EXPECT_FALSE(fs::exists(m_file));
}

TEST_F(SecretStoreTest, SetWritesA0600FileThatReopensWithTheValue)
{
    auto store = SecretStore::open(m_file);
    ASSERT_TRUE(store);
    auto set = (*store)->set("GITHUB_TOKEN", "ghp_example_value\nwith \"quotes\" and \\ backslash");
    ASSERT_TRUE(set) << set.error().message;
    EXPECT_FALSE(*set);
    EXPECT_EQ(modeOf(m_file), 0600u);
    EXPECT_EQ(modeOf(m_file.parent_path()), 0700u);
    // Written atomically: no temporary left next to it.
    size_t files = 0;
    for ([[maybe_unused]] const auto &entry : fs::directory_iterator(m_file.parent_path()))
        ++files;
    EXPECT_EQ(files, 1u);

    auto reopened = SecretStore::open(m_file);
    ASSERT_TRUE(reopened) << reopened.error().message;
    EXPECT_EQ((*reopened)->snapshot()->values.at("GITHUB_TOKEN"), "ghp_example_value\nwith \"quotes\" and \\ backslash");
    EXPECT_EQ((*reopened)->snapshot()->redactor.redact("x ghp_example_value\nwith \"quotes\" and \\ backslash y"),
              "x [REDACTED:GITHUB_TOKEN] y");

    auto replaced = (*reopened)->set("GITHUB_TOKEN", "another-value");
    ASSERT_TRUE(replaced);
    EXPECT_TRUE(*replaced);
}

TEST_F(SecretStoreTest, ListShowsFingerprintsNeverValues)
{
    auto store = SecretStore::open(m_file);
    ASSERT_TRUE(store);
    ASSERT_TRUE((*store)->set("B_TOKEN", "value-of-b"));
    ASSERT_TRUE((*store)->set("A_TOKEN", "value-of-a"));
    const auto list = (*store)->list();
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[0].name, "A_TOKEN");
    EXPECT_EQ(list[1].name, "B_TOKEN");
    EXPECT_TRUE(list[0].fingerprint.starts_with("sha256:")) << list[0].fingerprint;
    EXPECT_EQ(list[0].fingerprint.size(), std::string("sha256:").size() + 12);
    EXPECT_NE(list[0].fingerprint, list[1].fingerprint);
    EXPECT_EQ(list[0].fingerprint.find("value"), std::string::npos);
    // The same value has the same fingerprint (so two brokers can be compared).
    EXPECT_EQ(fingerprint("value-of-a"), list[0].fingerprint);
}

TEST_F(SecretStoreTest, RemoveDeletesAndUnknownIsNotFound)
{
    auto store = SecretStore::open(m_file);
    ASSERT_TRUE(store);
    ASSERT_TRUE((*store)->set("ONE", "value-one"));
    ASSERT_TRUE((*store)->set("TWO", "value-two"));
    const auto held = (*store)->snapshot();
    ASSERT_TRUE((*store)->remove("ONE"));
    auto again = (*store)->remove("ONE");
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().code, ErrorCode::NotFound);
    EXPECT_NE(again.error().message.find("paddockctl secrets ls"), std::string::npos);
    EXPECT_EQ((*store)->unknown({"ONE", "TWO", "THREE"}), (std::vector<std::string>{"ONE", "THREE"}));
    // A snapshot taken before keeps its values: a step in progress sees one consistent set.
    EXPECT_EQ(held->values.size(), 2u);
    auto reopened = SecretStore::open(m_file);
    ASSERT_TRUE(reopened);
    EXPECT_EQ((*reopened)->snapshot()->values.size(), 1u);
}

TEST_F(SecretStoreTest, AFileOthersCanReadIsRefusedNamingTheFix)
{
    writeText("[secrets]\nTOKEN = \"some-value\"\n", fs::perms::owner_read | fs::perms::owner_write
                                                        | fs::perms::group_read | fs::perms::others_read);
    auto store = SecretStore::open(m_file);
    ASSERT_FALSE(store);
    EXPECT_EQ(store.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(store.error().message.find("0644"), std::string::npos) << store.error().message;
    EXPECT_NE(store.error().message.find("chmod 600 " + m_file.string()), std::string::npos) << store.error().message;

    fs::permissions(m_file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_write);
    EXPECT_FALSE(SecretStore::open(m_file));
    fs::permissions(m_file, fs::perms::owner_read);
    auto readOnly = SecretStore::open(m_file);
    ASSERT_TRUE(readOnly) << readOnly.error().message;
    EXPECT_EQ((*readOnly)->snapshot()->values.at("TOKEN"), "some-value");
}

TEST_F(SecretStoreTest, ASymlinkIsRefused)
{
    writeText("[secrets]\n", fs::perms::owner_read | fs::perms::owner_write);
    const auto link = m_dir / "link.toml";
    fs::create_symlink(m_file, link);
    auto store = SecretStore::open(link);
    ASSERT_FALSE(store);
    EXPECT_NE(store.error().message.find("symbolic link"), std::string::npos) << store.error().message;
}

TEST_F(SecretStoreTest, HandEditedMistakesNameTheFileAndLine)
{
    writeText("[secrets]\nGOOD = \"a-good-value\"\nBAD = 12\n", fs::perms::owner_read | fs::perms::owner_write);
    auto store = SecretStore::open(m_file);
    ASSERT_FALSE(store);
    EXPECT_NE(store.error().message.find(m_file.string() + ":3"), std::string::npos) << store.error().message;

    writeText("[secrets]\nSHORT = \"abc\"\n", fs::perms::owner_read | fs::perms::owner_write);
    store = SecretStore::open(m_file);
    ASSERT_FALSE(store);
    EXPECT_NE(store.error().message.find("at least 4"), std::string::npos) << store.error().message;

    writeText("[secrets\n", fs::perms::owner_read | fs::perms::owner_write);
    store = SecretStore::open(m_file);
    ASSERT_FALSE(store);
    EXPECT_NE(store.error().message.find("fix the TOML syntax"), std::string::npos) << store.error().message;

    writeText("token = \"x-value\"\n", fs::perms::owner_read | fs::perms::owner_write);
    store = SecretStore::open(m_file);
    ASSERT_FALSE(store);
    EXPECT_NE(store.error().message.find("[secrets]"), std::string::npos) << store.error().message;
}

TEST_F(SecretStoreTest, BadNamesAndValuesAreRefusedAndNothingIsWritten)
{
    auto store = SecretStore::open(m_file);
    ASSERT_TRUE(store);
    for (const std::string name : {"", "1ABC", "WITH-DASH", "PATH", "HOME", "has space"}) {
        auto set = (*store)->set(name, "long-enough-value");
        ASSERT_FALSE(set) << name;
        EXPECT_EQ(set.error().code, ErrorCode::InvalidArgument);
    }
    for (const std::string &value : {std::string("abc"), std::string("ab\0cd", 5), std::string("\xff\xfe\xfd\xfc"),
                                    std::string(kMaxSecretBytes + 1, 'x')}) {
        auto set = (*store)->set("NAME", value);
        ASSERT_FALSE(set) << value.size();
        EXPECT_EQ(set.error().code, ErrorCode::InvalidArgument);
    }
    auto shortOne = (*store)->set("NAME", "abc");
    EXPECT_NE(shortOne.error().message.find("at least 4"), std::string::npos) << shortOne.error().message;
    EXPECT_FALSE(fs::exists(m_file));
    EXPECT_TRUE((*store)->set("_ok_Name9", "long-enough-value"));
}

} // namespace
} // namespace paddock::secrets
