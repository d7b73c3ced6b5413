#pragma once
// The egress matrix's shared parts: the network namespaces, the fake internet in them, the tier
// cases and the GoogleTest fixture that starts a real paddock-pool and paddockd per test. The
// tests are in egress_netns_test.cpp (what the proxy lets through, refuses and records) and
// egress_netns_review_test.cpp (hosts opened by an approved review or a grant); each is its own
// binary whose main() (egress_netns_network.cpp) makes the network before any thread exists.
//
// Network (made in main() before any thread exists, removed at exit):
//   <ns>p  "the execution host": this test process, the pool, the broker and their sandboxes.
//          lo up; veth 198.51.100.1/24 and 10.77.0.1/24; a route for 169.254.169.254 onto the veth.
//   <ns>i  "the internet": an HTTP server (a thread of this test, its socket made in <ns>i) on
//          port 8080 of 198.51.100.2 (allowed.test), 198.51.100.3 (other.test), 198.51.100.4
//          (approved.test, reached only after a review approves it), 10.77.0.2 (internal.test)
//          and 169.254.169.254 (a fake metadata service).
// Neither namespace has a default route or any other interface, so nothing here can send a
// packet beyond this machine's two test namespaces, even through a bug. The fake metadata server
// and the non-allowlisted host are reachable at the IP level on purpose: a refusal is the
// proxy's, not the network's, and the server's request log proves nothing refused got through.
// Names come from a private /etc/hosts (a bind mount in this process's own mount namespace), which
// the pool's getaddrinfo reads. The namespaces, veths and temporary files are named after the
// process id, so two test processes (ctest runs each test in its own) never share them.
//
// Needs root (namespaces, bwrap); skips with a message otherwise. Parameterized over tiers: a
// runsc tier is one more line in kTierCases once that runtime binds the egress socket.
//
// Threads: main() sets the network up and tears it down on the main thread, before and after the
// tests, which run on the main thread too. InternetServer serves on a thread of its own;
// requests() may be called from any thread. Everything else is for the main thread only.

#include "tests/integration/harness.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

namespace paddock::test {

namespace fs = std::filesystem;
using nlohmann::json;

extern std::string g_skipReason;   // set: the network could not be made; tests skip with it

// Runs a shell command with its output discarded; returns its exit code (-1 if it did not exit).
int run(const std::string &command);

// The fake internet's HTTP server: answers "hello from <local address> <path>" and logs requests.
class InternetServer {
public:
    void start(const std::string &nsName);
    void stop();
    std::vector<std::string> requests();

private:
    void serve();

