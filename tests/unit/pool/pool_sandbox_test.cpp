// The lite tier for real: an in-process SandboxPool behind the real gRPC PoolService, driven
// through the broker's gRPC PoolClient. Every sandbox is a real bwrap with the real init.

#include "broker/pool_client/grpc_pool_client.h"
#include "pool/core/sandbox_pool.h"
#include "tests/support/proc_file.h"
#include "tests/support/loopback_listener.h"
#include "tests/support/served_pool.h"
#include "tests/support/started_pool.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <set>
#include <sstream>
#include <sys/socket.h>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;

namespace {

struct PoolHarness {
    test::InProcessPool inProcess;
    std::unique_ptr<test::ServedPool> served;   // ends the server, the pool, then the service
    pool::SandboxPool *sandboxPool = nullptr;
    std::unique_ptr<pool_client::PoolClient> client;

    PoolHarness()
    {
        // A variable only the test process has: it must never show up inside a sandbox.
        ::setenv("PADDOCK_TEST_HOST_ONLY_VAR", "leaked-if-you-see-this", 1);
        const pool::TierConfig lite{"lite", "bwrap", 2, 16, 0.5, 512ll << 20};
        inProcess.createOrAbort("paddock-pool-test", test::testPoolConfig({lite}));
        sandboxPool = &inProcess.pool();
        served = std::make_unique<test::ServedPool>(inProcess);
        sandboxPool->start();
        client = pool_client::makeGrpcPoolClient("test", served->address());
    }
};

PoolHarness *g_harness = nullptr;

class LiteSandbox : public ::testing::Test {
protected:
    static void SetUpTestSuite() { g_harness = new PoolHarness(); }
    static void TearDownTestSuite()
    {
        delete g_harness;
        g_harness = nullptr;
    }

    void SetUp() override
    {
        auto c = client().claim("lite", "session-test", "");
        ASSERT_TRUE(c) << c.error().message;
        m_id = c->sandboxId;
    }
    void TearDown() override
    {
        if (!m_id.empty())
            (void)client().release(m_id);
    }

    pool_client::PoolClient &client() { return *g_harness->client; }

    pool_client::ExecOutcome sh(const std::string &line, const std::string &key = {}, int64_t timeoutMs = 60000)
    {
        pool_client::ExecSpec spec;
        spec.sandboxId = m_id;
        spec.argv = {"/bin/sh", "-c", line};
        spec.idempotencyKey = key;
        spec.timeoutMs = timeoutMs;
        auto r = client().exec(spec);
        EXPECT_TRUE(r) << line << ": " << (r ? "" : r.error().message);
        return r ? *r : pool_client::ExecOutcome{};
    }

    std::string m_id;
};

} // namespace

TEST_F(LiteSandbox, ProcOneIsTheSandboxInit)
{
    auto r = sh("tr '\\0' ' ' < /proc/1/cmdline; echo; readlink /proc/1/exe");
    EXPECT_NE(r.stdoutData.find("paddock-sandbox-init --listen-fd"), std::string::npos) << r.stdoutData;
    EXPECT_EQ(r.exitCode, 0);
}

TEST_F(LiteSandbox, EnvironmentHasOnlyPathHomeLang)
{
    ASSERT_NE(std::getenv("PADDOCK_TEST_HOST_ONLY_VAR"), nullptr);
    pool_client::ExecSpec spec;
    spec.sandboxId = m_id;
    spec.argv = {"env"};
    auto r = client().exec(spec);
    ASSERT_TRUE(r) << r.error().message;
    std::set<std::string> names;
    std::istringstream lines(r->stdoutData);
    for (std::string line; std::getline(lines, line);)
        names.insert(line.substr(0, line.find('=')));
    EXPECT_EQ(names, (std::set<std::string>{"HOME", "LANG", "PATH"})) << r->stdoutData;
    EXPECT_NE(r->stdoutData.find("HOME=/workspace"), std::string::npos);
    EXPECT_EQ(r->stdoutData.find("leaked-if-you-see-this"), std::string::npos);
}

TEST_F(LiteSandbox, HostLoopbackIsUnreachable)
{
    int port = 0;
    int fd = test::listenOnLoopback(port);
    ASSERT_GE(fd, 0);
    // bash has /dev/tcp; the listener is reachable from the host side (control).
    ASSERT_EQ(::system(("bash -c 'echo > /dev/tcp/127.0.0.1/" + std::to_string(port) + "' 2>/dev/null").c_str()), 0);
    auto r = sh("bash -c 'echo hi > /dev/tcp/127.0.0.1/" + std::to_string(port) + "'");
    EXPECT_NE(r.exitCode, 0) << "a sandbox reached the host's loopback";
    auto addrs = sh("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '");
    EXPECT_EQ(addrs.stdoutData, "lo\n") << "only a loopback interface of its own";
    ::close(fd);
}

