// Issue 16's fleet at scale: thousands of sessions at once, each holding a lite sandbox through a
// long command, over two pools on two "hosts" (network namespaces, TestNetwork) and one paddockd
// with its default configuration (no --workers). Prints figures; not a test.
//
//   fleet_bench [--sessions 2000] [--command-seconds 20] [--warm 32] [--no-console]
//
// --warm is each pool's warm_count (capped at its max_count): with the default most claims start a
// sandbox cold, as a fleet does when a burst outruns its warm pool; with --warm at max_count every
// sandbox is started before the first submit, which separates what the broker holds at once from
// how fast this machine starts sandboxes.
//
// Each session runs one playbook: `run_command` of `sleep <command-seconds>`, then `finish`. The
// bench submits them all (16 threads, one call in flight each) and polls the broker once a second
// until every session has ended. Reported:
// - time to submit; the peaks of sessions holding a sandbox, of commands under way by the broker's
//   log (ListSessions: running, a sandbox, no result yet, the last event the tool.call or the
//   sandbox.claimed of a cold claim that follows it) and of `sleep` processes really running in the
//   sandboxes (a /proc scan for the pools' host uids);
// - wall time from the first submit to the last session's end against the command's own time, each
//   session's end (as the polls saw it) and when its sandbox was back (its last event);
// - succeeded / failed;
// - the broker's threads (at the peak and at most), its RSS per session (RSS at the peak minus RSS
//   before submitting, over the sessions), its CPU per step (utime + stime over the run, over the
//   tool calls completed) and per event; the pools' threads and CPU, for information;
// - unless --no-console: the console (GrpcConsoleClient and MainWindow on its Sessions page,
//   offscreen) following the fleet over the broker's unix socket: the rows its sessions table
//   reached, and the GUI thread's stalls from a 5 ms probe timer (a stall: the gap between two
//   ticks minus 5 ms). Budget: stall p99 <= 50 ms (ARCHITECTURE.md), printed, not asserted.
//
// Exits non-zero only when the run itself failed: the daemons did not start, a submit or a session
// failed, the run timed out, or the console's table did not list every session. The temporary
// directory (daemon logs, databases) is then kept and its path printed.
//
// Known limits:
// - Everything shares this machine's cores: the sandboxes, both pools, the broker, the bench's
//   polls and the console. The broker's CPU includes answering the polls (ListSessions and
//   ListPools once a second) and the console's session watch.
// - The peak "at the peak" figures are from the poll that saw the most sleep processes; a poll is
//   a second apart, so a peak shorter than that can be missed.
// - With the default --warm a burst of cold claims reaches each pool at once, and the pool starts
//   them all in parallel (one claim thread each): on two cores a start then takes seconds, and
//   starts past bwrap's 10 s start timeout fail and are claimed again (the tiers' cold claims
//   exceed the sessions). The peak at once is then bounded by this machine's start rate times the
//   command's length, not by the broker.
// - The daemons inherit RLIMIT_NOFILE raised to its hard limit (raising the hard limit needs
//   CAP_SYS_RESOURCE); a pool holds about ten descriptors per sandbox.
// - Needs root (ip netns; a root pool gives each sandbox host uids of its own, which is how the
//   /proc scan finds the sandboxes' commands).

#include "rpc/broker_stubs.h"
#include "tests/integration/harness.h"
#include "tests/integration/multi_host_support.h"
#include "tests/integration/test_network.h"

#if PADDOCK_FLEET_BENCH_CONSOLE
#include "app/client/grpc_console_client.h"
#include "app/main_window.h"
#include "views/sessions_view.h"
#include "views/theme.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QTableView>
#include <QTimer>
#endif

#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace paddock;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kSubmitThreads = 16;
constexpr auto kPollInterval = 1s;
constexpr int kDefaultWarmPerPool = 32;
constexpr int kDiskMb = 64;                      // per sandbox; sizes each pool's sparse btrfs image
constexpr int64_t kIdsPerSandbox = 65536;        // the pool's default [sandbox_identity] block
constexpr int64_t kFirstSandboxId = 1'000'000'000;
constexpr double kStallBudgetMs = 50;
constexpr int kProbeIntervalMs = 5;
const std::vector<std::string> kPoolNames{"fleet-a", "fleet-b"};

std::atomic<bool> g_stop{false};

void onSignal(int)
{
    g_stop = true;
}

struct Options {
    int sessions = 2000;
    int commandSeconds = 20;
    int warm = kDefaultWarmPerPool;   // per pool; at most max_count
    bool console = true;
};

std::optional<Options> parseOptions(int argc, char **argv)
{
    Options options;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const bool hasValue = i + 1 < argc;
        if (arg == "--sessions" && hasValue)
            options.sessions = std::atoi(argv[++i]);
        else if (arg == "--command-seconds" && hasValue)
            options.commandSeconds = std::atoi(argv[++i]);
        else if (arg == "--warm" && hasValue)
            options.warm = std::atoi(argv[++i]);
        else if (arg == "--no-console")
            options.console = false;
        else
            return std::nullopt;
    }
    if (options.sessions < 1 || options.commandSeconds < 1 || options.warm < 0)
        return std::nullopt;
    return options;
}

