// Every tier's isolation, for real: one in-process SandboxPool per runtime (bwrap, runsc, crun),
// real sandboxes with the real init. The same checks run against each runtime; a runtime whose
// binary is missing from this machine is skipped with a message saying so (scripts/setup-deps
// installs all three). runsc starts cost ~150-300 ms each here: the runsc pool keeps one warm
// sandbox and these tests stay few.

#include "pool/core/sandbox_pool.h"
#include "pool/init/init_client.h"
#include "pool/runtimes/oci_runtime.h"
#include "tests/support/cpu_weight.h"
#include "tests/support/loopback_listener.h"
#include "tests/support/proc_file.h"
#include "tests/support/started_pool.h"
#include "tests/support/tier_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <csignal>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <set>
#include <sstream>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;

namespace {

constexpr int64_t kMemoryLimit = 256ll << 20;
constexpr int64_t kDiskLimit = 8ll << 20;   // each sandbox directory's btrfs qgroup limit

using test::TierCase;

std::string halfTier(const TierCase &c) { return c.tier + "-half"; }

struct Harness {
    std::unique_ptr<test::StartedPool> started;
    pool::SandboxPool *sandboxPool = nullptr;
    std::string skipReason;

    explicit Harness(const TierCase &c)
    {
        // A variable only the test process has: it must never show up inside a sandbox.
        ::setenv("PADDOCK_TEST_HOST_ONLY_VAR", "leaked-if-you-see-this", 1);
        if (auto rt = pool::makeRuntime(c.runtime); !rt) {
            skipReason = "runtime '" + c.runtime + "' is not usable on this machine (" + rt.error().message +
                         "); scripts/setup-deps installs it";
            return;
        }
        const pool::TierConfig tier{.name = c.tier, .runtime = c.runtime, .warmCount = 1, .maxCount = 8, .cpu = 1,
                                    .memoryBytes = kMemoryLimit, .pids = 256, .diskBytes = kDiskLimit};
        // The same runtime at half a core, started cold when a test claims it (CpuThrottlingIsSampled).
        pool::TierConfig half = tier;
        half.name = halfTier(c);
        half.cpu = 0.5;
        half.warmCount = 0;
        half.maxCount = 1;
        started = std::make_unique<test::StartedPool>(
            "paddock-rt-test", test::testPoolConfig({tier, half}, "rt-test-" + std::to_string(::getpid())));
        sandboxPool = &started->pool();
    }
};

test::HarnessPerTier<Harness> &harnesses()
{
    // The pools make their cgroups under this process's: a weighted one, so that a sandbox gets
    // its cpu quota on a busy host (CpuThrottlingIsSampled). Made first, so it outlives the pools.
    static test::CpuWeight weight;
    static test::HarnessPerTier<Harness> all;
    return all;
}

class TierIsolation : public ::testing::TestWithParam<TierCase> {
protected:
    static void TearDownTestSuite() { harnesses().clear(); }

    void SetUp() override
    {
        Harness &h = harnesses().of(GetParam());
        if (!h.skipReason.empty())
            GTEST_SKIP() << h.skipReason;
        m_harness = &h;
        auto c = pool().claim(GetParam().tier, "isolation-test", "");
        ASSERT_TRUE(c) << c.error().message;
        EXPECT_EQ(c->runtime, GetParam().runtime);
        m_id = c->sandboxId;
    }
    void TearDown() override
    {
        if (!m_id.empty() && m_harness)
            (void)pool().release(m_id);
    }

    pool::SandboxPool &pool() { return *m_harness->sandboxPool; }

    struct Run {
        pool::InitExecResult exit;
        std::string out, err;
    };
    Run run(std::vector<std::string> argv, int64_t timeoutMs = 60000)
    {
        pool::ExecRequest req;
        req.sandboxId = m_id;
        req.argv = std::move(argv);
        req.timeoutMs = timeoutMs;
        Run result;
        auto r = pool().exec(req, [&](int stream, std::string_view chunk) { (stream == 1 ? result.out : result.err).append(chunk); });
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        if (r)
            result.exit = r->exit;
        return result;
    }
    Run sh(const std::string &line, int64_t timeoutMs = 60000) { return run({"/bin/sh", "-c", line}, timeoutMs); }

