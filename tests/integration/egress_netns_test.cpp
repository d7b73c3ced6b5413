// The egress matrix, end to end: real paddock-pool, paddockd and paddockctl, real bubblewrap
// sandboxes, real curl and python3 inside them, all inside network namespaces this test creates.
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
// the pool's getaddrinfo reads.
//
// Needs root (namespaces, bwrap); skips with a message otherwise. Parameterized over tiers: a
// runsc tier is one more line in kTierCases once that runtime binds the egress socket.

#include "broker/engine/step_engine.h"
#include "broker/llm/scripted_model.h"
#include "broker/pool_client/grpc_pool_client.h"
#include "broker/review/review_desk.h"
#include "broker/store/sqlite_event_store.h"
#include "tests/integration/harness.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <future>
#include <fstream>
#include <mutex>
#include <set>
#include <chrono>
#include <thread>

namespace paddock::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string g_skipReason;      // set: the network could not be made; tests skip with it
std::string g_poolNs, g_inetNs;
fs::path g_hostsFile;

int run(const std::string &command)
{
    int rc = std::system((command + " >/dev/null 2>&1").c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The fake internet's HTTP server: answers "hello from <local address> <path>" and logs requests.
class InternetServer {
public:
    void start(const std::string &nsName)
    {
        std::promise<std::string> ready;
        auto started = ready.get_future();
        m_thread = std::thread([this, nsName, &ready] {
            int nsFd = ::open(("/run/netns/" + nsName).c_str(), O_RDONLY | O_CLOEXEC);
            if (nsFd < 0 || ::setns(nsFd, CLONE_NEWNET) != 0) {
                ready.set_value("cannot enter " + nsName);
                return;
            }
            ::close(nsFd);
            m_listen = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            int one = 1;
            ::setsockopt(m_listen, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            sockaddr_in addr{};
            addr.sin_family = AF_INET;
            addr.sin_port = htons(8080);
            if (::bind(m_listen, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 || ::listen(m_listen, 64) != 0) {
                ready.set_value("cannot listen on :8080 in " + nsName);
                return;
            }
            ready.set_value("");
            serve();
        });
        const std::string err = started.get();
        if (!err.empty())
            g_skipReason = err;
    }

    void stop()
    {
        m_stop = true;
        if (m_listen >= 0)
            ::shutdown(m_listen, SHUT_RDWR);
        if (m_thread.joinable())
            m_thread.join();
    }

    std::vector<std::string> requests()
    {
        std::lock_guard lock(m_mutex);
        return m_requests;
    }

private:
    void serve()
    {
        while (!m_stop) {
            sockaddr_in local{};
            socklen_t len = sizeof local;
            int c = ::accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            timeval tv{5, 0};   // a tunnel that never sends must not stall the next request
            ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            ::getsockname(c, reinterpret_cast<sockaddr *>(&local), &len);
            char ip[INET_ADDRSTRLEN] = {};
            ::inet_ntop(AF_INET, &local.sin_addr, ip, sizeof ip);
            std::string head;
            char buf[4096];
            while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
                ssize_t n = ::read(c, buf, sizeof buf);
                if (n <= 0)
                    break;
                head.append(buf, static_cast<size_t>(n));
            }
            const std::string line = head.substr(0, head.find("\r\n"));
            {
                std::lock_guard lock(m_mutex);
                m_requests.push_back(std::string(ip) + " " + line);
            }
            const std::string body = std::string("hello from ") + ip + " " + line + "\n";
            const std::string resp = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: " +
                                     std::to_string(body.size()) + "\r\n\r\n" + body;
            (void)!::write(c, resp.data(), resp.size());
            ::close(c);
        }
        ::close(m_listen);
    }

    std::thread m_thread;
    int m_listen = -1;
    std::atomic<bool> m_stop{false};
    std::mutex m_mutex;
    std::vector<std::string> m_requests;
};

InternetServer g_server;

// The fake internet's HTTPS server: openssl s_server -WWW on 198.51.100.2:8443 in <ns>i, serving
// the file "tls" of g_tlsDir, with a self-signed certificate for allowed.test (g_tlsCertPem) that
// a sandbox trusts only when told to.
fs::path g_tlsDir;
pid_t g_tlsServer = -1;
std::string g_tlsCertPem;
constexpr const char *kTlsBody = "hello over tls from allowed.test";

void stopTlsServer()
{
    if (g_tlsServer > 0) {
        ::kill(g_tlsServer, SIGKILL);
        ::waitpid(g_tlsServer, nullptr, 0);
        g_tlsServer = -1;
    }
    std::error_code ec;
    if (!g_tlsDir.empty())
        fs::remove_all(g_tlsDir, ec);
}

std::string startTlsServer(const std::string &tag)
{
    g_tlsDir = fs::temp_directory_path() / (tag + "-tls");
    fs::create_directories(g_tlsDir);
    const std::string cert = (g_tlsDir / "cert.pem").string(), key = (g_tlsDir / "key.pem").string();
    if (run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=allowed.test -addext "
            "subjectAltName=DNS:allowed.test -keyout " + key + " -out " + cert) != 0)
        return "cannot make a test certificate with openssl";
    std::ifstream in(cert);
    g_tlsCertPem.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    std::ofstream(g_tlsDir / "tls") << kTlsBody << "\n";
    g_tlsServer = ::fork();
    if (g_tlsServer == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::chdir(g_tlsDir.c_str()) != 0)
            _exit(126);
        ::execlp("ip", "ip", "netns", "exec", g_inetNs.c_str(), "openssl", "s_server", "-WWW", "-quiet", "-accept",
                 "198.51.100.2:8443", "-cert", cert.c_str(), "-key", key.c_str(), nullptr);
        _exit(127);
    }
    // Serving once a connection from the pool's namespace (this process's) is accepted.
    for (int i = 0; i < 200; ++i) {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr {};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(8443);
        ::inet_pton(AF_INET, "198.51.100.2", &addr.sin_addr);
        const bool ok = ::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0;
        ::close(fd);
        if (ok)
            return {};
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return "openssl s_server did not start on 198.51.100.2:8443";
}

void tearDownNetwork()
{
    stopTlsServer();
    g_server.stop();
    if (!g_poolNs.empty())
        run("ip netns delete " + g_poolNs);
    if (!g_inetNs.empty())
        run("ip netns delete " + g_inetNs);
    if (!g_hostsFile.empty())
        fs::remove(g_hostsFile);
}

// Everything that must happen before the first thread: namespaces, setns, the private mounts.
void setUpNetwork()
{
    if (::geteuid() != 0) {
        g_skipReason = "needs root (network namespaces and bubblewrap); run as root to test egress";
        return;
    }
    if (run("ip -V") != 0) {
        g_skipReason = "the ip command (iproute2) is not installed";
        return;
    }
    const std::string tag = "pdkeg" + std::to_string(::getpid());
    g_poolNs = tag + "p";
    g_inetNs = tag + "i";
    const std::string vp = "ve" + std::to_string(::getpid()) + "p", vi = "ve" + std::to_string(::getpid()) + "i";
    const std::vector<std::string> steps = {
        "ip netns add " + g_poolNs,
        "ip netns add " + g_inetNs,
        "ip link add " + vp + " netns " + g_poolNs + " type veth peer name " + vi + " netns " + g_inetNs,
        "ip -n " + g_poolNs + " link set lo up",
        "ip -n " + g_inetNs + " link set lo up",
        "ip -n " + g_poolNs + " addr add 198.51.100.1/24 dev " + vp,
        "ip -n " + g_poolNs + " addr add 10.77.0.1/24 dev " + vp,
        "ip -n " + g_poolNs + " link set " + vp + " up",
        "ip -n " + g_inetNs + " addr add 198.51.100.2/24 dev " + vi,
        "ip -n " + g_inetNs + " addr add 198.51.100.3/24 dev " + vi,
        "ip -n " + g_inetNs + " addr add 198.51.100.4/24 dev " + vi,
        "ip -n " + g_inetNs + " addr add 10.77.0.2/24 dev " + vi,
        "ip -n " + g_inetNs + " addr add 169.254.169.254/32 dev " + vi,
        "ip -n " + g_inetNs + " link set " + vi + " up",
        "ip -n " + g_poolNs + " route add 169.254.169.254/32 dev " + vp,
    };
    for (const auto &step : steps) {
        if (run(step) != 0) {
            g_skipReason = "cannot set up the test network (" + step + " failed)";
            return;
        }
    }
    // The safety net this test relies on: no default route anywhere.
    for (const auto &ns : {g_poolNs, g_inetNs}) {
        if (run("ip -n " + ns + " route show default | grep -q .") == 0) {
            g_skipReason = "namespace " + ns + " has a default route; refusing to run";
            return;
        }
    }
    // Names for the pool's resolver, in a mount namespace of this process only.
    g_hostsFile = fs::temp_directory_path() / (tag + "-hosts");
    std::ofstream(g_hostsFile) << "127.0.0.1 localhost\n198.51.100.2 allowed.test\n198.51.100.3 other.test\n"
                                  "198.51.100.4 approved.test\n10.77.0.2 internal.test\n";
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount(g_hostsFile.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) != 0) {
        g_skipReason = std::string("cannot bind a private /etc/hosts: ") + std::strerror(errno);
        return;
    }
    int nsFd = ::open(("/run/netns/" + g_poolNs).c_str(), O_RDONLY | O_CLOEXEC);
    if (nsFd < 0 || ::setns(nsFd, CLONE_NEWNET) != 0) {
        g_skipReason = "cannot enter namespace " + g_poolNs;
        return;
    }
    ::close(nsFd);
    g_server.start(g_inetNs);
    if (const std::string why = startTlsServer(tag); !why.empty())
        g_skipReason = why;
}

struct TierCase {
    std::string name;      // the tier's name in pool.toml
    std::string runtime;   // its runtime
};

// What ctest shows for each case, instead of the bytes of the struct.
void PrintTo(const TierCase &tc, std::ostream *os) { *os << tc.name << " (" << tc.runtime << ")"; }

// One allowlist tier per runtime; each binds SandboxSpec::egressSocket the same way.
const std::vector<TierCase> kTierCases = {{"egress", "bwrap"}, {"egress", "runsc"}, {"egress", "crun"}};

// Every spelling of the metadata service the proxy must refuse, as sent in a request line.
const std::vector<std::string> kMetadataSpellings = {
    "169.254.169.254", "2852039166", "0xa9fea9fe", "0XA9FEA9FE", "0251.0376.0251.0376", "169.254.43518",
    "[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "169.254.169.254.", "[fd00:ec2::254]",
    "metadata.google.internal", "METADATA.GOOGLE.INTERNAL.", "0xa9.0xfe.0xa9.0xfe"};

// A bash function that sends one raw request line through the sandbox's proxy and prints the
// status line (bash's /dev/tcp: curl would normalize odd spellings first).
const char *kProbe = "probe() { exec 3<>/dev/tcp/127.0.0.1/3128 || { echo \"$1 noproxy\"; return; }; "
                     "printf '%s\\r\\nHost: x\\r\\n\\r\\n' \"$1\" >&3; read -r status <&3; echo \"$1 => $status\"; "
                     "exec 3<&-; }\n";

// A playbook step asking for an egress_exception review of one host.
std::string egressException(const std::string &host)
{
    return "[[step]]\ntool = \"propose_change\"\nkind = \"egress_exception\"\ntargets = [\"" + host +
           "\"]\nchange = \"reach " + host + "\"\nchange_format = \"text\"\njustification = \"the test needs " + host +
           "\"\n";
}

// The tool.result of the session's (last) propose_change.
json proposalResult(const std::vector<json> &events)
{
    json out;
    for (const auto &e : events) {
        const json &p = e.at("payload");
        const json payload = p.is_string() ? json::parse(p.get<std::string>()) : p;
        if (e.value("kind", "") == "tool.result" && payload.value("name", "") == "propose_change")
            out = payload;
    }
    return out;
}

// The broker's own parts (SQLite store, step engine, scripted model, review desk) in this process,
// on the real pool: paddockd names its callers by their connection (docs/permissions.md), so only
// here can a test approve as a principal other than the session's submitter.
class ReviewingBroker {
public:
    ReviewingBroker(const fs::path &dir, const std::string &poolEndpoint)
    {
        auto store = store::openSqliteEventStore(dir / "reviewing.db");
        EXPECT_TRUE(store) << store.error().message;
        m_store = std::move(*store);
        auto queries = store::ReviewQueries::open(dir / "reviewing.db");
        EXPECT_TRUE(queries);
        m_queries = std::move(*queries);
        m_desk = std::make_unique<review::ReviewDesk>(*m_store, *m_queries, review::ReviewPolicy{});
        m_pools.add(pool_client::makeGrpcPoolClient("egress", poolEndpoint), true);
        m_engine = std::make_unique<engine::StepEngine>(
            *m_store, m_pools, [this](const std::string &) -> llm::ModelAdapter * { return &m_scripted; });
    }
    ~ReviewingBroker()
    {
        m_engine->stop();
        m_desk.reset();
        m_store->close();
    }

    void submit(const std::string &id, const std::string &tier, const std::string &playbook)
    {
        store::AppendRequest create;
        create.sessionId = id;
        create.expectedLastSeq = 0;
        create.events.push_back({core::kind::SessionCreated,
                                 json{{"agent", "fetcher"}, {"model", "scripted"}, {"tier", tier}, {"goal", "fetch"},
                                      {"submitted_by", "bob"}, {"playbook_toml", playbook}}.dump()});
        ASSERT_TRUE(m_store->appendSync(std::move(create)));
    }

    // Steps every session until none has anything to do (ended, or waiting for a review).
    void runUntilIdle()
    {
        for (int i = 0; i < 200; ++i) {
            auto lease = m_store->acquireLease("test", 60000, 0);
            if (!lease)
                return;
            m_engine->runOneStep(*lease);
            m_store->releaseLease(*lease);
        }
        FAIL() << "the sessions did not settle";
    }

    // Approves the session's pending review as alice, who reads it first (egress is high risk).
    std::string approvePending(const std::string &sessionId)
    {
        store::ReviewListQuery query;
        query.sessionId = sessionId;
        auto page = m_desk->list(query);
        EXPECT_TRUE(page && page->items.size() == 1) << "no single pending review for " << sessionId;
        if (!page || page->items.size() != 1)
            return {};
        const auto item = page->items.front();
        EXPECT_EQ(item.kind, "egress_exception");
        EXPECT_TRUE(m_desk->fetch(item.id, "alice"));
        review::DecideRequest approve;
        approve.ids = {item.id};
        approve.approve = true;
        approve.decider = "alice";
        approve.reason = "the test needs it";
        approve.changeHashes[item.id] = item.changeHash;
        auto decided = m_desk->decide(approve);
        EXPECT_TRUE(decided) << decided.error().message;
        return item.id;
    }

    core::SessionStatus status(const std::string &id) { return m_store->getSession(id)->status; }
    std::string statusReason(const std::string &id) { return m_store->getSession(id)->statusReason; }

    // The session's log as paddockctl prints it: {"kind", "payload"}.
    std::vector<json> events(const std::string &id)
    {
        std::vector<json> out;
        auto log = m_store->readEvents(id, 1, 100000);
        EXPECT_TRUE(log);
        if (log)
            for (const auto &e : *log)
                out.push_back({{"kind", e.kind}, {"payload", json::parse(e.payload)}});
        return out;
    }

private:
    std::unique_ptr<store::EventStore> m_store;
    std::unique_ptr<store::ReviewQueries> m_queries;
    std::unique_ptr<review::ReviewDesk> m_desk;
    placement::PoolSet m_pools;
    llm::ScriptedModel m_scripted;
    std::unique_ptr<engine::StepEngine> m_engine;
};

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

    static json payload(const json &event)
    {
        const json &p = event.at("payload");
        return p.is_string() ? json::parse(p.get<std::string>()) : p;
    }

    static std::vector<json> ofKind(const std::vector<json> &events, const std::string &kind)
    {
        std::vector<json> out;
        for (const auto &e : events)
            if (e.value("kind", "") == kind)
                out.push_back(payload(e));
        return out;
    }

    static std::string stdoutOf(const std::vector<json> &events, const std::string &commandPart)
    {
        for (const auto &p : ofKind(events, "tool.result"))
            if (p.value("command", "").find(commandPart) != std::string::npos)
                return p.value("stdout", "") + p.value("stderr", "");
        return "(no tool.result for a command containing '" + commandPart + "')";
    }

    std::unique_ptr<TempDir> m_dir;
    std::unique_ptr<Daemon> m_pool;
    std::unique_ptr<BrokerProcess> m_broker;
    int m_poolPort = 0;
    int m_playbooks = 0;
};

