// broker_start_bench: issue 16's warm budget through the real broker. Prints figures; not a test
// (it exits non-zero only when the run itself failed).
//
//   broker_start_bench [sessions_per_tier=10] [steps=20] [settle_ms=300]
//
// One real paddock-pool (a tier per runtime on this machine: lite on bwrap, oci on crun, standard
// on runsc) and one real paddockd. Per tier, sessions one at a time, each a scripted playbook of
// `steps` run_command steps of `true`; afterwards each session's log is read and every run_command
// tool.result's `start_after_ms` collected (the broker's append of the tool.call acknowledged ->
// the sandbox's init spawned the command). In the same run:
//
//   pool share: Exec(`sh -c true`) straight to the same pool after the same idle pause: sent ->
//     spawned (the pool's started_unix_us), and the whole round trip
//   raw floors: posix_spawn + waitpid of /usr/bin/true on the host; one Status round trip to the
//     pool after the idle pause the broker path has (the log's tool.result -> next tool.call gap,
//     at least 1 ms) and after pool_exec_bench's 30 ms settle
//   cold: `runsc run` (and `crun run`) of /usr/bin/true with the pool's bundle (pool_exec_bench's way)
//
// Budget (issue 16): lite and oci, median start_after_ms <= 1.5 x (raw spawn + gRPC round trip
// after the same pause); standard (runsc), median <= 0.1 x its cold start.
//
// Known limits:
// - Each tier has warm_count = max_count = 1, so no refill runs while a session holds its sandbox
//   (the machine is otherwise idle, as the budget asks); a pool with spare capacity starts a
//   refill right after each claim, beside the session's first commands.
// - The log's times have millisecond resolution, so the pause is known to a millisecond.
// - Same host: start_after_ms compares the broker's and the pool's wall clocks, which are one.

#include "tests/integration/harness.h"

#include "paddock/v1/pool.grpc.pb.h"
#include "pool/runtimes/oci_runtime.h"
#include "rpc/broker_stubs.h"

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>

using namespace paddock;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr int kPaceMs = 30;   // pool_exec_bench's settle, the second pause the floor is measured after

struct Figures {
    double median = 0, p99 = 0, mean = 0;
    size_t n = 0;
};

Figures summarize(std::vector<double> ms)
{
    Figures f;
    if (ms.empty())
        return f;
    std::sort(ms.begin(), ms.end());
    f.n = ms.size();
    f.median = ms[ms.size() / 2];
    f.p99 = ms[std::min(ms.size() - 1, static_cast<size_t>(static_cast<double>(ms.size()) * 0.99))];
    for (double v : ms)
        f.mean += v;
    f.mean /= static_cast<double>(ms.size());
    return f;
}

void print(const std::string &name, const Figures &f)
{
    std::printf("  %-52s median %8.3f ms   p99 %8.3f ms   mean %8.3f ms   (n=%zu)\n", name.c_str(), f.median, f.p99,
                f.mean, f.n);
}

double since(Clock::time_point t0)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int64_t nowUnixUs()
{
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

[[noreturn]] void die(const std::string &what)
{
    std::fprintf(stderr, "broker_start_bench: %s\n", what.c_str());
    std::exit(1);
}

std::unique_ptr<grpc::ClientContext> context(std::chrono::milliseconds timeout)
{
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + timeout);
    return ctx;
}

struct TierSpec {
    std::string name;
    std::string runtime;
    bool namespaceRuntime;   // bwrap, crun: held to the raw floor; runsc: to a tenth of its cold start
};

// What one tier's sessions left in their logs.
struct TierRun {
    std::vector<double> startAfter;        // every run_command's start_after_ms
    std::vector<double> firstStartAfter;   // the first command of each session (its tool.call came with the claim)
    std::vector<double> laterStartAfter;   // the others (their tool.call came from a model step alone)
    std::vector<double> gap;               // tool.result -> next tool.call, ms (the log's resolution)
    std::vector<double> step;              // tool.call -> its tool.result (command, checkpoint, append)
    int missing = 0;                       // run_command results without start_after_ms
};

// The pool's own share: Exec straight to it after the same pause, as the broker would send it.
struct PoolShare {
    std::vector<double> sentToSpawned;   // Exec sent -> the init spawned the command (pool's clock = ours)
    std::vector<double> roundTrip;       // Exec sent -> exit frame read
};

class Bench {
public:
    Bench(std::shared_ptr<grpc::Channel> poolChannel, std::unique_ptr<rpc::BrokerStubs> broker, int settleMs)
        : m_pool(v1::PoolService::NewStub(poolChannel)), m_broker(std::move(broker)), m_settleMs(settleMs)
    {
    }

