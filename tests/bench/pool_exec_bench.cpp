// pool_exec_bench: each tier's warm path against a cold start of its runtime, measured in the same
// run on the same machine. Prints figures; it is not a test. The lite tier (bwrap) in detail
// first, then every other runtime on this machine (runsc, crun): warm claim -> first `true`
// against that runtime's own cold start of `true` with the pool's bundle.
//
//   warm claim -> first command finished: Claim + Exec(`true`) through gRPC (what the broker does)
//   warm exec: Exec(`true`) on a claimed sandbox, through gRPC and directly through the init
//   cold: `bwrap <the pool's own arguments> true`, spawned and waited for
//   raw: posix_spawn + waitpid of /usr/bin/true on the host (the floor under any exec)
//   gRPC floors: a Status round trip back to back, and one after the same idle pause as a claim
//
// Budget (ARCHITECTURE.md): warm claim-to-first-command median <= 2 ms, p99 <= 10 ms, and at
// most half of a cold bwrap start; heavier tiers: warm median at most a tenth of their cold start.
// crun is a namespace runtime like bwrap (no user-space kernel in the way), so the oci tier is
// held to the lite budget, not to the heavier tiers' tenth.
//
//   pool_exec_bench [runs] [settle_ms] [oci_runs] [disk_mb]      (defaults 200, 30, 40, 1024)
//
// disk_mb is every tier's disk limit (docs/pool.md "Disk": each sandbox directory a btrfs
// subvolume with a qgroup); 0 runs the same pools on plain directories, to see what the limit costs.

#include "broker/pool_client/grpc_pool_client.h"
#include "pool/core/sandbox_pool.h"
#include "pool/runtimes/bwrap_runtime.h"
#include "pool/runtimes/oci_runtime.h"
#include "pool/server/pool_service.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>
#include <sched.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using namespace paddock;
using Clock = std::chrono::steady_clock;

int kSettleMs = 30;
int64_t kDiskBytes = 1ll << 30;

namespace {

struct Figures {
    double median = 0, p99 = 0, mean = 0;
};

Figures summarize(std::vector<double> ms)
{
    std::sort(ms.begin(), ms.end());
    Figures f;
    f.median = ms[ms.size() / 2];
    f.p99 = ms[std::min(ms.size() - 1, static_cast<size_t>(static_cast<double>(ms.size()) * 0.99))];
    for (double v : ms)
        f.mean += v;
    f.mean /= static_cast<double>(ms.size());
    return f;
}

void print(const char *name, const Figures &f)
{
    std::printf("  %-44s median %7.3f ms   p99 %7.3f ms   mean %7.3f ms\n", name, f.median, f.p99, f.mean);
}

double since(Clock::time_point t0)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

[[noreturn]] void die(const std::string &what)
{
    std::fprintf(stderr, "pool_exec_bench: %s\n", what.c_str());
    std::exit(1);
}

// A pool of the given tiers behind the real gRPC service on loopback, and a broker-side client of it.
class ServedPool {
public:
    ServedPool(pool::PoolConfig config, std::string label) : m_label(std::move(label))
    {
        m_trueSpec.argv = {"true"};
        for (auto &tier : config.tiers)
            tier.diskBytes = kDiskBytes;
        auto created = pool::SandboxPool::create(config);
        if (!created)
            die(created.error().message);
        m_pool = std::move(*created);
        if (kDiskBytes > 0 && !m_pool->diskLimitsEnforced())
            die(m_label + "no disk limits on this machine (" + m_pool->diskLimits() + "); run with disk_mb = 0");
        m_service = std::make_unique<pool::PoolService>(*m_pool);
        grpc::ServerBuilder builder;
        int port = 0;
        builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
        builder.RegisterService(m_service.get());
        m_server = builder.BuildAndStart();
        m_pool->start();
        client = pool_client::makeGrpcPoolClient("bench", "127.0.0.1:" + std::to_string(port));
    }
    ~ServedPool()
    {
        m_server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
        m_pool->shutdown();
        m_service->stop();
    }