TEST_F(LiteSandbox, WritesOutsideWorkspaceFail)
{
    EXPECT_NE(sh("touch /usr/x").exitCode, 0);
    EXPECT_NE(sh("touch /etc/x").exitCode, 0);
    EXPECT_NE(sh("touch /x").exitCode, 0);
    EXPECT_EQ(sh("touch /workspace/ok && touch /tmp/ok").exitCode, 0);
    auto w = client().writeFile(m_id, "/etc/paddock-x", "no");
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error().code, ErrorCode::PermissionDenied);
}

TEST_F(LiteSandbox, NoCapabilitiesSoReadOnlyMountsStayReadOnly)
{
    // Root inside a bwrap started by root holds every capability of its user namespace unless
    // they are dropped; with them it could remount /usr read-write and write to the host.
    auto caps = sh("grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status");
    EXPECT_EQ(caps.stdoutData, "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n");
    EXPECT_NE(sh("mount -o remount,rw,bind /usr").exitCode, 0);
    EXPECT_NE(sh("mount -o remount,rw,bind /etc").exitCode, 0);
    EXPECT_NE(sh("mount -o remount,rw /").exitCode, 0);
    const std::string probe = "/usr/paddock-escape-" + m_id;
    EXPECT_NE(sh("touch " + probe).exitCode, 0);
    EXPECT_FALSE(fs::exists(probe)) << "a sandbox wrote to the host's /usr";
    std::error_code ec;
    fs::remove(probe, ec);   // never leave the proof behind on the host
    EXPECT_EQ(sh("cat /etc/shadow | wc -c").stdoutData, "0\n") << "the host's password hashes are hidden";
}

TEST_F(LiteSandbox, CompilesAndRunsACProgram)
{
    auto w = client().writeFile(m_id, "hello.c",
                                "#include <stdio.h>\nint main(void) { printf(\"hello from %s\\n\", \"the sandbox\"); return 7; }\n");
    ASSERT_TRUE(w) << w.error().message;
    auto r = sh("cc -o hello hello.c && ./hello");
    EXPECT_EQ(r.stdoutData, "hello from the sandbox\n") << r.stderrData;
    EXPECT_EQ(r.exitCode, 7);
}

TEST_F(LiteSandbox, ExecTimeoutKillsAndReports)
{
    auto r = sh("sleep 60", "", 300);
    EXPECT_TRUE(r.timedOut);
    EXPECT_EQ(r.exitCode, -1);
    EXPECT_EQ(r.signal, SIGKILL);
    EXPECT_EQ(sh("echo alive").stdoutData, "alive\n") << "the sandbox survives a timed-out command";
}

TEST_F(LiteSandbox, ExecWithTheSameKeyRunsOnce)
{
    auto first = sh("echo run >> marker; wc -l < marker", "step-1");
    auto second = sh("echo run >> marker; wc -l < marker", "step-1");
    EXPECT_FALSE(first.replayed);
    EXPECT_TRUE(second.replayed);
    EXPECT_EQ(first.stdoutData, "1\n");
    EXPECT_EQ(second.stdoutData, "1\n");
    EXPECT_EQ(sh("wc -l < marker").stdoutData, "1\n");
    EXPECT_EQ(sh("echo run >> marker; wc -l < marker", "step-2").stdoutData, "2\n");
}

TEST_F(LiteSandbox, RepeatWhileRunningWaitsForTheFirstRun)
{
    pool_client::ExecOutcome a, b;
    std::thread t1([&] { a = sh("sleep 0.5; echo run >> marker2; echo done", "slow"); });
    std::thread t2([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        b = sh("sleep 0.5; echo run >> marker2; echo done", "slow");
    });
    t1.join();
    t2.join();
    EXPECT_EQ(a.stdoutData, "done\n");
    EXPECT_EQ(b.stdoutData, "done\n");
    EXPECT_NE(a.replayed, b.replayed) << "exactly one of the two ran";
    EXPECT_EQ(sh("wc -l < marker2").stdoutData, "1\n");
}

TEST_F(LiteSandbox, LargeStdinAndOutputStreamThroughTheExecLoop)
{
    // More stdin than a socket buffer holds (the exec loop finishes sending it as room opens)
    // and output in many frames (parsed across reads).
    pool_client::ExecSpec spec;
    spec.sandboxId = m_id;
    spec.argv = {"/bin/sh", "-c", "wc -c; head -c 3000000 /dev/zero | tr '\\0' x"};
    spec.stdinData = std::string(3 << 20, 'a');
    spec.timeoutMs = 60000;
    auto r = client().exec(spec);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->exitCode, 0);
    ASSERT_GE(r->stdoutData.size(), 3000000u);
    EXPECT_EQ(std::stoll(r->stdoutData), 3 << 20);
    EXPECT_EQ(r->stdoutData.size() - r->stdoutData.find('x'), 3000000u);
}

