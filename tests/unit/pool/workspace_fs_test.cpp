// The workspace filesystem behind the tiers' disk_mb (pool/runtimes/workspace_fs.h), for real: a
// btrfs image on a loop device, subvolumes with qgroup limits. Needs root and btrfs; skipped
// (saying why) otherwise. The same limits inside real sandboxes of every runtime are
// TierIsolation.DiskLimitIsEnforced (pool_runtime_isolation_test.cpp).

#include "pool/runtimes/workspace_fs.h"
#include "tests/support/pool_temp_dir.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;

namespace {

constexpr int64_t kImageBytes = 1ll << 30;
constexpr int64_t kLimit = 8ll << 20;

// Writes bytes of zeros to path and fsyncs; 0 or the errno of the first failure.
int writeZeros(const fs::path &path, int64_t bytes)
{
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    std::string chunk(1 << 20, '\0');
    int err = 0;
    for (int64_t done = 0; done < bytes && err == 0;) {
        const ssize_t n = ::write(fd, chunk.data(), std::min<int64_t>(chunk.size(), bytes - done));
        if (n < 0)
            err = errno;
        else
            done += n;
    }
    if (err == 0 && ::fsync(fd) != 0)
        err = errno;
    ::close(fd);
    return err;
}

size_t mountsAt(const fs::path &dir)
{
    std::ifstream in("/proc/self/mountinfo");
    size_t n = 0;
    for (std::string line; std::getline(in, line);)
        n += line.find(" " + dir.string() + " ") != std::string::npos ? 1 : 0;
    return n;
}

class WorkspaceFsTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_NO_FATAL_FAILURE(m_tempDir.make("paddock-wsfs-test"));
        m_dir = m_tempDir.path();
        m_mount = m_dir / "sandboxes";
        fs::create_directories(m_mount);
        auto mounted = pool::WorkspaceFs::mount(m_dir / "image", m_mount, kImageBytes);
        if (!mounted)
            GTEST_SKIP() << "no workspace filesystem here: " << mounted.error().message;
        m_fs = std::move(*mounted);
    }
    void TearDown() override
    {
        m_fs.reset();
        pool::WorkspaceFs::detachStale(m_mount);
    }
    test::PoolTempDir m_tempDir;   // removed with the fixture, after TearDown has unmounted
    fs::path m_dir, m_mount;
    std::unique_ptr<pool::WorkspaceFs> m_fs;
};

} // namespace

TEST_F(WorkspaceFsTest, EachSubvolumeIsHeldToItsOwnLimit)
{
    EXPECT_EQ(mountsAt(m_mount), 1u);
    auto a = m_fs->createLimited("a", kLimit);
    ASSERT_TRUE(a) << a.error().message;
    auto b = m_fs->createLimited("b", 2 * kLimit);
    ASSERT_TRUE(b) << b.error().message;
    EXPECT_EQ(writeZeros(m_mount / "a" / "four", 4ll << 20), 0);
    EXPECT_GE(m_fs->usedBytes(*a), 4ll << 20);
    // Root with every capability is held to it too (qgroups have no CAP_SYS_RESOURCE bypass).
    EXPECT_EQ(writeZeros(m_mount / "a" / "sixteen", 16ll << 20), EDQUOT);
    EXPECT_LE(m_fs->usedBytes(*a), kLimit);
    // b has its own limit: 12 MiB fit there while a is full.
    EXPECT_EQ(writeZeros(m_mount / "b" / "twelve", 12ll << 20), 0);
    // Deleting a subvolume drops its usage; the same name made again starts empty.
    m_fs->remove("a");
    EXPECT_FALSE(fs::exists(m_mount / "a"));
    auto again = m_fs->createLimited("a", kLimit);
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_NE(*again, *a) << "a new subvolume, a new qgroup";
    EXPECT_LT(m_fs->usedBytes(*again), 1ll << 20);
    EXPECT_EQ(writeZeros(m_mount / "a" / "six", 6ll << 20), 0);
    // A rename inside a subvolume (a restore's swap) works; across two of them it does not.
    fs::create_directories(m_mount / "a" / "scratch" / "staged");
    EXPECT_EQ(::rename((m_mount / "a" / "scratch" / "staged").c_str(), (m_mount / "a" / "workspace").c_str()), 0);
}

TEST_F(WorkspaceFsTest, TheMountOfAKilledPoolIsReplacedAndACleanUnmountLeavesNothing)
{
    auto a = m_fs->createLimited("left-behind", kLimit);
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_EQ(writeZeros(m_mount / "left-behind" / "file", 1 << 20), 0);
    // A pool killed with kill -9 never unmounts: leak the object (and its descriptor) as it would.
    (void)m_fs.release();
    auto next = pool::WorkspaceFs::mount(m_dir / "image", m_mount, kImageBytes);
    ASSERT_TRUE(next) << next.error().message;
    m_fs = std::move(*next);
    EXPECT_EQ(mountsAt(m_mount), 1u) << "the stale mount was detached, not stacked under the new one";
    EXPECT_FALSE(fs::exists(m_mount / "left-behind")) << "a fresh filesystem";
    auto b = m_fs->createLimited("new", kLimit);
    ASSERT_TRUE(b) << b.error().message;
    EXPECT_EQ(writeZeros(m_mount / "new" / "big", 16ll << 20), EDQUOT);
    m_fs->remove("new");
    m_fs->unmount();
    EXPECT_EQ(mountsAt(m_mount), 0u);
    EXPECT_FALSE(fs::exists(m_dir / "image"));
}

// Without root (here: a child that dropped to nobody) there is no workspace filesystem, and the
// error says why; SandboxPool then runs without disk limits and says so (docs/pool.md "Disk").
TEST(WorkspaceFsUnavailable, NotRootIsAClearError)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "not root: the refusal is what every mount here gets";
    test::PoolTempDir tempDir;
    ASSERT_NO_FATAL_FAILURE(tempDir.make("paddock-wsfs-noroot"));
    const fs::path dir = tempDir.path();
    fs::permissions(dir, fs::perms::all);
    int pipeFds[2];
    ASSERT_EQ(::pipe(pipeFds), 0);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(pipeFds[0]);
        if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
            ::_exit(2);
        auto mounted = pool::WorkspaceFs::mount(dir / "image", dir / "sandboxes", kImageBytes);
        const std::string message = mounted ? std::string("mounted") : mounted.error().message;
        (void)!::write(pipeFds[1], message.data(), message.size());
        ::_exit(mounted ? 1 : 0);
    }
    ::close(pipeFds[1]);
    std::string message;
    char buf[512];
    for (ssize_t n; (n = ::read(pipeFds[0], buf, sizeof buf)) > 0;)
        message.append(buf, static_cast<size_t>(n));
    ::close(pipeFds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << message;
    EXPECT_NE(message.find("does not run as root"), std::string::npos) << message;
    EXPECT_EQ(mountsAt(dir / "sandboxes"), 0u);
}