    Harness *m_harness = nullptr;
    std::string m_id;
};

// Host processes whose command line mentions `needle`.
std::vector<pid_t> processesMentioning(const std::string &needle)
{
    std::vector<pid_t> out;
    DIR *proc = ::opendir("/proc");
    while (dirent *e = proc ? ::readdir(proc) : nullptr) {
        const pid_t pid = std::atoi(e->d_name);
        if (pid <= 0 || pid == ::getpid())
            continue;
        const std::string cmdline = test::readProcFile(std::string("/proc/") + e->d_name + "/cmdline");
        if (cmdline.find(needle) != std::string::npos)
            out.push_back(pid);
    }
    if (proc)
        ::closedir(proc);
    return out;
}

} // namespace

TEST_P(TierIsolation, ProcOneIsTheInitAndTheEnvironmentIsBuiltFromNothing)
{
    ASSERT_NE(std::getenv("PADDOCK_TEST_HOST_ONLY_VAR"), nullptr);
    auto init = sh("tr '\\0' ' ' < /proc/1/cmdline");
    EXPECT_EQ(init.out.rfind("/run/paddock/paddock-sandbox-init ", 0), 0u) << init.out << init.err;
    auto env = run({"env"});
    std::set<std::string> names;
    std::istringstream lines(env.out);
    for (std::string line; std::getline(lines, line);)
        names.insert(line.substr(0, line.find('=')));
    EXPECT_EQ(names, (std::set<std::string>{"HOME", "LANG", "PATH"})) << env.out;
    EXPECT_EQ(env.out.find("leaked-if-you-see-this"), std::string::npos);
    auto caps = sh("grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status");
    EXPECT_EQ(caps.out, "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n");
}

TEST_P(TierIsolation, WritesOutsideTheWorkspaceFail)
{
    const std::string probe = "paddock-escape-" + m_id;
    for (const std::string dir : {"/usr", "/etc", "", "/run/paddock", "/bin", "/proc/sys/kernel"}) {
        auto r = sh("echo x > " + dir + "/" + probe);
        EXPECT_NE(r.exit.exitCode, 0) << "wrote into " << dir << "/";
    }
    EXPECT_NE(sh("mount -o remount,rw /usr").exit.exitCode, 0);
    EXPECT_NE(sh("echo 1 > /proc/sys/kernel/sysrq").exit.exitCode, 0);
    for (const std::string dir : {"/usr", "/etc", "/bin"}) {
        EXPECT_FALSE(fs::exists(dir + "/" + probe)) << "a sandbox wrote to the host's " << dir;
        std::error_code ec;
        fs::remove(dir + "/" + probe, ec);   // never leave the proof behind on the host
    }
    EXPECT_EQ(sh("cat /etc/shadow | wc -c").out, "0\n") << "the host's password hashes are hidden";
    EXPECT_EQ(sh("echo ok > /workspace/ok && echo ok > /tmp/ok && cat /workspace/ok /tmp/ok").out, "ok\nok\n");
    auto w = pool().writeFile(m_id, "/etc/paddock-x", "no", 0644);
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error().code, ErrorCode::PermissionDenied);
}

TEST_P(TierIsolation, TheInitsSocketCannotBeReplacedFromInside)
{
    // Under runsc the init's socket lives in a directory the sandbox can write; uid 0 inside
    // removes it and tries to listen in its place. The pool must still reach the real init.
    const char *fake = "import os, socket, time\n"
                       "try: os.unlink('/run/paddock/ctl/init.sock'); print('unlinked', flush=True)\n"
                       "except OSError as e: print('unlink refused', e.errno, flush=True)\n"
                       "s = socket.socket(socket.AF_UNIX)\n"
                       "s.bind('/run/paddock/ctl/init.sock'); s.listen(8); print('listening', flush=True)\n"
                       "time.sleep(30)\n";
    auto planted = sh(std::string("setsid python3 -c \"") + fake + "\" > /tmp/fake.out 2>&1 & sleep 1; cat /tmp/fake.out");
    auto real = run({"echo", "the real init"}, 5000);
    EXPECT_EQ(real.out, "the real init\n") << "after the agent's attempt: " << planted.out;
    EXPECT_FALSE(real.exit.timedOut);
    auto w = pool().writeFile(m_id, "still.txt", "ok", 0644);
    EXPECT_TRUE(w) << (w ? "" : w.error().message);
}

