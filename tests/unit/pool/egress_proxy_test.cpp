// The egress proxy over real unix sockets, without any network: refusals, malformed requests,
// limits and the attempt records. (Allowed connections are tested in network namespaces by
// tests/integration/egress_netns_test.cpp: here every destination would be this host.)

#include "pool/egress/egress_proxy.h"
#include "pool/metrics/pool_metrics.h"

#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>

namespace paddock::pool::egress {
namespace {

namespace fs = std::filesystem;

int connectTo(const fs::path &path)
{
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

// Sends a request and reads the whole answer (the proxy closes after a refusal).
std::string roundTrip(const fs::path &path, const std::string &request)
{
    int fd = connectTo(path);
    if (fd < 0)
        return "connect failed";
    (void)!::write(fd, request.data(), request.size());
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
        out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return out;
}

class EgressProxyTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = std::make_unique<test::TempDir>("egress-proxy");
        m_socket = m_dir->path() / "egress.sock";
    }

    void startProxy(EgressLimits limits = {}, std::vector<std::string> allowlist = {"allowed.test", "10.0.0.0/8"})
    {
        auto list = Allowlist::parse(allowlist);
        ASSERT_TRUE(list);
        m_proxy = std::make_unique<EgressProxy>(limits, [this](const std::string &host, int) -> Result<std::vector<IpAddress>> {
            {
                std::unique_lock lock(m_mutex);
                m_resolved.push_back(host);
                m_cv.wait(lock, [&] { return !m_holdResolver; });
            }
            if (host == "allowed.test")
                return std::vector<IpAddress>{*parseIpLiteral("169.254.169.254")};   // a rebinding answer
            return fail(ErrorCode::NotFound, "no such host");
        });
        ASSERT_TRUE(m_proxy->addSandbox("sb-1", m_socket, std::make_shared<const Allowlist>(*list)));
    }

    std::vector<EgressAttempt> take() { return m_proxy->takeAttemptsBlocking("sb-1", 2000); }

    std::unique_ptr<test::TempDir> m_dir;
    fs::path m_socket;
    std::unique_ptr<EgressProxy> m_proxy;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_holdResolver = false;
    std::vector<std::string> m_resolved;
};

TEST_F(EgressProxyTest, RefusesForbiddenDestinationsWith403AndRecordsThem)
{
    startProxy();
    std::string r = roundTrip(m_socket, "CONNECT 0xa9fea9fe:80 HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 403 Forbidden\r\n", 0), 0u) << r;
    EXPECT_NE(r.find("(metadata)"), std::string::npos) << r;
    r = roundTrip(m_socket, "GET http://evil.example/x HTTP/1.1\r\nHost: evil.example\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 403", 0), 0u) << r;
    EXPECT_NE(r.find("not_allowlisted"), std::string::npos) << r;
    r = roundTrip(m_socket, "GET http://user@127.0.0.1:7701/ HTTP/1.1\r\n\r\n");
    EXPECT_NE(r.find("(loopback)"), std::string::npos) << r;
    // A listed name whose answer is a forbidden address: refused, after one lookup.
    r = roundTrip(m_socket, "CONNECT allowed.test:443 HTTP/1.1\r\n\r\n");
    EXPECT_NE(r.find("(metadata)"), std::string::npos) << r;

    auto attempts = take();
    ASSERT_EQ(attempts.size(), 4u);
    EXPECT_FALSE(attempts[0].allowed);
    EXPECT_EQ(attempts[0].method, "CONNECT");
    EXPECT_EQ(attempts[0].host, "0xa9fea9fe");
    EXPECT_EQ(attempts[0].port, 80);
    EXPECT_EQ(attempts[0].address, "169.254.169.254");
    EXPECT_EQ(attempts[0].reason, "metadata");
    EXPECT_GT(attempts[0].timeUnixMs, 0);
    EXPECT_EQ(attempts[1].reason, "not_allowlisted");
    EXPECT_EQ(attempts[1].method, "GET");
    EXPECT_EQ(attempts[1].host, "evil.example");
    EXPECT_EQ(attempts[1].port, 80);
    EXPECT_EQ(attempts[2].reason, "loopback");
    EXPECT_EQ(attempts[2].port, 7701);
    EXPECT_EQ(attempts[3].reason, "metadata");
    EXPECT_EQ(attempts[3].host, "allowed.test");
    EXPECT_EQ(m_resolved, std::vector<std::string>{"allowed.test"});   // evil.example never reached DNS
    EXPECT_TRUE(take().empty());   // handed over once
}

TEST_F(EgressProxyTest, RefusalsAreCountedByReasonForMetrics)
{
    auto &refusals = pool_metrics::poolMetrics().egressRefusals;
    const uint64_t metadataBefore = refusals.with({"metadata"}).value();
    const uint64_t loopbackBefore = refusals.with({"loopback"}).value();
    const uint64_t malformedBefore = refusals.with({"bad_request"}).value() + refusals.with({"invalid_host"}).value();
    startProxy();
    roundTrip(m_socket, "CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n");
    roundTrip(m_socket, "CONNECT [::ffff:169.254.169.254]:80 HTTP/1.1\r\n\r\n");
    roundTrip(m_socket, "GET http://127.0.0.1:7701/ HTTP/1.1\r\n\r\n");
    roundTrip(m_socket, "NONSENSE\r\n\r\n");
    ASSERT_EQ(take().size(), 4u);   // every attempt decided before the counts are read
    EXPECT_EQ(refusals.with({"metadata"}).value(), metadataBefore + 2);
    EXPECT_EQ(refusals.with({"loopback"}).value(), loopbackBefore + 1);
    // A malformed head is one or the other.
    EXPECT_EQ(refusals.with({"bad_request"}).value() + refusals.with({"invalid_host"}).value(), malformedBefore + 1);
}

