// cgroup limits of the lite tier for real: real bwrap, real init, real cgroups (v1, v2 or this
// machine's hybrid). A sandbox that allocates past its memory limit is OOM-killed and its exec
// says so; a fork bomb stops at pids.max; the cgroup goes with the sandbox.

#include "lite_pool_fixture.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <thread>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;

namespace {

constexpr int64_t kMemoryLimit = 64ll << 20;
constexpr int64_t kPidsLimit = 64;

std::string slurp(const fs::path &path)
{
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

int64_t keyed(const fs::path &path, const std::string &key)
{
    std::istringstream in(slurp(path));
    std::string k;
    int64_t v;
    while (in >> k >> v)
        if (k == key)
            return v;
    return -1;
}

// What /proc/self/cgroup and /sys/fs/cgroup say, read independently of the pool's code.
struct HostCgroups {
    bool v1Memory = false;        // a "N:...memory...:path" line and its hierarchy
    std::string v1MemoryPath;
    bool v2Mount = false;         // a cgroup2 mount at /sys/fs/cgroup or /sys/fs/cgroup/unified
    bool v2Memory = false;        // ... whose cgroup.controllers lists memory
    std::string expected() const { return v2Memory ? "v2" : v1Memory ? "v1" : "none"; }
};

HostCgroups hostCgroups()
{
    HostCgroups h;
    std::istringstream lines(slurp("/proc/self/cgroup"));
    for (std::string line; std::getline(lines, line);) {
        auto a = line.find(':'), b = line.find(':', a + 1);
        std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
        if (controllers.find(",memory,") != std::string::npos && fs::is_directory("/sys/fs/cgroup/memory")) {
            h.v1Memory = true;
            h.v1MemoryPath = line.substr(b + 1);
        }
    }
    for (const char *dir : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
        const fs::path controllers = fs::path(dir) / "cgroup.controllers";
        if (!fs::exists(controllers))
            continue;
        h.v2Mount = true;
        if ((" " + slurp(controllers)).find(" memory") != std::string::npos)
            h.v2Memory = true;
    }
    return h;
}

class CgroupLite : public LitePoolTest {
protected:
    void SetUp() override
    {
        if (::geteuid() != 0)
            GTEST_SKIP() << "cgroups cannot be written: the test does not run as root";
        if (hostCgroups().expected() == "none")
            GTEST_SKIP() << "no cgroup hierarchy with the memory controller on this host";
        ASSERT_NO_FATAL_FAILURE(createPool(kMemoryLimit, kPidsLimit));
        ASSERT_TRUE(m_pool->cgroupsEnforced()) << "running as root on a host with cgroups, the pool must enforce them";
        m_pool->start();
    }

    fs::path dirWith(const std::string &id, const std::string &file)
    {
        for (const auto &dir : m_pool->cgroupDirs(id))
            if (fs::exists(dir / file))
                return dir;
        return {};
    }
};

} // namespace

TEST(CgroupDetection, MatchesProcSelfCgroupAndSysFsCgroup)
{
    const HostCgroups host = hostCgroups();
    const pool::CgroupLayout layout = pool::detectCgroupLayout();
    EXPECT_EQ(layout.version, host.expected());
    EXPECT_EQ(layout.hybrid, host.v1Memory && host.v2Mount);
    if (layout.version == "v1") {
        ASSERT_TRUE(layout.v1Mounts.count("memory"));
        EXPECT_EQ(layout.v1Mounts.at("memory"), fs::path("/sys/fs/cgroup/memory"));
        EXPECT_EQ(layout.selfPaths.at("memory"), host.v1MemoryPath);
        EXPECT_EQ(layout.statusText(), host.v2Mount ? "v1 (hybrid)" : "v1");
    }
    if (host.v2Mount) {
        EXPECT_FALSE(layout.unifiedMount.empty());
    }
    if (layout.version == "none") {
        EXPECT_EQ(layout.statusText(), "none (no limits enforced)");
    }
}

TEST(CgroupDetection, ReadsAV2OnlyLayout)
{
    char tmpl[] = "/tmp/paddock-cgroup-detect-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    ::chmod(tmpl, 0711);   // sandbox uids pass through to their workspaces
    const fs::path dir = tmpl;
    std::ofstream(dir / "mountinfo") << "30 23 0:26 / " << (dir / "cg").string()
                                     << " rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
    std::ofstream(dir / "cgroup") << "0::/system.slice/paddock-pool.service\n";
    fs::create_directories(dir / "cg");
    std::ofstream(dir / "cg" / "cgroup.controllers") << "cpuset cpu io memory hugetlb pids rdma misc\n";
    const auto layout = pool::detectCgroupLayout(dir / "mountinfo", dir / "cgroup");
    EXPECT_EQ(layout.version, "v2");
    EXPECT_FALSE(layout.hybrid);
    EXPECT_EQ(layout.unifiedMount, dir / "cg");
    EXPECT_EQ(layout.selfPaths.at(""), "/system.slice/paddock-pool.service");
    EXPECT_EQ(layout.statusText(), "v2");
    std::error_code ec;
    fs::remove_all(dir, ec);
}

// A v2 hierarchy as plain files: the pool's own cgroup as systemd delegates it to a service
// (Delegate=yes), holding `procs`. cgroupfs creates each directory's files itself; here they are
// made up front, so what the pool writes can be read back. (This machine's controllers are bound
// to v1, so no real v2 cgroup with controllers can be made here.)
struct FakeV2Tree {
    fs::path dir;
    fs::path own;
    pool::CgroupLayout layout;