TEST_P(TierIsolation, HostLoopbackIsUnreachable)
{
    int port = 0;
    int fd = test::listenOnLoopback(port);
    ASSERT_GE(fd, 0);
    const std::string connect = "import socket; s=socket.create_connection(('127.0.0.1', " + std::to_string(port) +
                                "), timeout=2); print('connected')";
    // Control: the same program reaches the listener from the host.
    ASSERT_EQ(::system(("python3 -c \"" + connect + "\" >/dev/null 2>&1").c_str()), 0);
    auto r = run({"python3", "-c", connect});
    EXPECT_NE(r.exit.exitCode, 0) << "a sandbox reached the host's loopback: " << r.out;
    EXPECT_EQ(r.out.find("connected"), std::string::npos);
    auto devices = sh("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
    EXPECT_EQ(devices.out, "lo\n") << "only a loopback interface of its own";
    ::close(fd);
}

TEST_P(TierIsolation, TerminalInjectionIsRefused)
{
    // No controlling terminal (a session of its own), and TIOCSTI into a terminal that is not
    // the caller's controlling one needs CAP_SYS_ADMIN, which no sandbox has.
    const char *program = R"PY(
import fcntl, os, pty, termios
try:
    os.open('/dev/tty', os.O_RDWR)
    print('opened /dev/tty')
except OSError as e:
    print('no tty', e.errno)
master, slave = pty.openpty()
try:
    fcntl.ioctl(slave, termios.TIOCSTI, b'x')
    print('injected')
except OSError as e:
    print('refused', e.errno)
with open('/proc/self/stat') as f:
    print('tty_nr', f.read().rsplit(')', 1)[1].split()[4])
)PY";
    auto r = run({"python3", "-c", program});
    EXPECT_EQ(r.exit.exitCode, 0) << r.err;
    EXPECT_NE(r.out.find("no tty"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("refused"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("injected"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("tty_nr 0\n"), std::string::npos) << r.out;
}

TEST_P(TierIsolation, OomIsNamed)
{
    if (!pool().cgroupsEnforced())
        GTEST_SKIP() << "no usable cgroup hierarchy here (" << pool().cgroupLayout().statusText() << "): no memory limit to hit";
    // tail keeps the last line; /dev/zero has none, so it grows until the memory limit.
    auto oom = run({"tail", "/dev/zero"}, 120000);
    EXPECT_EQ(oom.exit.reason, "oom_killed") << "exit " << oom.exit.exitCode << " signal " << oom.exit.signal << ": " << oom.err;
    EXPECT_NE(oom.exit.exitCode, 0);
    if (GetParam().runtime != "runsc") {
        auto still = run({"echo", "still here"});
        EXPECT_EQ(still.out, "still here\n") << "the sandbox survives its command's OOM kill";
        return;
    }
    // gVisor keeps the command's memory in its own (sentry) process: the host's OOM killer
    // takes the whole sandbox, which the pool then reports as dead.
    pool::ExecRequest req;
    req.sandboxId = m_id;
    req.argv = {"true"};
    Result<pool::ExecResult> after = fail(ErrorCode::Internal, "not run");
    for (int i = 0; i < 50; ++i) {
        after = pool().exec(req, {});
        if (!after && after.error().code == ErrorCode::FailedPrecondition)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_FALSE(after);
    EXPECT_EQ(after.error().code, ErrorCode::FailedPrecondition) << after.error().message;
}

TEST_P(TierIsolation, TimeoutIsNamed)
{
    auto slow = run({"sleep", "600"}, 300);
    EXPECT_TRUE(slow.exit.timedOut);
    EXPECT_EQ(slow.exit.reason, "timeout");
    EXPECT_EQ(run({"echo", "after"}).out, "after\n");
}

TEST_P(TierIsolation, FilesAreWrittenReadAndListed)
{
    auto w = pool().writeFile(m_id, "dir/hello.txt", "hello from the host\n", 0640);
    ASSERT_TRUE(w) << w.error().message;
    EXPECT_EQ(*w, 20);
    EXPECT_EQ(sh("cat /workspace/dir/hello.txt && echo made inside > /workspace/dir/inside.txt").out, "hello from the host\n");
    auto r = pool().readFile(m_id, "/workspace/dir/inside.txt", 0);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->content, "made inside\n");
    auto list = pool().listDir(m_id, "dir");
    ASSERT_TRUE(list) << list.error().message;
    std::vector<std::string> names;
    for (const auto &e : *list)
        names.push_back(e.name);
    EXPECT_EQ(names, (std::vector<std::string>{"hello.txt", "inside.txt"}));
    // `cd` first: `ls PATH` fails under this 2022 runsc (its statx refuses AT_NO_AUTOMOUNT).
    EXPECT_EQ(sh("cd /workspace/dir && ls").out, "hello.txt\ninside.txt\n");
}

TEST_P(TierIsolation, SamplesAreTakenAndReleaseLeavesNothingBehind)
{
    ASSERT_EQ(run({"true"}).exit.exitCode, 0);
    if (pool().cgroupsEnforced()) {
        std::vector<pool::CgroupSample> samples;
        for (int i = 0; i < 40 && samples.empty(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            samples = pool().samples(m_id);
        }
        ASSERT_FALSE(samples.empty()) << "no resource sample within 4 s";
        EXPECT_GT(samples.back().memoryBytes, 0);
        EXPECT_GE(samples.back().pids, 1);
    }
    const auto cgroupDirs = pool().cgroupDirs(m_id);
    ASSERT_FALSE(processesMentioning(m_id).empty()) << "the runtime's processes name the sandbox";
    ASSERT_TRUE(pool().release(m_id));
    const std::string id = m_id;
    m_id.clear();
    for (int i = 0; i < 50 && !processesMentioning(id).empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(processesMentioning(id).empty()) << "a process of " << id << " outlived its release";
    for (const auto &dir : cgroupDirs)
        EXPECT_FALSE(fs::exists(dir)) << dir.string();
    EXPECT_FALSE(fs::exists(m_harness->started->sandboxDir(id))) << "its directory (and the runtime's state) is gone";
}

// Half a core on every runtime (whose processes all run in the sandbox's cgroup): samples read
// the cgroup's CFS throttling (cpu.stat, v1 or v2) counted from the sandbox's start. An idle
// command is throttled in next to no period; two CPU-bound loops, in most of the periods they ran.
TEST_P(TierIsolation, CpuThrottlingIsSampled)
{
    if (!pool().cgroupsEnforced())
        GTEST_SKIP() << "no cgroups here (" << pool().cgroupLayout().statusText() << "): no cpu limit to be throttled by";
    ASSERT_TRUE(pool().release(m_id));
    auto half = pool().claim(halfTier(GetParam()), "isolation-test", "");
    ASSERT_TRUE(half) << half.error().message;
    m_id = half->sandboxId;
    // The first sample taken after now.
    auto nextSample = [&] {
        const int64_t after = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch()).count();
        for (int i = 0; i < 60; ++i) {
            const auto samples = pool().samples(m_id);
            if (!samples.empty() && samples.back().unixMs > after)
                return samples.back();
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        ADD_FAILURE() << "no resource sample within 6 s";
        return pool::CgroupSample{};
    };

    ASSERT_EQ(sh("sleep 2").exit.exitCode, 0);
    const pool::CgroupSample idle = nextSample();
    ASSERT_TRUE(idle.throttling.known()) << "the cgroup has a cpu controller: cpu.stat has nr_periods";

    // Two loops: with one, a single core's share of a busy host could stay under the quota.
    const auto spinStart = std::chrono::steady_clock::now();
    ASSERT_EQ(sh("timeout 3 sh -c 'while :; do :; done' & timeout 3 sh -c 'while :; do :; done'; wait; echo spun").out,
              "spun\n");
    const double spinUs = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - spinStart).count();
    const pool::CgroupSample busy = nextSample();
    ASSERT_TRUE(busy.throttling.known());
    const pool::CpuThrottling spun = busy.throttling.since(idle.throttling);
    ASSERT_GT(spun.periods, 0);
    EXPECT_GE(spun.throttledUs, 0);
    // The quota bites only when the host gives the sandbox that much cpu. On a host whose other
    // work leaves the sandbox's cgroup less than its half core (CpuWeight could not weigh it),
    // there is nothing to see.
    const double gotCores = static_cast<double>(busy.cpuUsageUs - idle.cpuUsageUs) / spinUs;
    if (gotCores < 0.45)
        GTEST_SKIP() << "the host gave the spinning sandbox " << gotCores << " cores, under its 0.5-core quota, so it was "
                     << "throttled in only " << spun.throttledPeriods << " of " << spun.periods
                     << " periods; run this test on a less loaded host";
    std::printf("%s: idle, throttled in %lld of %lld periods; spinning at %.2f cores, in %lld of %lld\n",
                halfTier(GetParam()).c_str(), static_cast<long long>(idle.throttling.throttledPeriods),
                static_cast<long long>(idle.throttling.periods), gotCores, static_cast<long long>(spun.throttledPeriods),
                static_cast<long long>(spun.periods));
    EXPECT_GT(static_cast<double>(spun.throttledPeriods) / static_cast<double>(spun.periods), 0.5)
        << spun.throttledPeriods << " of " << spun.periods << " periods throttled while spinning at " << gotCores << " cores";
    EXPECT_GT(static_cast<double>(busy.throttling.throttledPeriods) / static_cast<double>(busy.throttling.periods), 0.5)
        << "since the sandbox started: " << busy.throttling.throttledPeriods << " of " << busy.throttling.periods;
    // Idle, next to nothing: a command's start alone may use a period's quota (runsc's exec goes
    // through its sentry), so "nothing" is relative to what two seconds of spinning gave.
    EXPECT_LT(idle.throttling.throttledPeriods * 10, spun.throttledPeriods)
        << "idle, yet throttled in " << idle.throttling.throttledPeriods << " of " << idle.throttling.periods << " periods";
}

// disk_mb = 8: 4 MiB fit, 16 MiB fail inside with EDQUOT and the exec is named disk_full; the
// sandbox goes on; a snapshot taken at the limit restores into a fresh sandbox of the tier
// (staging and swap on the same, quota'd filesystem); and a released sandbox's quota does not
// follow its slot: the next sandbox of the tier starts empty with its whole limit.
TEST_P(TierIsolation, DiskLimitIsEnforced)
{
    if (!pool().diskLimitsEnforced())
        GTEST_SKIP() << "no disk limits on this machine: " << pool().diskLimits();
    EXPECT_EQ(pool().diskLimits(), "btrfs qgroups");
    auto small = sh("head -c 4194304 /dev/zero > /workspace/small && sync /workspace/small && echo ok");
    EXPECT_EQ(small.out, "ok\n") << small.err;
    EXPECT_EQ(small.exit.exitCode, 0);
    EXPECT_GE(pool().workspaceUsedBytes(m_id), 4ll << 20);
    // sync: under gVisor the write lands in its page cache and the host's EDQUOT comes at fsync.
    auto big = sh("head -c 16777216 /dev/zero > /workspace/big && sync /workspace/big");
    EXPECT_NE(big.exit.exitCode, 0) << "16 MiB were written under an 8 MiB limit";
    EXPECT_TRUE(big.err.find("Disk quota exceeded") != std::string::npos || big.err.find("No space left") != std::string::npos)
        << big.err;
    EXPECT_EQ(big.exit.reason, "disk_full") << big.err;
    EXPECT_LE(pool().workspaceUsedBytes(m_id), kDiskLimit);
    // The post-mortem names it for the operator, with the limit and the way out.
    auto pm = pool().postMortems().get(m_id);
    ASSERT_TRUE(pm) << pm.error().message;
    EXPECT_EQ(pm->reason, "disk_full");
    if (pool().cgroupsEnforced()) {   // the sample taken at the failure carries the disk use
        ASSERT_FALSE(pm->samples.empty());
        EXPECT_GE(pm->samples.back().diskBytes, kDiskLimit - (1ll << 20));
    }
    EXPECT_NE(pm->detail.find("the workspace full: the tier's disk limit of 8 MiB"), std::string::npos) << pm->detail;
    EXPECT_EQ(pm->diskLimitBytes, kDiskLimit);
    EXPECT_EQ(run({"echo", "still here"}).out, "still here\n");
    EXPECT_EQ(sh("rm /workspace/big && wc -c < /workspace/small").out, "4194304\n");
    // A plain failure with room left is not named disk_full.
    EXPECT_EQ(run({"false"}).exit.reason, "");

    auto snap = pool().snapshot(m_id);
    ASSERT_TRUE(snap) << snap.error().message;
    ASSERT_TRUE(pool().release(m_id));
    const std::string old = m_id;
    auto next = pool().claim(GetParam().tier, "isolation-test", "");
    ASSERT_TRUE(next) << next.error().message;
    m_id = next->sandboxId;
    ASSERT_NE(m_id, old);
    EXPECT_LT(pool().workspaceUsedBytes(m_id), 1ll << 20) << "the new sandbox starts with its whole limit";
    auto restored = pool().restore(m_id, snap->ref);
    ASSERT_TRUE(restored) << restored.error().message;
    EXPECT_EQ(sh("wc -c < /workspace/small").out, "4194304\n");
    // Restored 4 MiB plus 3 more fit; the limit still holds after a restore.
    EXPECT_EQ(sh("head -c 3145728 /dev/zero > /workspace/more && sync /workspace/more && echo ok").out, "ok\n");
    EXPECT_NE(sh("head -c 8388608 /dev/zero > /workspace/over && sync /workspace/over").exit.exitCode, 0);
}

INSTANTIATE_TEST_SUITE_P(Tiers, TierIsolation, test::everyTier(), test::tierCaseName);

// Allowlist tiers on every runtime: a command's HTTP request leaves the sandbox only through the
// pool's egress proxy (the socket the runtime binds in, the init's forwarder), which refuses the
// host's loopback. Without the proxy the same request gets "connection refused" (the sandbox's
// own loopback); through it, the proxy's 403, and the host's server sees nothing. (The full
// egress matrix, in network namespaces, is tests/integration/egress_netns_test.cpp.)
class TierEgress : public ::testing::TestWithParam<TierCase> {};

TEST_P(TierEgress, RequestsGoThroughTheProxyWhichRefusesTheHostsLoopback)
{
    if (!pool::makeRuntime(GetParam().runtime))
        GTEST_SKIP() << "runtime '" << GetParam().runtime << "' is not on this machine; scripts/setup-deps installs it";
    int port = 0;
    int listenFd = test::listenOnLoopback(port);
    ASSERT_GE(listenFd, 0);
    const pool::TierConfig tier{.name = GetParam().tier, .runtime = GetParam().runtime, .warmCount = 0,
                                .network = "allowlist", .allowlist = {"allowed.test"}};
    test::InProcessPool owned(test::PoolCgroupDirs::Remove);
    ASSERT_NO_FATAL_FAILURE(
        owned.create("paddock-rt-egress", test::testPoolConfig({tier}, "rt-egress-" + std::to_string(::getpid()))));
    auto &sandboxPool = owned.pool();
    sandboxPool.start();
    auto claimed = sandboxPool.claim(tier.name, "egress-test", "");
    ASSERT_TRUE(claimed) << claimed.error().message;
    pool::ExecRequest req;
    req.sandboxId = claimed->sandboxId;
    req.argv = {"python3", "-c",
                "import urllib.request, urllib.error\n"
                "try: urllib.request.urlopen('http://127.0.0.1:" + std::to_string(port) + "/x', timeout=20); print('reached')\n"
                "except urllib.error.HTTPError as e: print('proxy said', e.code)\n"
                "except Exception as e: print('failed', e)\n"};
    req.timeoutMs = 60000;
    // The sandbox's NO_PROXY names its own loopback; this request must take the proxy.
    req.env = {{"NO_PROXY", "none.invalid"}, {"no_proxy", "none.invalid"}};
    std::string out;
    auto r = sandboxPool.exec(req, [&](int, std::string_view chunk) { out.append(chunk); });
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(out, "proxy said 403\n") << "exit " << r->exit.exitCode;
    pollfd pfd {listenFd, POLLIN, 0};
    EXPECT_EQ(::poll(&pfd, 1, 0), 0) << "the host's loopback server was reached";
    ::close(listenFd);
}

INSTANTIATE_TEST_SUITE_P(Tiers, TierEgress, test::everyTier(), test::tierCaseName);

TEST(MakeRuntime, UnknownOrMissingRuntimesAreClearStartErrors)
{
    auto unknown = pool::makeRuntime("firecracker");
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(unknown.error().message.find("known runtimes: bwrap"), std::string::npos) << unknown.error().message;

    // A runtime whose binary is not on PATH: the pool refuses to start, naming the tier and the fix.
    const std::string savedPath = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", "/nonexistent-paddock-bin", 1);
    pool::PoolConfig config = test::testPoolConfig({pool::TierConfig{.name = "standard", .runtime = "runsc"}});
    config.stateDir = fs::temp_directory_path() / ("paddock-rt-missing-" + std::to_string(::getpid()));
    auto created = pool::SandboxPool::create(config);
    ::setenv("PATH", savedPath.c_str(), 1);
    ASSERT_FALSE(created);
    EXPECT_EQ(created.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(created.error().message.find("tier 'standard'"), std::string::npos) << created.error().message;
    EXPECT_NE(created.error().message.find("apt-get install runsc"), std::string::npos) << created.error().message;
    std::error_code ec;
    fs::remove_all(config.stateDir, ec);
}

namespace {

// Every descendant of pid, from /proc (children of every thread, recursively).
std::set<pid_t> descendantsOf(pid_t pid)
{
    std::set<pid_t> out;
    std::vector<pid_t> todo = {pid};
    while (!todo.empty()) {
        const pid_t p = todo.back();
        todo.pop_back();
        const std::string taskDir = "/proc/" + std::to_string(p) + "/task";
        DIR *dir = ::opendir(taskDir.c_str());
        while (dirent *e = dir ? ::readdir(dir) : nullptr) {
            if (e->d_name[0] == '.')
                continue;
            std::ifstream in(taskDir + "/" + e->d_name + "/children");
            for (pid_t child; in >> child;)
                if (out.insert(child).second)
                    todo.push_back(child);
        }
        if (dir)
            ::closedir(dir);
    }
    return out;
}

bool alive(pid_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

} // namespace

TEST(PoolKilled, NoSandboxOfAnyRuntimeOutlivesAKillNineOfThePool)
{
    // crun leaves its container running when crun itself is killed; the init's own
    // PR_SET_PDEATHSIG and the runtime's make the whole sandbox go with a killed pool.
    std::string tiers;
    size_t tierCount = 0;
    for (const std::string runtime : {"bwrap", "runsc", "crun"})
        if (pool::makeRuntime(runtime) && ++tierCount)
            tiers += "[[tier]]\nname = \"t-" + runtime + "\"\nruntime = \"" + runtime + "\"\nwarm_count = 1\n";
    test::PoolTempDir tempDir;
    ASSERT_NO_FATAL_FAILURE(tempDir.make("paddock-rt-kill"));
    const fs::path dir = tempDir.path();
    std::ofstream(dir / "pool.toml") << "log_level = \"warn\"\n" << tiers;
    auto startPool = [&] {
        pid_t pid = ::fork();
        if (pid == 0) {
            ::execl(PADDOCK_POOL_BIN, PADDOCK_POOL_BIN, "--config", (dir / "pool.toml").c_str(), "--state-dir",
                    (dir / "state").c_str(), "--listen", "127.0.0.1:0", "--init-path", PADDOCK_SANDBOX_INIT, nullptr);
            ::_exit(127);
        }
        return pid;
    };
    // Warm: one sandbox directory per tier, and its init's socket. The sandbox directories are on
    // the pool's workspace filesystem, mounted in its private mount namespace: seen through
    // /proc/<pool>/root.
    auto warmCount = [&](pid_t pid) {
        size_t warm = 0;
        for (int i = 0; i < 300 && warm < tierCount; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            warm = 0;
            std::error_code ec;
            const fs::path seen = "/proc/" + std::to_string(pid) + "/root" + (dir / "state" / "sandboxes").string();
            for (const auto &e : fs::directory_iterator(seen, ec))
                warm += fs::exists(e.path() / "ctl" / "init.sock") ? 1 : 0;
        }
        return warm;
    };
    auto mountsUnder = [&] {
        std::ifstream in("/proc/self/mountinfo");
        size_t n = 0;
        for (std::string line; std::getline(in, line);)
            n += line.find(dir.string()) != std::string::npos ? 1 : 0;
        return n;
    };
    pid_t pool = startPool();
    ASSERT_GT(pool, 0);
    const size_t warm = warmCount(pool);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));   // the last init's handlers
    const std::set<pid_t> started = descendantsOf(pool);
    EXPECT_GE(warm, tierCount) << "the pool did not warm up";
    EXPECT_GE(started.size(), 2 * warm);
    ::kill(pool, SIGKILL);
    ::waitpid(pool, nullptr, 0);
    std::set<pid_t> left = started;
    for (int i = 0; i < 50 && !left.empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::erase_if(left, [](pid_t p) { return !alive(p); });
    }
    EXPECT_TRUE(left.empty()) << left.size() << " of the pool's " << started.size() << " sandbox processes outlived it";
    for (pid_t p : left)
        ::kill(p, SIGKILL);   // never leave them running on the host
    EXPECT_EQ(mountsUnder(), 0u) << "the killed pool's workspace filesystem is still mounted on the host";
    // The next pool on this state directory removes what the dead one left (directories, cgroups,
    // its workspace image) and comes up: warm again, then a clean SIGTERM that unmounts.
    pool = startPool();
    ASSERT_GT(pool, 0);
    EXPECT_GE(warmCount(pool), tierCount) << "the restarted pool did not warm up";
    ::kill(pool, SIGTERM);
    int status = 0;
    ::waitpid(pool, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    EXPECT_EQ(mountsUnder(), 0u);
    EXPECT_FALSE(fs::exists(dir / "state" / "workspaces.btrfs")) << "a clean shutdown deletes the workspace image";
}

TEST(SpawnPriority, SandboxesOfARealTimePoolRunAtNormalPriority)
{
    // A pool run under `chrt -f` (the benchmarks do) must not give its sandboxes real-time
    // priority: they could starve the host, and v1's cpu controller refuses real-time tasks.
    sched_param rt {};
    rt.sched_priority = 10;
    int oldPolicy = 0;
    sched_param oldParam {};
    ::pthread_getschedparam(::pthread_self(), &oldPolicy, &oldParam);
    if (::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &rt) != 0)
        GTEST_SKIP() << "cannot make this thread real-time here (needs root or CAP_SYS_NICE)";
    for (const std::string name : {"bwrap", "crun"}) {
        auto runtime = pool::makeRuntime(name);   // its spawner thread inherits SCHED_FIFO
        if (!runtime)
            continue;
        test::PoolTempDir tempDir;
        ASSERT_NO_FATAL_FAILURE(tempDir.make("paddock-rt-prio"));
        const fs::path dir = tempDir.path();
        pool::SandboxSpec spec;
        spec.id = "prio-" + std::to_string(::getpid());
        spec.workspaceDir = dir / "workspace";
        spec.controlDir = dir / "ctl";
        spec.initPath = PADDOCK_SANDBOX_INIT;
        fs::create_directories(spec.workspaceDir);
        fs::create_directories(spec.controlDir);
        auto sandbox = (*runtime)->start(spec);
        ASSERT_TRUE(sandbox) << name << ": " << sandbox.error().message;
        pool::InitExecRequest req;
        req.argv = {"python3", "-c", "import os; print(os.sched_getscheduler(0))"};
        req.timeoutMs = 30000;
        std::string out;
        auto r = pool::InitClient((*sandbox)->controlSocket()).exec(req, [&](int, std::string_view c) { out.append(c); });
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_EQ(out, std::to_string(SCHED_OTHER) + "\n") << name << ": the sandbox inherited a real-time policy";
        (*sandbox)->kill();
    }
    ::pthread_setschedparam(::pthread_self(), oldPolicy, &oldParam);
}

TEST(OciBundle, ConfigHasNoCapabilitiesNoHostEnvironmentAndAReadOnlyRoot)
{
    pool::OciBundleOptions o;
    o.bundleDir = "/b";
    o.workspaceDir = "/host/ws";
    o.initPath = "/host/init";
    o.args = {pool::kOciInitInsidePath, "--listen-fd", "3"};
    o.memoryBytes = 1 << 30;
    const std::string json = pool::ociConfigJson(o);
    EXPECT_NE(json.find("\"readonly\": true"), std::string::npos) << json;
    EXPECT_NE(json.find("\"bounding\": []"), std::string::npos) << json;
    EXPECT_NE(json.find("\"noNewPrivileges\": true"), std::string::npos);
    EXPECT_NE(json.find("\"source\": \"/host/ws\""), std::string::npos);
    EXPECT_NE(json.find("\"type\": \"network\""), std::string::npos);
    EXPECT_EQ(json.find("PADDOCK_TEST"), std::string::npos);
    EXPECT_EQ(json.find("/run/paddock/ctl"), std::string::npos) << "no control directory unless asked for";
}