// Ordinary tools through the proxy: curl (plain HTTP and CONNECT), python3 urllib; a name and a
// private range that the allowlist names; every attempt recorded as egress.allowed.
TEST_P(EgressNetnsTest, AllowlistedHostsReachedWithOrdinaryTools)
{
    const std::string tier = GetParam().name;
    auto events = runPlaybook(tier, R"(goal = "reach the allowlisted hosts"
[[step]]
tool = "run_command"
command = "env | grep -i _proxy= | sort; curl -sS -f --max-time 20 http://allowed.test:8080/plain"
expect_stdout = "hello from 198.51.100.2 GET /plain"
[[step]]
tool = "run_command"
command = "curl -sS -f -p --max-time 20 http://allowed.test:8080/tunnel"
expect_stdout = "hello from 198.51.100.2 GET /tunnel"
[[step]]
tool = "run_command"
command = "python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://10.77.0.2:8080/python\", timeout=20).read().decode())'"
expect_stdout = "hello from 10.77.0.2 GET /python"
[[step]]
tool = "run_command"
command = "curl -sS -f --max-time 20 http://internal.test:8080/internal"
expect_stdout = "hello from 10.77.0.2 GET /internal"
)");
    EXPECT_NE(stdoutOf(events, "env | grep").find("HTTP_PROXY=http://127.0.0.1:3128"), std::string::npos)
        << stdoutOf(events, "env | grep");
    auto allowed = ofKind(events, "egress.allowed");
    ASSERT_EQ(allowed.size(), 4u) << "events:\n" << [&] {
        std::string s;
        for (const auto &e : events)
            s += e.dump() + "\n";
        return s;
    }();
    const std::vector<std::tuple<std::string, std::string, std::string>> expected = {
        {"allowed.test", "198.51.100.2", "GET"}, {"allowed.test", "198.51.100.2", "CONNECT"},
        {"10.77.0.2", "10.77.0.2", "GET"}, {"internal.test", "10.77.0.2", "GET"}};
    for (size_t i = 0; i < expected.size(); ++i) {
        const auto &[host, address, method] = expected[i];
        EXPECT_EQ(allowed[i].value("host", ""), host) << allowed[i].dump();
        EXPECT_EQ(allowed[i].value("address", ""), address) << allowed[i].dump();
        EXPECT_EQ(allowed[i].value("method", ""), method) << allowed[i].dump();
        EXPECT_EQ(allowed[i].value("port", 0), 8080);
        EXPECT_GT(allowed[i].value("bytes_in", 0), 0) << allowed[i].dump();
        EXPECT_GT(allowed[i].value("bytes_out", 0), 0) << allowed[i].dump();
        EXPECT_FALSE(allowed[i].contains("error")) << allowed[i].dump();
    }
    EXPECT_TRUE(ofKind(events, "egress.refused").empty());
    // Each attempt sits right before the tool.result of the command that made it.
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        if (events[i].value("kind", "") == "egress.allowed") {
            EXPECT_TRUE(events[i + 1].value("kind", "") == "tool.result" ||
                        events[i + 1].value("kind", "") == "egress.allowed");
        }
    }
}

