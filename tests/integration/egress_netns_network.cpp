// The egress tests' network and main(): the two network namespaces, the fake internet's HTTP
// server (InternetServer) and HTTPS server (openssl s_server) in them, and the private /etc/hosts,
// made before any thread exists and removed at exit. Each egress test binary links this file; what
// the network looks like is described in egress_netns_fixture.h.
//
// Threads: setUpNetwork() runs on the main thread before any other thread exists (unshare and
// setns act on the calling thread only, and every later thread inherits its namespaces); then
// InternetServer::serve() runs on the server's own thread until tearDownNetwork() stops it.

#include "tests/integration/egress_netns_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>

namespace paddock::test {

std::string g_skipReason;
InternetServer g_server;
std::string g_tlsCertPem;

int run(const std::string &command)
{
    int rc = std::system((command + " >/dev/null 2>&1").c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void InternetServer::start(const std::string &nsName)
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

void InternetServer::stop()
{
    m_stop = true;
    if (m_listen >= 0)
        ::shutdown(m_listen, SHUT_RDWR);
    if (m_thread.joinable())
        m_thread.join();
}

std::vector<std::string> InternetServer::requests()
{
    std::lock_guard lock(m_mutex);
    return m_requests;
}

void InternetServer::serve()
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

namespace {

std::string g_poolNs, g_inetNs;
fs::path g_hostsFile;

// The fake internet's HTTPS server: openssl s_server -WWW on 198.51.100.2:8443 in <ns>i, serving
// the file "tls" of g_tlsDir, with a self-signed certificate for allowed.test (g_tlsCertPem) that
// a sandbox trusts only when told to.
fs::path g_tlsDir;
pid_t g_tlsServer = -1;

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
