// The egress matrix, end to end: real paddock-pool, paddockd and paddockctl, real bubblewrap
// sandboxes, real curl and python3 inside them, all inside network namespaces this test creates.
//
// This file: what the proxy lets through, refuses and records, as sessions (through paddockctl)
// and the pool's API see it, and that a tier without network reaches nothing. Hosts opened by a
// review or a grant are in egress_netns_review_test.cpp; the network, the fake internet and the
// fixture (and what they look like) in egress_netns_fixture.h.
//
// Needs root (namespaces, bwrap); skips with a message otherwise.
//
// Threads: everything here runs on the test's main thread.

#include "broker/pool_client/grpc_pool_client.h"
#include "tests/integration/egress_netns_fixture.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace paddock::test {
namespace {

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

INSTANTIATE_TEST_SUITE_P(Tiers, EgressNetnsTest, ::testing::ValuesIn(kTierCases),
                         [](const ::testing::TestParamInfo<TierCase> &tier) { return tier.param.runtime; });

} // namespace
} // namespace paddock::test