    void waitWarm(int64_t timeoutMs, const char *what)
    {
        if (!m_pool->waitWarm(timeoutMs))
            die(m_label + "the pool did not " + what);
    }

    void execTrue(const std::string &id)
    {
        m_trueSpec.sandboxId = id;
        auto r = client->exec(m_trueSpec);
        if (!r || r->exitCode != 0)
            die(m_label + "exec of `true` failed: " + (r ? std::to_string(r->exitCode) : r.error().message));
    }

    std::unique_ptr<pool_client::PoolClient> client;

private:
    std::string m_label; // "runsc: " before each error, or nothing
    std::unique_ptr<pool::SandboxPool> m_pool;
    std::unique_ptr<pool::PoolService> m_service;
    std::unique_ptr<grpc::Server> m_server;
    pool_client::ExecSpec m_trueSpec; // built once: the timed execs only set the sandbox
};

// The budget line for one tier: a namespace runtime (bwrap, crun) gets the lite budget, a
// user-space kernel (runsc) a tenth of its cold start.
void printBudget(const Figures &claim, const Figures &cold, bool namespaceRuntime)
{
    if (namespaceRuntime) {
        std::printf("budget: median <= 2 ms: %s   p99 <= 10 ms: %s   median <= half of cold: %s\n",
                    claim.median <= 2.0 ? "yes" : "NO", claim.p99 <= 10.0 ? "yes" : "NO",
                    claim.median <= 0.5 * cold.median ? "yes" : "NO");
    } else {
        std::printf("budget: warm median <= a tenth of cold: %s\n", claim.median <= 0.1 * cold.median ? "yes" : "NO");
    }
}

struct InitRuns {
    std::vector<double> roundTrip;   // connect, request, exit frame read
    std::vector<double> inInit;      // the init's own figure: spawn of the command to its reap
};

// `true` straight through a claimed sandbox's init socket: no gRPC and no pool in between.
InitRuns initRuns(const fs::path &stateDir, const std::string &sandboxId, int runs)
{
    pool::InitClient init(stateDir / "sandboxes" / sandboxId / "ctl/init.sock");
    pool::InitExecRequest ir;
    ir.argv = {"true"};
    ir.timeoutMs = 10000;
    InitRuns out;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        auto r = init.exec(ir, {});
        if (!r)
            die(r.error().message);
        out.roundTrip.push_back(since(t0));
        out.inInit.push_back(r->durationMs);
    }
    return out;
}

struct ClaimRuns {
    std::vector<double> claimToFirst, claimOnly, firstExec, secondExec;
    int coldClaims = 0;
};

// Warm claim -> first `true` done, `runs` times, each after the pool refilled and settled.
ClaimRuns claimRuns(ServedPool &served, const std::string &tier, int runs, int64_t warmTimeoutMs)
{
    ClaimRuns out;
    for (int i = 0; i < runs; ++i) {
        served.waitWarm(warmTimeoutMs, "refill");
        // Let the kernel finish tearing down the namespaces of the sandbox released last round
        // (network namespace cleanup runs asynchronously in a kworker): the benchmark's own
        // release should not be billed to the next claim.
        std::this_thread::sleep_for(std::chrono::milliseconds(kSettleMs));
        const auto t0 = Clock::now();
        auto c = served.client->claim(tier, "bench", "");
        if (!c)
            die(c.error().message);
        out.claimOnly.push_back(since(t0));
        const auto t1 = Clock::now();
        served.execTrue(c->sandboxId);
        out.firstExec.push_back(since(t1));
        out.claimToFirst.push_back(since(t0));
        const auto t2 = Clock::now();
        served.execTrue(c->sandboxId);
        out.secondExec.push_back(since(t2));
        out.coldClaims += c->warm ? 0 : 1;
        (void)served.client->release(c->sandboxId);
    }
    return out;
}