// What an agent really downloads: HTTPS through the proxy (CONNECT), verified against a CA the
// agent names, with curl and with Python; and without that CA the same download fails on the
// certificate, so verification really ran (the sandbox's CA bundle, the minimal /etc's copy of
// the host's, does not hold the test's certificate).
TEST_P(EgressNetnsTest, HttpsDownloadsThroughTheProxyAreVerified)
{
    const std::string tier = GetParam().name;
    auto events = runPlaybook(tier, "goal = \"download over https\"\n[[step]]\ntool = \"write_file\"\npath = \"ca.pem\"\n"
                                    "content = \"\"\"\n" + g_tlsCertPem + "\"\"\"\n" + R"([[step]]
tool = "run_command"
command = "curl -sS -f --max-time 20 --cacert ca.pem -o got https://allowed.test:8443/tls && cat got"
expect_stdout = "hello over tls from allowed.test"
[[step]]
tool = "run_command"
command = "python3 -c 'import ssl, urllib.request; c = ssl.create_default_context(cafile=\"ca.pem\"); print(urllib.request.urlopen(\"https://allowed.test:8443/tls\", context=c, timeout=20).read().decode())'"
expect_stdout = "hello over tls from allowed.test"
[[step]]
tool = "run_command"
command = "test -s /etc/ssl/certs/ca-certificates.crt && curl -sS --max-time 20 https://allowed.test:8443/tls; echo rc=$?"
expect_stdout = "rc=60"
)");
    EXPECT_NE(stdoutOf(events, "--cacert").find(kTlsBody), std::string::npos) << stdoutOf(events, "--cacert");
    EXPECT_NE(stdoutOf(events, "rc=").find("rc=60"), std::string::npos) << "no CA of ours, no download: " << stdoutOf(events, "rc=");
    auto allowed = ofKind(events, "egress.allowed");
    ASSERT_EQ(allowed.size(), 3u);
    for (const auto &a : allowed) {
        EXPECT_EQ(a.value("method", ""), "CONNECT") << a.dump();
        EXPECT_EQ(a.value("port", 0), 8443) << a.dump();
    }
}

