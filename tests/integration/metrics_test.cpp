// /metrics of the real paddockd and paddock-pool, started as processes (docs/metrics.md):
// - after a session that runs commands, promtool (Debian's prometheus package, which
//   scripts/setup-deps installs: a missing promtool fails the test) accepts both pages, the
//   counters grew, the session is counted under its final status, and the pool's warm and claimed
//   gauges are what the pool itself reports (through `paddockctl pools`), while the session holds
//   its sandbox and after;
// - promtool accepts the alert rules and the scrape config that docs/metrics.md shows;
// - over TLS, a scrape without the token or with another one gets 401, with it 200, on both;
// - a metrics address already in use, or one off loopback without TLS, stops each daemon at start
//   with a message that names the setting and the fix.

#include "tests/integration/daemons_fixture.h"
#include "tests/integration/multi_host_support.h"

#include <httplib.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <regex>
#include <sstream>

namespace paddock::test {
namespace {

using nlohmann::json;

constexpr const char *kPromtool = "/usr/bin/promtool";

std::string readText(const std::filesystem::path &path)
{
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

#define PADDOCK_REQUIRE_PROMTOOL()                                                                            \
    do {                                                                                                      \
        if (!std::filesystem::exists(kPromtool))                                                              \
            GTEST_FAIL() << kPromtool << " is missing: install Debian's prometheus package (scripts/setup-deps " \
                                         "does)";                                                             \
    } while (0)

struct Scrape {
    int status = -1;    // -1: no answer
    std::string body;
    std::string error;
};

// GET /metrics on 127.0.0.1:port; over HTTPS when ca is given (the server's certificate checked
// against it), with "Authorization: Bearer token" when token is not empty.
Scrape scrape(int port, const std::string &token = {}, const std::filesystem::path &ca = {})
{
    httplib::Headers headers;
    if (!token.empty())
        headers.emplace("Authorization", "Bearer " + token);
    httplib::Result result = [&] {
        if (ca.empty()) {
            httplib::Client client("127.0.0.1", port);
            client.set_read_timeout(10, 0);
            return client.Get("/metrics", headers);
        }
        httplib::SSLClient client("127.0.0.1", port);
        client.set_ca_cert_path(ca.c_str());
        client.enable_server_certificate_verification(true);
        client.set_read_timeout(10, 0);
        return client.Get("/metrics", headers);
    }();
    if (!result)
        return {-1, {}, httplib::to_string(result.error())};
    return {result->status, result->body, {}};
}

// The value of one series ("name" or "name{a=\"b\"}", written as the page writes it).
std::optional<double> valueOf(const std::string &page, const std::string &series)
{
    std::istringstream lines(page);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 && line[series.size()] == ' ')
            return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
    return std::nullopt;
}

// Every series of a family added up (a counter over its labels).
double sumOf(const std::string &page, const std::string &name)
{
    double total = 0;
    std::istringstream lines(page);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.starts_with(name + " ") || line.starts_with(name + "{"))
            total += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
    }
    return total;
}

// A TCP socket listening on a free loopback port, kept open by the caller; its port.
int holdLoopbackPort(int &fd)
{
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof addr;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 || ::listen(fd, 4) != 0
        || ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &size) != 0)
        return -1;
    return ntohs(addr.sin_port);
}

// promtool's exit status on `args` (its output in log), e.g. {"check", "metrics"} with the page on stdin.
int promtool(const std::vector<std::string> &args, const std::filesystem::path &log,
             const std::filesystem::path &stdinFile = {})
{
    std::string command = std::string("exec ") + kPromtool;
    for (const auto &arg : args)
        command += " '" + arg + "'";
    if (!stdinFile.empty())
        command += " < '" + stdinFile.string() + "'";
    return runToEnd({"/bin/sh", "-c", command}, log);
}

// The ```yaml block after the line `<!-- marker -->` in docs/metrics.md.
std::string documentedYaml(const std::string &marker)
{
    const std::string doc = readText(std::filesystem::path(PADDOCK_SOURCE_DIR) / "docs/metrics.md");
    const auto at = doc.find("<!-- " + marker + " -->");
    if (at == std::string::npos)
        return {};
    const auto open = doc.find("```yaml\n", at);
    const auto close = doc.find("\n```", open + 8);
    if (open == std::string::npos || close == std::string::npos)
        return {};
    return doc.substr(open + 8, close - open - 8 + 1);
}