    // Until the tier has its warm sandbox and nothing claimed (the last session's is given back).
    void waitWarm(const std::string &tier)
    {
        const auto deadline = Clock::now() + 180s;
        while (Clock::now() < deadline) {
            v1::PoolStatusResponse status;
            if (m_pool->Status(context(5s).get(), v1::PoolStatusRequest(), &status).ok()) {
                for (const auto &t : status.tiers()) {
                    if (t.tier().name() == tier && t.warm() >= 1 && t.claimed() == 0) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(m_settleMs));
                        return;
                    }
                }
            }
            std::this_thread::sleep_for(50ms);
        }
        die("the pool's tier '" + tier + "' did not get a warm sandbox within 180 s");
    }

    // One session of `steps` commands on the tier; its figures are added to run.
    void runSession(const std::string &tier, const std::string &playbook, int steps, TierRun &run,
                    const test::Daemon &brokerDaemon)
    {
        v1::SubmitSessionRequest request;
        request.set_playbook_toml(playbook);
        request.set_tier(tier);
        v1::Session session;
        if (auto s = m_broker->sessions->SubmitSession(context(10s).get(), request, &session); !s.ok())
            die("submit on tier '" + tier + "' failed: " + s.error_message());
        const auto deadline = Clock::now() + 300s;
        while (true) {
            std::this_thread::sleep_for(100ms);
            v1::GetSessionRequest get;
            get.set_id(session.id());
            if (!m_broker->sessions->GetSession(context(5s).get(), get, &session).ok())
                continue;
            if (session.status() == v1::SESSION_STATUS_SUCCEEDED)
                break;
            if (session.status() == v1::SESSION_STATUS_FAILED || session.status() == v1::SESSION_STATUS_CANCELLED)
                die("session " + session.id() + " on tier '" + tier + "' ended " + v1::SessionStatus_Name(session.status())
                    + ": " + session.status_reason() + "\nbroker log:\n" + brokerDaemon.logTail());
            if (Clock::now() > deadline)
                die("session " + session.id() + " on tier '" + tier + "' did not finish within 300 s");
        }
        if (session.tier() != tier)
            die("session " + session.id() + " ran on tier '" + session.tier() + "', not '" + tier + "'");
        collect(session.id(), steps, run);
    }

    // Exec of `sh -c true` (the broker's argv for `true`) straight to the pool, `runs` times, each
    // after `pause`, in a sandbox of the tier claimed for the purpose.
    PoolShare poolShare(const std::string &tier, std::chrono::microseconds pause, int runs)
    {
        waitWarm(tier);
        v1::ClaimRequest claim;
        claim.set_tier(tier);
        claim.set_session_id("broker-start-bench");
        claim.set_idempotency_key("broker-start-bench-" + tier);
        v1::ClaimResponse claimed;
        if (auto s = m_pool->Claim(context(120s).get(), claim, &claimed); !s.ok())
            die("claim on tier '" + tier + "' failed: " + s.error_message());
        PoolShare out;
        for (int i = 0; i < runs; ++i) {
            std::this_thread::sleep_for(pause);
            v1::ExecRequest exec;
            exec.set_sandbox_id(claimed.sandbox_id());
            exec.add_argv("/bin/sh");
            exec.add_argv("-c");
            exec.add_argv("true");
            exec.set_timeout_ms(60000);
            exec.set_idempotency_key("split-" + tier + "-" + std::to_string(i));
            auto ctx = context(60s);
            const auto t0 = Clock::now();
            const int64_t sentUs = nowUnixUs();
            auto reader = m_pool->Exec(ctx.get(), exec);
            v1::ExecResponse response;
            v1::ExecExit exit;
            bool gotExit = false;
            while (reader->Read(&response)) {
                if (response.has_exit()) {
                    exit = response.exit();
                    gotExit = true;
                }
            }
            const double rtt = since(t0);
            if (auto s = reader->Finish(); !s.ok() || !gotExit || exit.exit_code() != 0)
                die("exec of `true` on tier '" + tier + "' failed: " + s.error_message());
            out.roundTrip.push_back(rtt);
            if (exit.started_unix_us() > 0)
                out.sentToSpawned.push_back(static_cast<double>(exit.started_unix_us() - sentUs) / 1000.0);
        }
        v1::ReleaseRequest release;
        release.set_sandbox_id(claimed.sandbox_id());
        v1::ReleaseResponse released;
        (void)m_pool->Release(context(30s).get(), release, &released);
        return out;
    }

    // Status round trips to the pool, each after `pause` (0: back to back).
    std::vector<double> statusAfter(std::chrono::microseconds pause, int runs)
    {
        std::vector<double> ms;
        for (int i = 0; i < runs; ++i) {
            if (pause.count() > 0)
                std::this_thread::sleep_for(pause);
            v1::PoolStatusResponse status;
            auto ctx = context(5s);
            const auto t0 = Clock::now();
            if (!m_pool->Status(ctx.get(), v1::PoolStatusRequest(), &status).ok())
                die("the pool's Status failed");
            ms.push_back(since(t0));
        }
        return ms;
    }

