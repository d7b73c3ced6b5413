// The /metrics server over real loopback sockets: the page and its content type, a taken port and
// a bad address refused with the setting named, and scrapes over TLS that need the bearer token
// (401 without it, with another, or with another scheme), with client certificates when a CA is
// given. Certificates come from the openssl CLI (tests/integration/multi_host_support.h).

#include "metrics/server/metrics_server.h"

#include "tests/integration/multi_host_support.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>

namespace paddock::metrics {
namespace {

constexpr const char *kPage = "# HELP test_up Up\n# TYPE test_up gauge\ntest_up 1\n";

MetricsServerOptions plainOptions(const std::string &listen = "127.0.0.1:0")
{
    MetricsServerOptions options;
    options.listen = listen;
    options.setting = "[metrics] listen in test.toml";
    options.render = [] { return std::string(kPage); };
    return options;
}

// A TCP socket listening on a free loopback port; its port, or -1.
int holdPort(int &fd)
{
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 || ::listen(fd, 4) != 0
        || ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &size) != 0)
        return -1;
    return ntohs(addr.sin_port);
}

TEST(MetricsServer, ServesThePageOverHttpOnLoopback)
{
    auto server = MetricsServer::start(plainOptions());
    ASSERT_TRUE(server) << server.error().message;
    EXPECT_GT((*server)->port(), 0);
    EXPECT_EQ((*server)->url(), "http://127.0.0.1:" + std::to_string((*server)->port()) + "/metrics");
    httplib::Client client("127.0.0.1", (*server)->port());
    auto page = client.Get("/metrics");
    ASSERT_TRUE(page) << httplib::to_string(page.error());
    EXPECT_EQ(page->status, 200);
    EXPECT_EQ(page->body, kPage);
    EXPECT_EQ(page->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    auto elsewhere = client.Get("/");
    ASSERT_TRUE(elsewhere);
    EXPECT_EQ(elsewhere->status, 404);
    EXPECT_NE(elsewhere->body.find("/metrics"), std::string::npos) << elsewhere->body;
    (*server)->stop();
    (*server)->stop();   // idempotent
    EXPECT_FALSE(client.Get("/metrics"));
}

TEST(MetricsServer, ATakenPortIsRefusedNamingTheSettingAndTheFix)
{
    int fd = -1;
    const int port = holdPort(fd);
    ASSERT_GT(port, 0);
    auto refused = MetricsServer::start(plainOptions("127.0.0.1:" + std::to_string(port)));
    ::close(fd);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::Unavailable);
    EXPECT_NE(refused.error().message.find("[metrics] listen in test.toml"), std::string::npos) << refused.error().message;
    EXPECT_NE(refused.error().message.find("the port is taken"), std::string::npos) << refused.error().message;

    // Nor can a second server share a first one's port (no SO_REUSEPORT).
    auto first = MetricsServer::start(plainOptions());
    ASSERT_TRUE(first) << first.error().message;
    auto second = MetricsServer::start(plainOptions("127.0.0.1:" + std::to_string((*first)->port())));
    EXPECT_FALSE(second);
}

TEST(MetricsServer, AddressesAreParsedAndLoopbackIsRecognised)
{
    auto v4 = parseListenAddress("127.0.0.1:9464", "s");
    ASSERT_TRUE(v4);
    EXPECT_EQ(v4->host, "127.0.0.1");
    EXPECT_EQ(v4->port, 9464);
    auto v6 = parseListenAddress("[::1]:9464", "s");
    ASSERT_TRUE(v6);
    EXPECT_EQ(v6->host, "::1");
    for (const char *bad : {"9464", ":9464", "127.0.0.1:", "127.0.0.1:70000", "::1:9464", "[::1:9464", "host:port"}) {
        auto parsed = parseListenAddress(bad, "[metrics] listen");
        ASSERT_FALSE(parsed) << bad;
        EXPECT_NE(parsed.error().message.find("[metrics] listen \"" + std::string(bad) + "\""), std::string::npos)
            << parsed.error().message;
        EXPECT_NE(parsed.error().message.find("127.0.0.1:9464"), std::string::npos) << parsed.error().message;
    }
    for (const char *host : {"127.0.0.1", "127.1.2.3", "::1", "localhost", "LocalHost", "::ffff:127.0.0.1"})
        EXPECT_TRUE(isLoopbackHost(host)) << host;
    for (const char *host : {"0.0.0.0", "::", "10.0.0.1", "192.168.1.1", "::ffff:10.0.0.1", "metrics.example", ""})
        EXPECT_FALSE(isLoopbackHost(host)) << host;
}