// Per pool: its half of the sessions and a margin, so a pool never refuses a claim at max_count.
int maxCountPerPool(const Options &options)
{
    return (options.sessions + 1) / 2 + std::max(32, options.sessions / 20);
}

int warmPerPool(const Options &options)
{
    return std::min(options.warm, maxCountPerPool(options));
}

double percentile(std::vector<double> values, double p)
{
    if (values.empty())
        return 0;
    std::sort(values.begin(), values.end());
    return values[std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())))];
}

std::string readWhole(const std::string &path)
{
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The first n whitespace-separated fields of text, joined by spaces.
std::string firstFields(const std::string &text, int n)
{
    std::istringstream in(text);
    std::string out;
    std::string field;
    for (int i = 0; i < n && in >> field; ++i)
        out += (out.empty() ? "" : " ") + field;
    return out;
}

// A numeric field of /proc/PID/status ("Threads:", "VmRSS:" in kB); -1 when the process is gone.
long long statusField(pid_t pid, const char *name)
{
    std::istringstream text(readWhole("/proc/" + std::to_string(pid) + "/status"));
    std::string line;
    while (std::getline(text, line)) {
        if (line.starts_with(name))
            return std::atoll(line.c_str() + std::strlen(name));
    }
    return -1;
}

// utime + stime of a process, in seconds (/proc/PID/stat fields 14 and 15).
double cpuSeconds(pid_t pid)
{
    const std::string text = readWhole("/proc/" + std::to_string(pid) + "/stat");
    const auto close = text.rfind(')');
    if (close == std::string::npos)
        return 0;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    long long utime = 0;
    long long stime = 0;
    for (int i = 3; fields >> field && i <= 15; ++i) {
        if (i == 14)
            utime = std::atoll(field.c_str());
        else if (i == 15)
            stime = std::atoll(field.c_str());
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

struct SandboxProcesses {
    int all = 0;      // every process running as a sandbox's host uid
    int sleeps = 0;   // of them, the commands: `sleep <seconds>`
};

// The processes running as a host uid in [uidLow, uidHigh) (the owner of /proc/PID is the
// process's uid): the sandboxes, as the kernel sees them.
SandboxProcesses countSandboxProcesses(int64_t uidLow, int64_t uidHigh, int seconds)
{
    const std::string cmdline = "sleep" + std::string(1, '\0') + std::to_string(seconds) + std::string(1, '\0');
    SandboxProcesses n;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc", ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec)) {
        const std::string dir = it->path().string();
        const bool isProcess = std::isdigit(static_cast<unsigned char>(it->path().filename().string()[0]));
        struct stat st {};
        if (!isProcess || ::stat(dir.c_str(), &st) != 0 || st.st_uid < uidLow || st.st_uid >= uidHigh)
            continue;
        ++n.all;
        n.sleeps += readWhole(dir + "/comm") == "sleep\n" && readWhole(dir + "/cmdline") == cmdline;
    }
    return n;
}

// Busy and total jiffies of the whole machine (/proc/stat's cpu line): busy is all but idle and iowait.
std::pair<long long, long long> machineJiffies()
{
    std::istringstream line(readWhole("/proc/stat"));
    std::string cpu;
    line >> cpu;
    long long busy = 0;
    long long total = 0;
    long long value = 0;
    for (int i = 0; i < 10 && line >> value; ++i) {
        total += value;
        busy += (i == 3 || i == 4) ? 0 : value;   // idle, iowait
    }
    return {busy, total};
}

// RLIMIT_NOFILE raised as far as the kernel allows (fs.nr_open), for the daemons to inherit: a pool
// holds descriptors per sandbox (its pidfd, cgroup files, the init's sockets during an exec).
std::string raiseFileLimit()
{
    rlim_t wanted = 1 << 20;
    if (const long long nrOpen = std::atoll(readWhole("/proc/sys/fs/nr_open").c_str()); nrOpen > 0)
        wanted = static_cast<rlim_t>(nrOpen);
    rlimit limit{wanted, wanted};
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
        ::getrlimit(RLIMIT_NOFILE, &limit);
        limit.rlim_cur = limit.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &limit);
    }
    ::getrlimit(RLIMIT_NOFILE, &limit);
    return std::to_string(limit.rlim_cur);
}

std::string playbook(int commandSeconds)
{
    return "name = \"fleet\"\ngoal = \"hold a lite sandbox through one command\"\n"
           "\n[[step]]\ntool = \"run_command\"\ncommand = \"sleep " + std::to_string(commandSeconds) + "\"\n"
           "\n[[step]]\ntool = \"finish\"\nsummary = \"slept\"\n";
}

std::unique_ptr<grpc::ClientContext> context(std::chrono::milliseconds timeout)
{
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + timeout);
    return ctx;
}