TEST_F(EgressProxyTest, MalformedRequestsGetA4xxAndARecord)
{
    startProxy();
    std::string r = roundTrip(m_socket, "GET /relative HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
    r = roundTrip(m_socket, "GET https://allowed.test/ HTTP/1.1\r\n\r\n");
    EXPECT_NE(r.find("CONNECT"), std::string::npos) << r;
    r = roundTrip(m_socket, "CONNECT allowed.test HTTP/1.1\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
    r = roundTrip(m_socket, "CONNECT a b:1 HTTP/1.1\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
    r = roundTrip(m_socket, "GET http://x\r\n/ HTTP/1.1\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 4", 0), 0u) << r;
    r = roundTrip(m_socket, "GET http://allowed.test/" + std::string(20000, 'a') + " HTTP/1.1\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 431", 0), 0u) << r;
    auto attempts = take();
    ASSERT_EQ(attempts.size(), 6u);
    for (const auto &a : attempts) {
        EXPECT_FALSE(a.allowed);
        EXPECT_TRUE(a.reason == "bad_request" || a.reason == "invalid_host") << a.reason;
    }
}

TEST_F(EgressProxyTest, LimitsConcurrentConnectionsPerSandbox)
{
    EgressLimits limits;
    limits.maxConnectionsPerSandbox = 1;
    startProxy(limits);
    {
        std::lock_guard lock(m_mutex);
        m_holdResolver = true;   // the first request stays in flight
    }
    int first = connectTo(m_socket);
    ASSERT_GE(first, 0);
    const std::string req = "CONNECT allowed.test:443 HTTP/1.1\r\n\r\n";
    (void)!::write(first, req.data(), req.size());
    for (int i = 0; i < 200; ++i) {
        std::lock_guard lock(m_mutex);
        if (!m_resolved.empty())
            break;
        ::usleep(10000);
    }
    std::string r = roundTrip(m_socket, "CONNECT allowed.test:8443 HTTP/1.1\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 503", 0), 0u) << r;
    {
        std::lock_guard lock(m_mutex);
        m_holdResolver = false;
    }
    m_cv.notify_all();
    char buf[512];
    ssize_t n = ::read(first, buf, sizeof buf);
    ASSERT_GT(n, 0);
    EXPECT_EQ(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 403", 0), 0u);
    ::close(first);
    auto attempts = take();
    ASSERT_EQ(attempts.size(), 2u);
    EXPECT_EQ(attempts[0].reason, "too_many_connections");
    EXPECT_EQ(attempts[0].port, 8443);
    EXPECT_EQ(attempts[1].reason, "metadata");
}

TEST_F(EgressProxyTest, ClosesAnIdleHeadAndForgetsARemovedSandbox)
{
    EgressLimits limits;
    limits.headTimeoutMs = 200;
    startProxy(limits);
    int fd = connectTo(m_socket);
    ASSERT_GE(fd, 0);
    (void)!::write(fd, "CONN", 4);   // never finishes its head
    char buf[64];
    EXPECT_EQ(::read(fd, buf, sizeof buf), 0);   // closed by the proxy, not by the 10 s receive timeout
    ::close(fd);
    EXPECT_TRUE(take().empty());   // no request, no attempt
    m_proxy->removeSandbox("sb-1");
    EXPECT_EQ(connectTo(m_socket), -1);
    EXPECT_TRUE(m_proxy->takeAttemptsBlocking("sb-1", 100).empty());
}

// Grants (approved hosts) apply to the connections a sandbox opens while they are held, then no
// more. (The answer here is a rebinding one, so what a grant changes is how far the request gets:
// past the allowlist to DNS and the address check, never out.)
TEST_F(EgressProxyTest, GrantsApplyWhileHeldAndNeverOpenAForbiddenAddress)
{
    startProxy(EgressLimits{}, {"other.test"});
    const std::string request = "CONNECT allowed.test:443 HTTP/1.1\r\n\r\n";
    EXPECT_NE(roundTrip(m_socket, request).find("(not_allowlisted)"), std::string::npos);
    auto grant = Grant::parse("allowed.test", "rev-1");
    ASSERT_TRUE(grant);
    m_proxy->addGrants("sb-1", 7, std::make_shared<const Grants>(Grants{*grant}));
    m_proxy->addGrants("no-such-sandbox", 8, std::make_shared<const Grants>(Grants{*grant}));   // ignored
    const std::string held = roundTrip(m_socket, request);
    EXPECT_EQ(held.rfind("HTTP/1.1 403", 0), 0u) << held;
    EXPECT_NE(held.find("(metadata)"), std::string::npos) << held;
    m_proxy->revokeGrants("sb-1", 7);
    EXPECT_NE(roundTrip(m_socket, request).find("(not_allowlisted)"), std::string::npos);

    auto attempts = take();
    ASSERT_EQ(attempts.size(), 3u);
    EXPECT_EQ(attempts[0].reason, "not_allowlisted");
    EXPECT_EQ(attempts[1].reason, "metadata");
    EXPECT_EQ(attempts[1].address, "169.254.169.254");
    EXPECT_TRUE(attempts[1].reviewId.empty());   // refused: no review allowed anything
    EXPECT_EQ(attempts[2].reason, "not_allowlisted");
    EXPECT_EQ(m_resolved, std::vector<std::string>{"allowed.test"});   // looked up only while granted
}

} // namespace
} // namespace paddock::pool::egress
