// Many hosts, made with network namespaces on this machine: the broker in one namespace, two pools
// in two others, joined by veth pairs on a bridge in the broker's namespace (a private /24, no
// route out of it). The pools serve TLS with bearer tokens, the broker treats them as remote (no
// allow_local_execution). Sessions run to completion; no sandbox process ever belongs to the
// broker's namespace or descends from a process in it; kill -9 of one pool mid-run: its sessions
// finish on the other, each repeating at most one step, and their logs say they moved.
//
// Needs root (ip netns). Skips with the reason otherwise. The network is TestNetwork
// (test_network.h), deleted at the end even when an assertion fails.

#include "tests/integration/daemons_fixture.h"
#include "tests/integration/multi_host_support.h"
#include "tests/integration/test_network.h"

#include <dirent.h>
#include <set>
#include <unistd.h>

namespace paddock::test {
namespace {

constexpr int kSessions = 6;
constexpr int kSteps = 10;

std::string readProc(pid_t pid, const char *file)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/" + file);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

pid_t parentOf(pid_t pid)
{
    const std::string status = readProc(pid, "status");
    const auto at = status.find("\nPPid:");
    return at == std::string::npos ? 0 : static_cast<pid_t>(std::atol(status.c_str() + at + 6));
}

// Every running paddock-sandbox-init (PID 1 of a sandbox), by its host pid.
std::vector<pid_t> sandboxInits()
{
    std::vector<pid_t> out;
    for (const auto &entry : std::filesystem::directory_iterator("/proc")) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0])))
            continue;
        const pid_t pid = static_cast<pid_t>(std::atol(name.c_str()));
        const std::string cmdline = readProc(pid, "cmdline");
        if (cmdline.find("paddock-sandbox-init") != std::string::npos && cmdline.find("--listen-fd") != std::string::npos
            && cmdline.rfind("bwrap", 0) != 0 && cmdline.find("bwrap") == std::string::npos)
            out.push_back(pid);
    }
    return out;
}

class MultiHost : public ::testing::Test {
protected:
    void SetUp() override
    {
        PADDOCK_SKIP_IF_MISSING(kDaemonBinaries);
        if (const std::string why = namespacesUnavailable("the multi-host test"); !why.empty())
            GTEST_SKIP() << why;
        m_dir = std::make_unique<TempDir>("paddock-multihost");
        m_net = std::make_unique<TestNetwork>(m_dir->path());
        if (const std::string error = m_net->create(); !error.empty()) {
            m_net.reset();
            GTEST_SKIP() << "network namespaces are not available here: " << error;
        }
        m_env = hermeticEnvFor(m_dir->path());
    }

    void TearDown() override
    {
        if (HasFailure()) {
            if (m_broker)
                std::cerr << "---- paddockd log (tail) ----\n" << m_broker->logTail(80);
            for (auto &pool : m_pools)
                std::cerr << "---- paddock-pool log (tail) ----\n" << pool.logTail(30);
        }
        if (m_broker)
            m_broker->terminate();
        for (auto &pool : m_pools)
            pool.terminate();
        m_net.reset();   // deletes the namespaces, whatever happened above
    }

    void checkNoSandboxInBrokerNamespace()
    {
        const std::string brokerNs = netnsOf(m_broker->pid());
        ASSERT_FALSE(brokerNs.empty());
        for (const pid_t init : sandboxInits()) {
            ++m_sandboxesSeen;
            EXPECT_NE(netnsOf(init), brokerNs) << "sandbox init " << init << " is in the broker's network namespace";
            // Its ancestors: a pool in a pool namespace, never the broker or its namespace.
            bool underAPool = false;
            for (pid_t p = parentOf(init); p > 1; p = parentOf(p)) {
                EXPECT_NE(p, m_broker->pid()) << "sandbox init " << init << " descends from the broker";
                for (size_t i = 0; i < m_pools.size(); ++i) {
                    if (p == m_pools[i].pid()) {
                        underAPool = true;
                        EXPECT_EQ(netnsOf(p), m_poolNs[i]);
                        EXPECT_NE(netnsOf(p), brokerNs);
                    }
                }
            }
            // An init whose pool was just killed may have been re-parented for a moment.
            if (!underAPool) {
                EXPECT_NE(netnsOf(init), brokerNs);
            }
        }
    }

