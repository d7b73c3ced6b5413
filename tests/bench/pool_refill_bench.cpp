// pool_refill_bench: how fast the pool fills a tier's warm pool (two refill workers, i.e. two
// starts in parallel), against the raw start rate of that tier's runtime: Runtime::start() until
// the init accepts requests, one at a time, without the pool (no cgroup, no bookkeeping), each
// sandbox killed right after (the kill is not timed). Prints figures; it is not a test.
//
// Budget (ARCHITECTURE.md): refill at two parallel starts >= half the runtime's raw start rate.
// Refill is measured twice per round: with disk limits (each sandbox directory a btrfs subvolume
// with a qgroup limit, docs/pool.md "Disk") and without (disk_mb = 0: plain directories), so the
// cost of the limits shows in the same run; pool start (mkfs and mount) is printed apart.
//
//   pool_refill_bench [sandboxes_per_round] [rounds]     (defaults 16, 3; runsc uses a quarter)

#include "pool/core/sandbox_pool.h"
#include "pool/runtimes/runtime.h"
#include "tests/support/pool_cgroups.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void die(const std::string &what)
{
    std::fprintf(stderr, "pool_refill_bench: %s\n", what.c_str());
    std::exit(1);
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Sandboxes per second, one start at a time, straight through the runtime.
double rawStartRate(pool::Runtime &runtime, int count, const fs::path &dir)
{
    double seconds = 0;   // starts only: the kill and the clean-up are not timed
    for (int i = 0; i < count; ++i) {
        const fs::path sb = dir / ("raw-" + std::to_string(i));
        pool::SandboxSpec spec;
        spec.id = "raw-" + std::to_string(::getpid()) + "-" + std::to_string(i);
        spec.workspaceDir = sb / "workspace";
        spec.controlDir = sb / "ctl";
        spec.runtimeDir = sb / "runtime";
        spec.initPath = PADDOCK_SANDBOX_INIT;
        fs::create_directories(spec.workspaceDir);
        fs::create_directories(spec.controlDir);
        const auto t0 = Clock::now();
        auto started = runtime.start(spec);
        seconds += since(t0);
        if (!started)
            die(runtime.name() + ": " + started.error().message);
        (*started)->kill();
        std::error_code ec;
        fs::remove_all(sb, ec);
    }
    return count / seconds;
}

// Sandboxes per second while a fresh pool fills `count` warm slots with its two refill workers.
double refillRate(const std::string &runtimeName, int count, const fs::path &dir, int64_t diskBytes, double &statusRate,
                  double &createMs)
{
    pool::PoolConfig config;
    config.stateDir = dir / "pool";
    config.initPath = PADDOCK_SANDBOX_INIT;
    config.poolId = "refill-bench-" + std::to_string(::getpid());
    config.tiers.push_back(pool::TierConfig{"t", runtimeName, count, count, 1, 1ll << 30});
    config.tiers.back().diskBytes = diskBytes;
    const auto c0 = Clock::now();
    auto created = pool::SandboxPool::create(config);
    createMs = since(c0) * 1000;
    if (!created)
        die(created.error().message);
    if (diskBytes > 0 && !(*created)->diskLimitsEnforced())
        die("no disk limits on this machine: " + (*created)->diskLimits());
    const auto t0 = Clock::now();
    (*created)->start();
    if (!(*created)->waitWarm(600000))
        die(runtimeName + ": the pool did not fill");
    const double rate = count / since(t0);
    statusRate = (*created)->stats().tiers.at(0).refillPerSecond;
    test::endPoolAndItsCgroups(*created);
    return rate;
}

} // namespace

int main(int argc, char **argv)
{
    const int perRound = argc > 1 ? std::max(4, std::atoi(argv[1])) : 16;
    const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
    spdlog::set_level(spdlog::level::warn);
    char tmpl[] = "/tmp/paddock-refill-bench-XXXXXX";
    if (!::mkdtemp(tmpl))
        die("cannot create a temporary directory");
    ::chmod(tmpl, 0711);   // sandbox uids pass through to their workspaces
    const fs::path dir = tmpl;
    std::printf("pool_refill_bench: %d rounds; refill = a fresh pool filling its warm slots with 2 parallel starts\n", rounds);
    for (const std::string runtimeName : {"bwrap", "runsc", "crun"}) {
        auto runtime = pool::makeRuntime(runtimeName);
        if (!runtime) {
            std::printf("%s: skipped: %s\n", runtimeName.c_str(), runtime.error().message.c_str());
            continue;
        }
        const int count = runtimeName == "runsc" ? std::max(4, perRound / 4) : perRound;
        std::vector<double> raw, refill, status, plain, createMs, plainCreateMs;
        for (int r = 0; r < rounds; ++r) {
            raw.push_back(rawStartRate(**runtime, count, dir / "raw"));
            double s = 0, ms = 0;
            plain.push_back(refillRate(runtimeName, count, dir / ("plain-" + std::to_string(r)), 0, s, ms));
            plainCreateMs.push_back(ms);
            refill.push_back(refillRate(runtimeName, count, dir / ("round-" + std::to_string(r)), 1ll << 30, s, ms));
            status.push_back(s);
            createMs.push_back(ms);
        }
        const double rawMedian = median(raw), refillMedian = median(refill), plainMedian = median(plain);
        std::printf("%s (%d sandboxes per round, medians):\n", runtimeName.c_str(), count);
        std::printf("  raw start rate, one at a time (Runtime::start to ready)  %7.2f /s  (%.1f ms each)\n", rawMedian,
                    1000.0 / rawMedian);
        std::printf("  pool refill rate, no disk limits (disk_mb = 0)          %7.2f /s  refill / raw: %.2f\n", plainMedian,
                    plainMedian / rawMedian);
        std::printf("  pool refill rate, 2 parallel starts (fill to warm)      %7.2f /s  (disk_mb = 1024: btrfs subvolume + qgroup)\n",
                    refillMedian);
        std::printf("  pool start (create), with / without disk limits        %7.1f / %.1f ms  (mkfs.btrfs + loop mount)\n",
                    median(createMs), median(plainCreateMs));
        std::printf("  Status.refill_per_second (2 / mean start time)          %7.2f /s\n", median(status));
        std::printf("  refill / raw: %.2f   budget >= 0.5: %s\n", refillMedian / rawMedian, refillMedian >= 0.5 * rawMedian ? "yes" : "NO");
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