bool isFinal(v1::SessionStatus status)
{
    return status == v1::SESSION_STATUS_SUCCEEDED || status == v1::SESSION_STATUS_FAILED
        || status == v1::SESSION_STATUS_CANCELLED;
}

// Every session, all pages; nullopt when the broker did not answer.
std::optional<std::vector<v1::Session>> listAll(rpc::BrokerStubs &stubs)
{
    std::vector<v1::Session> out;
    std::string token;
    do {
        v1::ListSessionsRequest request;
        request.set_page_size(1000);
        request.set_page_token(token);
        v1::ListSessionsResponse response;
        if (!stubs.sessions->ListSessions(context(20s).get(), request, &response).ok())
            return std::nullopt;
        out.insert(out.end(), response.sessions().begin(), response.sessions().end());
        token = response.next_page_token();
    } while (!token.empty());
    return out;
}

std::optional<v1::ListPoolsResponse> listPools(rpc::BrokerStubs &stubs)
{
    v1::ListPoolsResponse response;
    if (!stubs.operations->ListPools(context(10s).get(), v1::ListPoolsRequest(), &response).ok())
        return std::nullopt;
    return response;
}

// The test network, the two pools in their namespaces and paddockd in the broker's, all in one
// temporary directory. Destruction stops the daemons (SIGTERM, then SIGKILL) before the namespaces
// go, on every path out of main().
class Fleet {
public:
    explicit Fleet(const Options &options) : m_options(options) {}
    ~Fleet()
    {
        if (m_broker)
            m_broker->terminate();
        for (auto &pool : m_pools)
            pool.terminate(30s);
    }

    // Empty when every daemon is up and the broker sees both pools healthy; else what failed.
    std::string start()
    {
        if (const std::string why = test::namespacesUnavailable("fleet_bench"); !why.empty())
            return why;
        if (!std::filesystem::exists("/usr/bin/nsenter"))
            return "no /usr/bin/nsenter: install util-linux";
        if (const std::string error = m_net.create(); !error.empty())
            return "network namespaces: " + error;
        m_env = test::hermeticEnvFor(m_dir.path());
        for (int i = 0; i < 2; ++i) {
            if (std::string error = startPool(i); !error.empty())
                return error;
        }
        return startBroker();
    }

    const test::TempDir &dir() const { return m_dir; }
    std::string address() const { return "unix:" + (m_dir / "run/broker.sock").string(); }
    pid_t brokerPid() const { return m_broker ? m_broker->pid() : -1; }
    pid_t poolPid(int i) const { return m_pools[static_cast<size_t>(i)].pid(); }
    // The host uids the pools give their sandboxes: [low, high).
    int64_t uidLow() const { return kFirstSandboxId; }
    int64_t uidHigh() const { return kFirstSandboxId + 2 * idRange(); }

    std::string logTails()
    {
        std::string text;
        if (m_broker)
            text += "---- paddockd log (tail) ----\n" + m_broker->logTail(30);
        for (size_t i = 0; i < m_pools.size(); ++i)
            text += "---- " + kPoolNames[i] + " log (tail) ----\n" + m_pools[i].logTail(20);
        return text;
    }

private:
    // max_count blocks and a margin: a released sandbox holds its block until it is gone, while the
    // refill already starts its successor (without the margin the pool logs "every block ... is in
    // use" at max_count and retries the refill).
    int64_t idRange() const
    {
        const int64_t blocks = maxCountPerPool(m_options);
        return (blocks + blocks / 4 + 16) * kIdsPerSandbox;
    }

    std::string startPool(int i)
    {
        const std::string &name = kPoolNames[static_cast<size_t>(i)];
        // Disjoint identity ranges: both pools are on this machine, and no two live sandboxes may
        // share a host uid.
        const auto config = m_dir / (name + ".toml");
        std::ofstream(config) << "pool_id = \"" << name << "\"\n"
                              << "\n[sandbox_identity]\nfirst_id = " << kFirstSandboxId + i * idRange()
                              << "\ncount = " << idRange() << "\nids_per_sandbox = " << kIdsPerSandbox << "\n"
                              << "\n[[tier]]\nname = \"lite\"\nruntime = \"bwrap\"\nwarm_count = "
                              << warmPerPool(m_options) << "\nmax_count = " << maxCountPerPool(m_options)
                              << "\ndisk_mb = " << kDiskMb << "\n";
        // TestNetwork::in joins only the namespace's network, so the pool sees the host's cgroups.
        auto pool = test::Daemon::start(test::TestNetwork::in(m_net.pool(i),
                                                              {test::binaryPath("paddock-pool").string(), "--config",
                                                               config.string(), "--listen",
                                                               test::TestNetwork::poolAddress(i) + ":7701",
                                                               "--state-dir", (m_dir / ("state-" + name)).string()}),
                                        m_dir / (name + ".log"), m_env);
        if (!pool)
            return "cannot start " + name + ": " + pool.error().message;
        m_pools.push_back(std::move(*pool));
        if (auto ready = test::waitForPoolLog(m_pools.back()); !ready)
            return name + ": " + ready.error().message;
        return {};
    }