TEST_F(LiteSandbox, ConcurrentExecsEachGetAHandler)
{
    // More execs at once than the init keeps idle handlers: it forks more as they are taken,
    // and every handler goes back to waiting afterwards.
    constexpr int kExecs = 6;
    std::vector<pool_client::ExecOutcome> out(kExecs);
    std::vector<std::thread> threads;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kExecs; ++i)
        threads.emplace_back([&, i] { out[static_cast<size_t>(i)] = sh("sleep 0.5; echo " + std::to_string(i)); });
    for (auto &t : threads)
        t.join();
    const auto took = std::chrono::steady_clock::now() - t0;
    for (int i = 0; i < kExecs; ++i)
        EXPECT_EQ(out[static_cast<size_t>(i)].stdoutData, std::to_string(i) + "\n");
    EXPECT_LT(took, std::chrono::milliseconds(2500)) << "the execs ran concurrently";
    for (int i = 0; i < 20; ++i)
        EXPECT_EQ(sh("echo " + std::to_string(i)).stdoutData, std::to_string(i) + "\n");
    // Handlers are reused: 20 execs later the sandbox holds a handful of processes, not 20.
    auto ps = sh("ls -d /proc/[0-9]* | wc -l");
    EXPECT_LE(std::stoi(ps.stdoutData), 12) << "handlers should be reused, not accumulate";
}

TEST_F(LiteSandbox, ReadWriteAndListFiles)
{
    ASSERT_TRUE(client().writeFile(m_id, "src/lib/a.txt", "alpha", 0600));
    ASSERT_TRUE(client().writeFile(m_id, "/workspace/src/b.txt", "beta"));
    auto a = client().readFile(m_id, "/workspace/src/lib/a.txt");
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(*a, "alpha");
    auto part = client().readFile(m_id, "src/b.txt", 2);
    ASSERT_TRUE(part);
    EXPECT_EQ(*part, "be");
    auto list = client().listDir(m_id, "src");
    ASSERT_TRUE(list) << list.error().message;
    ASSERT_EQ(list->size(), 2u);
    EXPECT_EQ((*list)[0].name, "b.txt");
    EXPECT_FALSE((*list)[0].isDir);
    EXPECT_EQ((*list)[0].size, 4);
    EXPECT_EQ((*list)[1].name, "lib");
    EXPECT_TRUE((*list)[1].isDir);
    EXPECT_EQ(sh("stat -c %a src/lib/a.txt").stdoutData, "600\n");
    auto missing = client().readFile(m_id, "nope.txt");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::NotFound);
}

TEST_F(LiteSandbox, WriteThroughASymlinkOutOfTheWorkspaceIsRefused)
{
    ASSERT_EQ(sh("ln -s /tmp escape && ln -s ../tmp/f rel && ln -s /workspace/../tmp/g abs").exitCode, 0);
    for (const char *path : {"escape/x", "rel", "abs", "../tmp/y"}) {
        auto w = client().writeFile(m_id, path, "owned");
        ASSERT_FALSE(w) << path;
        EXPECT_EQ(w.error().code, ErrorCode::PermissionDenied) << path << ": " << w.error().message;
    }
    EXPECT_EQ(sh("ls /tmp | wc -l").stdoutData, "0\n");
}

TEST_F(LiteSandbox, ReleaseDeletesTheWorkspace)
{
    ASSERT_TRUE(client().writeFile(m_id, "keep.txt", "x"));
    const fs::path ws = g_harness->inProcess.sandboxDir(m_id) / "workspace";
    ASSERT_TRUE(fs::exists(ws / "keep.txt"));
    ASSERT_TRUE(client().release(m_id));
    EXPECT_FALSE(fs::exists(ws.parent_path()));
    EXPECT_TRUE(client().release(m_id)) << "a retried release succeeds";
    pool_client::ExecSpec spec;
    spec.sandboxId = m_id;
    spec.argv = {"true"};
    auto r = client().exec(spec);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::NotFound);
    EXPECT_NE(r.error().message.find("claim a new one"), std::string::npos) << r.error().message;
    m_id.clear();
}

TEST_F(LiteSandbox, ClaimWithTheSameKeyGetsTheSameSandbox)
{
    auto a = client().claim("lite", "s1", "claim-key-1");
    auto b = client().claim("lite", "s1", "claim-key-1");
    auto c = client().claim("lite", "s2", "claim-key-2");
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(a->sandboxId, b->sandboxId);
    EXPECT_NE(a->sandboxId, c->sandboxId);
    EXPECT_TRUE(client().release(a->sandboxId));
    EXPECT_TRUE(client().release(c->sandboxId));
}