// Every spelling of the metadata address, hosts off the allowlist, private ranges it does not
// name and the pool host's own loopback: refused by the proxy (403), recorded as egress.refused,
// and never seen by the server behind them.
TEST_P(EgressNetnsTest, ForbiddenDestinationsRefusedAndRecorded)
{
    const std::string tier = GetParam().name;
    // Raw requests through bash's /dev/tcp: curl would normalize the odd spellings first.
    const std::string probe = kProbe;
    std::vector<std::pair<std::string, std::string>> cases;   // request line, reason
    for (const auto &s : kMetadataSpellings) {
        cases.emplace_back("GET http://" + s + ":8080/meta HTTP/1.1", "metadata");
        cases.emplace_back("CONNECT " + s + ":8080 HTTP/1.1", "metadata");
    }
    cases.emplace_back("GET http://other.test:8080/other HTTP/1.1", "not_allowlisted");
    cases.emplace_back("CONNECT other.test:8080 HTTP/1.1", "not_allowlisted");
    cases.emplace_back("GET http://198.51.100.3:8080/other HTTP/1.1", "not_allowlisted");
    cases.emplace_back("CONNECT internal.test:443 HTTP/1.1", "not_allowlisted");   // the entry names :8080
    cases.emplace_back("GET http://192.168.1.1:8080/private HTTP/1.1", "private");
    cases.emplace_back("GET http://100.64.0.1:8080/cgnat HTTP/1.1", "cgnat");
    cases.emplace_back("CONNECT 127.0.0.1:" + std::to_string(m_poolPort) + " HTTP/1.1", "loopback");
    cases.emplace_back("CONNECT localhost:" + std::to_string(m_poolPort) + " HTTP/1.1", "not_allowlisted");
    cases.emplace_back("CONNECT [::1]:" + std::to_string(m_poolPort) + " HTTP/1.1", "loopback");
    cases.emplace_back("GET http://0.0.0.0:8080/zero HTTP/1.1", "unspecified");
    std::string script = probe;
    for (const auto &[line, reason] : cases)
        script += "probe '" + line + "'\n";
    auto events = runPlaybook(tier, "goal = \"probe forbidden destinations\"\n[[step]]\ntool = \"write_file\"\npath = \"probe.sh\"\n"
                                    "content = " + json(script).dump() + "\n[[step]]\ntool = \"run_command\"\n"
                                    "command = \"bash probe.sh\"\n"
                                    "[[step]]\ntool = \"run_command\"\ncommand = \"curl -sS --max-time 20 -o /dev/null -w '%{http_code}' http://169.254.169.254:8080/curl-meta; "
                                    "curl -sS --max-time 20 -p http://other.test:8080/curl-other\"\nexpect_exit = 56\n");
    const std::string out = stdoutOf(events, "bash probe.sh");
    for (const auto &[line, reason] : cases)
        EXPECT_NE(out.find(line + " => HTTP/1.1 403 Forbidden"), std::string::npos) << line << "\n" << out;
    EXPECT_NE(stdoutOf(events, "curl-meta").find("403"), std::string::npos) << stdoutOf(events, "curl-meta");

    auto refused = ofKind(events, "egress.refused");
    ASSERT_EQ(refused.size(), cases.size() + 2) << out;
    for (size_t i = 0; i < cases.size(); ++i) {
        EXPECT_EQ(refused[i].value("reason", ""), cases[i].second) << cases[i].first << ": " << refused[i].dump();
        EXPECT_FALSE(refused[i].value("detail", "").empty());
        EXPECT_EQ(refused[i].value("bytes_out", -1), 0);
    }
    EXPECT_EQ(refused[cases.size()].value("reason", ""), "metadata");
    EXPECT_EQ(refused[cases.size() + 1].value("reason", ""), "not_allowlisted");
    EXPECT_EQ(refused[cases.size() + 1].value("host", ""), "other.test");
    EXPECT_TRUE(ofKind(events, "egress.allowed").empty());
    // Normalized hosts are what the log shows.
    EXPECT_EQ(refused[2].value("host", ""), "2852039166");
    EXPECT_EQ(refused[2].value("address", ""), "169.254.169.254");
    for (const auto &request : g_server.requests()) {
        EXPECT_EQ(request.find("169.254.169.254"), std::string::npos) << "the fake metadata server was reached: " << request;
        EXPECT_EQ(request.find("198.51.100.3"), std::string::npos) << "a host off the allowlist was reached: " << request;
    }
}