    std::string startBroker()
    {
        // The broker's defaults but for the pools: plaintext to each, as the pools serve it.
        std::string config;
        for (int i = 0; i < 2; ++i)
            config += "[[pool]]\nname = \"" + kPoolNames[static_cast<size_t>(i)] + "\"\nendpoint = \""
                + test::TestNetwork::poolAddress(i) + ":7701\"\n\n";
        std::ofstream(m_dir / "broker.toml") << config;
        auto broker = test::Daemon::start(
            test::TestNetwork::in(m_net.broker(), {test::binaryPath("paddockd").string(), "--config",
                                                   (m_dir / "broker.toml").string(), "--data-dir",
                                                   (m_dir / "broker").string(), "--socket",
                                                   (m_dir / "run/broker.sock").string()}),
            m_dir / "broker.log", m_env);
        if (!broker)
            return "cannot start paddockd: " + broker.error().message;
        m_broker.emplace(std::move(*broker));
        if (auto healthy = test::waitForHealthy(address(), 30s, &*m_broker); !healthy)
            return healthy.error().message;
        rpc::BrokerStubs stubs(grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
        for (auto until = Clock::now() + 60s; Clock::now() < until && !g_stop; std::this_thread::sleep_for(200ms)) {
            auto pools = listPools(stubs);
            if (pools && pools->pools_size() == 2
                && std::all_of(pools->pools().begin(), pools->pools().end(), [](const auto &p) { return p.healthy(); }))
                return {};
        }
        return "the broker did not see both pools healthy within 60 s";
    }

    const Options &m_options;
    test::TempDir m_dir{"paddock-fleet"};
    test::TestNetwork m_net{m_dir.path()};
    std::map<std::string, std::string> m_env;
    std::vector<test::Daemon> m_pools;
    std::optional<test::Daemon> m_broker;
};

// Open descriptors of a process (entries of /proc/PID/fd).
long long openFds(pid_t pid)
{
    std::error_code ec;
    long long n = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
        ++n;
    return n;
}

struct ProcessFigures {
    double cpuStart = 0;
    double cpuSeconds = 0;
    long long maxThreads = 0;
    long long maxRssKb = 0;
    long long maxFds = 0;

