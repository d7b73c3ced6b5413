#pragma once
// Many hosts on this machine, for the tests that need them (multi_host_test,
// workspace_failover_test): three network namespaces, the "broker host" and two "pool hosts",
// joined by veth pairs on a bridge in the broker's namespace (10.250.77.0/24, no route out of it).
// A process is put on a host by running its argv through `nsenter --net` (in()): it joins only the
// namespace's network. (`ip netns exec` also remounts /sys for it, which hides the host's cgroup
// mounts: a pool started that way would run its sandboxes without limits.)
//
// Needs root (ip netns). The namespaces are named after this process's id: left-overs of a crashed
// run with the same pid are deleted first, and the destructor deletes them whatever the test did.
//
// Threads: the test's main thread only.

#include "tests/integration/multi_host_support.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

namespace paddock::test {

// The test's network: namespaces, veth pairs, a bridge. Deleted in the destructor.
class TestNetwork {
public:
    explicit TestNetwork(std::filesystem::path logDir) : m_logDir(std::move(logDir))
    {
        m_prefix = "pdk" + std::to_string(::getpid() % 100000);
        for (const char *role : {"b", "p1", "p2"})
            m_names.push_back(m_prefix + role);
        removeAll();   // a crashed earlier run with this pid
    }
    ~TestNetwork() { removeAll(); }
    TestNetwork(const TestNetwork &) = delete;
    TestNetwork &operator=(const TestNetwork &) = delete;

    const std::string &broker() const { return m_names[0]; }
    const std::string &pool(int i) const { return m_names[1 + i]; }
    static std::string brokerAddress() { return "10.250.77.1"; }
    static std::string poolAddress(int i) { return "10.250.77." + std::to_string(2 + i); }

    // Empty when it worked; otherwise what failed.
    std::string create()
    {
        for (const auto &ns : m_names) {
            if (!ip({"netns", "add", ns}))
                return "ip netns add " + ns + " failed (see " + log().string() + ")";
            if (!ip({"-n", ns, "link", "set", "lo", "up"}))
                return "cannot bring up lo in " + ns;
        }
        if (!ip({"-n", broker(), "link", "add", "br0", "type", "bridge"})
            || !ip({"-n", broker(), "addr", "add", brokerAddress() + "/24", "dev", "br0"})
            || !ip({"-n", broker(), "link", "set", "br0", "up"}))
            return "cannot make the bridge in " + broker();
        for (int i = 0; i < 2; ++i) {
            const std::string hostSide = m_prefix + "h" + std::to_string(i);
            const std::string poolSide = m_prefix + "v" + std::to_string(i);
            if (!ip({"link", "add", hostSide, "type", "veth", "peer", "name", poolSide})
                || !ip({"link", "set", hostSide, "netns", broker()}) || !ip({"link", "set", poolSide, "netns", pool(i)})
                || !ip({"-n", broker(), "link", "set", hostSide, "master", "br0"})
                || !ip({"-n", broker(), "link", "set", hostSide, "up"})
                || !ip({"-n", pool(i), "addr", "add", poolAddress(i) + "/24", "dev", poolSide})
                || !ip({"-n", pool(i), "link", "set", poolSide, "up"}))
                return "cannot wire " + pool(i) + " to " + broker() + " (see " + log().string() + ")";
        }
        return {};
    }

    // argv run inside namespace ns.
    static std::vector<std::string> in(const std::string &ns, std::vector<std::string> argv)
    {
        argv.insert(argv.begin(), {"/usr/bin/nsenter", "--net=/run/netns/" + ns, "--"});
        return argv;
    }

private:
    std::filesystem::path log() const { return m_logDir / "ip.log"; }
    bool ip(std::vector<std::string> args) const
    {
        args.insert(args.begin(), "/usr/sbin/ip");
        return runToEnd(args, log(), 30s) == 0;
    }
    void removeAll()
    {
        for (const auto &ns : m_names) {
            if (std::filesystem::exists("/run/netns/" + ns))
                ip({"netns", "del", ns});
        }
    }

    std::filesystem::path m_logDir;
    std::string m_prefix;
    std::vector<std::string> m_names;
};

// The network namespace of process pid ("net:[4026531840]"), empty when it is gone.
inline std::string netnsOf(pid_t pid)
{
    std::error_code ec;
    return std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/ns/net", ec).string();
}

} // namespace paddock::test