// Straight to the pool's gRPC API: the attempts come back on ExecExit.egress, an exec repeated
// under its idempotency key (the broker's retry after a crash) carries the first run's attempts
// without running anything again, and a background connection left open is reported as open.
TEST_P(EgressNetnsTest, PoolReportsAttemptsWithEachExecAndReplays)
{
    const size_t requestsBefore = g_server.requests().size();   // earlier tests in this process
    auto client = pool_client::makeGrpcPoolClient("egress", "127.0.0.1:" + std::to_string(m_poolPort));
    auto claimed = client->claim(GetParam().name, "s-replay", "s-replay:claim");
    ASSERT_TRUE(claimed) << claimed.error().message;
    pool_client::ExecSpec spec;
    spec.sandboxId = claimed->sandboxId;
    spec.argv = {"/bin/sh", "-c", "curl -sS --max-time 20 http://allowed.test:8080/replay; "
                                  "curl -s -o /dev/null -w '%{http_code}' http://169.254.169.254:8080/replay-meta"};
    spec.idempotencyKey = "s-replay:7";
    auto first = client->exec(spec);
    ASSERT_TRUE(first) << first.error().message;
    EXPECT_NE(first->stdoutData.find("hello from 198.51.100.2 GET /replay"), std::string::npos) << first->stdoutData;
    ASSERT_EQ(first->egress.size(), 2u);
    EXPECT_TRUE(first->egress[0].allowed);
    EXPECT_EQ(first->egress[0].address, "198.51.100.2");
    EXPECT_FALSE(first->egress[1].allowed);
    EXPECT_EQ(first->egress[1].reason, "metadata");
    auto again = client->exec(spec);
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_TRUE(again->replayed);
    ASSERT_EQ(again->egress.size(), 2u);
    EXPECT_EQ(again->egress[0].host, "allowed.test");
    EXPECT_EQ(again->egress[0].bytesIn, first->egress[0].bytesIn);
    EXPECT_EQ(again->egress[1].reason, "metadata");
    size_t replays = 0;
    const auto requests = g_server.requests();
    for (size_t i = requestsBefore; i < requests.size(); ++i)
        replays += requests[i].find("/replay ") != std::string::npos ? 1 : 0;
    EXPECT_EQ(replays, 1u) << "the replay ran the command again";

    // A connection a background process keeps open: reported once, as open, when the exec ends.
    pool_client::ExecSpec background;
    background.sandboxId = claimed->sandboxId;
    background.argv = {"/bin/sh", "-c", "setsid sh -c \"(printf 'CONNECT allowed.test:8080 HTTP/1.1\\\\r\\\\n\\\\r\\\\n'; sleep 30) | "
                                        "bash -c 'cat >/dev/tcp/127.0.0.1/3128'\" >/dev/null 2>&1 & sleep 1; echo started"};
    auto bg = client->exec(background);
    ASSERT_TRUE(bg) << bg.error().message;
    ASSERT_EQ(bg->egress.size(), 1u);
    EXPECT_TRUE(bg->egress[0].allowed);
    EXPECT_TRUE(bg->egress[0].open);
    pool_client::ExecSpec quiet;
    quiet.sandboxId = claimed->sandboxId;
    quiet.argv = {"true"};
    auto next = client->exec(quiet);
    ASSERT_TRUE(next);
    EXPECT_TRUE(next->egress.empty());   // not reported twice
    EXPECT_TRUE(client->release(claimed->sandboxId));
}