    void sample(pid_t pid)
    {
        maxThreads = std::max(maxThreads, statusField(pid, "Threads:"));
        maxRssKb = std::max(maxRssKb, statusField(pid, "VmRSS:"));
        maxFds = std::max(maxFds, openFds(pid));
    }
};

struct Figures {
    bool ok = false;
    std::string problem;
    double warmWaitS = 0;
    double submitS = 0;
    int submitFailed = 0;
    double totalS = 0;
    double releasedS = 0;                // every sandbox given back
    double machineBusy = 0;              // of all cores, over the run: 0..1
    int peakHolding = 0;
    int peakRunningByLog = 0;
    int peakSleeps = 0;
    int peakSandboxProcesses = 0;
    double peakSleepsAtS = 0;
    long long brokerThreadsBefore = 0;
    long long brokerThreadsAtPeak = 0;
    long long brokerRssBeforeKb = 0;
    long long brokerRssAtPeakKb = 0;
    ProcessFigures broker;
    std::vector<ProcessFigures> pools{2};
    std::map<std::string, int> statuses;
    std::vector<std::string> failures;   // the first few, with their reasons
    int64_t steps = 0;
    int64_t events = 0;
    std::map<std::string, double> endedAtS;   // each session: when a poll first saw it ended
    std::vector<double> backSeconds;     // each session: created to its last event (sandbox.released)
    std::vector<std::string> poolLines;  // per pool, from ListPools at the end
    std::vector<int> peakClaimed{0, 0};
    std::string sampleKinds;             // one session's log, to show what a step and an event are
};

// SubmitSession for every session from kSubmitThreads threads, one call in flight each. Returns the
// failures (the first one's message in firstError).
int submitAll(rpc::BrokerStubs &stubs, const Options &options, std::string &firstError)
{
    const std::string text = playbook(options.commandSeconds);
    std::atomic<int> next{0};
    std::atomic<int> failed{0};
    std::mutex errorMutex;
    std::vector<std::thread> threads;
    for (int t = 0; t < kSubmitThreads; ++t) {
        threads.emplace_back([&] {
            for (int i = next++; i < options.sessions && !g_stop; i = next++) {
                v1::SubmitSessionRequest request;
                request.set_playbook_toml(text);
                request.add_tags("fleet-bench");
                v1::Session session;
                const grpc::Status status = stubs.sessions->SubmitSession(context(60s).get(), request, &session);
                if (!status.ok() && failed++ == 0) {
                    std::lock_guard lock(errorMutex);
                    firstError = status.error_message();
                }
            }
        });
    }
    for (auto &thread : threads)
        thread.join();
    return failed;
}

// What one poll saw; the peaks are kept in figures.
void poll(const Fleet &fleet, rpc::BrokerStubs &stubs, const Options &options, Clock::time_point start,
          Figures &figures, std::vector<v1::Session> &sessions)
{
    if (auto listed = listAll(stubs))
        sessions = std::move(*listed);
    int holding = 0;
    int runningByLog = 0;
    const double now = std::chrono::duration<double>(Clock::now() - start).count();
    for (const auto &s : sessions) {
        if (isFinal(s.status()))
            figures.endedAtS.emplace(s.id(), now);
        const bool hasSandbox = !isFinal(s.status()) && !s.sandbox_id().empty();
        holding += hasSandbox;
        // In its command: no result yet, and the last event is the tool.call, or the sandbox.claimed
        // that follows it when the claim was cold (the claim runs while the model thinks).
        runningByLog += hasSandbox && s.status() == v1::SESSION_STATUS_RUNNING && s.steps() == 0
            && (s.last_event_kind() == "tool.call" || s.last_event_kind() == "sandbox.claimed");
    }
    const SandboxProcesses processes = countSandboxProcesses(fleet.uidLow(), fleet.uidHigh(), options.commandSeconds);
    const int sleeps = processes.sleeps;
    figures.peakSandboxProcesses = std::max(figures.peakSandboxProcesses, processes.all);
    figures.peakHolding = std::max(figures.peakHolding, holding);
    figures.peakRunningByLog = std::max(figures.peakRunningByLog, runningByLog);
    figures.broker.sample(fleet.brokerPid());
    for (int i = 0; i < 2; ++i)
        figures.pools[static_cast<size_t>(i)].sample(fleet.poolPid(i));
    if (sleeps > figures.peakSleeps) {
        figures.peakSleeps = sleeps;
        figures.peakSleepsAtS = std::chrono::duration<double>(Clock::now() - start).count();
        figures.brokerThreadsAtPeak = statusField(fleet.brokerPid(), "Threads:");
        figures.brokerRssAtPeakKb = statusField(fleet.brokerPid(), "VmRSS:");
    }
    if (auto pools = listPools(stubs)) {
        for (const auto &pool : pools->pools()) {
            int claimed = 0;
            for (const auto &tier : pool.tiers())
                claimed += tier.claimed();
            for (size_t i = 0; i < kPoolNames.size(); ++i) {
                if (pool.name() == kPoolNames[i])
                    figures.peakClaimed[i] = std::max(figures.peakClaimed[i], claimed);
            }
        }
    }
}

// One session's log as its event kinds in order ("session.created state.changed ...").
std::string eventKinds(rpc::BrokerStubs &stubs, const std::string &sessionId)
{
    auto ctx = context(10s);
    v1::StreamEventsRequest request;
    request.set_session_id(sessionId);
    auto reader = stubs.sessions->StreamEvents(ctx.get(), request);
    v1::EventBatch batch;
    std::string kinds;
    while (reader->Read(&batch)) {
        for (const auto &event : batch.events())
            kinds += (kinds.empty() ? "" : " ") + event.kind();
    }
    reader->Finish();
    return kinds;
}

// Waits until each pool has its warm sandboxes (the start of a fleet that has been up a while).
double waitForWarmPools(rpc::BrokerStubs &stubs, int warmPerPool)
{
    const auto start = Clock::now();
    const auto timeout = 120s + warmPerPool * 250ms;
    while (Clock::now() - start < timeout && !g_stop) {
        auto pools = listPools(stubs);
        int warm = 0;
        if (pools) {
            for (const auto &pool : pools->pools())
                for (const auto &tier : pool.tiers())
                    warm += tier.warm();
        }
        if (warm >= 2 * warmPerPool)
            break;
        std::this_thread::sleep_for(250ms);
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// The whole run, from the first submit to the last session's end. Touches no Qt object; inRun
// (when given) is true from the first submit until every session has ended.
Figures runFleet(const Fleet &fleet, const Options &options, std::atomic<bool> *inRun = nullptr)
{
    Figures figures;
    rpc::BrokerStubs stubs(grpc::CreateChannel(fleet.address(), grpc::InsecureChannelCredentials()));
    figures.warmWaitS = waitForWarmPools(stubs, warmPerPool(options));
    const pid_t brokerPid = fleet.brokerPid();
    figures.brokerThreadsBefore = statusField(brokerPid, "Threads:");
    figures.brokerRssBeforeKb = statusField(brokerPid, "VmRSS:");
    figures.broker.cpuStart = cpuSeconds(brokerPid);
    for (int i = 0; i < 2; ++i)
        figures.pools[static_cast<size_t>(i)].cpuStart = cpuSeconds(fleet.poolPid(i));

    const auto jiffiesStart = machineJiffies();
    const auto start = Clock::now();
    if (inRun)
        *inRun = true;
    std::atomic<bool> submitted{false};
    std::string submitError;
    std::thread submitter([&] {
        figures.submitFailed = submitAll(stubs, options, submitError);
        figures.submitS = std::chrono::duration<double>(Clock::now() - start).count();
        submitted = true;
    });

    // Long enough for the slowest sandbox starts; a stuck run ends here, not never.
    const auto timeout = std::chrono::seconds(600 + 3 * options.commandSeconds + options.sessions / 4);
    std::vector<v1::Session> sessions;
    bool ended = false;
    while (!g_stop && Clock::now() - start < timeout) {
        const auto next = Clock::now() + kPollInterval;
        poll(fleet, stubs, options, start, figures, sessions);
        const auto finals =
            std::count_if(sessions.begin(), sessions.end(), [](const auto &s) { return isFinal(s.status()); });
        ended = submitted && finals == options.sessions - figures.submitFailed;
        if (ended)
            break;
        std::this_thread::sleep_until(next);
    }
    figures.totalS = std::chrono::duration<double>(Clock::now() - start).count();
    if (inRun)
        *inRun = false;
    // A session ends before its sandbox is given back (sandbox.released follows the final state):
    // the broker's CPU and events are counted once every sandbox is back.
    for (const auto endedAt = Clock::now(); ended && !g_stop && Clock::now() - endedAt < 120s;) {
        if (std::none_of(sessions.begin(), sessions.end(), [](const auto &s) { return !s.sandbox_id().empty(); }))
            break;
        std::this_thread::sleep_for(kPollInterval);
        poll(fleet, stubs, options, start, figures, sessions);
    }
    figures.releasedS = std::chrono::duration<double>(Clock::now() - start).count();
    const auto jiffiesEnd = machineJiffies();
    figures.machineBusy = static_cast<double>(jiffiesEnd.first - jiffiesStart.first)
        / static_cast<double>(std::max(1LL, jiffiesEnd.second - jiffiesStart.second));
    figures.broker.cpuSeconds = cpuSeconds(brokerPid) - figures.broker.cpuStart;
    for (int i = 0; i < 2; ++i) {
        ProcessFigures &pool = figures.pools[static_cast<size_t>(i)];
        pool.cpuSeconds = cpuSeconds(fleet.poolPid(i)) - pool.cpuStart;
    }
    submitter.join();

    for (const auto &s : sessions) {
        ++figures.statuses[v1::SessionStatus_Name(s.status())];
        figures.steps += s.steps();
        figures.events += s.last_seq();
        if (isFinal(s.status()))
            figures.backSeconds.push_back(static_cast<double>(s.updated_unix_ms() - s.created_unix_ms()) / 1000.0);
        if (s.status() != v1::SESSION_STATUS_SUCCEEDED && figures.failures.size() < 5)
            figures.failures.push_back(s.id() + " " + v1::SessionStatus_Name(s.status()) + ": " + s.status_reason());
    }
    if (!sessions.empty())
        figures.sampleKinds = eventKinds(stubs, sessions.front().id());
    if (auto pools = listPools(stubs)) {
        for (const auto &pool : pools->pools()) {
            std::string line = pool.name() + ": cgroups " + pool.cgroups() + ", disk limits " + pool.disk_limits();
            for (const auto &tier : pool.tiers()) {
                char hitRate[16];
                std::snprintf(hitRate, sizeof hitRate, "%.2f", tier.hit_rate());
                line += "; tier " + tier.tier().name() + " max " + std::to_string(tier.max()) + ", cold claims "
                    + std::to_string(tier.cold_fallbacks()) + ", warm hit rate " + hitRate;
            }
            figures.poolLines.push_back(line);
        }
    }

    const int succeeded = figures.statuses["SESSION_STATUS_SUCCEEDED"];
    if (g_stop)
        figures.problem = "interrupted";
    else if (figures.submitFailed > 0)
        figures.problem = std::to_string(figures.submitFailed) + " submits failed; the first: " + submitError;
    else if (!ended)
        figures.problem = "not every session ended within " + std::to_string(timeout.count()) + " s";
    else if (succeeded != options.sessions)
        figures.problem = std::to_string(options.sessions - succeeded) + " sessions did not succeed";
    figures.ok = figures.problem.empty();
    return figures;
}

void printFigures(const Options &options, const Figures &f)
{
    const double perSessionKb = static_cast<double>(f.brokerRssAtPeakKb - f.brokerRssBeforeKb) / options.sessions;
    std::printf("warm pools ready after %.1f s (%d warm per pool)\n", f.warmWaitS, warmPerPool(options));
    std::printf("submitted %d sessions in %.2f s (%.0f/s, %d threads), %d failed\n", options.sessions, f.submitS,
                options.sessions / std::max(f.submitS, 1e-9), kSubmitThreads, f.submitFailed);
    std::printf("peak sessions holding a sandbox at once:           %6d of %d\n", f.peakHolding, options.sessions);
    std::printf("peak commands under way at once (broker's log):    %6d\n", f.peakRunningByLog);
    std::printf("peak `sleep %d` processes in sandboxes at once:    %6d  (at %.1f s)\n", options.commandSeconds,
                f.peakSleeps, f.peakSleepsAtS);
    std::printf("peak sandboxes claimed per pool (pools' status):   %6d / %d\n", f.peakClaimed[0], f.peakClaimed[1]);
    std::printf("peak processes in sandboxes (warm ones included):  %6d\n", f.peakSandboxProcesses);
    std::printf("all ended after %.1f s; the command alone takes %d s: ratio %.2f; every sandbox back after %.1f s\n",
                f.totalS, options.commandSeconds, f.totalS / options.commandSeconds, f.releasedS);
    std::printf("machine CPU busy until then (everything on it, other users included): %.0f%% of %u cores\n",
                100.0 * f.machineBusy, std::thread::hardware_concurrency());
    std::vector<double> ended;
    for (const auto &[id, seconds] : f.endedAtS)
        ended.push_back(seconds);
    std::printf("per session, first submit to its end (1 s polls): p50 %.1f s, p99 %.1f s (ratio p50 %.2f); "
                "its creation to its sandbox back: p50 %.1f s, p99 %.1f s\n",
                percentile(ended, 0.5), percentile(ended, 0.99), percentile(ended, 0.5) / options.commandSeconds,
                percentile(f.backSeconds, 0.5), percentile(f.backSeconds, 0.99));
    std::printf("statuses:");
    for (const auto &[status, n] : f.statuses)
        std::printf(" %s %d", status.c_str(), n);
    std::printf("\n");
    std::printf("one session's log: %s\n", f.sampleKinds.c_str());
    for (const auto &failure : f.failures)
        std::printf("  not succeeded: %s\n", failure.c_str());
    std::printf("broker threads: %lld before submitting, %lld at the peak, %lld at most\n", f.brokerThreadsBefore,
                f.brokerThreadsAtPeak, f.broker.maxThreads);
    std::printf("broker RSS: %.1f MB before, %.1f MB at the peak, %.1f MB at most; per session %.1f KB; "
                "%lld open files at most\n",
                f.brokerRssBeforeKb / 1024.0, f.brokerRssAtPeakKb / 1024.0, f.broker.maxRssKb / 1024.0, perSessionKb,
                f.broker.maxFds);
    std::printf("broker CPU: %.2f s until every sandbox was back (%.2f cores); %lld steps (tool calls completed), "
                "%lld events: %.3f ms per step, %.3f ms per event\n",
                f.broker.cpuSeconds, f.broker.cpuSeconds / f.releasedS, static_cast<long long>(f.steps),
                static_cast<long long>(f.events), 1000.0 * f.broker.cpuSeconds / std::max<int64_t>(f.steps, 1),
                1000.0 * f.broker.cpuSeconds / std::max<int64_t>(f.events, 1));
    for (size_t i = 0; i < 2; ++i)
        std::printf("pool %s: %lld threads at most, %.1f MB RSS at most, %lld open files at most, %.2f s CPU "
                    "(%.2f cores)\n",
                    kPoolNames[i].c_str(), f.pools[i].maxThreads, f.pools[i].maxRssKb / 1024.0, f.pools[i].maxFds,
                    f.pools[i].cpuSeconds, f.pools[i].cpuSeconds / f.releasedS);
    for (const auto &line : f.poolLines)
        std::printf("  %s\n", line.c_str());
    std::fflush(stdout);
}

#if PADDOCK_FLEET_BENCH_CONSOLE
struct ConsoleFigures {
    bool connected = false;
    std::vector<double> stallsMs;
    int maxRows = 0;
    int finalRows = 0;
};

// The console following the fleet while runFleet() runs on a thread of its own: the GUI thread
// runs the event loop, a 5 ms probe timer measures its stalls, a 100 ms timer notes the rows.
Figures runWithConsole(int &argc, char **argv, const Fleet &fleet, const Options &options, ConsoleFigures &out)
{
    using namespace paddock::console;
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    if (qEnvironmentVariableIsEmpty("XDG_RUNTIME_DIR"))
        qputenv("XDG_RUNTIME_DIR", QByteArray::fromStdString((fleet.dir() / "xdg/run").string()));
    QApplication app(argc, argv);
    Theme::captureSystemPalette();
    Theme::apply(ThemeMode::Light);
    GrpcConsoleClient client;
    MainWindow window(&client, MainWindow::Options{.persistSettings = false});
    window.resize(1280, 800);
    window.show();
    window.showPage(MainWindow::Page::Sessions);
    window.connectToBroker(QString::fromStdString(fleet.address()));
    QElapsedTimer connecting;
    connecting.start();
    while (client.connectionState() != ConnectionState::Connected && connecting.elapsed() < 15000 && !g_stop)
        QApplication::processEvents(QEventLoop::AllEvents, 50);
    out.connected = client.connectionState() == ConnectionState::Connected;
    QAbstractItemModel *table = window.sessionsView()->tableView()->model();

    QElapsedTimer clock;
    clock.start();
    qint64 lastNs = clock.nsecsElapsed();
    QTimer probe;
    probe.setTimerType(Qt::PreciseTimer);
    probe.setInterval(kProbeIntervalMs);
    std::atomic<bool> inRun{false};   // the stalls of the run only, not of the warm-up before it
    QObject::connect(&probe, &QTimer::timeout, [&] {
        const qint64 now = clock.nsecsElapsed();
        if (inRun)
            out.stallsMs.push_back(std::max(0.0, double(now - lastNs) / 1e6 - kProbeIntervalMs));
        lastNs = now;
    });
    std::atomic<bool> done{false};
    QTimer watch;
    watch.setInterval(100);
    QObject::connect(&watch, &QTimer::timeout, [&] {
        out.maxRows = std::max(out.maxRows, table->rowCount());
        if (done || g_stop)
            app.quit();
    });

    Figures figures;
    probe.start();
    watch.start();
    std::thread run([&] {
        figures = runFleet(fleet, options, &inRun);
        done = true;
    });
    app.exec();
    run.join();
    probe.stop();
    // The last changes reach the table within the client's coalescing interval.
    QElapsedTimer settle;
    settle.start();
    while (settle.elapsed() < 2000)
        QApplication::processEvents(QEventLoop::AllEvents, 50);
    out.finalRows = table->rowCount();
    out.maxRows = std::max(out.maxRows, out.finalRows);
    window.close();
    return figures;
}

void printConsole(const Options &options, const ConsoleFigures &c)
{
    const double p99 = percentile(c.stallsMs, 0.99);
    std::printf("console (GrpcConsoleClient + MainWindow, Sessions page, offscreen) following the fleet:\n");
    std::printf("  connected: %s; the sessions table reached %d rows (%d at the end) of %d: %s\n",
                c.connected ? "yes" : "NO", c.maxRows, c.finalRows, options.sessions,
                c.maxRows >= options.sessions ? "all" : "NOT ALL");
    std::printf("  GUI stall (5 ms probe gap minus 5 ms) over %zu ticks: p50 %.2f ms, p99 %.2f ms, max %.2f ms; "
                "budget p99 <= %.0f ms: %s\n",
                c.stallsMs.size(), percentile(c.stallsMs, 0.5), p99, percentile(c.stallsMs, 1.0), kStallBudgetMs,
                p99 <= kStallBudgetMs ? "met" : "MISSED");
    std::fflush(stdout);
}
#endif

} // namespace

int main(int argc, char **argv)
{
    auto options = parseOptions(argc, argv);
    if (!options) {
        std::fprintf(stderr,
                     "usage: fleet_bench [--sessions 2000] [--command-seconds 20] [--warm 32] [--no-console]\n");
        return 2;
    }
#if !PADDOCK_FLEET_BENCH_CONSOLE
    options->console = false;
#endif
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    std::signal(SIGPIPE, SIG_IGN);
    const std::string fileLimit = raiseFileLimit();
    std::printf("fleet_bench: %d sessions x `sleep %d`, two pools (lite, bwrap; warm %d, max %d each) in network "
                "namespaces, paddockd with its default config%s\n",
                options->sessions, options->commandSeconds, warmPerPool(*options), maxCountPerPool(*options),
                options->console ? ", the console following" : "");
    std::printf("machine: %u cores, RLIMIT_NOFILE %s for the daemons, pid_max %s, load average %s\n",
                std::thread::hardware_concurrency(), fileLimit.c_str(),
                firstFields(readWhole("/proc/sys/kernel/pid_max"), 1).c_str(),
                firstFields(readWhole("/proc/loadavg"), 3).c_str());
    std::fflush(stdout);

    Fleet fleet(*options);
    if (const std::string error = fleet.start(); !error.empty()) {
        std::fprintf(stderr, "fleet_bench: the fleet did not start: %s\n%s", error.c_str(), fleet.logTails().c_str());
        ::setenv("PADDOCK_KEEP_TEST_DIRS", "1", 1);
        return 1;
    }

    Figures figures;
    bool consoleOk = true;
#if PADDOCK_FLEET_BENCH_CONSOLE
    ConsoleFigures console;
    if (options->console) {
        figures = runWithConsole(argc, argv, fleet, *options, console);
        consoleOk = console.connected && console.maxRows >= options->sessions;
    } else {
        figures = runFleet(fleet, *options);
    }
#else
    figures = runFleet(fleet, *options);
#endif
    printFigures(*options, figures);
#if PADDOCK_FLEET_BENCH_CONSOLE
    if (options->console)
        printConsole(*options, console);
#endif
    if (!figures.ok || !consoleOk) {
        std::fprintf(stderr, "fleet_bench: the run failed: %s\n%s",
                     !figures.ok ? figures.problem.c_str() : "the console's table did not list every session",
                     fleet.logTails().c_str());
        ::setenv("PADDOCK_KEEP_TEST_DIRS", "1", 1);   // TempDir keeps the logs and prints where
        return 1;
    }
    return 0;
}