    std::unique_ptr<TempDir> m_dir;
    std::unique_ptr<TestNetwork> m_net;
    std::map<std::string, std::string> m_env;
    std::vector<Daemon> m_pools;
    std::vector<std::string> m_poolNs;
    std::optional<Daemon> m_broker;
    int m_sandboxesSeen = 0;
    std::vector<double> m_snapshotMs;   // checkpoint durations recorded in the logs
    std::vector<double> m_execMs;       // command durations recorded in the logs
};

TEST_F(MultiHost, SessionsRunOnRemotePoolsAndMoveWhenOneIsKilled)
{
    TestCa ca(m_dir->path() / "pki", "paddock-test-ca");
    ASSERT_TRUE(ca.ok());
    const auto token = m_dir->path() / "pool.token";
    std::ofstream(token) << "multi-host-token-" << ::getpid() << "\n";
    const std::vector<std::string> names{"east", "west"};

    for (int i = 0; i < 2; ++i) {
        auto cert = ca.issue(names[i], "IP:" + TestNetwork::poolAddress(i));
        ASSERT_TRUE(cert) << cert.error().message;
        const auto config = m_dir->path() / (names[i] + ".toml");
        // Nothing shared between the pools: the workspace moves through the broker's checkpoint
        // store (docs/checkpoints.md).
        std::ofstream(config) << "pool_id = \"" << names[i] << "\"\n[[tier]]\nname = \"lite\"\n"
                              << "runtime = \"bwrap\"\nwarm_count = 2\nmax_count = 16\n";
        auto pool = Daemon::start(m_net->in(m_net->pool(i), {binaryPath("paddock-pool").string(), "--config",
                                                              config.string(), "--listen",
                                                              TestNetwork::poolAddress(i) + ":7701", "--state-dir",
                                                              (m_dir->path() / ("state-" + names[i])).string(),
                                                              "--tls-cert", cert->first.string(), "--tls-key",
                                                              cert->second.string(), "--token-file", token.string()}),
                                  m_dir->path() / (names[i] + ".log"), m_env);
        ASSERT_TRUE(pool) << pool.error().message;
        m_pools.push_back(std::move(*pool));
        auto ready = waitForPoolLog(m_pools.back());
        ASSERT_TRUE(ready) << ready.error().message;
        m_poolNs.push_back(netnsOf(m_pools.back().pid()));
    }

    std::string config = "pool_health_interval_ms = 250\npool_lost_after_ms = 2000\n";
    for (int i = 0; i < 2; ++i)
        config += "\n[[pool]]\nname = \"" + names[i] + "\"\nendpoint = \"" + TestNetwork::poolAddress(i)
            + ":7701\"\ntls_ca = \"" + ca.pem().string() + "\"\ntoken_file = \"" + token.string() + "\"\n";
    const auto configFile = m_dir->path() / "broker.toml";
    std::ofstream(configFile) << config;
    const auto socket = m_dir->path() / "run/broker.sock";
    auto broker = Daemon::start(m_net->in(m_net->broker(), {binaryPath("paddockd").string(), "--config",
                                                           configFile.string(), "--data-dir",
                                                           (m_dir->path() / "broker").string(), "--socket",
                                                           socket.string(), "--playbook-dir", playbookDir().string(),
                                                           "--workers", "8"}),
                                m_dir->path() / "broker.log", m_env);
    ASSERT_TRUE(broker) << broker.error().message;
    m_broker.emplace(std::move(*broker));
    const std::string address = "unix:" + socket.string();
    ASSERT_TRUE(waitForHealthy(address, 30s, &*m_broker));
    for (size_t i = 0; i < m_poolNs.size(); ++i)
        ASSERT_NE(m_poolNs[i], netnsOf(m_broker->pid())) << "the pools must not share the broker's namespace";

    // Both pools healthy, remote, over TLS with a token.
    nlohmann::json pools;
    for (int i = 0; i < 200; ++i) {
        pools = listPools(address);
        if (findPool(pools, "east").value("healthy", false) && findPool(pools, "west").value("healthy", false))
            break;
        std::this_thread::sleep_for(100ms);
    }
    for (const auto &name : names) {
        const auto pool = findPool(pools, name);
        ASSERT_TRUE(pool.value("healthy", false)) << pool.dump(2);
        EXPECT_EQ(pool["execution"], "remote");
        EXPECT_EQ(pool["transport"], "tls");
        EXPECT_EQ(pool["token"], true);
    }
    EXPECT_EQ(pools["local_execution"], false);

    // Each step appends to a marker and sleeps, so the kill lands in the middle of the run: about
    // 10 s per session, all running at once, so that a loaded machine's slow polling below still
    // kills east before its sessions are done.
    std::string playbook = "name = \"multi-host\"\ngoal = \"steps on a remote pool\"\n";
    for (int step = 1; step <= kSteps; ++step)
        playbook += "\n[[step]]\ntool = \"run_command\"\ncommand = \"echo step-" + std::to_string(step)
            + " >> marker.txt && sleep 1\"\n";
    playbook += "\n[[step]]\ntool = \"run_command\"\ncommand = \"cat marker.txt\"\n";
    playbook += "\n[[step]]\ntool = \"finish\"\nsummary = \"all steps ran\"\n";
    const auto playbookFile = m_dir->path() / "multi-host.toml";
    std::ofstream(playbookFile) << playbook;
    std::vector<std::string> ids;
    for (int i = 0; i < kSessions; ++i) {
        const CliResult submitted = runCli({"--broker", address, "submit", "--playbook", playbookFile.string(), "--output", "json"});
        ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
        ids.push_back(nlohmann::json::parse(submitted.out)["id"].get<std::string>());
    }

    // Wait until every session has a sandbox and a few results, looking for sandboxes meanwhile.
    auto poolOf = [&](const std::string &id) {
        std::string pool;
        for (const auto &event : sessionEvents(address, id)) {
            if (event["kind"] == "sandbox.claimed")
                pool = event["payload"]["pool"];
        }
        return pool;
    };
    auto results = [&](const std::string &id) {
        int n = 0;
        for (const auto &event : sessionEvents(address, id))
            n += event["kind"] == "tool.result";
        return n;
    };
    for (int i = 0; i < 300; ++i) {
        checkNoSandboxInBrokerNamespace();
        if (std::all_of(ids.begin(), ids.end(), [&](const std::string &id) { return results(id) >= 2; }))
            break;
        std::this_thread::sleep_for(200ms);
    }
    std::map<std::string, std::string> placedOn;
    std::map<std::string, int> perPool;
    for (const auto &id : ids) {
        placedOn[id] = poolOf(id);
        ++perPool[placedOn[id]];
    }
    ASSERT_GT(perPool["east"], 0) << "placement put nothing on east";
    ASSERT_GT(perPool["west"], 0) << "placement put nothing on west";
    ASSERT_GT(m_sandboxesSeen, 0) << "no sandbox init was found to check";

    // kill -9 of east in the middle of the run.
    checkNoSandboxInBrokerNamespace();
    m_pools[0].kill9();
    ASSERT_TRUE(m_pools[0].waitExit(10s).has_value());

    std::map<std::string, std::string> status;
    for (int round = 0; round < 1200; ++round) {
        bool allDone = true;
        for (const auto &id : ids) {
            const CliResult shown = runCli({"--broker", address, "show", id, "--output", "json"});
            auto j = nlohmann::json::parse(shown.out, nullptr, false);
            status[id] = j.is_object() ? j.value("status", std::string()) : std::string();
            allDone = allDone && (status[id] == "succeeded" || status[id] == "failed" || status[id] == "cancelled");
        }
        if (allDone)
            break;
        if (round % 5 == 0)
            checkNoSandboxInBrokerNamespace();
        std::this_thread::sleep_for(200ms);
    }

    int moved = 0;
    for (const auto &id : ids) {
        SCOPED_TRACE("session " + id + " first placed on " + placedOn[id]);
        EXPECT_EQ(status[id], "succeeded");
        const auto events = sessionEvents(address, id);
        // Steps are tool calls: each once in the log (the model was not asked again), each with
        // exactly one result.
        std::map<std::string, int> calls;
        std::map<std::string, int> answered;
        std::vector<nlohmann::json> lost;
        std::vector<nlohmann::json> moves;
        for (const auto &event : events) {
            if (event["kind"] == "tool.call")
                ++calls[event["payload"]["call_id"].get<std::string>()];
            else if (event["kind"] == "tool.result")
                ++answered[event["payload"]["call_id"].get<std::string>()];
            else if (event["kind"] == "sandbox.lost")
                lost.push_back(event["payload"]);
            else if (event["kind"] == "sandbox.moved")
                moves.push_back(event["payload"]);
        }
        EXPECT_EQ(calls.size(), static_cast<size_t>(kSteps + 2));
        // The workspace followed the session: the last command reads the marker every step wrote,
        // each step once.
        std::string marker;
        for (const auto &event : events) {
            if (event["kind"] == "tool.result" && event["payload"].value("command", std::string()) == "cat marker.txt")
                marker = event["payload"].value("stdout", std::string());
            if (event["kind"] == "checkpoint")
                m_snapshotMs.push_back(event["payload"].value("duration_ms", 0.0));
            if (event["kind"] == "tool.result" && event["payload"].contains("duration_ms"))
                m_execMs.push_back(event["payload"].value("duration_ms", 0.0));
        }
        int lines = 0;
        for (int step = 1; step <= kSteps; ++step) {
            const std::string line = "step-" + std::to_string(step) + "\n";
            int n = 0;
            for (size_t at = marker.find(line); at != std::string::npos; at = marker.find(line, at + 1))
                n += at == 0 || marker[at - 1] == '\n';
            EXPECT_GE(n, 1) << "step " << step << " is missing from the marker:\n" << marker;
            lines += n;
        }
        // The repeated step ran on east too, but its effect went with east's workspace: the move
        // restored the checkpoint before it, so each step is in the marker exactly once.
        EXPECT_EQ(lines, kSteps) << "a step's effect is missing or doubled:\n" << marker;
        for (const auto &[call, n] : calls) {
            EXPECT_EQ(n, 1) << call << " was asked of the model more than once";
            EXPECT_EQ(answered[call], 1) << call;
        }
        if (placedOn[id] == "west") {
            EXPECT_TRUE(lost.empty()) << "a session on the surviving pool moved";
            continue;
        }
        // On east: lost once, moved once to west, and the log says so.
        ASSERT_EQ(lost.size(), 1u);
        ASSERT_EQ(moves.size(), 1u);
        ++moved;
        EXPECT_EQ(lost[0]["pool"], "east");
        EXPECT_EQ(lost[0]["reason"], "pool_lost");
        EXPECT_EQ(moves[0]["from_pool"], "east");
        EXPECT_EQ(moves[0]["to_pool"], "west");
        EXPECT_FALSE(moves[0]["note"].get<std::string>().empty());
        EXPECT_EQ(moves[0]["workspace"], "restored") << moves[0].dump();
        EXPECT_TRUE(moves[0]["manifest"].is_string());
        // At most one step repeated: the marker on west holds the steps from the interrupted one on,
        // each once. The marker's lines are the steps that ran on west; steps before the move ran on
        // east (one per result before the loss), so together they cover each step once, plus at
        // most the one repeated.
        int resultsBeforeLoss = 0;
        for (const auto &event : events) {
            if (event["kind"] == "sandbox.lost")
                break;
            resultsBeforeLoss += event["kind"] == "tool.result";
        }
        const int stepsOnWest = kSteps - resultsBeforeLoss;
        EXPECT_GE(stepsOnWest, 1);
        EXPECT_LE(resultsBeforeLoss + stepsOnWest, kSteps + 1) << "more than one step repeated";
        EXPECT_EQ(moves[0]["repeats_call"], lost[0]["interrupted_call"]);
    }
    EXPECT_GT(moved, 0) << "east held no session when it was killed; the test proved nothing";

    const std::string log = m_broker->logText();
    EXPECT_NE(log.find("pool 'east' at " + TestNetwork::poolAddress(0) + ":7701 is unhealthy"), std::string::npos);
    EXPECT_NE(log.find("moved from pool 'east' to pool 'west'"), std::string::npos);
    pools = listPools(address);
    EXPECT_FALSE(findPool(pools, "east")["healthy"].get<bool>());
    EXPECT_TRUE(findPool(pools, "west")["healthy"].get<bool>());
    std::cout << "multi-host: " << kSessions << " sessions, " << perPool["east"] << " first on east, "
              << perPool["west"] << " on west; " << moved << " moved after kill -9 of east; " << m_sandboxesSeen
              << " sandbox-init observations, none in the broker's namespace\n";
    auto median = [](std::vector<double> v) {
        if (v.empty())
            return 0.0;
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    ASSERT_FALSE(m_snapshotMs.empty()) << "no checkpoint was recorded";
    std::cout << "checkpoint per step: median " << median(m_snapshotMs) << " ms over " << m_snapshotMs.size()
              << " checkpoints; command median " << median(m_execMs) << " ms (each command sleeps 400 ms)\n";
}

} // namespace
} // namespace paddock::test