// A tier with network = "none" has no proxy, no socket and no route: nothing gets out, and
// nothing is recorded as egress.
TEST_P(EgressNetnsTest, LiteTierReachesNothing)
{
    auto events = runPlaybook("lite", R"(goal = "no network"
[[step]]
tool = "run_command"
command = "env | grep -ci proxy; test ! -e /run/paddock/egress.sock && echo no-socket"
expect_exit = 0
expect_stdout = "no-socket"
[[step]]
tool = "run_command"
command = "curl -sS --max-time 10 http://198.51.100.2:8080/lite"
expect_exit = 7
[[step]]
tool = "run_command"
command = "curl -sS --max-time 10 http://169.254.169.254:8080/lite-meta"
expect_exit = 7
[[step]]
tool = "run_command"
command = "curl -sS --max-time 10 -x http://127.0.0.1:3128 http://allowed.test:8080/lite-proxy"
expect_exit = 7
)");
    EXPECT_NE(stdoutOf(events, "env | grep").find("0\n"), std::string::npos) << stdoutOf(events, "env | grep");
    EXPECT_TRUE(ofKind(events, "egress.allowed").empty());
    EXPECT_TRUE(ofKind(events, "egress.refused").empty());
    for (const auto &request : g_server.requests())
        EXPECT_EQ(request.find("/lite"), std::string::npos) << "the lite tier reached the network: " << request;
}

