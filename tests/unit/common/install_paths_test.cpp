// install_paths: an installed program finds its helpers and data relative to its own executable,
// and the build tree (no libexec/, no share/) keeps its fallbacks. Fake prefixes in a temporary
// directory stand in for /usr and for a build tree.

#include "common/install_paths.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;

namespace {

class InstallPathsTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/paddock-install-paths-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        m_root = tmpl;
    }
    void TearDown() override
    {
        std::error_code ec;
        fs::remove_all(m_root, ec);
    }

    static void writeFile(const fs::path &file, unsigned mode)
    {
        fs::create_directories(file.parent_path());
        std::ofstream(file) << "#!/bin/sh\n";
        ::chmod(file.c_str(), mode);
    }

    fs::path m_root;
};

TEST_F(InstallPathsTest, InstalledDirectoriesAreSiblingsOfBin)
{
    const fs::path exe = "/opt/paddock/bin/paddock-pool";
    EXPECT_EQ(installedLibexecDir(exe), fs::path("/opt/paddock/libexec/paddock"));
    EXPECT_EQ(installedDataDir(exe), fs::path("/opt/paddock/share/paddock"));
}

TEST_F(InstallPathsTest, InstalledHelperComesFromLibexec)
{
    const fs::path prefix = m_root / "usr";
    writeFile(prefix / "bin/paddock-pool", 0755);
    writeFile(prefix / "libexec/paddock/paddock-sandbox-init", 0755);
    EXPECT_EQ(findHelperProgram(prefix / "bin/paddock-pool", "paddock-sandbox-init"),
              prefix / "libexec/paddock/paddock-sandbox-init");
}

TEST_F(InstallPathsTest, LibexecBeatsACopyNextToTheExecutable)
{
    const fs::path prefix = m_root / "usr";
    writeFile(prefix / "bin/paddock-pool", 0755);
    writeFile(prefix / "bin/paddock-sandbox-init", 0755);
    writeFile(prefix / "libexec/paddock/paddock-sandbox-init", 0755);
    EXPECT_EQ(findHelperProgram(prefix / "bin/paddock-pool", "paddock-sandbox-init"),
              prefix / "libexec/paddock/paddock-sandbox-init");
}

TEST_F(InstallPathsTest, BuildTreeHelperIsNextToTheExecutable)
{
    const fs::path build = m_root / "build";
    writeFile(build / "bin/paddock-pool", 0755);
    writeFile(build / "bin/paddock-sandbox-init", 0755);
    EXPECT_EQ(findHelperProgram(build / "bin/paddock-pool", "paddock-sandbox-init"),
              build / "bin/paddock-sandbox-init");
}

TEST_F(InstallPathsTest, NonExecutableOrDirectoryInLibexecIsNotTheHelper)
{
    const fs::path prefix = m_root / "usr";
    writeFile(prefix / "bin/paddock-pool", 0755);
    writeFile(prefix / "libexec/paddock/paddock-sandbox-init", 0644);
    writeFile(prefix / "libexec/paddock/other-helper/x", 0755);
    // Even for root: access(X_OK) needs at least one x bit.
    EXPECT_EQ(findHelperProgram(prefix / "bin/paddock-pool", "paddock-sandbox-init"), prefix / "bin/paddock-sandbox-init");
    EXPECT_EQ(findHelperProgram(prefix / "bin/paddock-pool", "other-helper"), prefix / "bin/other-helper");
}

TEST_F(InstallPathsTest, UnknownExecutableLooksInTheWorkingDirectory)
{
    EXPECT_EQ(findHelperProgram({}, "paddock-sandbox-init"), fs::path("./paddock-sandbox-init"));
    EXPECT_EQ(findDataDir({}, "playbooks", "/src/resources/playbooks"), fs::path("/src/resources/playbooks"));
}

TEST_F(InstallPathsTest, InstalledDataDirWinsOverTheBuildTreeFallback)
{
    const fs::path prefix = m_root / "usr";
    writeFile(prefix / "bin/paddockd", 0755);
    fs::create_directories(prefix / "share/paddock/playbooks");
    EXPECT_EQ(findDataDir(prefix / "bin/paddockd", "playbooks", "/src/resources/playbooks"),
              prefix / "share/paddock/playbooks");
}

TEST_F(InstallPathsTest, MissingDataDirFallsBackToTheBuildTree)
{
    const fs::path build = m_root / "build";
    writeFile(build / "bin/paddockd", 0755);
    EXPECT_EQ(findDataDir(build / "bin/paddockd", "playbooks", "/src/resources/playbooks"),
              fs::path("/src/resources/playbooks"));
    // A file where the directory should be is not the directory.
    writeFile(build / "share/paddock/playbooks", 0644);
    EXPECT_EQ(findDataDir(build / "bin/paddockd", "playbooks", "/src/resources/playbooks"),
              fs::path("/src/resources/playbooks"));
}

TEST_F(InstallPathsTest, CurrentExecutableIsThisTestBinary)
{
    const fs::path exe = currentExecutable();
    ASSERT_FALSE(exe.empty());
    EXPECT_TRUE(exe.is_absolute()) << exe;
    EXPECT_EQ(exe.filename(), fs::path("paddock_common_test"));
}

} // namespace