// A pool and a broker on loopback, each serving /metrics on a port of its own.
class Metrics : public DaemonsTest {
protected:
    void SetUp() override
    {
        m_poolMetricsPort = freeLoopbackPort();
        m_brokerMetricsPort = freeLoopbackPort();
        DaemonsTest::SetUp();
    }

    std::map<std::string, std::string> configFiles() const override
    {
        return {{"pool.toml", "[metrics]\nlisten = \"127.0.0.1:" + std::to_string(m_poolMetricsPort) + "\"\n"},
                {"broker.toml", "pool_health_interval_ms = 200\n[metrics]\nlisten = \"127.0.0.1:"
                                    + std::to_string(m_brokerMetricsPort) + "\"\n"}};
    }

    // Scrapes, with the page checked by promtool; the page.
    std::string checkedScrape(int port, const std::string &name)
    {
        const Scrape page = scrape(port);
        EXPECT_EQ(page.status, 200) << name << ": " << page.error << page.body;
        const auto file = *m_dir / (name + ".prom");
        std::ofstream(file) << page.body;
        const auto log = *m_dir / (name + ".promtool.log");
        EXPECT_EQ(promtool({"check", "metrics"}, log, file), 0)
            << "promtool check metrics refused " << name << "'s page:\n" << readText(log) << "\n" << page.body;
        return page.body;
    }

    // Waits until the pool's /metrics and the pool's Status (paddockctl pools, read before and after
    // the scrape and the same both times) agree on the lite tier's warm and claimed sandboxes, and
    // claimed is `claimed`. The page that agreed, or "" after the deadline.
    std::string poolAgrees(int claimed)
    {
        const auto until = std::chrono::steady_clock::now() + 30s;
        std::string last;
        while (std::chrono::steady_clock::now() < until) {
            const json before = findPool(listPools(m_broker->address), "local");
            const Scrape page = scrape(m_poolMetricsPort);
            const json after = findPool(listPools(m_broker->address), "local");
            if (page.status == 200 && before.is_object() && before == after && !before["tiers"].empty()) {
                const json &tier = before["tiers"][0];
                const auto warm = valueOf(page.body, "paddock_pool_warm_sandboxes{tier=\"lite\"}");
                const auto held = valueOf(page.body, "paddock_pool_claimed_sandboxes{tier=\"lite\"}");
                last = tier.dump() + "\n" + page.body;
                if (tier["name"] == "lite" && warm && held && *warm == tier["warm"].get<double>()
                    && *held == tier["claimed"].get<double>() && *held == claimed)
                    return page.body;
            }
            std::this_thread::sleep_for(100ms);
        }
        ADD_FAILURE() << "the pool's /metrics never agreed with its Status on lite with " << claimed
                      << " claimed; last seen:\n" << last;
        return {};
    }

    int m_poolMetricsPort = 0;
    int m_brokerMetricsPort = 0;
};