// An approved egress_exception opens its host to that session's commands, through the proxy:
// refused before the review, reached after it (plain and CONNECT), and recorded as allowed by
// that review. Another session on the same pool still cannot reach the host, a tier without
// network reaches nothing even when approved (and the approval says so), and an approval that
// names the metadata service opens none of its spellings.
TEST_P(EgressNetnsTest, ApprovedHostReachedOnlyByThatSession)
{
    const std::string tier = GetParam().name;
    ReviewingBroker broker(m_dir->path(), "127.0.0.1:" + std::to_string(m_poolPort));
    const size_t requestsBefore = g_server.requests().size();   // earlier tests in this process
    const auto reached = [&](const std::string &path) {
        size_t n = 0;
        const auto requests = g_server.requests();
        for (size_t i = requestsBefore; i < requests.size(); ++i)
            n += requests[i].find(" " + path + " ") != std::string::npos ? 1 : 0;
        return n;
    };

    broker.submit("s-approved", tier, R"(goal = "reach approved.test after a review"
[[step]]
tool = "run_command"
command = "curl -s -o /dev/null -w 'before=%{http_code}' --max-time 20 http://approved.test:8080/before"
expect_stdout = "before=403"
)" + egressException("approved.test") + R"([[step]]
tool = "run_command"
command = "curl -sS -f --max-time 20 http://approved.test:8080/approved"
expect_stdout = "hello from 198.51.100.4 GET /approved"
[[step]]
tool = "run_command"
command = "curl -sS -f -p --max-time 20 http://approved.test:8080/approved-tunnel"
expect_stdout = "hello from 198.51.100.4 GET /approved-tunnel"
)");
    broker.runUntilIdle();
    ASSERT_EQ(broker.status("s-approved"), core::SessionStatus::WaitingApproval) << broker.statusReason("s-approved");
    EXPECT_EQ(reached("/before"), 0u);
    const std::string reviewId = broker.approvePending("s-approved");
    ASSERT_FALSE(reviewId.empty());
    broker.runUntilIdle();
    auto events = broker.events("s-approved");
    EXPECT_EQ(broker.status("s-approved"), core::SessionStatus::Succeeded) << broker.statusReason("s-approved");
    EXPECT_EQ(reached("/approved"), 1u);
    EXPECT_EQ(reached("/approved-tunnel"), 1u);
    const json decided = proposalResult(events);
    EXPECT_EQ(decided.value("reachable", false), true) << decided.dump();
    const auto refused = ofKind(events, "egress.refused");
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_EQ(refused[0].value("host", ""), "approved.test");
    EXPECT_EQ(refused[0].value("reason", ""), "not_allowlisted");
    const auto allowed = ofKind(events, "egress.allowed");
    ASSERT_EQ(allowed.size(), 2u);
    for (const auto &a : allowed) {
        EXPECT_EQ(a.value("host", ""), "approved.test") << a.dump();
        EXPECT_EQ(a.value("address", ""), "198.51.100.4") << a.dump();
        EXPECT_EQ(a.value("review_id", ""), reviewId) << a.dump();
        EXPECT_EQ(a.value("detail", ""), "approved in review " + reviewId) << a.dump();
        EXPECT_GT(a.value("bytes_in", 0), 0) << a.dump();
    }
    EXPECT_EQ(allowed[0].value("method", ""), "GET");
    EXPECT_EQ(allowed[1].value("method", ""), "CONNECT");

    // Another session on the same pool and tier: the approval is not its own.
    broker.submit("s-other", tier, R"(goal = "try approved.test without a review"
[[step]]
tool = "run_command"
command = "curl -s -o /dev/null -w 'other=%{http_code}' --max-time 20 http://approved.test:8080/other-session"
expect_stdout = "other=403"
)");
    broker.runUntilIdle();
    EXPECT_EQ(broker.status("s-other"), core::SessionStatus::Succeeded) << broker.statusReason("s-other");
    events = broker.events("s-other");
    ASSERT_EQ(ofKind(events, "egress.refused").size(), 1u);
    EXPECT_EQ(ofKind(events, "egress.refused")[0].value("reason", ""), "not_allowlisted");
    EXPECT_TRUE(ofKind(events, "egress.allowed").empty());
    EXPECT_EQ(reached("/other-session"), 0u);

    // A tier without network: approved, and still nothing gets out; the result names this tier.
    broker.submit("s-lite", "lite", R"(goal = "approved on a tier without network"
)" + egressException("approved.test") + R"([[step]]
tool = "run_command"
command = "curl -sS --max-time 10 -x http://127.0.0.1:3128 http://approved.test:8080/lite-approved"
expect_exit = 7
)");
    broker.runUntilIdle();
    ASSERT_FALSE(broker.approvePending("s-lite").empty());
    broker.runUntilIdle();
    EXPECT_EQ(broker.status("s-lite"), core::SessionStatus::Succeeded) << broker.statusReason("s-lite");
    events = broker.events("s-lite");
    const json liteDecided = proposalResult(events);
    EXPECT_EQ(liteDecided.value("reachable", true), false) << liteDecided.dump();
    const std::string note = liteDecided.value("note", "");
    EXPECT_NE(note.find("tier 'lite' has no network at all"), std::string::npos) << note;
    EXPECT_NE(note.find("paddockctl override s-lite " + tier), std::string::npos) << note;
    EXPECT_EQ(reached("/lite-approved"), 0u);

    // Approvals that name the metadata service: every spelling is still refused as metadata.
    std::string script = kProbe;
    for (const auto &spelling : kMetadataSpellings)
        script += "probe 'GET http://" + spelling + ":8080/approved-meta HTTP/1.1'\n";
    broker.submit("s-meta", tier, R"(goal = "metadata, approved"
)" + egressException("169.254.169.254") + egressException("metadata.google.internal") + R"([[step]]
tool = "write_file"
path = "probe.sh"
content = )" + json(script).dump() + R"(
[[step]]
tool = "run_command"
command = "bash probe.sh"
)");
    broker.runUntilIdle();
    ASSERT_FALSE(broker.approvePending("s-meta").empty());
    broker.runUntilIdle();
    ASSERT_FALSE(broker.approvePending("s-meta").empty());
    broker.runUntilIdle();
    EXPECT_EQ(broker.status("s-meta"), core::SessionStatus::Succeeded) << broker.statusReason("s-meta");
    events = broker.events("s-meta");
    const std::string out = stdoutOf(events, "bash probe.sh");
    for (const auto &spelling : kMetadataSpellings)
        EXPECT_NE(out.find("GET http://" + spelling + ":8080/approved-meta HTTP/1.1 => HTTP/1.1 403 Forbidden"),
                  std::string::npos) << spelling << "\n" << out;
    const auto metaRefused = ofKind(events, "egress.refused");
    ASSERT_EQ(metaRefused.size(), kMetadataSpellings.size()) << out;
    for (const auto &r : metaRefused) {
        EXPECT_EQ(r.value("reason", ""), "metadata") << r.dump();
        EXPECT_FALSE(r.contains("review_id")) << r.dump();
    }
    EXPECT_TRUE(ofKind(events, "egress.allowed").empty());
    EXPECT_EQ(reached("/approved-meta"), 0u);
    for (const auto &request : g_server.requests())
        EXPECT_EQ(request.find("169.254.169.254"), std::string::npos) << "the fake metadata server was reached: " << request;
}

