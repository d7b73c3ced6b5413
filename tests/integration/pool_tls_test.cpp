// Pools over TLS with bearer tokens, on loopback: a broker with five pools, one right, one mutual
// TLS, and three wrong in the ways operators get it wrong (a certificate from another CA, one for
// another name, another token). The right ones take sessions; each wrong one is unhealthy in
// ListPools with an error naming the pool, the endpoint and the fix, the broker's log says so,
// no session is lost, and the token never appears anywhere.

#include "tests/integration/daemons_fixture.h"
#include "tests/integration/multi_host_support.h"

namespace paddock::test {
namespace {

constexpr const char *kToken = "s3cret-pool-token-0123456789abcdef";

class PoolTls : public ::testing::Test {
protected:
    void SetUp() override
    {
        PADDOCK_SKIP_IF_MISSING(kDaemonBinaries);
        if (!haveOpenssl())
            GTEST_SKIP() << "no /usr/bin/openssl to make test certificates: run scripts/setup-deps";
        m_dir = std::make_unique<TempDir>("paddock-tls-test");
        m_env = hermeticEnvFor(m_dir->path());
    }

    void TearDown() override
    {
        if (HasFailure()) {
            if (m_broker)
                std::cerr << "---- paddockd log (tail) ----\n" << m_broker->logTail(60);
            for (auto &[name, pool] : m_pools)
                std::cerr << "---- pool " << name << " log (tail) ----\n" << pool.logTail(20);
        }
        if (m_broker)
            m_broker->terminate();
        for (auto &[name, pool] : m_pools)
            pool.terminate();
    }

    std::filesystem::path write(const std::string &name, const std::string &text)
    {
        const auto path = m_dir->path() / name;
        std::ofstream(path) << text;
        return path;
    }