class MetricsServerTls : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!test::haveOpenssl())
            GTEST_FAIL() << "no /usr/bin/openssl to make test certificates: run scripts/setup-deps";
        m_dir = std::make_unique<test::TempDir>("metrics-tls");
        m_ca = std::make_unique<test::TestCa>(m_dir->path() / "pki", "metrics-test-ca");
        ASSERT_TRUE(m_ca->ok());
        auto leaf = m_ca->issue("metrics", "IP:127.0.0.1");
        auto client = m_ca->issue("scraper", "DNS:prometheus");
        ASSERT_TRUE(leaf && client);
        m_leaf = *leaf;
        m_client = *client;
    }

    MetricsServerOptions tlsOptions()
    {
        MetricsServerOptions options = plainOptions();
        options.tlsCert = m_leaf.first;
        options.tlsKey = m_leaf.second;
        options.checkToken = [](std::string_view token) -> std::string {
            return token == "right-token" ? "" : "that token is not this server's";
        };
        options.tokenHint = "ask for one";
        options.onRefusal = [this](std::string_view why, std::string_view token) {
            std::lock_guard lock(m_mutex);
            m_refusals.emplace_back(std::string(why), std::string(token));
        };
        return options;
    }

    std::unique_ptr<httplib::SSLClient> client(int port, bool withCertificate = false)
    {
        auto out = withCertificate ? std::make_unique<httplib::SSLClient>("127.0.0.1", port, m_client.first.string(),
                                                                          m_client.second.string())
                                   : std::make_unique<httplib::SSLClient>("127.0.0.1", port);
        out->set_ca_cert_path(m_ca->pem().c_str());
        out->enable_server_certificate_verification(true);
        return out;
    }

    std::unique_ptr<test::TempDir> m_dir;
    std::unique_ptr<test::TestCa> m_ca;
    std::pair<std::filesystem::path, std::filesystem::path> m_leaf, m_client;
    std::mutex m_mutex;
    std::vector<std::pair<std::string, std::string>> m_refusals;
};

TEST_F(MetricsServerTls, ScrapesWithoutTheRightBearerTokenGet401)
{
    auto server = MetricsServer::start(tlsOptions());
    ASSERT_TRUE(server) << server.error().message;
    EXPECT_EQ((*server)->url().rfind("https://127.0.0.1:", 0), 0u) << (*server)->url();
    auto https = client((*server)->port());

    auto none = https->Get("/metrics");
    ASSERT_TRUE(none) << httplib::to_string(none.error());
    EXPECT_EQ(none->status, 401);
    EXPECT_NE(none->body.find("had none; ask for one"), std::string::npos) << none->body;
    EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer realm=\"paddock metrics\"");

    auto wrong = https->Get("/metrics", {{"Authorization", "Bearer wrong-token"}});
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401);
    EXPECT_NE(wrong->body.find("not this server's"), std::string::npos) << wrong->body;
    EXPECT_EQ(wrong->body.find("wrong-token"), std::string::npos) << "a 401 must not echo the token";

    auto basic = https->Get("/metrics", {{"Authorization", "Basic cmlnaHQtdG9rZW4="}});
    ASSERT_TRUE(basic);
    EXPECT_EQ(basic->status, 401);
    EXPECT_NE(basic->body.find("not 'Bearer <token>'"), std::string::npos) << basic->body;

    auto right = https->Get("/metrics", {{"Authorization", "bearer right-token"}});
    ASSERT_TRUE(right);
    EXPECT_EQ(right->status, 200);
    EXPECT_EQ(right->body, kPage);

    std::lock_guard lock(m_mutex);
    ASSERT_EQ(m_refusals.size(), 3u);
    EXPECT_EQ(m_refusals[0].second, "");
    EXPECT_EQ(m_refusals[1].second, "wrong-token");   // for the audit record's token id
    EXPECT_EQ(m_refusals[2].second, "");

    // Plain HTTP to the TLS port gets nothing.
    httplib::Client plain("127.0.0.1", (*server)->port());
    plain.set_read_timeout(2, 0);
    auto cleartext = plain.Get("/metrics");
    EXPECT_TRUE(!cleartext || cleartext->status != 200);
}

TEST_F(MetricsServerTls, AClientCaRequiresAClientCertificate)
{
    MetricsServerOptions options = tlsOptions();
    options.clientCa = m_ca->pem();
    auto server = MetricsServer::start(std::move(options));
    ASSERT_TRUE(server) << server.error().message;
    auto anonymous = client((*server)->port())->Get("/metrics", {{"Authorization", "Bearer right-token"}});
    EXPECT_TRUE(!anonymous || anonymous->status != 200);
    auto identified = client((*server)->port(), true)->Get("/metrics", {{"Authorization", "Bearer right-token"}});
    ASSERT_TRUE(identified) << httplib::to_string(identified.error());
    EXPECT_EQ(identified->status, 200);
}

TEST_F(MetricsServerTls, ACertificateThatDoesNotLoadIsNamed)
{
    MetricsServerOptions options = tlsOptions();
    options.tlsKey = m_client.second;   // another certificate's key
    auto refused = MetricsServer::start(std::move(options));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(refused.error().message.find(m_leaf.first.string()), std::string::npos) << refused.error().message;
    EXPECT_NE(refused.error().message.find("[metrics] listen in test.toml"), std::string::npos) << refused.error().message;

    options = tlsOptions();
    options.tlsKey.clear();
    refused = MetricsServer::start(std::move(options));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
}

} // namespace
} // namespace paddock::metrics