// The pool's API directly: grants ride on one exec and hold for that command only, in that
// sandbox only, even while another sandbox of the same tier runs a command at the same time.
TEST_P(EgressNetnsTest, PoolHoldsGrantsForTheirCommandOnly)
{
    const size_t requestsBefore = g_server.requests().size();
    auto client = pool_client::makeGrpcPoolClient("egress", "127.0.0.1:" + std::to_string(m_poolPort));
    auto mine = client->claim(GetParam().name, "s-grant", "s-grant:claim");
    auto theirs = client->claim(GetParam().name, "s-nogrant", "s-nogrant:claim");
    ASSERT_TRUE(mine) << mine.error().message;
    ASSERT_TRUE(theirs) << theirs.error().message;
    const std::string curl = "curl -s -o /dev/null -w '%{http_code}' --max-time 20 http://approved.test:8080/";

    // While the granted command runs (it waits for the other to finish), the other sandbox tries.
    pool_client::ExecSpec granted;
    granted.sandboxId = mine->sandboxId;
    granted.argv = {"/bin/sh", "-c", "sleep 2; " + curl + "grant-held"};
    granted.egressGrants = {{"approved.test", "rev-held"}};
    auto running = std::async(std::launch::async, [&] { return client->exec(granted); });
    pool_client::ExecSpec other;
    other.sandboxId = theirs->sandboxId;
    other.argv = {"/bin/sh", "-c", curl + "grant-elsewhere"};
    auto elsewhere = client->exec(other);
    auto during = running.get();
    ASSERT_TRUE(during) << during.error().message;
    ASSERT_TRUE(elsewhere) << elsewhere.error().message;
    EXPECT_EQ(during->stdoutData, "200");
    ASSERT_EQ(during->egress.size(), 1u);
    EXPECT_TRUE(during->egress[0].allowed);
    EXPECT_EQ(during->egress[0].reviewId, "rev-held");
    EXPECT_EQ(elsewhere->stdoutData, "403");
    ASSERT_EQ(elsewhere->egress.size(), 1u);
    EXPECT_EQ(elsewhere->egress[0].reason, "not_allowlisted");

    // The next command of the same sandbox without the grant: refused again.
    pool_client::ExecSpec after;
    after.sandboxId = mine->sandboxId;
    after.argv = {"/bin/sh", "-c", curl + "grant-gone"};
    auto gone = client->exec(after);
    ASSERT_TRUE(gone) << gone.error().message;
    EXPECT_EQ(gone->stdoutData, "403");

    // A grant that is not an allowlist entry: INVALID_ARGUMENT naming it, and nothing runs.
    pool_client::ExecSpec bad = after;
    bad.argv = {"/bin/sh", "-c", curl + "grant-bad"};
    bad.egressGrants = {{"http://approved.test/", "rev-bad"}};
    auto refused = client->exec(bad);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(refused.error().message.find("rev-bad"), std::string::npos) << refused.error().message;
    size_t held = 0, others = 0;
    const auto requests = g_server.requests();
    for (size_t i = requestsBefore; i < requests.size(); ++i) {
        held += requests[i].find("/grant-held ") != std::string::npos ? 1 : 0;
        others += requests[i].find("/grant-") != std::string::npos && requests[i].find("/grant-held ") == std::string::npos;
    }
    EXPECT_EQ(held, 1u);
    EXPECT_EQ(others, 0u) << "a command without the grant reached approved.test";
    EXPECT_TRUE(client->release(mine->sandboxId));
    EXPECT_TRUE(client->release(theirs->sandboxId));
}

INSTANTIATE_TEST_SUITE_P(Tiers, EgressNetnsTest, ::testing::ValuesIn(kTierCases),
                         [](const ::testing::TestParamInfo<TierCase> &tier) { return tier.param.runtime; });

} // namespace
} // namespace paddock::test

int main(int argc, char **argv)
{
    ::testing::InitGoogleTest(&argc, argv);
    // Listing tests (ctest's discovery) needs no network.
    if (!GTEST_FLAG_GET(list_tests))
        paddock::test::setUpNetwork();
    const int rc = RUN_ALL_TESTS();
    paddock::test::tearDownNetwork();
    return rc;
}