TEST_F(Metrics, BothPagesPassPromtoolAndMoveWithARealSession)
{
    PADDOCK_REQUIRE_PROMTOOL();
    // The broker's first health check of the pool may still be under way when it starts serving.
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (valueOf(scrape(m_brokerMetricsPort).body, "paddock_pool_up{pool=\"local\"}") != 1.0
           && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(100ms);
    const std::string brokerBefore = checkedScrape(m_brokerMetricsPort, "broker-before");
    EXPECT_EQ(valueOf(brokerBefore, "paddock_pool_up{pool=\"local\"}"), 1.0) << brokerBefore;
    EXPECT_EQ(valueOf(brokerBefore, "paddock_sessions{status=\"succeeded\"}"), 0.0) << brokerBefore;
    EXPECT_FALSE(poolAgrees(0).empty());

    // A session that runs a command long enough to be seen holding its sandbox.
    const auto playbook = writeFile("metrics.toml", R"toml(
name = "metrics"
goal = "hold a sandbox for a while, then finish"

[[step]]
tool = "run_command"
command = "echo started && sleep 8 && echo done"
expect_stdout = "done"

[[step]]
tool = "finish"
summary = "held and finished"
)toml");
    const CliResult submitted = cli({"submit", "--playbook", playbook.string(), "--output", "json"});
    ASSERT_EQ(submitted.exitCode, 0) << submitted.err << submitted.out;
    const auto session = json::parse(submitted.out, nullptr, false);
    ASSERT_TRUE(session.is_object() && session.contains("id")) << submitted.out;
    const std::string id = session["id"];

    // While the command runs: one lite sandbox claimed, on the page as in the pool's Status, and the
    // session counted as running.
    EXPECT_FALSE(poolAgrees(1).empty());
    const Scrape during = scrape(m_brokerMetricsPort);
    EXPECT_EQ(valueOf(during.body, "paddock_sessions{status=\"running\"}"), 1.0) << during.body;

    const CliResult followed = cli({"events", id, "-f"});
    ASSERT_EQ(followed.exitCode, 0) << followed.err << followed.out;

    const std::string brokerAfter = checkedScrape(m_brokerMetricsPort, "broker-after");
    const std::string poolAfter = checkedScrape(m_poolMetricsPort, "pool-after");
    EXPECT_GT(sumOf(brokerAfter, "paddock_engine_steps_total"), sumOf(brokerBefore, "paddock_engine_steps_total"));
    EXPECT_GE(valueOf(brokerAfter, "paddock_engine_steps_total{action=\"run_tool\"}").value_or(0), 1.0) << brokerAfter;
    EXPECT_GT(valueOf(brokerAfter, "paddock_store_appends_total").value_or(0),
              valueOf(brokerBefore, "paddock_store_appends_total").value_or(0))
        << brokerAfter;
    EXPECT_GT(valueOf(brokerAfter, "paddock_store_events_appended_total").value_or(0),
              valueOf(brokerAfter, "paddock_store_appends_total").value_or(0) - 1);
    EXPECT_EQ(valueOf(brokerAfter, "paddock_store_append_duration_seconds_count"),
              valueOf(brokerAfter, "paddock_store_appends_total"))
        << brokerAfter;
    EXPECT_EQ(valueOf(brokerAfter, "paddock_sessions{status=\"succeeded\"}"), 1.0) << brokerAfter;
    EXPECT_EQ(valueOf(brokerAfter, "paddock_sessions{status=\"running\"}"), 0.0) << brokerAfter;
    EXPECT_GE(valueOf(brokerAfter, "paddock_model_call_duration_seconds_count{model=\"scripted\",outcome=\"ok\"}")
                  .value_or(0),
              1.0)
        << brokerAfter;
    EXPECT_GT(valueOf(brokerAfter, "paddock_model_tokens_total{model=\"scripted\",direction=\"input\"}").value_or(0), 0)
        << brokerAfter;
    EXPECT_GE(valueOf(brokerAfter, "paddock_checkpoints_total").value_or(0), 1.0) << brokerAfter;
    EXPECT_GT(valueOf(brokerAfter, "paddock_checkpoint_stored_bytes_total").value_or(0), 0) << brokerAfter;
    EXPECT_EQ(valueOf(brokerAfter, "paddock_review_queue_depth{kind=\"tier_escalation\"}"), 0.0) << brokerAfter;
    EXPECT_EQ(valueOf(brokerAfter, "paddock_store_up"), 1.0) << brokerAfter;

    // The sandbox went back: the pool's page and its Status agree again, with nothing claimed; the
    // claim was counted.
    EXPECT_FALSE(poolAgrees(0).empty());
    EXPECT_GE(valueOf(poolAfter, "paddock_pool_claim_duration_seconds_count{tier=\"lite\"}").value_or(0), 1.0)
        << poolAfter;
    EXPECT_EQ(valueOf(poolAfter, "paddock_pool_max_sandboxes{tier=\"lite\"}"), 32.0) << poolAfter;
    EXPECT_EQ(valueOf(poolAfter, "paddock_pool_warm_target_sandboxes{tier=\"lite\"}"), 2.0) << poolAfter;
    EXPECT_TRUE(valueOf(poolAfter, "paddock_pool_cold_fallbacks_total{tier=\"lite\"}").has_value()) << poolAfter;
    // The session's checkpoints left the pool: what it sent covers what the broker stored (the
    // broker adds manifests; an unchanged workspace sends nothing and stores nothing).
    EXPECT_EQ(valueOf(poolAfter, "paddock_pool_checkpoints_total"), valueOf(brokerAfter, "paddock_checkpoints_total"))
        << poolAfter;
    EXPECT_GT(valueOf(poolAfter, "paddock_pool_checkpoint_sent_bytes_total").value_or(0), 0) << poolAfter;
    EXPECT_EQ(valueOf(poolAfter, "paddock_pool_restore_received_bytes_total"), 0.0) << poolAfter;
}

TEST(MetricsDocs, PromtoolAcceptsTheDocumentedAlertRulesAndScrapeConfig)
{
    PADDOCK_REQUIRE_PROMTOOL();
    TempDir dir("paddock-metrics-docs");
    const std::string rules = documentedYaml("promtool check rules");
    ASSERT_FALSE(rules.empty()) << "docs/metrics.md has no ```yaml block after <!-- promtool check rules -->";
    std::ofstream(dir / "paddock-alerts.yml") << rules;
    EXPECT_EQ(promtool({"check", "rules", (dir / "paddock-alerts.yml").string()}, dir / "rules.log"), 0)
        << readText(dir / "rules.log") << "\n" << rules;

    const std::string config = documentedYaml("promtool check config");
    ASSERT_FALSE(config.empty()) << "docs/metrics.md has no ```yaml block after <!-- promtool check config -->";
    std::ofstream(dir / "prometheus.yml") << config;
    // --syntax-only: the files it names (a CA, a token) are the operator's, not this machine's.
    EXPECT_EQ(promtool({"check", "config", "--syntax-only", (dir / "prometheus.yml").string()}, dir / "config.log"), 0)
        << readText(dir / "config.log") << "\n" << config;
}

// Daemons started by hand with TLS, and for the refusals: each test's own directory and env.
class MetricsSettings : public ::testing::Test {
protected:
    void SetUp() override
    {
        PADDOCK_SKIP_IF_MISSING(kDaemonBinaries);
        m_dir = std::make_unique<TempDir>("paddock-metrics");
        m_env = hermeticEnvFor(m_dir->path());
    }

    void TearDown() override
    {
        for (auto &[name, daemon] : m_daemons) {
            if (HasFailure())
                std::cerr << "---- " << name << " log (tail) ----\n" << daemon.logTail(40);
            daemon.terminate();
        }
    }

    std::filesystem::path write(const std::string &name, const std::string &text)
    {
        const auto path = m_dir->path() / name;
        std::ofstream(path) << text;
        return path;
    }

    std::filesystem::path socket() const { return m_dir->path() / "run/broker.sock"; }

    std::vector<std::string> brokerArgs(const std::filesystem::path &config) const
    {
        return {binaryPath("paddockd").string(), "--config", config.string(), "--data-dir",
                (m_dir->path() / "broker").string(), "--socket", socket().string(), "--pool", "local=127.0.0.1:1",
                "--allow-local-execution", "--playbook-dir", playbookDir().string(), "--workers", "2"};
    }

    std::vector<std::string> poolArgs(const std::filesystem::path &config, const std::string &name) const
    {
        return {binaryPath("paddock-pool").string(), "--config", config.string(), "--listen",
                "127.0.0.1:" + std::to_string(freeLoopbackPort()), "--state-dir", (m_dir->path() / ("state-" + name)).string(),
                "--warm", "1"};
    }

    // Runs a daemon that must refuse to start: its exit status and its log.
    std::pair<int, std::string> refusedStart(const std::vector<std::string> &argv, const std::string &name)
    {
        const auto log = m_dir->path() / (name + ".log");
        auto daemon = Daemon::start(argv, log, m_env);
        EXPECT_TRUE(daemon) << daemon.error().message;
        if (!daemon)
            return {-1, {}};
        const auto status = daemon->waitExit(60s);
        if (!status) {
            ADD_FAILURE() << name << " did not stop; it should have refused its [metrics] setting:\n" << daemon->logTail();
            return {-1, daemon->logText()};
        }
        return {*status, daemon->logText()};
    }

    // Waits for a started daemon's log to say `text`.
    Status waitForLog(Daemon &daemon, const std::string &text)
    {
        const auto until = std::chrono::steady_clock::now() + 60s;
        while (std::chrono::steady_clock::now() < until) {
            if (daemon.logText().find(text) != std::string::npos)
                return {};
            if (!daemon.running())
                return fail(ErrorCode::Unavailable, "exited at start:\n" + daemon.logTail());
            std::this_thread::sleep_for(50ms);
        }
        return fail(ErrorCode::DeadlineExceeded, "never said '" + text + "':\n" + daemon.logTail());
    }

    std::unique_ptr<TempDir> m_dir;
    std::map<std::string, std::string> m_env;
    std::map<std::string, Daemon> m_daemons;
};

TEST_F(MetricsSettings, OverTlsAScrapeWithoutTheRightTokenGets401)
{
    if (!haveOpenssl())
        GTEST_FAIL() << "no /usr/bin/openssl to make test certificates: run scripts/setup-deps";
    TestCa ca(m_dir->path() / "pki", "metrics-ca");
    ASSERT_TRUE(ca.ok()) << "openssl could not make the test CA; see " << (m_dir->path() / "pki");
    auto cert = ca.issue("daemon", "IP:127.0.0.1");
    ASSERT_TRUE(cert) << cert.error().message;

    // The broker: a viewer principal reached by token only, and the OS user as admin on the socket.
    const int brokerPort = freeLoopbackPort();
    const auto brokerConfig = write("broker.toml", "[[principal]]\nname = \"admin\"\nrole = \"admin\"\nuids = ["
                                                       + std::to_string(::getuid()) + "]\n\n[[principal]]\nname = "
                                                       "\"prometheus\"\nrole = \"viewer\"\n\n[metrics]\nlisten = "
                                                       "\"127.0.0.1:" + std::to_string(brokerPort) + "\"\ntls_cert = \""
                                                       + cert->first.string() + "\"\ntls_key = \"" + cert->second.string()
                                                       + "\"\n");
    auto broker = Daemon::start(brokerArgs(brokerConfig), m_dir->path() / "broker.log", m_env);
    ASSERT_TRUE(broker) << broker.error().message;
    auto &brokerDaemon = m_daemons.emplace("paddockd", std::move(*broker)).first->second;
    ASSERT_TRUE(waitForHealthy("unix:" + socket().string(), 60s, &brokerDaemon));
    EXPECT_NE(brokerDaemon.logText().find("metrics at https://127.0.0.1:" + std::to_string(brokerPort)), std::string::npos)
        << brokerDaemon.logTail();
    const CliResult created = runCli({"--broker", "unix:" + socket().string(), "tokens", "create", "prometheus"});
    ASSERT_EQ(created.exitCode, 0) << created.err;
    const std::string token = splitLines(created.out).front();

    const Scrape none = scrape(brokerPort, {}, ca.pem());
    EXPECT_EQ(none.status, 401) << none.error << none.body;
    EXPECT_NE(none.body.find("paddockctl tokens create"), std::string::npos) << none.body;
    const Scrape forged = scrape(brokerPort, "pdk_0123456789ab_notasecret", ca.pem());
    EXPECT_EQ(forged.status, 401) << forged.error << forged.body;
    const Scrape right = scrape(brokerPort, token, ca.pem());
    EXPECT_EQ(right.status, 200) << right.error << right.body;
    EXPECT_NE(right.body.find("paddock_sessions{status=\"queued\"} 0"), std::string::npos) << right.body;
    EXPECT_EQ(scrape(brokerPort).status, -1) << "plain HTTP must get no page from the TLS port";
    // The refusals are in the audit log, like refused calls.
    const CliResult audit = runCli({"--broker", "unix:" + socket().string(), "audit", "--output", "json"});
    EXPECT_NE(audit.out.find("GET /metrics"), std::string::npos) << audit.err << audit.out;
    EXPECT_EQ(audit.out.find(token), std::string::npos) << "the audit log must not hold the token";

    // The pool: its own TLS flags and token.
    const int poolPort = freeLoopbackPort();
    const auto poolConfig = write("pool.toml", "[metrics]\nlisten = \"127.0.0.1:" + std::to_string(poolPort) + "\"\n");
    const auto tokenFile = write("pool.token", "pool-token-0123456789abcdef\n");
    auto argv = poolArgs(poolConfig, "tls");
    argv.insert(argv.end(), {"--tls-cert", cert->first.string(), "--tls-key", cert->second.string(), "--token-file",
                             tokenFile.string()});
    auto pool = Daemon::start(argv, m_dir->path() / "pool.log", m_env);
    ASSERT_TRUE(pool) << pool.error().message;
    auto &poolDaemon = m_daemons.emplace("paddock-pool", std::move(*pool)).first->second;
    ASSERT_TRUE(waitForLog(poolDaemon, "metrics at https://127.0.0.1:" + std::to_string(poolPort)));

    const Scrape poolNone = scrape(poolPort, {}, ca.pem());
    EXPECT_EQ(poolNone.status, 401) << poolNone.error << poolNone.body;
    EXPECT_NE(poolNone.body.find("--token-file"), std::string::npos) << poolNone.body;
    const Scrape poolWrong = scrape(poolPort, "pool-token-0123456789abcdeX", ca.pem());
    EXPECT_EQ(poolWrong.status, 401) << poolWrong.error << poolWrong.body;
    const Scrape poolRight = scrape(poolPort, "pool-token-0123456789abcdef", ca.pem());
    EXPECT_EQ(poolRight.status, 200) << poolRight.error << poolRight.body;
    EXPECT_NE(poolRight.body.find("paddock_pool_max_sandboxes{tier=\"lite\"} 32"), std::string::npos) << poolRight.body;
}

TEST_F(MetricsSettings, AnAddressInUseStopsEachDaemonNamingTheSetting)
{
    int held = -1;
    const int port = holdLoopbackPort(held);
    ASSERT_GT(port, 0);
    const std::string listen = "[metrics]\nlisten = \"127.0.0.1:" + std::to_string(port) + "\"\n";

    const auto [brokerExit, brokerLog] = refusedStart(brokerArgs(write("broker.toml", listen)), "broker-in-use");
    EXPECT_EQ(brokerExit, 1) << brokerLog;
    EXPECT_NE(brokerLog.find("cannot listen on 127.0.0.1:" + std::to_string(port) + " ([metrics] listen"),
              std::string::npos)
        << brokerLog;
    EXPECT_NE(brokerLog.find("the port is taken"), std::string::npos) << brokerLog;

    const auto [poolExit, poolLog] = refusedStart(poolArgs(write("pool.toml", listen), "in-use"), "pool-in-use");
    EXPECT_EQ(poolExit, 1) << poolLog;
    EXPECT_NE(poolLog.find("([metrics] listen in pool.toml): the port is taken"), std::string::npos) << poolLog;
    ::close(held);
}

TEST_F(MetricsSettings, AnAddressOffLoopbackWithoutTlsIsRefusedWithTheFix)
{
    const std::string listen = "[metrics]\nlisten = \"0.0.0.0:" + std::to_string(freeLoopbackPort()) + "\"\n";
    const auto brokerConfig = write("broker.toml", listen);
    const auto [brokerExit, brokerLog] = refusedStart(brokerArgs(brokerConfig), "broker-open");
    EXPECT_EQ(brokerExit, 3) << brokerLog;
    EXPECT_NE(brokerLog.find("is not a loopback address"), std::string::npos) << brokerLog;
    EXPECT_NE(brokerLog.find("set tls_cert and tls_key in [metrics]"), std::string::npos) << brokerLog;
    // --check-config says the same without starting.
    auto check = brokerArgs(brokerConfig);
    check.push_back("--check-config");
    const auto [checkExit, checkLog] = refusedStart(check, "broker-check");
    EXPECT_EQ(checkExit, 3) << checkLog;
    EXPECT_NE(checkLog.find("set tls_cert and tls_key in [metrics]"), std::string::npos) << checkLog;

    const auto poolConfig = write("pool.toml", listen);
    const auto [poolExit, poolLog] = refusedStart(poolArgs(poolConfig, "open"), "pool-open");
    EXPECT_EQ(poolExit, 2) << poolLog;
    EXPECT_NE(poolLog.find("not a loopback address"), std::string::npos) << poolLog;
    EXPECT_NE(poolLog.find("--tls-cert, --tls-key and --token-file"), std::string::npos) << poolLog;

    // A listen that is not an address at all is named too.
    const auto [badExit, badLog] = refusedStart(brokerArgs(write("bad.toml", "[metrics]\nlisten = \"9464\"\n")), "broker-bad");
    EXPECT_EQ(badExit, 3) << badLog;
    EXPECT_NE(badLog.find("[metrics] listen \"9464\" is not HOST:PORT"), std::string::npos) << badLog;
}

} // namespace
} // namespace paddock::test