private:
    void collect(const std::string &sessionId, int steps, TierRun &run)
    {
        v1::StreamEventsRequest request;
        request.set_session_id(sessionId);
        request.set_from_seq(1);
        auto ctx = context(30s);
        auto reader = m_broker->sessions->StreamEvents(ctx.get(), request);
        std::vector<v1::Event> events;
        v1::EventBatch batch;
        while (reader->Read(&batch))
            events.insert(events.end(), batch.events().begin(), batch.events().end());
        if (auto s = reader->Finish(); !s.ok())
            die("reading the log of " + sessionId + " failed: " + s.error_message());

        int commands = 0;   // this session's, with start_after_ms
        int missing = 0;    // this session's, without
        int64_t lastResultMs = -1;
        int64_t lastCallMs = -1;
        for (const auto &e : events) {
            if (e.kind() != "tool.call" && e.kind() != "tool.result")
                continue;
            const json payload = json::parse(e.payload_json(), nullptr, false);
            if (payload.is_discarded() || payload.value("name", "") != "run_command")
                continue;
            if (e.kind() == "tool.call") {
                if (lastResultMs >= 0)
                    run.gap.push_back(static_cast<double>(e.time_unix_ms() - lastResultMs));
                lastCallMs = e.time_unix_ms();
                continue;
            }
            lastResultMs = e.time_unix_ms();
            if (lastCallMs >= 0)
                run.step.push_back(static_cast<double>(e.time_unix_ms() - lastCallMs));
            if (payload.contains("error"))
                die("session " + sessionId + ": a command failed: " + payload["error"].dump());
            if (!payload.contains("start_after_ms") || !payload["start_after_ms"].is_number()) {
                ++missing;
                continue;
            }
            const double ms = payload["start_after_ms"].get<double>();
            run.startAfter.push_back(ms);
            (commands == 0 ? run.firstStartAfter : run.laterStartAfter).push_back(ms);
            ++commands;
        }
        run.missing += missing;
        if (commands + missing != steps)
            die("session " + sessionId + " recorded " + std::to_string(commands + missing) + " commands, not "
                + std::to_string(steps));
    }

    std::unique_ptr<v1::PoolService::Stub> m_pool;
    std::unique_ptr<rpc::BrokerStubs> m_broker;
    int m_settleMs;
};

// posix_spawn + waitpid of /usr/bin/true on the host, back to back: the floor under any exec.
std::vector<double> rawSpawns(int runs)
{
    char arg0[] = "true";
    char *argv[] = {arg0, nullptr};
    char *env[] = {nullptr};
    std::vector<double> ms;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        pid_t pid;
        if (posix_spawn(&pid, "/usr/bin/true", nullptr, nullptr, argv, env) != 0)
            die("cannot spawn /usr/bin/true");
        int status = 0;
        ::waitpid(pid, &status, 0);
        ms.push_back(since(t0));
    }
    return ms;
}

// The runtime's cold start of /usr/bin/true with the pool's bundle (pool_exec_bench's way).
std::vector<double> coldStarts(const std::string &runtimeName, int runs, const fs::path &dir)
{
    auto rt = pool::makeRuntime(runtimeName);
    if (!rt)
        die(runtimeName + ": " + rt.error().message);
    auto *oci = dynamic_cast<pool::OciRuntime *>(rt->get());
    if (!oci)
        die(runtimeName + " is not an OCI runtime");
    pool::SandboxSpec spec;
    spec.id = "cold";
    spec.workspaceDir = dir / ("cold-" + runtimeName) / "ws";
    spec.controlDir = dir / ("cold-" + runtimeName) / "ctl";
    spec.runtimeDir = dir / ("cold-" + runtimeName) / "runtime";
    spec.initPath = test::binaryPath("paddock-sandbox-init");
    fs::create_directories(spec.workspaceDir);
    fs::create_directories(spec.controlDir);
    std::vector<double> ms;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        auto status = oci->runToCompletion(spec, {"/usr/bin/true"});
        ms.push_back(since(t0));
        if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0)
            die(runtimeName + ": cold `true` failed" + (status ? "" : ": " + status.error().message));
    }
    return ms;
}