    explicit FakeV2Tree(const std::string &procs)
    {
        char tmpl[] = "/tmp/paddock-cgroup-v2-XXXXXX";
        if (!::mkdtemp(tmpl))
            std::abort();
        ::chmod(tmpl, 0711);   // sandbox uids pass through to their workspaces
        dir = tmpl;
        std::ofstream(dir / "mountinfo") << "30 23 0:26 / " << (dir / "cg").string()
                                         << " rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
        std::ofstream(dir / "cgroup") << "0::/system.slice/paddock-pool.service\n";
        own = dir / "cg/system.slice/paddock-pool.service";
        for (const fs::path &d : {dir / "cg", own, own / "pool-process", own / "paddock", own / "paddock/p1"}) {
            fs::create_directories(d);
            std::ofstream(d / "cgroup.subtree_control");
            std::ofstream(d / "cgroup.procs");
        }
        std::ofstream(dir / "cg/cgroup.controllers") << "cpu memory pids\n";
        std::ofstream(own / "cgroup.procs") << procs;
        layout = pool::detectCgroupLayout(dir / "mountinfo", dir / "cgroup");
    }
    ~FakeV2Tree()
    {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    std::string read(const fs::path &path) const
    {
        std::ifstream in(path);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
};

TEST(CgroupDelegation, APoolAloneInItsDelegatedV2CgroupMovesIntoALeafAndKeepsTheSandboxesInItsOwn)
{
    const std::string self = std::to_string(::getpid());
    FakeV2Tree tree(self + "\n");
    ASSERT_EQ(tree.layout.version, "v2");
    auto manager = pool::CgroupManager::create(tree.layout, "p1");
    ASSERT_NE(manager, nullptr);
    EXPECT_EQ(tree.read(tree.own / "pool-process/cgroup.procs"), self)
        << "moved out of the cgroup that passes controllers on";
    EXPECT_EQ(manager->poolDirs(), std::vector<fs::path>{tree.own / "paddock/p1"})
        << "the sandboxes stay inside the unit's cgroup, not the hierarchy's root";
}

TEST(CgroupDelegation, APoolBesideOtherProcessesLeavesThemWhereTheyAre)
{
    const std::string self = std::to_string(::getpid());
    FakeV2Tree tree("1\n" + self + "\n");   // a login shell's scope: not handed to the pool
    auto manager = pool::CgroupManager::create(tree.layout, "p1");
    EXPECT_EQ(tree.read(tree.own / "pool-process/cgroup.procs"), "");
}

TEST(CgroupDelegation, AHierarchyThePoolMayNotWriteMeansNoLimitsEvenWhenItsDirectoryExists)
{
    // A v1 memory hierarchy as plain files whose paddock/p1 a pool run as root left behind; a pool
    // run as a user (here: a child that drops to nobody) cannot create a cgroup in it.
    char tmpl[] = "/tmp/paddock-cgroup-v1-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    ::chmod(tmpl, 0711);   // sandbox uids pass through to their workspaces
    const fs::path dir = tmpl;
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read
                             | fs::perms::others_exec);
    std::ofstream(dir / "mountinfo") << "35 25 0:30 / " << (dir / "memory").string()
                                     << " rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,memory\n";
    std::ofstream(dir / "cgroup") << "5:memory:/\n";
    fs::create_directories(dir / "memory/paddock/p1");
    const pool::CgroupLayout layout = pool::detectCgroupLayout(dir / "mountinfo", dir / "cgroup");
    ASSERT_EQ(layout.version, "v1");
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root, to leave a directory the pool cannot write and drop to another user";

    EXPECT_NE(pool::CgroupManager::create(layout, "p1"), nullptr) << "root may create cgroups there";
    EXPECT_EQ(pool::cgroupAccessProblem(layout, "p1"), "");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (::setgid(65534) != 0 || ::setuid(65534) != 0)
            ::_exit(2);
        // --check-config says so too, without creating anything.
        if (pool::cgroupAccessProblem(layout, "p1").find("may not create cgroups under") == std::string::npos)
            ::_exit(3);
        ::_exit(pool::CgroupManager::create(layout, "p1") == nullptr ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "a pool that cannot create sandbox cgroups must say it runs without "
                                         "limits, not fail every sandbox later (exit 1: it claimed the hierarchy; "
                                         "2: could not drop to nobody; 3: the check did not say so)";
    std::error_code ec;
    fs::remove_all(dir, ec);
}

// cpu.stat as this machine's kernel (6.18) wrote it: v1's cpu controller with a 5 ms quota in 10 ms
// periods, one loop spinning for 2 s; the v2 mount beside it, which has no cpu controller here.
constexpr const char *kCpuStatV1 = "nr_periods 202\nnr_throttled 161\nthrottled_time 532505733\nnr_bursts 0\nburst_time 0\n";
constexpr const char *kCpuStatV2NoCpuController =
    "usage_usec 53943663719\nuser_usec 49295465187\nsystem_usec 4648198532\nnice_usec 3094223368\n";
// v2 with the cpu controller enabled: the same kernel's keys (Documentation/admin-guide/cgroup-v2.rst);
// not captured here, where the cpu controller is bound to v1.
constexpr const char *kCpuStatV2 = "usage_usec 1012345\nuser_usec 1008622\nsystem_usec 3723\nnice_usec 0\n"
                                   "core_sched.force_idle_usec 0\nnr_periods 205\nnr_throttled 198\n"
                                   "throttled_usec 1957023\nnr_bursts 0\nburst_usec 0\n";

TEST(CpuStat, V1CountsThrottledTimeInNanoseconds)
{
    const pool::CpuThrottling t = pool::parseCpuStat(kCpuStatV1);
    ASSERT_TRUE(t.known());
    EXPECT_EQ(t.periods, 202);
    EXPECT_EQ(t.throttledPeriods, 161);
    EXPECT_EQ(t.throttledUs, 532505);
}

TEST(CpuStat, V2CountsThrottledTimeInMicroseconds)
{
    const pool::CpuThrottling t = pool::parseCpuStat(kCpuStatV2);
    ASSERT_TRUE(t.known());
    EXPECT_EQ(t.periods, 205);
    EXPECT_EQ(t.throttledPeriods, 198);
    EXPECT_EQ(t.throttledUs, 1957023);
    // usage_usec and nr_bursts are not mistaken for the counters they start like.
    EXPECT_EQ(pool::parseCpuStat("nr_periods_x 9\nnr_periods 3\nnr_throttled 1\nthrottled_usec 7").periods, 3);
}

TEST(CpuStat, WithoutTheCpuControllerThrottlingIsUnknownNotZero)
{
    const pool::CpuThrottling t = pool::parseCpuStat(kCpuStatV2NoCpuController);
    EXPECT_FALSE(t.known());
    EXPECT_EQ(t.periods, -1);
    EXPECT_EQ(t.throttledUs, -1);
    EXPECT_FALSE(pool::parseCpuStat("").known());
}

TEST(CpuStat, CountsSinceAnEarlierReading)
{
    const pool::CpuThrottling later = pool::parseCpuStat(kCpuStatV1);
    const pool::CpuThrottling since = later.since({2, 1, 500});
    EXPECT_EQ(since.periods, 200);
    EXPECT_EQ(since.throttledPeriods, 160);
    EXPECT_EQ(since.throttledUs, 532005);
    EXPECT_FALSE(later.since({}).known()) << "an unknown start makes the difference unknown";
}

TEST_F(CgroupLite, StatusAndLimitsComeFromTheTier)
{
    EXPECT_EQ(m_pool->stats().cgroupVersion, m_pool->cgroupLayout().statusText());
    const std::string id = claim();
    ASSERT_FALSE(id.empty());
    auto dirs = m_pool->cgroupDirs(id);
    ASSERT_FALSE(dirs.empty());
    for (const auto &dir : dirs)
        EXPECT_EQ(dir.filename().string(), id);
    if (m_pool->cgroupLayout().version == "v2") {
        EXPECT_EQ(slurp(dirs[0] / "memory.max"), std::to_string(kMemoryLimit) + "\n");
        EXPECT_EQ(slurp(dirs[0] / "pids.max"), std::to_string(kPidsLimit) + "\n");
        EXPECT_EQ(slurp(dirs[0] / "cpu.max"), "10000 10000\n");   // one core: the whole 10 ms period
    } else {
        EXPECT_EQ(slurp(dirWith(id, "memory.limit_in_bytes") / "memory.limit_in_bytes"), std::to_string(kMemoryLimit) + "\n");
        EXPECT_EQ(slurp(dirWith(id, "pids.max") / "pids.max"), std::to_string(kPidsLimit) + "\n");
        EXPECT_EQ(slurp(dirWith(id, "cpu.cfs_quota_us") / "cpu.cfs_quota_us"), "10000\n");   // one core
        EXPECT_EQ(slurp(dirWith(id, "cpu.cfs_period_us") / "cpu.cfs_period_us"), "10000\n");
    }
    // Every process of the sandbox is in it, the first one (bwrap) included.
    std::string out;
    auto r = run(id, {"cat", "/proc/self/cgroup"}, 60000, &out);
    EXPECT_EQ(r.exit.exitCode, 0);
    const fs::path procs = dirWith(id, "cgroup.procs") / "cgroup.procs";
    std::istringstream pids(slurp(procs));
    int count = 0;
    for (pid_t pid; pids >> pid;)
        ++count;
    EXPECT_GE(count, 2) << "bwrap and the init (at least) are in " << procs.string();
    EXPECT_EQ(m_pool->release(id).has_value(), true);
}

TEST_F(CgroupLite, AllocationBeyondTheLimitIsNamedOomKilled)
{
    const std::string id = claim();
    ASSERT_FALSE(id.empty());
    // tail keeps the last lines; /dev/zero has no newline, so it buffers until the limit.
    auto r = run(id, {"tail", "/dev/zero"});
    EXPECT_EQ(r.exit.reason, "oom_killed");
    EXPECT_EQ(r.exit.signal, 9);
    EXPECT_EQ(r.exit.exitCode, -1);
    EXPECT_FALSE(r.exit.timedOut);
    const fs::path memory = dirWith(id, m_pool->cgroupLayout().version == "v2" ? "memory.events" : "memory.oom_control");
    EXPECT_GE(keyed(memory / (m_pool->cgroupLayout().version == "v2" ? "memory.events" : "memory.oom_control"), "oom_kill"), 1);
    // The sandbox survives its command's OOM: the init is still there.
    std::string out;
    auto after = run(id, {"echo", "still here"}, 60000, &out);
    EXPECT_EQ(after.exit.exitCode, 0);
    EXPECT_EQ(after.exit.reason, "");
    EXPECT_EQ(out, "still here\n");
}

TEST_F(CgroupLite, TimeoutIsNamed)
{
    const std::string id = claim();
    ASSERT_FALSE(id.empty());
    auto r = run(id, {"sleep", "600"}, 200);
    EXPECT_TRUE(r.exit.timedOut);
    EXPECT_EQ(r.exit.reason, "timeout");
}

TEST_F(CgroupLite, ReasonReachesTheGrpcExit)
{
    auto stub = serve();
    ASSERT_TRUE(m_server);
    const std::string id = claim();
    ASSERT_FALSE(id.empty());
    auto exec = [&](std::vector<std::string> argv, int64_t timeoutMs) {
        grpc::ClientContext ctx;
        paddock::v1::ExecRequest req;
        req.set_sandbox_id(id);
        for (auto &a : argv)
            req.add_argv(a);
        req.set_timeout_ms(timeoutMs);
        auto reader = stub->Exec(&ctx, req);
        paddock::v1::ExecResponse resp, last;
        while (reader->Read(&resp))
            if (resp.has_exit())
                last = resp;
        EXPECT_TRUE(reader->Finish().ok());
        return last.exit();
    };
    auto oom = exec({"tail", "/dev/zero"}, 120000);
    EXPECT_EQ(oom.reason(), "oom_killed");
    EXPECT_EQ(oom.signal(), 9);
    auto timeout = exec({"sleep", "600"}, 200);
    EXPECT_EQ(timeout.reason(), "timeout");
    EXPECT_TRUE(timeout.timed_out());
    auto normal = exec({"true"}, 60000);
    EXPECT_EQ(normal.reason(), "");
    EXPECT_EQ(normal.exit_code(), 0);
}

TEST_F(CgroupLite, ForkBombStopsAtPidsMax)
{
    const std::string id = claim();
    ASSERT_FALSE(id.empty());
    const fs::path pidsDir = dirWith(id, "pids.max");
    ASSERT_FALSE(pidsDir.empty());
    // Each shell forks a copy of itself in the background and recurses in the foreground: the
    // number of processes only grows until fork fails; the top shell then exits with an error
    // and the init kills its whole process group.
    std::string out;
    auto r = run(id, {"/bin/sh", "-c", "bomb() { bomb & bomb; }; bomb"}, 120000, &out);
    EXPECT_TRUE(r.exit.exitCode != 0 || r.exit.timedOut) << "the fork bomb's command must fail";
    EXPECT_GE(keyed(pidsDir / "pids.events", "max"), 1) << "the kernel refused forks at pids.max";
    const auto sample = m_pool->samples(id);
    for (const auto &s : sample)
        EXPECT_LE(s.pids, kPidsLimit);
    // The host still forks, the pool still serves: the sandbox itself runs a command again
    // (once the bomb's leftovers are gone), and a new sandbox too.
    EXPECT_EQ(std::system("true"), 0);
    std::string again;
    auto ok = run(id, {"echo", "ok"}, 60000, &again);
    EXPECT_EQ(ok.exit.exitCode, 0);
    EXPECT_EQ(again, "ok\n");
    ASSERT_TRUE(m_pool->release(id).has_value());
    const std::string other = claim();
    ASSERT_FALSE(other.empty());
    std::string hi;
    EXPECT_EQ(run(other, {"echo", "hi"}, 60000, &hi).exit.exitCode, 0);
    EXPECT_EQ(hi, "hi\n");
}

TEST_F(CgroupLite, CgroupIsRemovedOnRelease)
{
    const std::string id = claim();
    ASSERT_FALSE(id.empty());
    auto dirs = m_pool->cgroupDirs(id);
    ASSERT_FALSE(dirs.empty());
    for (const auto &dir : dirs)
        EXPECT_TRUE(fs::is_directory(dir)) << dir.string();
    // Something still running at release time goes too.
    pool::ExecRequest req;
    req.sandboxId = id;
    req.argv = {"/bin/sh", "-c", "sleep 600 & echo started"};
    ASSERT_TRUE(m_pool->exec(req, nullptr));
    ASSERT_TRUE(m_pool->release(id).has_value());
    for (const auto &dir : dirs)
        EXPECT_FALSE(fs::exists(dir)) << dir.string() << " outlived its sandbox";
    EXPECT_TRUE(m_pool->cgroupDirs(id).empty());
}

TEST_F(CgroupLite, SamplesMemoryCpuAndPidsEverySecond)
{
    const std::string id = claim();
    ASSERT_FALSE(id.empty());
    auto r = run(id, {"/bin/sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"});
    EXPECT_EQ(r.exit.exitCode, 0);
    // Wait (bounded) for two samples; the sampler ticks once a second.
    for (int i = 0; i < 200 && m_pool->samples(id).size() < 2; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto samples = m_pool->samples(id);
    ASSERT_GE(samples.size(), 2u);
    for (const auto &s : samples) {
        EXPECT_GT(s.memoryBytes, 0);
        EXPECT_GE(s.cpuUsageUs, 0);
        EXPECT_GE(s.pids, 1);
        EXPECT_LE(s.pids, kPidsLimit);
        EXPECT_GT(s.unixMs, 0);
    }
    EXPECT_LE(samples.front().cpuUsageUs, samples.back().cpuUsageUs);
    EXPECT_LE(samples.size(), pool::SandboxPool::kSamplesKept);
}

TEST_F(CgroupLite, GetSamplesAnswersForAClaimedSandboxAndNotFoundOtherwise)
{
    auto stub = serve();
    ASSERT_TRUE(m_server);
    auto get = [&](const std::string &id, int64_t after, paddock::v1::GetSamplesResponse *resp) {
        grpc::ClientContext ctx;
        paddock::v1::GetSamplesRequest req;
        req.set_sandbox_id(id);
        req.set_after_unix_ms(after);
        return stub->GetSamples(&ctx, req, resp);
    };
    const std::string id = claim();
    ASSERT_FALSE(id.empty());
    // Busy for a while so that the cpu time grows between samples; the sampler ticks once a second.
    auto r = run(id, {"/bin/sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"});
    EXPECT_EQ(r.exit.exitCode, 0);
    paddock::v1::GetSamplesResponse all;
    for (int i = 0; i < 200; ++i) {
        all.Clear();
        ASSERT_TRUE(get(id, 0, &all).ok());
        if (all.samples_size() >= 2)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_GE(all.samples_size(), 2);
    for (const auto &s : all.samples()) {
        EXPECT_GT(s.memory_bytes(), 0);
        EXPECT_GE(s.pids(), 1);
        EXPECT_GE(s.cpu_cores(), 0.0);
    }
    EXPECT_LT(all.samples(0).time_unix_ms(), all.samples(all.samples_size() - 1).time_unix_ms());
    // A one-core quota: the loop ran in CFS periods, which the samples count from the start.
    const auto &last = all.samples(all.samples_size() - 1);
    EXPECT_GT(last.cpu_periods(), 0);
    EXPECT_LE(last.cpu_throttled_periods(), last.cpu_periods());
    EXPECT_GE(last.cpu_periods(), all.samples(0).cpu_periods()) << "counted since the sandbox started, never reset";
    // Only the ones after the given time.
    const int64_t after = all.samples(0).time_unix_ms();
    paddock::v1::GetSamplesResponse newer;
    ASSERT_TRUE(get(id, after, &newer).ok());
    ASSERT_GE(newer.samples_size(), 1);
    for (const auto &s : newer.samples())
        EXPECT_GT(s.time_unix_ms(), after);

    paddock::v1::GetSamplesResponse none;
    const auto unknown = get("no-such-sandbox", 0, &none);
    EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(unknown.error_message().find("no-such-sandbox"), std::string::npos) << unknown.error_message();
    ASSERT_TRUE(m_pool->release(id).has_value());
    EXPECT_EQ(get(id, 0, &none).error_code(), grpc::StatusCode::NOT_FOUND) << "a released sandbox has no samples";
}

namespace {

// Room for a command that allocates 64 MiB without being OOM-killed.
class CgroupLiteRoomy : public CgroupLite {
protected:
    void SetUp() override
    {
        if (::geteuid() != 0)
            GTEST_SKIP() << "cgroups cannot be written: the test does not run as root";
        if (hostCgroups().expected() == "none")
            GTEST_SKIP() << "no cgroup hierarchy with the memory controller on this host";
        ASSERT_NO_FATAL_FAILURE(createPool(kRoomyMemoryLimit, kPidsLimit));
        ASSERT_TRUE(m_pool->cgroupsEnforced());
        m_pool->start();
    }
    static constexpr int64_t kRoomyMemoryLimit = 256ll << 20;
};

constexpr int64_t kAllocated = 64ll << 20;
// dd reads /dev/zero into one 64 MiB buffer, touching every page of it; the loop burns a little
// CPU. Both end well inside the pool's one-second sampling period.
const std::vector<std::string> kShortAllocation = {
    "/bin/sh", "-c", "dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"};

} // namespace

TEST_F(CgroupLiteRoomy, AShortCommandReportsItsOwnPeakMemoryAndCpuTime)
{
    const std::string id = claim();
    ASSERT_FALSE(id.empty());
    const auto big = run(id, kShortAllocation);
    EXPECT_EQ(big.exit.exitCode, 0);
    EXPECT_GE(big.exit.peakMemoryBytes, kAllocated);
    EXPECT_GT(big.exit.cpuTimeUs, 0);
    const auto small = run(id, {"true"});
    EXPECT_EQ(small.exit.exitCode, 0);
    EXPECT_GT(small.exit.peakMemoryBytes, 0);
    EXPECT_GT(small.exit.cpuTimeUs, 0);
    EXPECT_LT(small.exit.cpuTimeUs, big.exit.cpuTimeUs) << "each command counts its own CPU time, not the sandbox's so far";
    // v1's reset works for root; v2's from kernel 6.12 (older kernels refuse it, and say so).
    if (m_pool->cgroupLayout().version == "v1") {
        EXPECT_EQ(big.exit.peakMemoryScope, "command");
    } else {
        EXPECT_TRUE(big.exit.peakMemoryScope == "command" || big.exit.peakMemoryScope == "sandbox") << big.exit.peakMemoryScope;
    }
    EXPECT_EQ(small.exit.peakMemoryScope, big.exit.peakMemoryScope);
    if (small.exit.peakMemoryScope == "command") {
        EXPECT_LT(small.exit.peakMemoryBytes, kAllocated) << "the second command's peak is its own, not the first one's";
    } else {
        EXPECT_GE(small.exit.peakMemoryBytes, big.exit.peakMemoryBytes) << "without a reset the peak is the sandbox's";
    }
    std::cout << "cgroup " << m_pool->cgroupLayout().statusText() << ": 64 MiB command peak " << big.exit.peakMemoryBytes
              << " B, cpu " << big.exit.cpuTimeUs << " us; `true` peak " << small.exit.peakMemoryBytes << " B, cpu "
              << small.exit.cpuTimeUs << " us (" << small.exit.peakMemoryScope << ")\n";
}

TEST_F(CgroupLiteRoomy, CommandsThatOverlapSayTheirPeakCoversEachOther)
{
    const std::string id = claim();
    ASSERT_FALSE(id.empty());
    // The first command waits for a file the third creates; the second runs meanwhile.
    pool::ExecResult waiting;
    std::thread first([&] {
        waiting = run(id, {"/bin/sh", "-c", "touch started; while [ ! -e go ]; do sleep 0.01; done"});
    });
    bool started = false;
    for (int i = 0; i < 2000 && !started; ++i) {
        started = m_pool->readFile(id, "started", 16).has_value();
        if (!started)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(started);
    const auto beside = run(id, {"true"});
    run(id, {"touch", "go"});
    first.join();
    EXPECT_EQ(waiting.exit.exitCode, 0);
    EXPECT_EQ(waiting.exit.peakMemoryScope, "concurrent");
    EXPECT_EQ(beside.exit.peakMemoryScope, "concurrent");
    EXPECT_GT(beside.exit.peakMemoryBytes, 0);
    // Alone again: the next command's peak is its own.
    const auto alone = run(id, {"true"});
    if (m_pool->cgroupLayout().version == "v1") {
        EXPECT_EQ(alone.exit.peakMemoryScope, "command");
    }
}

TEST_F(CgroupLiteRoomy, FiguresReachTheGrpcExit)
{
    auto stub = serve();
    ASSERT_TRUE(m_server);
    const std::string id = claim();
    ASSERT_FALSE(id.empty());
    grpc::ClientContext ctx;
    paddock::v1::ExecRequest req;
    req.set_sandbox_id(id);
    for (const auto &a : kShortAllocation)
        req.add_argv(a);
    req.set_timeout_ms(120000);
    req.set_idempotency_key("short-allocation");   // the recorded result carries them too
    auto reader = stub->Exec(&ctx, req);
    paddock::v1::ExecResponse resp, last;
    while (reader->Read(&resp))
        if (resp.has_exit())
            last = resp;
    ASSERT_TRUE(reader->Finish().ok());
    EXPECT_EQ(last.exit().exit_code(), 0);
    EXPECT_GE(last.exit().peak_memory_bytes(), kAllocated);
    EXPECT_GT(last.exit().cpu_time_us(), 0);
    EXPECT_FALSE(last.exit().peak_memory_scope().empty());
}

TEST(PoolConfigTiers, LimitsNetworkAllowlistAndPriceAreReadAndChecked)
{
    char tmpl[] = "/tmp/paddock-cgroup-config-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    ::chmod(tmpl, 0711);   // sandbox uids pass through to their workspaces
    const fs::path dir = tmpl;
    std::ofstream(dir / "ok.toml") << "[[tier]]\nname = \"lite\"\nmemory_mb = 64\npids = 100\n"
                                   << "[[tier]]\nname = \"plain\"\n";
    auto ok = pool::loadPoolConfig(dir / "ok.toml", true);
    ASSERT_TRUE(ok) << ok.error().message;
    ASSERT_EQ(ok->tiers.size(), 2u);
    EXPECT_EQ(ok->tiers[0].pids, 100);
    EXPECT_EQ(ok->tiers[0].memoryBytes, 64ll << 20);
    EXPECT_EQ(ok->tiers[1].pids, 512);
    std::ofstream(dir / "bad.toml") << "[[tier]]\nname = \"lite\"\npids = 1\n";
    auto bad = pool::loadPoolConfig(dir / "bad.toml", true);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("tier.pids"), std::string::npos) << bad.error().message;

    std::ofstream(dir / "net.toml") << "[[tier]]\nname = \"standard\"\nruntime = \"runsc\"\nnetwork = \"allowlist\"\n"
                                    << "allowlist = [\"example.com:443\", \"10.9.0.0/16\"]\nprice_per_hour = 0.12\ndisk_mb = 2048\n";
    auto net = pool::loadPoolConfig(dir / "net.toml", true);
    ASSERT_TRUE(net) << net.error().message;
    EXPECT_EQ(net->tiers[0].network, "allowlist");
    EXPECT_EQ(net->tiers[0].allowlist, (std::vector<std::string>{"example.com:443", "10.9.0.0/16"}));
    EXPECT_DOUBLE_EQ(net->tiers[0].pricePerHour, 0.12);
    EXPECT_EQ(net->tiers[0].diskBytes, 2048ll << 20);
    std::ofstream(dir / "badnet.toml") << "[[tier]]\nname = \"lite\"\nnetwork = \"open\"\n";
    auto badNet = pool::loadPoolConfig(dir / "badnet.toml", true);
    ASSERT_FALSE(badNet);
    EXPECT_NE(badNet.error().message.find("\"none\" or \"allowlist\""), std::string::npos) << badNet.error().message;
    std::error_code ec;
    fs::remove_all(dir, ec);
}