    std::thread m_thread;
    int m_listen = -1;
    std::atomic<bool> m_stop{false};
    std::mutex m_mutex;
    std::vector<std::string> m_requests;
};

extern InternetServer g_server;

// The fake internet's HTTPS server (egress_netns_network.cpp) serves kTlsBody with a self-signed
// certificate for allowed.test (g_tlsCertPem) that a sandbox trusts only when told to.
extern std::string g_tlsCertPem;
constexpr const char *kTlsBody = "hello over tls from allowed.test";

struct TierCase {
    std::string name;      // the tier's name in pool.toml
    std::string runtime;   // its runtime
};

// What ctest shows for each case, instead of the bytes of the struct.
inline void PrintTo(const TierCase &tc, std::ostream *os) { *os << tc.name << " (" << tc.runtime << ")"; }

// One allowlist tier per runtime; each binds SandboxSpec::egressSocket the same way.
inline const std::vector<TierCase> kTierCases = {{"egress", "bwrap"}, {"egress", "runsc"}, {"egress", "crun"}};

// Every spelling of the metadata service the proxy must refuse, as sent in a request line.
inline const std::vector<std::string> kMetadataSpellings = {
    "169.254.169.254", "2852039166", "0xa9fea9fe", "0XA9FEA9FE", "0251.0376.0251.0376", "169.254.43518",
    "[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "169.254.169.254.", "[fd00:ec2::254]",
    "metadata.google.internal", "METADATA.GOOGLE.INTERNAL.", "0xa9.0xfe.0xa9.0xfe"};

// A bash function that sends one raw request line through the sandbox's proxy and prints the
// status line (bash's /dev/tcp: curl would normalize odd spellings first).
inline const char *kProbe = "probe() { exec 3<>/dev/tcp/127.0.0.1/3128 || { echo \"$1 noproxy\"; return; }; "
                            "printf '%s\\r\\nHost: x\\r\\n\\r\\n' \"$1\" >&3; read -r status <&3; echo \"$1 => $status\"; "
                            "exec 3<&-; }\n";

// An event's payload as JSON (paddockctl prints it as a string or as an object).
inline json payload(const json &event)
{
    const json &p = event.at("payload");
    return p.is_string() ? json::parse(p.get<std::string>()) : p;
}

// The payloads of the events of one kind, in order.
inline std::vector<json> ofKind(const std::vector<json> &events, const std::string &kind)
{
    std::vector<json> out;
    for (const auto &e : events)
        if (e.value("kind", "") == kind)
            out.push_back(payload(e));
    return out;
}

// The output of the first command containing commandPart, or a note saying there was none.
inline std::string stdoutOf(const std::vector<json> &events, const std::string &commandPart)
{
    for (const auto &p : ofKind(events, "tool.result"))
        if (p.value("command", "").find(commandPart) != std::string::npos)
            return p.value("stdout", "") + p.value("stderr", "");
    return "(no tool.result for a command containing '" + commandPart + "')";
}

class EgressNetnsTest : public ::testing::TestWithParam<TierCase> {
protected:
    void SetUp() override
    {
        if (!g_skipReason.empty())
            GTEST_SKIP() << g_skipReason;
        const auto missing = missingBinaries({"paddockd", "paddock-pool", "paddock-sandbox-init", "paddockctl"});
        if (!missing.empty())
            GTEST_SKIP() << "not built: " << missing.front();
        if (run("command -v curl") != 0 || !fs::exists("/usr/bin/python3") || !fs::exists("/usr/bin/bash"))
            GTEST_SKIP() << "needs curl, /usr/bin/python3 and /usr/bin/bash on this host (the sandbox uses its /usr)";
        m_dir = std::make_unique<TempDir>("paddock-egress");
        const TierCase &tc = GetParam();
        std::ofstream(*m_dir / "pool.toml") << "pool_id = \"egress-test\"\n"
                                               "[[tier]]\nname = \""
                                            << tc.name << "\"\nruntime = \"" << tc.runtime
                                            << "\"\nwarm_count = 1\nmax_count = 4\nnetwork = \"allowlist\"\n"
                                               "allowlist = [\"allowed.test\", \"internal.test:8080\", \"10.77.0.0/24\"]\n"
                                               "[[tier]]\nname = \"lite\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 4\n"
                                               "network = \"none\"\n";
        const std::map<std::string, std::string> env = {{"XDG_CONFIG_HOME", (*m_dir / "xdg/config").string()},
                                                        {"XDG_DATA_HOME", (*m_dir / "xdg/data").string()},
                                                        {"XDG_RUNTIME_DIR", (*m_dir / "xdg/run").string()}};
        fs::create_directories(*m_dir / "xdg/run");
        m_poolPort = freeLoopbackPort();
        const std::string endpoint = "127.0.0.1:" + std::to_string(m_poolPort);
        auto pool = Daemon::start({binaryPath("paddock-pool").string(), "--config", (*m_dir / "pool.toml").string(),
                                   "--listen", endpoint, "--state-dir", (*m_dir / "pool").string()},
                                  *m_dir / "pool.log", env);
        ASSERT_TRUE(pool) << pool.error().message;
        m_pool = std::make_unique<Daemon>(std::move(*pool));
        ASSERT_TRUE(waitForHealthy(endpoint, 30s, m_pool.get())) << m_pool->logTail();
        auto broker = startBroker(*m_dir, endpoint);
        ASSERT_TRUE(broker) << broker.error().message;
        m_broker = std::make_unique<BrokerProcess>(std::move(*broker));
    }

    void TearDown() override
    {
        if (HasFailure()) {
            if (m_pool)
                std::cerr << "---- paddock-pool log ----\n" << m_pool->logTail(60);
            if (m_broker)
                std::cerr << "---- paddockd log ----\n" << m_broker->daemon.logTail(40);
        }
        if (m_broker)
            m_broker->daemon.terminate();
        if (m_pool)
            m_pool->terminate();
    }

    // Runs a playbook on a tier to its end; returns its events (the session's log).
    std::vector<json> runPlaybook(const std::string &tier, const std::string &playbook, bool expectSuccess = true)
    {
        const fs::path file = *m_dir / ("pb-" + std::to_string(m_playbooks++) + ".toml");
        std::ofstream(file) << playbook;
        CliResult r = runCli({"--broker", m_broker->address, "--output", "json", "submit", "--playbook", file.string(),
                              "--tier", tier, "-f"},
                             {}, 180s);
        EXPECT_EQ(r.exitCode, expectSuccess ? 0 : 7) << r.out << r.err;
        std::vector<json> events;
        for (const auto &line : splitLines(r.out)) {
            auto j = json::parse(line, nullptr, false);
            if (!j.is_discarded() && j.contains("kind"))
                events.push_back(j);
        }
        return events;
    }

    std::unique_ptr<TempDir> m_dir;
    std::unique_ptr<Daemon> m_pool;
    std::unique_ptr<BrokerProcess> m_broker;
    int m_poolPort = 0;
    int m_playbooks = 0;
};

} // namespace paddock::test