std::string playbookOf(int steps)
{
    std::string toml = "name = \"start-bench\"\ngoal = \"run true, step after step\"\n";
    for (int i = 0; i < steps; ++i)
        toml += "[[step]]\ntool = \"run_command\"\ncommand = \"true\"\n";
    return toml;
}

// The pause the broker path has before an Exec: the log's median tool.result -> tool.call gap,
// at least 1 ms.
std::chrono::microseconds pauseOf(const TierRun &run)
{
    return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(summarize(run.gap).median)));
}

} // namespace

int main(int argc, char **argv)
{
    const int sessionsPerTier = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
    const int steps = argc > 2 ? std::max(2, std::atoi(argv[2])) : 20;
    const int settleMs = argc > 3 ? std::max(0, std::atoi(argv[3])) : 300;

    const std::vector<TierSpec> candidates = {{"lite", "bwrap", true}, {"oci", "crun", true}, {"standard", "runsc", false}};
    std::vector<TierSpec> tiers;
    std::vector<std::string> skipped;
    for (const auto &t : candidates) {
        if (auto rt = pool::makeRuntime(t.runtime); rt)
            tiers.push_back(t);
        else
            skipped.push_back(t.name + " (" + t.runtime + "): skipped: " + rt.error().message);
    }
    if (tiers.empty())
        die("no sandbox runtime on this machine");

    test::TempDir dir("paddock-start-bench");
    {
        std::ofstream toml(dir / "pool.toml");
        for (const auto &t : tiers)
            toml << "[[tier]]\nname = \"" << t.name << "\"\nruntime = \"" << t.runtime
                 << "\"\nwarm_count = 1\nmax_count = 1\n";
    }
    const std::map<std::string, std::string> env = {{"XDG_CONFIG_HOME", (dir / "xdg/config").string()},
                                                     {"XDG_DATA_HOME", (dir / "xdg/data").string()},
                                                     {"XDG_RUNTIME_DIR", (dir / "xdg/run").string()}};
    fs::create_directories(dir / "xdg/run");
    const std::string endpoint = "127.0.0.1:" + std::to_string(test::freeLoopbackPort());
    auto pool = test::Daemon::start({test::binaryPath("paddock-pool").string(), "--listen", endpoint, "--state-dir",
                                     (dir / "pool").string(), "--config", (dir / "pool.toml").string(),
                                     "--log-level", "warn"},
                                    dir / "pool.log", env);
    if (!pool || !test::waitForHealthy(endpoint, 60s, &*pool))
        die("paddock-pool did not start; its log: " + (pool ? pool->logTail() : pool.error().message));
    auto broker = test::startBroker(dir, endpoint, 30s);
    if (!broker)
        die("paddockd did not start: " + broker.error().message);

    auto poolChannel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
    Bench bench(poolChannel,
                std::make_unique<rpc::BrokerStubs>(grpc::CreateChannel(broker->address, grpc::InsecureChannelCredentials())),
                settleMs);

    const auto started = Clock::now();
    const std::string playbook = playbookOf(steps);
    std::map<std::string, TierRun> runs;
    std::map<std::string, PoolShare> shares;
    for (const auto &t : tiers) {
        // One session first, not counted: the broker's and the pool's first calls of the tier.
        TierRun warmup;
        bench.waitWarm(t.name);
        bench.runSession(t.name, playbook, steps, warmup, broker->daemon);
        TierRun &run = runs[t.name];
        for (int i = 0; i < sessionsPerTier; ++i) {
            bench.waitWarm(t.name);
            bench.runSession(t.name, playbook, steps, run, broker->daemon);
        }
        shares[t.name] = bench.poolShare(t.name, pauseOf(run), static_cast<int>(run.startAfter.size()));
    }

    // The floors, with the pool idle and the broker idle.
    const int floorRuns = 200;
    const std::vector<double> raw = rawSpawns(floorRuns);
    const std::vector<double> statusBackToBack = bench.statusAfter(0us, floorRuns);
    std::map<int64_t, std::vector<double>> statusAfterPause;   // pause in ms -> round trips
    for (const auto &t : tiers)
        statusAfterPause.try_emplace(pauseOf(runs[t.name]).count() / 1000);
    statusAfterPause.try_emplace(kPaceMs);
    for (auto &[pauseMs, ms] : statusAfterPause)
        ms = bench.statusAfter(std::chrono::milliseconds(pauseMs), 100);
    const double measuredSeconds = std::chrono::duration<double>(Clock::now() - started).count();

    broker->daemon.terminate();
    pool->terminate();

    // Cold starts with the daemons gone: nothing else on the machine but the other engineers.
    std::map<std::string, Figures> cold;
    for (const auto &t : tiers) {
        if (t.runtime == "runsc")
            cold[t.name] = summarize(coldStarts("runsc", 5, dir.path()));
        else if (t.runtime == "crun")
            cold[t.name] = summarize(coldStarts("crun", 10, dir.path()));
    }

    std::printf("broker_start_bench: tool.call recorded -> command started, through a real paddockd and paddock-pool\n");
    std::printf("  %d sessions per tier (after one not counted), %d run_command steps of `true` each, one session at a "
                "time, %d ms settle between sessions; warm_count = max_count = 1 per tier (no refill during a "
                "session); sessions measured in %.1f s\n",
                sessionsPerTier, steps, settleMs, measuredSeconds);
    for (const auto &s : skipped)
        std::printf("  %s\n", s.c_str());

    const Figures fRaw = summarize(raw);
    std::printf("raw floors (same run):\n");
    print("posix_spawn+waitpid of /usr/bin/true (host)", fRaw);
    print("pool Status round trip, back to back", summarize(statusBackToBack));
    for (const auto &[pauseMs, ms] : statusAfterPause)
        print("pool Status round trip after a " + std::to_string(pauseMs) + " ms pause", summarize(ms));

    for (const auto &t : tiers) {
        const TierRun &run = runs[t.name];
        const PoolShare &share = shares[t.name];
        const Figures fStart = summarize(run.startAfter);
        const Figures fGap = summarize(run.gap);
        const int64_t pauseMs = pauseOf(run).count() / 1000;
        const Figures fStatus = summarize(statusAfterPause[pauseMs]);
        const Figures fStatus30 = summarize(statusAfterPause[kPaceMs]);
        const Figures fSent = summarize(share.sentToSpawned);
        const double floorMs = fRaw.median + fStatus.median;
        const double floor30Ms = fRaw.median + fStatus30.median;
        std::printf("%s tier (%s):\n", t.name.c_str(), t.runtime.c_str());
        print("start_after_ms: tool.call recorded -> command spawned", fStart);
        print("  first command of a session (tool.call with the claim)", summarize(run.firstStartAfter));
        print("  later commands (tool.call from a model step)", summarize(run.laterStartAfter));
        if (run.missing > 0)
            std::printf("  run_command results without start_after_ms: %d\n", run.missing);
        print("log: tool.result -> next tool.call (ms resolution)", fGap);
        print("log: tool.call -> its tool.result (ms resolution)", summarize(run.step));
        print("pool alone after a " + std::to_string(pauseMs) + " ms pause: Exec sent -> spawned", fSent);
        print("  the same Exec's whole round trip (`sh -c true`)", summarize(share.roundTrip));
        std::printf("  split of the median (a difference of medians): pool (Exec sent -> spawned) %.3f ms, the rest "
                    "(broker: step hand-over, decide, Exec out) %.3f ms\n",
                    fSent.median, fStart.median - fSent.median);
        std::printf("  floor: raw spawn %.3f + Status after %lld ms %.3f = %.3f ms; start_after median / floor = %.2f "
                    "(p99 / floor %.2f)\n",
                    fRaw.median, static_cast<long long>(pauseMs), fStatus.median, floorMs, fStart.median / floorMs,
                    fStart.p99 / floorMs);
        std::printf("  with the floor's Status after %d ms instead: %.3f ms; ratio %.2f\n", kPaceMs, floor30Ms,
                    fStart.median / floor30Ms);
        if (auto c = cold.find(t.name); c != cold.end()) {
            print("cold `" + t.runtime + " run` of /usr/bin/true (pool's bundle)", c->second);
            std::printf("  start_after median / cold median = %.4f\n", fStart.median / c->second.median);
        }
        if (t.namespaceRuntime) {
            std::printf("budget (median <= 1.5 x floor after the same pause): %s (%.2fx)\n",
                        fStart.median <= 1.5 * floorMs ? "met" : "MISSED", fStart.median / floorMs);
        } else {
            const Figures &c = cold[t.name];
            std::printf("budget (median <= 0.1 x cold runsc start): %s (%.4fx of %.1f ms)\n",
                        fStart.median <= 0.1 * c.median ? "met" : "MISSED", fStart.median / c.median, c.median);
        }
    }
    return 0;
}