// A pool of one tier on `runtime`, behind the real gRPC service: warm claim -> first `true`,
// the same straight through the init, then the runtime's own cold start of `true`
// (runToCompletion: the pool's bundle, the pool's spawn). Skipped, saying why, when the runtime
// is not on this machine.
void benchOciTier(const std::string &tierName, const std::string &runtimeName, bool namespaceRuntime, int runs,
                  const fs::path &dir)
{
    auto rt = pool::makeRuntime(runtimeName);
    if (!rt) {
        std::printf("%s tier (%s): skipped: %s\n", tierName.c_str(), runtimeName.c_str(), rt.error().message.c_str());
        return;
    }
    pool::PoolConfig config;
    config.stateDir = dir / ("state-" + runtimeName);
    config.initPath = PADDOCK_SANDBOX_INIT;
    config.tiers.push_back(pool::TierConfig{tierName, runtimeName, 2, 16, 2, 4ll << 30});
    ClaimRuns warm;
    InitRuns direct;
    {
        ServedPool served(config, runtimeName + ": ");
        served.waitWarm(120000, "warm up");
        warm = claimRuns(served, tierName, runs, 120000);
        auto c = served.client->claim(tierName, "bench", "");
        if (!c)
            die(runtimeName + ": " + c.error().message);
        direct = initRuns(config.stateDir, c->sandboxId, runs);
        (void)served.client->release(c->sandboxId);
    }

    auto *oci = dynamic_cast<pool::OciRuntime *>(rt->get());
    pool::SandboxSpec spec;
    spec.id = "cold";
    spec.workspaceDir = dir / ("cold-" + runtimeName) / "ws";
    spec.controlDir = dir / ("cold-" + runtimeName) / "ctl";
    spec.runtimeDir = dir / ("cold-" + runtimeName) / "runtime";
    spec.initPath = PADDOCK_SANDBOX_INIT;
    fs::create_directories(spec.workspaceDir);
    fs::create_directories(spec.controlDir);
    std::vector<double> cold;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        auto status = oci->runToCompletion(spec, {"/usr/bin/true"});
        cold.push_back(since(t0));
        if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0)
            die(runtimeName + ": cold `true` failed" + (status ? "" : ": " + status.error().message));
    }
    const Figures fClaim = summarize(warm.claimToFirst), fCold = summarize(cold);
    std::printf("%s tier (%s), %d runs:\n", tierName.c_str(), runtimeName.c_str(), runs);
    print("warm claim -> first `true` done (gRPC)", fClaim);
    print("  of which: Claim", summarize(warm.claimOnly));
    print("  of which: first Exec `true`", summarize(warm.firstExec));
    print("  then: second Exec `true`", summarize(warm.secondExec));
    print("exec `true` straight through the init", summarize(direct.roundTrip));
    print("  of which: the init's spawn -> reap", summarize(direct.inInit));
    print(("cold `" + runtimeName + " run` of `true` (pool's bundle)").c_str(), fCold);
    std::printf("  claims that fell back to a cold start: %d of %d\n", warm.coldClaims, runs);
    std::printf("  claim->first done / cold %s: median %.3f   p99 %.3f\n", runtimeName.c_str(), fClaim.median / fCold.median,
                fClaim.p99 / fCold.p99);
    printBudget(fClaim, fCold, namespaceRuntime);
}

} // namespace

