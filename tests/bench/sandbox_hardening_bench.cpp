// What the sandbox hardening costs (ARCHITECTURE.md: at most 10%): per runtime, two in-process
// pools of one tier side by side, one hardened as shipped (own host ids, minimal /etc, seccomp) and
// one with PoolConfig::hardenSandboxes off (host root, no filter), measured interleaved in the same
// run so a busy moment of the machine hits both alike:
//   warm claim -> first `true` done, warm exec of `true`, and a cold claim (a sandbox started for
//   the claim) -> first `true` done;
// each printed as hardened / unhardened, and against the raw mechanism: posix_spawn + waitpid of
// /usr/bin/true on the host.
//
//   build/tests/bench/sandbox_hardening_bench [runs] [runtimes...]   (default 100, bwrap crun)
//
// Needs root (the identity mapping); runsc is slow here (ptrace) and is measured only when named.

#include "pool/core/sandbox_pool.h"
#include "tests/support/pool_cgroups.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <spawn.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using namespace paddock;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kSettleMs = 20;   // between iterations: a refill finishes, as between an agent's steps

double since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

[[noreturn]] void die(const std::string &what)
{
    std::fprintf(stderr, "sandbox_hardening_bench: %s\n", what.c_str());
    std::exit(1);
}

double rawSpawnMs()
{
    char *argv[] = {const_cast<char *>("/usr/bin/true"), nullptr};
    const auto t0 = Clock::now();
    pid_t pid;
    if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ) != 0)
        die("posix_spawn failed");
    ::waitpid(pid, nullptr, 0);
    return since(t0);
}

struct Side {
    std::unique_ptr<pool::SandboxPool> pool;
    std::vector<double> warmClaim, warmExec, coldClaim;
};

void execTrue(pool::SandboxPool &p, const std::string &id)
{
    pool::ExecRequest req;
    req.sandboxId = id;
    req.argv = {"/usr/bin/true"};
    req.timeoutMs = 60000;
    auto r = p.exec(req, [](int, std::string_view) {});
    if (!r || r->exit.exitCode != 0)
        die("exec `true` failed" + (r ? std::string() : ": " + r.error().message));
}

std::unique_ptr<pool::SandboxPool> makePool(const fs::path &dir, const std::string &runtime, bool harden)
{
    pool::PoolConfig config;
    config.stateDir = dir / ((harden ? "hardened-" : "plain-") + runtime);
    config.initPath = PADDOCK_SANDBOX_INIT;
    config.poolId = "hardening-bench-" + std::to_string(::getpid()) + (harden ? "-h" : "-p");
    config.hardenSandboxes = harden;
    pool::TierConfig warm{"warm", runtime, 2, 8, 0.5, 512ll << 20};
    warm.diskBytes = 0;
    pool::TierConfig cold = warm;
    cold.name = "cold";
    cold.warmCount = 0;
    config.tiers = {warm, cold};
    auto created = pool::SandboxPool::create(config);
    if (!created)
        die(created.error().message);
    (*created)->start();
    return std::move(*created);
}

void waitWarm(pool::SandboxPool &p)
{
    for (int i = 0; i < 3000; ++i) {
        const auto stats = p.stats();
        if (!stats.tiers.empty() && stats.tiers[0].warm >= stats.tiers[0].config.warmCount)
            return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    die("no warm sandbox within 30 s");
}

void measureOnce(Side &s)
{
    auto t0 = Clock::now();
    auto c = s.pool->claim("warm", "bench", "");
    if (!c)
        die(c.error().message);
    execTrue(*s.pool, c->sandboxId);
    s.warmClaim.push_back(since(t0));
    t0 = Clock::now();
    execTrue(*s.pool, c->sandboxId);
    s.warmExec.push_back(since(t0));
    (void)s.pool->release(c->sandboxId);
    t0 = Clock::now();
    auto cold = s.pool->claim("cold", "bench", "");
    if (!cold)
        die(cold.error().message);
    execTrue(*s.pool, cold->sandboxId);
    s.coldClaim.push_back(since(t0));
    (void)s.pool->release(cold->sandboxId);
}

void benchRuntime(const std::string &runtime, int runs, const fs::path &dir)
{
    if (auto rt = pool::makeRuntime(runtime); !rt) {
        std::printf("%s: skipped: %s\n", runtime.c_str(), rt.error().message.c_str());
        return;
    }
    Side hardened, plain;
    hardened.pool = makePool(dir, runtime, true);
    plain.pool = makePool(dir, runtime, false);
    waitWarm(*hardened.pool);
    waitWarm(*plain.pool);
    std::vector<double> raw;
    for (int i = 0; i < runs; ++i) {
        // Alternate which side goes first, so neither always follows the other's refill.
        Side &first = i % 2 ? plain : hardened, &second = i % 2 ? hardened : plain;
        measureOnce(first);
        std::this_thread::sleep_for(std::chrono::milliseconds(kSettleMs));
        measureOnce(second);
        std::this_thread::sleep_for(std::chrono::milliseconds(kSettleMs));
        raw.push_back(rawSpawnMs());
    }
    const double rawMs = median(raw);
    std::printf("%s, %d runs each, interleaved (medians; raw posix_spawn+wait of true: %.3f ms):\n", runtime.c_str(), runs, rawMs);
    std::printf("  %-34s %10s %10s %18s %12s\n", "", "hardened", "plain", "hardened / plain", "/ raw");
    auto row = [&](const char *name, const std::vector<double> &h, const std::vector<double> &p) {
        const double mh = median(h), mp = median(p);
        std::printf("  %-34s %7.3f ms %7.3f ms %18.3f %12.2f\n", name, mh, mp, mh / mp, mh / rawMs);
    };
    row("warm claim -> first `true` done", hardened.warmClaim, plain.warmClaim);
    row("warm exec `true`", hardened.warmExec, plain.warmExec);
    row("cold claim -> first `true` done", hardened.coldClaim, plain.coldClaim);
    const double worst = std::max({median(hardened.warmClaim) / median(plain.warmClaim),
                                   median(hardened.warmExec) / median(plain.warmExec)});
    std::printf("  budget: the warm path costs at most 10%% more hardened: %s (worst %.1f%%)\n", worst <= 1.10 ? "met" : "MISSED",
                (worst - 1) * 100);
    test::endPoolAndItsCgroups(hardened.pool);
    test::endPoolAndItsCgroups(plain.pool);
}

} // namespace

int main(int argc, char **argv)
{
    if (::geteuid() != 0)
        die("needs root: the identity mapping is a root pool's");
    const int runs = argc > 1 ? std::max(10, std::atoi(argv[1])) : 100;
    std::vector<std::string> runtimes;
    for (int i = 2; i < argc; ++i)
        runtimes.emplace_back(argv[i]);
    if (runtimes.empty())
        runtimes = {"bwrap", "crun"};
    spdlog::set_level(spdlog::level::warn);
    char tmpl[] = "/tmp/paddock-hardening-bench-XXXXXX";
    if (!::mkdtemp(tmpl))
        die("cannot create a temporary directory");
    ::chmod(tmpl, 0711);   // sandbox uids pass through to their workspaces
    const fs::path dir = tmpl;
    for (const auto &runtime : runtimes)
        benchRuntime(runtime, runs, dir);
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