    // Starts a pool on a free loopback port; returns its endpoint.
    std::string startPool(const std::string &name, std::vector<std::string> extra)
    {
        const int port = freeLoopbackPort();
        const std::string endpoint = "127.0.0.1:" + std::to_string(port);
        std::vector<std::string> argv{binaryPath("paddock-pool").string(), "--listen", endpoint, "--state-dir",
                                      (m_dir->path() / ("state-" + name)).string(), "--warm", "1"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        auto daemon = Daemon::start(argv, m_dir->path() / (name + ".log"), m_env);
        EXPECT_TRUE(daemon) << daemon.error().message;
        if (!daemon)
            return {};
        auto ready = waitForPoolLog(*daemon);
        EXPECT_TRUE(ready) << name << ": " << ready.error().message;
        m_pools.emplace(name, std::move(*daemon));
        return endpoint;
    }

    std::unique_ptr<TempDir> m_dir;
    std::map<std::string, std::string> m_env;
    std::map<std::string, Daemon> m_pools;
    std::optional<Daemon> m_broker;
};

TEST_F(PoolTls, RightCredentialsServeAndEachWrongOneIsNamedWithItsFix)
{
    TestCa ca(m_dir->path() / "pki", "paddock-test-ca");
    TestCa rogue(m_dir->path() / "pki", "rogue-ca");
    ASSERT_TRUE(ca.ok() && rogue.ok()) << "openssl could not make the test CAs; see " << (m_dir->path() / "pki");
    auto good = ca.issue("good", "IP:127.0.0.1");
    auto wrongCa = rogue.issue("wrongca", "IP:127.0.0.1");
    auto wrongName = ca.issue("wrongname", "DNS:elsewhere.example");
    auto client = ca.issue("broker-client", "DNS:paddock-broker");
    ASSERT_TRUE(good && wrongCa && wrongName && client);
    const auto token = write("pool.token", std::string(kToken) + "\n");
    const auto otherToken = write("other.token", "another-token-entirely\n");

    // A token without TLS is refused at start: it would cross the network in the clear.
    {
        const int exit = runToEnd({binaryPath("paddock-pool").string(), "--listen", "127.0.0.1:1", "--token-file",
                                   token.string(), "--state-dir", (m_dir->path() / "state-refused").string()},
                                  m_dir->path() / "refused.log");
        EXPECT_EQ(exit, 2);
        std::ifstream in(m_dir->path() / "refused.log");
        const std::string text((std::istreambuf_iterator<char>(in)), {});
        EXPECT_NE(text.find("--token-file needs TLS"), std::string::npos) << text;
    }

    auto tls = [&](const std::pair<std::filesystem::path, std::filesystem::path> &cert, const std::filesystem::path &tok) {
        return std::vector<std::string>{"--tls-cert", cert.first.string(), "--tls-key", cert.second.string(),
                                        "--token-file", tok.string()};
    };
    std::map<std::string, std::string> endpoints;
    endpoints["good"] = startPool("good", tls(*good, token));
    auto mtlsArgs = tls(*good, token);
    mtlsArgs.insert(mtlsArgs.end(), {"--tls-client-ca", ca.pem().string()});
    endpoints["mtls"] = startPool("mtls", mtlsArgs);
    endpoints["wrongca"] = startPool("wrongca", tls(*wrongCa, token));
    endpoints["wrongname"] = startPool("wrongname", tls(*wrongName, token));
    endpoints["badtoken"] = startPool("badtoken", tls(*good, otherToken));
    ASSERT_FALSE(HasFailure());

    std::string config = "allow_local_execution = true\npool_health_interval_ms = 200\n";
    for (const auto &[name, endpoint] : endpoints) {
        config += "\n[[pool]]\nname = \"" + name + "\"\nendpoint = \"" + endpoint + "\"\ntls_ca = \"" + ca.pem().string()
            + "\"\ntoken_file = \"" + token.string() + "\"\n";
        if (name == "mtls")
            config += "tls_cert = \"" + client->first.string() + "\"\ntls_key = \"" + client->second.string() + "\"\n";
    }
    const auto configFile = write("broker.toml", config);
    const auto socket = m_dir->path() / "run/broker.sock";
    auto broker = Daemon::start({binaryPath("paddockd").string(), "--config", configFile.string(), "--data-dir",
                                 (m_dir->path() / "broker").string(), "--socket", socket.string(), "--playbook-dir",
                                 playbookDir().string(), "--workers", "4"},
                                m_dir->path() / "broker.log", m_env);
    ASSERT_TRUE(broker) << broker.error().message;
    m_broker.emplace(std::move(*broker));
    const std::string address = "unix:" + socket.string();
    ASSERT_TRUE(waitForHealthy(address, 30s, &*m_broker));

    // Health checks settle: two healthy, three not.
    nlohmann::json pools;
    for (int i = 0; i < 300; ++i) {
        pools = listPools(address);
        int healthy = 0;
        int failed = 0;
        for (const auto &pool : pools.value("pools", nlohmann::json::array())) {
            healthy += pool["healthy"].get<bool>();
            failed += !pool["healthy"].get<bool>() && !pool["error"].get<std::string>().empty();
        }
        if (healthy == 2 && failed == 3)
            break;
        std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(pools.is_object()) << "paddockctl pools failed";
    EXPECT_TRUE(findPool(pools, "good")["healthy"].get<bool>()) << findPool(pools, "good").dump(2);
    EXPECT_TRUE(findPool(pools, "mtls")["healthy"].get<bool>()) << findPool(pools, "mtls").dump(2);
    EXPECT_EQ(findPool(pools, "good")["transport"], "tls");
    EXPECT_EQ(findPool(pools, "mtls")["transport"], "mtls");
    EXPECT_EQ(findPool(pools, "good")["token"], true);
    EXPECT_EQ(findPool(pools, "good")["execution"], "local execution");
    EXPECT_FALSE(findPool(pools, "good")["history"].empty()) << "health over time";
    // The pool's own word on disk_mb: enforced ("btrfs qgroups") or "none (why)", never blank.
    const std::string diskLimits = findPool(pools, "good")["disk_limits"];
    EXPECT_TRUE(diskLimits == "btrfs qgroups" || diskLimits.starts_with("none (")) << diskLimits;
    EXPECT_EQ(findPool(pools, "wrongca")["disk_limits"], "") << "an unreachable pool's limits are unknown";
    const CliResult table = runCli({"--broker", address, "pools"});
    EXPECT_NE(table.out.find("good: disk limits: " + diskLimits + "\n"), std::string::npos) << table.out;
    // And on memory, cpu and pids: the cgroup layout it enforces them with, or that it does not.
    const std::string cgroups = findPool(pools, "good")["cgroups"];
    EXPECT_TRUE(cgroups.starts_with("v1") || cgroups.starts_with("v2") || cgroups.starts_with("none")) << cgroups;
    EXPECT_NE(table.out.find("good: cgroups: " + cgroups + "\n"), std::string::npos) << table.out;
    // What each tier promises about its host (docs/security.md), from the pool through the broker.
    const nlohmann::json goodPool = findPool(pools, "good");
    const nlohmann::json isolation = goodPool["tiers"].at(0)["isolation"];
    const std::string identity = isolation.value("identity", "");
    if (::geteuid() == 0)
        EXPECT_TRUE(identity.starts_with("own host ids (uids and gids 1000000000-")) << isolation.dump();
    else
        EXPECT_TRUE(identity.starts_with("the pool's user (uid ")) << isolation.dump();
    EXPECT_TRUE(isolation.value("seccomp", "").starts_with("on (EPERM for ")) << isolation.dump();
    EXPECT_TRUE(isolation.value("etc", "").starts_with("minimal (")) << isolation.dump();
    EXPECT_NE(table.out.find("good/" + goodPool["tiers"].at(0)["name"].get<std::string>() + ": identity: " + identity +
                             "; seccomp: on (EPERM for "),
              std::string::npos)
        << table.out;

    for (const std::string name : {"wrongca", "wrongname"}) {
        const auto pool = findPool(pools, name);
        SCOPED_TRACE(pool.dump(2));
        EXPECT_FALSE(pool["healthy"].get<bool>());
        const std::string error = pool["error"];
        EXPECT_NE(error.find("pool '" + name + "'"), std::string::npos);
        EXPECT_NE(error.find(endpoints[name]), std::string::npos);
        EXPECT_NE(error.find("TLS handshake failed"), std::string::npos);
        EXPECT_NE(error.find("tls_ca"), std::string::npos) << "the fix";
        EXPECT_GT(pool["unhealthy_since_unix_ms"].get<int64_t>(), 0);
    }
    {
        const auto pool = findPool(pools, "badtoken");
        const std::string error = pool["error"];
        EXPECT_FALSE(pool["healthy"].get<bool>());
        EXPECT_NE(error.find("pool 'badtoken'"), std::string::npos) << error;
        EXPECT_NE(error.find("token_file"), std::string::npos) << error;
    }

    // Sessions go to the healthy pools and finish; none is lost to the broken ones.
    std::vector<std::string> ids;
    for (int i = 0; i < 4; ++i) {
        const CliResult submitted = runCli({"--broker", address, "submit", "--playbook", "hello-c", "--output", "json"});
        ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
        ids.push_back(nlohmann::json::parse(submitted.out)["id"].get<std::string>());
    }
    for (const auto &id : ids) {
        std::string status;
        for (int i = 0; i < 600; ++i) {
            const CliResult shown = runCli({"--broker", address, "show", id, "--output", "json"});
            auto j = nlohmann::json::parse(shown.out, nullptr, false);
            status = j.is_object() ? j.value("status", std::string()) : std::string();
            if (status == "succeeded" || status == "failed" || status == "cancelled")
                break;
            std::this_thread::sleep_for(100ms);
        }
        EXPECT_EQ(status, "succeeded") << id;
        for (const auto &event : sessionEvents(address, id)) {
            if (event["kind"] == "sandbox.claimed") {
                const std::string pool = event["payload"]["pool"];
                EXPECT_TRUE(pool == "good" || pool == "mtls") << "placed on an unhealthy pool: " << pool;
            }
        }
    }

    const std::string log = m_broker->logText();
    EXPECT_NE(log.find("pool 'wrongca' at " + endpoints["wrongca"] + " is unhealthy"), std::string::npos);
    EXPECT_NE(log.find("pool 'wrongname' at " + endpoints["wrongname"] + " is unhealthy"), std::string::npos);
    EXPECT_EQ(log.find(kToken), std::string::npos) << "the token is in the broker's log";
    EXPECT_EQ(listPools(address).dump().find(kToken), std::string::npos) << "the token is in ListPools";
}

} // namespace
} // namespace paddock::test