TEST_F(LiteSandbox, ConcurrentClaimsWithOneKeyGetOneSandbox)
{
    std::vector<std::string> ids(8);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < ids.size(); ++i)
        threads.emplace_back([&, i] {
            auto c = client().claim("lite", "s", "concurrent-key");
            ids[i] = c ? c->sandboxId : "error: " + c.error().message;
        });
    for (auto &t : threads)
        t.join();
    for (const auto &id : ids)
        EXPECT_EQ(id, ids[0]);
    EXPECT_TRUE(client().release(ids[0]));
}

TEST_F(LiteSandbox, ErrorsNameTheProblemAndTheFix)
{
    auto tier = client().claim("gold", "s", "");
    ASSERT_FALSE(tier);
    EXPECT_EQ(tier.error().code, ErrorCode::NotFound);
    EXPECT_NE(tier.error().message.find("lite"), std::string::npos) << tier.error().message;
    auto nope = client().readFile("lite-doesnotexist", "x");
    ASSERT_FALSE(nope);
    EXPECT_EQ(nope.error().code, ErrorCode::NotFound);
    EXPECT_NE(nope.error().message.find("no sandbox 'lite-doesnotexist'"), std::string::npos);
    pool_client::ExecSpec spec;
    spec.sandboxId = m_id;
    auto empty = client().exec(spec);
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().code, ErrorCode::InvalidArgument);
}

TEST_F(LiteSandbox, StatusReportsTheTier)
{
    auto s = client().status();
    ASSERT_TRUE(s) << s.error().message;
    ASSERT_EQ(s->tiers.size(), 1u);
    EXPECT_EQ(s->tiers[0].name, "lite");
    EXPECT_EQ(s->tiers[0].runtime, "bwrap");
    EXPECT_GE(s->tiers[0].claimed, 1);
    EXPECT_EQ(s->tiers[0].max, 16);
}

TEST_F(LiteSandbox, AKilledSandboxIsReportedAsDead)
{
    // Nothing inside can kill PID 1 (the kernel drops those signals), so kill bwrap from the
    // host, as an OOM killer or an operator would.
    const std::string ws = (g_harness->inProcess.sandboxDir(m_id) / "workspace").string();
    int killed = 0;
    for (const auto &entry : fs::directory_iterator("/proc")) {
        const std::string cmdline = test::readProcFile(entry.path() / "cmdline");   // the process may be exiting
        if (cmdline.rfind("/usr/bin/bwrap", 0) == 0 && cmdline.find(ws) != std::string::npos)
            killed += ::kill(std::stoi(entry.path().filename().string()), SIGKILL) == 0;
    }
    ASSERT_EQ(killed, 1);
    pool_client::ExecSpec spec;
    spec.sandboxId = m_id;
    spec.argv = {"true"};
    Result<pool_client::ExecOutcome> r;
    for (int i = 0; i < 200; ++i) {
        r = client().exec(spec);
        if (!r && r.error().code == ErrorCode::FailedPrecondition)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::FailedPrecondition) << r.error().message;
    EXPECT_NE(r.error().message.find("has died"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("claim a new one"), std::string::npos) << r.error().message;
}

TEST_F(LiteSandbox, SandboxOutlivesTheThreadThatStartedIt)
{
    // bwrap --die-with-parent is PR_SET_PDEATHSIG, which fires when the spawning *thread* ends.
    // Cold starts run on short-lived worker threads; their sandboxes must not die with them.
    std::vector<pool::ClaimedSandbox> claims;
    std::thread([&] {
        for (int i = 0; i < 4; ++i) {
            auto c = g_harness->sandboxPool->claim("lite", "thread-test", "");
            ASSERT_TRUE(c) << c.error().message;
            claims.push_back(*c);
        }
    }).join();
    ASSERT_EQ(claims.size(), 4u);
    int cold = 0;
    for (const auto &c : claims) {
        cold += c.warm ? 0 : 1;
        pool_client::ExecSpec spec;
        spec.sandboxId = c.sandboxId;
        spec.argv = {"echo", "alive"};
        auto r = client().exec(spec);
        ASSERT_TRUE(r) << c.sandboxId << (c.warm ? " (warm): " : " (cold): ") << r.error().message;
        EXPECT_EQ(r->stdoutData, "alive\n");
        EXPECT_TRUE(client().release(c.sandboxId));
    }
    EXPECT_GE(cold, 1) << "the test needs at least one cold start to mean anything";
}