int main(int argc, char **argv)
{
    const int runs = argc > 1 ? std::max(10, std::atoi(argv[1])) : 200;
    if (argc > 2)
        kSettleMs = std::atoi(argv[2]);
    if (argc > 4)
        kDiskBytes = std::max<int64_t>(0, std::atoll(argv[4])) << 20;
    spdlog::set_level(spdlog::level::warn);
    char tmpl[] = "/tmp/paddock-pool-bench-XXXXXX";
    if (!::mkdtemp(tmpl))
        die("cannot create a temporary directory");
    ::chmod(tmpl, 0711);   // sandbox uids pass through to their workspaces
    const fs::path dir = tmpl;

    pool::PoolConfig config;
    config.stateDir = dir / "state";
    config.initPath = PADDOCK_SANDBOX_INIT;
    config.tiers.push_back(pool::TierConfig{"lite", "bwrap", 2, 64, 0.5, 512ll << 20});
    auto served = std::make_unique<ServedPool>(config, "");
    auto &client = served->client;
    auto execTrue = [&](const std::string &id) { served->execTrue(id); };

    // Warm up the channel and the server's threads.
    served->waitWarm(30000, "warm up");
    {
        auto c = client->claim("lite", "bench", "");
        if (!c)
            die(c.error().message);
        for (int i = 0; i < 20; ++i)
            execTrue(c->sandboxId);
        (void)client->release(c->sandboxId);
    }

    std::printf("pool_exec_bench: %d runs each, lite tier (bwrap), 2-core budget from ARCHITECTURE.md; disk_mb = %lld%s\n",
                runs, static_cast<long long>(kDiskBytes >> 20), kDiskBytes > 0 ? " (btrfs subvolume + qgroup)" : " (plain directories)");

    // 1. Warm claim to first command finished.
    const ClaimRuns warm = claimRuns(*served, "lite", runs, 30000);

    // 2. Warm exec on a claimed sandbox: through gRPC, and straight through the init's socket.
    auto claimed = client->claim("lite", "bench", "");
    if (!claimed)
        die(claimed.error().message);
    std::vector<double> warmExec;
    // Thread wake-ups per exec, counted rather than timed: the context switches of every thread
    // in this process (the broker's client, gRPC's threads, the pool's exec loop and workers).
    rusage before {}, after {};
    ::getrusage(RUSAGE_SELF, &before);
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        execTrue(claimed->sandboxId);
        warmExec.push_back(since(t0));
    }
    ::getrusage(RUSAGE_SELF, &after);
    const double switchesPerExec = static_cast<double>((after.ru_nvcsw - before.ru_nvcsw) + (after.ru_nivcsw - before.ru_nivcsw)) / runs;
    const InitRuns direct = initRuns(config.stateDir, claimed->sandboxId, runs);
    // The floor under every gRPC figure on this machine right now: a unary call answered inline.
    std::vector<double> statusRtt;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        if (!client->status())
            die("status failed");
        statusRtt.push_back(since(t0));
    }
    // The same after the idle pause every claim above had: what waking gRPC's threads costs.
    // Then after shorter and longer pauses: the penalty grows with the pause (caches gone cold),
    // where a bare thread ping-pong over a socketpair grows by tens of microseconds.
    auto statusAfter = [&](int pauseMs, int n) {
        std::vector<double> ms;
        for (int i = 0; i < n; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(pauseMs));
            const auto t0 = Clock::now();
            if (!client->status())
                die("status failed");
            ms.push_back(since(t0));
        }
        return ms;
    };
    const std::vector<double> statusIdle = statusAfter(kSettleMs, std::min(runs, 100));
    std::vector<std::pair<int, double>> idleCurve;
    for (int pauseMs : {1, 3, 10, 30, 100})
        idleCurve.emplace_back(pauseMs, summarize(statusAfter(pauseMs, 30)).median);
    (void)client->release(claimed->sandboxId);

    // 3. Cold: the same bwrap command line the pool uses, running `true` instead of the init.
    auto runtime = pool::BwrapRuntime::create();
    if (!runtime)
        die(runtime.error().message);
    pool::SandboxSpec spec;
    spec.id = "cold";
    spec.workspaceDir = dir / "cold-ws";
    spec.initPath = config.initPath;
    fs::create_directories(spec.workspaceDir);
    const auto args = (*runtime)->commandLine(spec, {"/usr/bin/true"});
    std::vector<char *> cargv;
    for (const auto &a : args)
        cargv.push_back(const_cast<char *>(a.c_str()));
    cargv.push_back(nullptr);
    char *emptyEnv[] = {nullptr};
    // Under `chrt -f` the bench's own threads run real-time, but sandboxes never do (the pool's
    // spawn resets them to SCHED_OTHER): the cold and raw commands get the same normal priority.
    posix_spawnattr_t normal;
    posix_spawnattr_init(&normal);
    sched_param noPriority {};
    posix_spawnattr_setschedpolicy(&normal, SCHED_OTHER);
    posix_spawnattr_setschedparam(&normal, &noPriority);
    posix_spawnattr_setflags(&normal, POSIX_SPAWN_SETSCHEDULER);
    std::vector<double> cold;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        pid_t pid;
        if (posix_spawn(&pid, args[0].c_str(), nullptr, &normal, cargv.data(), emptyEnv) != 0)
            die("cannot spawn bwrap");
        int status = 0;
        ::waitpid(pid, &status, 0);
        cold.push_back(since(t0));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            die("cold bwrap true failed");
    }

    // 4. Raw: the host's own fork+exec+wait of the same command, the floor under every exec.
    std::vector<double> raw;
    char trueArg0[] = "true";
    char *trueArgv[] = {trueArg0, nullptr};
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        pid_t pid;
        if (posix_spawn(&pid, "/usr/bin/true", nullptr, &normal, trueArgv, emptyEnv) != 0)
            die("cannot spawn /usr/bin/true");
        int status = 0;
        ::waitpid(pid, &status, 0);
        raw.push_back(since(t0));
    }

    const Figures fRaw = summarize(raw), fStatusIdle = summarize(statusIdle);
    const Figures fClaim = summarize(warm.claimToFirst), fWarm = summarize(warmExec), fInit = summarize(direct.roundTrip),
                  fCold = summarize(cold), fStatus = summarize(statusRtt);
    print("warm claim -> first `true` done (gRPC)", fClaim);
    print("  of which: Claim", summarize(warm.claimOnly));
    print("  of which: first Exec `true`", summarize(warm.firstExec));
    print("  then: second Exec `true`", summarize(warm.secondExec));
    print("warm exec `true` on a claimed sandbox (gRPC)", fWarm);
    std::printf("  context switches per warm exec in the pool's and client's threads: %.2f\n", switchesPerExec);
    print("warm exec `true` straight through the init", fInit);
    print("  of which: the init's spawn -> reap", summarize(direct.inInit));
    print("cold `bwrap <pool args> true`", fCold);
    print("raw posix_spawn+wait of /usr/bin/true (host)", fRaw);
    print("gRPC floor: Status round trip", fStatus);
    print("gRPC floor: Status after the same idle pause", fStatusIdle);
    std::printf("  Status median after a pause of");
    for (const auto &[pauseMs, median] : idleCurve)
        std::printf("  %d ms: %.3f", pauseMs, median);
    std::printf(" ms\n");
    std::printf("  claims that fell back to a cold start: %d of %d\n", warm.coldClaims, runs);
    std::printf("ratios (warm / cold):\n");
    std::printf("  claim->first done / cold bwrap: median %.3f   p99 %.3f\n", fClaim.median / fCold.median, fClaim.p99 / fCold.p99);
    std::printf("  warm exec / cold bwrap:         median %.3f   p99 %.3f\n", fWarm.median / fCold.median, fWarm.p99 / fCold.p99);
    std::printf("ratios (against the raw fork+exec+wait of /usr/bin/true on the host):\n");
    std::printf("  claim->first done / raw:        median %.2f   p99 %.2f\n", fClaim.median / fRaw.median, fClaim.p99 / fRaw.p99);
    std::printf("  warm exec (gRPC) / raw:         median %.2f   p99 %.2f\n", fWarm.median / fRaw.median, fWarm.p99 / fRaw.p99);
    std::printf("  exec through the init / raw:    median %.2f   p99 %.2f\n", fInit.median / fRaw.median, fInit.p99 / fRaw.p99);
    printBudget(fClaim, fCold, true);

    served.reset();

    // 5. The other runtimes, one pool each (so a runsc refill never runs beside the lite figures).
    const int ociRuns = argc > 3 ? std::max(5, std::atoi(argv[3])) : 40;
    benchOciTier("standard", "runsc", false, ociRuns, dir);
    benchOciTier("oci", "crun", true, ociRuns, dir);

    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
