// paddock-pool as a process: serves, refuses a taken port and a missing bwrap with a clear
// message, and on SIGTERM drains, releases every sandbox and exits 0.

#include "broker/pool_client/grpc_pool_client.h"
#include "tests/support/pool_temp_dir.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <cctype>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <grp.h>
#include <sstream>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <vector>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;

namespace {

int freePort()
{
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
}

// Polls until something accepts TCP connections on the port (the pool is serving).
bool waitForPort(int port)
{
    for (int i = 0; i < 400; ++i) {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr {};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<uint16_t>(port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        const bool ok = ::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0;
        ::close(fd);
        if (ok)
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
}

class PoolProcess : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_NO_FATAL_FAILURE(m_tempDir.make("paddock-pool-proc"));
        m_dir = m_tempDir.path();
        fs::create_directories(m_dir / "config/paddock");
        std::ofstream(m_dir / "config/paddock/pool.toml") << "log_level = \"warn\"\n[[tier]]\nname = \"lite\"\nwarm_count = 1\nmax_count = 4\n";
    }

    // Starts paddock-pool with XDG_CONFIG_HOME in the temp dir; stderr goes to a file.
    pid_t start(int port, const std::string &path = {}, const std::string &stateName = "state")
    {
        pid_t pid = ::fork();
        if (pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGTERM);   // a crashed test leaves no pool behind
            ::setenv("XDG_CONFIG_HOME", (m_dir / "config").c_str(), 1);
            if (!path.empty())
                ::setenv("PATH", path.c_str(), 1);
            const std::string listen = "127.0.0.1:" + std::to_string(port);
            const std::string state = (m_dir / stateName).string();
            const std::string err = (m_dir / ("stderr-" + std::to_string(::getpid()))).string();
            std::freopen(err.c_str(), "w", stderr);
            ::execl(PADDOCK_POOL_BIN, "paddock-pool", "--listen", listen.c_str(), "--state-dir", state.c_str(),
                    "--warm", "1", nullptr);
            _exit(127);
        }
        return pid;
    }

    std::string stderrOf(pid_t pid)
    {
        std::ifstream in(m_dir / ("stderr-" + std::to_string(pid)));
        return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    }

    static int waitExit(pid_t pid)
    {
        int status = 0;
        ::waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

    test::PoolTempDir m_tempDir;   // removed with the fixture
    fs::path m_dir;
};

} // namespace

TEST_F(PoolProcess, ServesThenDrainsOnSigterm)
{
    const int port = freePort();
    pid_t pid = start(port);
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(waitForPort(port)) << stderrOf(pid);
    auto client = pool_client::makeGrpcPoolClient("proc", "127.0.0.1:" + std::to_string(port));
    Result<pool_client::PoolStatus> status;
    for (int i = 0; i < 200 && !(status = client->status()); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(status) << status.error().message;
    EXPECT_EQ(status->tiers.at(0).max, 4);   // from pool.toml under XDG_CONFIG_HOME

    auto claimed = client->claim("lite", "s", "k");
    ASSERT_TRUE(claimed) << claimed.error().message;
    pool_client::ExecSpec spec;
    spec.sandboxId = claimed->sandboxId;
    spec.argv = {"echo", "through the process"};
    auto r = client->exec(spec);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->stdoutData, "through the process\n");

    // A second instance on the same state directory, then on the same port: clear errors, and
    // the first pool's sandboxes are untouched.
    pid_t second = start(port);
    EXPECT_NE(waitExit(second), 0);
    EXPECT_NE(stderrOf(second).find("already using the state directory"), std::string::npos) << stderrOf(second);
    pid_t third = start(port, {}, "state2");
    EXPECT_NE(waitExit(third), 0);
    EXPECT_NE(stderrOf(third).find("port is taken"), std::string::npos) << stderrOf(third);
    auto again = client->exec(spec);
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again->stdoutData, "through the process\n");

    // The client stays connected: the pool must not wait for it to go away.
    // SIGTERM while an exec runs: the exec finishes (drain), then the pool exits 0.
    spec.argv = {"/bin/sh", "-c", "sleep 0.5; echo drained"};
    Result<pool_client::ExecOutcome> inFlight;
    std::thread running([&] { inFlight = client->exec(spec); });
    for (int i = 0; i < 200; ++i) {   // until the command is running inside the sandbox
        auto list = client->listDir(claimed->sandboxId, "/proc");
        int pids = 0;
        if (list)
            for (const auto &e : *list)
                pids += !e.name.empty() && std::isdigit(static_cast<unsigned char>(e.name[0])) ? 1 : 0;
        if (pids >= 6)   // init, 2 spare handlers, the busy handler, sh, sleep
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    running.join();
    ASSERT_TRUE(inFlight) << inFlight.error().message;
    EXPECT_EQ(inFlight->stdoutData, "drained\n");
    EXPECT_EQ(waitExit(pid), 0) << stderrOf(pid);
    EXPECT_TRUE(fs::is_empty(m_dir / "state/sandboxes")) << "every sandbox released and deleted";
}

TEST_F(PoolProcess, MissingBwrapIsAClearError)
{
    pid_t pid = start(freePort(), (m_dir / "empty-path").string());
    EXPECT_NE(waitExit(pid), 0);
    const std::string err = stderrOf(pid);
    EXPECT_NE(err.find("bubblewrap"), std::string::npos) << err;
}

// Bad sandbox-hardening input stops a root pool at start, naming the key and the fix, and leaves
// nothing running.
TEST_F(PoolProcess, ABadIdentityRangeOrAMissingEtcPathIsRefusedAtStart)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "the identity range is checked by root pools only";
    const std::string missing = "/etc/paddock-missing-" + std::to_string(::getpid());
    struct Case {
        std::string toml, expected;
    };
    const std::vector<Case> cases = {
        {"[sandbox_identity]\nfirst_id = 1\n", "[sandbox_identity] the range 1-67108864 holds user '"},
        {"[sandbox_identity]\ncount = 65536\n[[tier]]\nname = \"lite\"\nmax_count = 4\n",
         "raise count to at least 262144"},
        {"etc_extra = [\"" + missing + "\"]\n", "etc_extra: " + missing + " does not exist on this host"},
    };
    for (const auto &c : cases) {
        std::ofstream(m_dir / "config/paddock/pool.toml") << "log_level = \"warn\"\n" << c.toml;
        pid_t pid = start(freePort());
        EXPECT_NE(waitExit(pid), 0) << c.toml;
        const std::string err = stderrOf(pid);
        EXPECT_NE(err.find(c.expected), std::string::npos) << c.toml << "\n" << err;
        std::error_code ec;
        EXPECT_FALSE(fs::exists(m_dir / "state/sandboxes", ec)) << "nothing started: " << c.toml;
    }
}

// A pool run as an ordinary user (the user unit beside a desktop) cannot give sandboxes ids of
// their own: what holds then (docs/security.md) is that every sandbox is that user, as sandbox
// root with no capabilities, no_new_privs and the seccomp filter, seeing the pool's minimal /etc.
TEST_F(PoolProcess, AnUnprivilegedPoolsSandboxesAreItsUserWithNoCapabilities)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root to start the pool as another, ordinary user";
    constexpr uid_t kUser = 65534;   // nobody
    const fs::path state = m_dir / "user-state";
    fs::create_directories(state);
    ASSERT_EQ(::chown(state.c_str(), kUser, kUser), 0);
    std::ofstream(m_dir / "config/paddock/pool.toml")
        << "log_level = \"warn\"\n[[tier]]\nname = \"lite\"\nwarm_count = 0\nmax_count = 2\ndisk_mb = 0\n";
    const int port = freePort();
    const std::string errPath = (m_dir / "stderr-user").string();
    pid_t pid = ::fork();
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        ::setenv("XDG_CONFIG_HOME", (m_dir / "config").c_str(), 1);
        std::freopen(errPath.c_str(), "w", stderr);
        if (::setgroups(0, nullptr) != 0 || ::setgid(kUser) != 0 || ::setuid(kUser) != 0)
            _exit(126);
        const std::string listen = "127.0.0.1:" + std::to_string(port);
        ::execl(PADDOCK_POOL_BIN, "paddock-pool", "--listen", listen.c_str(), "--state-dir", state.c_str(), nullptr);
        _exit(127);
    }
    auto stderrText = [&] {
        std::ifstream in(errPath);
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    };
    ASSERT_TRUE(waitForPort(port)) << stderrText();
    auto client = pool_client::makeGrpcPoolClient("user", "127.0.0.1:" + std::to_string(port));
    auto claimed = client->claim("lite", "s", "");
    ASSERT_TRUE(claimed) << claimed.error().message << "\n" << stderrText();
    pool_client::ExecSpec spec;
    spec.sandboxId = claimed->sandboxId;
    spec.argv = {"/bin/sh", "-c",
                 "cat /proc/self/uid_map; id -u; grep -E '^(CapPrm|CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; "
                 "cat /etc/shadow 2>&1 >/dev/null | wc -l; echo x > /workspace/w && echo wrote"};
    auto r = client->exec(spec);
    ASSERT_TRUE(r) << r.error().message;
    std::istringstream fields(r->stdoutData);
    uint64_t inside = 1, host = 0, count = 0;
    fields >> inside >> host >> count;
    EXPECT_EQ(inside, 0u) << r->stdoutData;
    EXPECT_EQ(host, kUser) << "sandbox root is the pool's own user: " << r->stdoutData;
    EXPECT_EQ(count, 1u) << "and only that user is mapped";
    EXPECT_NE(r->stdoutData.find("\n0\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
                                 "NoNewPrivs:\t1\nSeccomp:\t2\n"),
              std::string::npos)
        << r->stdoutData;
    EXPECT_NE(r->stdoutData.find("1\nwrote\n"), std::string::npos) << "no /etc/shadow, and the workspace is writable: " << r->stdoutData;
    struct stat st {};
    ASSERT_EQ(::stat((state / "sandboxes" / claimed->sandboxId / "workspace" / "w").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, kUser);
    ::kill(pid, SIGTERM);
    EXPECT_EQ(waitExit(pid), 0) << stderrText();
}
