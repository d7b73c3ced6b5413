#pragma once
// Helpers for the tests that run pools as if on other hosts: a test CA and certificates made
// with the openssl CLI, pools started with TLS and a token, a broker config listing them, and
// commands run to completion. Everything lives in the test's temporary directory.
//
// Threads: the test's main thread only.

#include "tests/integration/harness.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <unistd.h>

namespace paddock::test {

// Runs argv to completion (output to logFile); the exit status, or -1 when it could not start or
// did not end within timeout.
inline int runToEnd(const std::vector<std::string> &argv, const std::filesystem::path &logFile,
                    std::chrono::milliseconds timeout = 60s)
{
    auto process = Daemon::start(argv, logFile);
    if (!process)
        return -1;
    auto status = process->waitExit(timeout);
    return status ? *status : -1;
}

inline bool haveOpenssl()
{
    return std::filesystem::exists("/usr/bin/openssl");
}

// Why a test of pools in network namespaces over TLS cannot run here, "" when it can: it needs
// root (ip netns), iproute2 and openssl (test certificates). `test` names it in the reason.
inline std::string namespacesUnavailable(const std::string &test)
{
    if (::geteuid() != 0)
        return test + " makes network namespaces (ip netns), which needs root; run it as root";
    if (!std::filesystem::exists("/usr/sbin/ip"))
        return "no /usr/sbin/ip: install iproute2 (scripts/setup-deps)";
    if (!haveOpenssl())
        return "no /usr/bin/openssl to make test certificates: run scripts/setup-deps";
    return {};
}

// A CA (ca.pem, ca.key) in dir/name, and certificates it signs.
class TestCa {
public:
    TestCa(std::filesystem::path dir, std::string name) : m_dir(std::move(dir)), m_name(std::move(name))
    {
        std::filesystem::create_directories(m_dir);
        m_ok = runToEnd({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                         "-nodes", "-keyout", key().string(), "-out", pem().string(), "-days", "2", "-subj",
                         "/CN=" + m_name},
                        m_dir / (m_name + ".log")) == 0;
    }
    bool ok() const { return m_ok; }
    std::filesystem::path pem() const { return m_dir / (m_name + ".pem"); }
    std::filesystem::path key() const { return m_dir / (m_name + ".key"); }

    // A leaf certificate for subjectAltName san ("IP:10.0.0.2", "DNS:pool.example"). Returns the
    // certificate and key paths, or an error naming the log.
    Result<std::pair<std::filesystem::path, std::filesystem::path>> issue(const std::string &leaf, const std::string &san) const
    {
        const auto cert = m_dir / (leaf + ".pem");
        const auto leafKey = m_dir / (leaf + ".key");
        const auto csr = m_dir / (leaf + ".csr");
        const auto ext = m_dir / (leaf + ".ext");
        std::ofstream(ext) << "subjectAltName=" << san << "\nbasicConstraints=CA:FALSE\n"
                           << "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n";
        const auto log = m_dir / (leaf + ".log");
        if (runToEnd({"/usr/bin/openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-keyout", leafKey.string(), "-out", csr.string(), "-subj", "/CN=" + leaf},
                     log) != 0
            || runToEnd({"/usr/bin/openssl", "x509", "-req", "-in", csr.string(), "-CA", pem().string(), "-CAkey",
                         key().string(), "-CAcreateserial", "-out", cert.string(), "-days", "2", "-extfile", ext.string()},
                        log) != 0)
            return fail(ErrorCode::Internal, "openssl could not issue " + leaf + "; see " + log.string());
        return std::make_pair(cert, leafKey);
    }

private:
    std::filesystem::path m_dir;
    std::string m_name;
    bool m_ok = false;
};

inline std::map<std::string, std::string> hermeticEnvFor(const std::filesystem::path &dir)
{
    std::filesystem::create_directories(dir / "xdg/config");
    std::filesystem::create_directories(dir / "xdg/data");
    std::filesystem::create_directories(dir / "xdg/run");
    std::filesystem::permissions(dir / "xdg/run", std::filesystem::perms::owner_all);
    return {{"XDG_CONFIG_HOME", (dir / "xdg/config").string()},
            {"XDG_DATA_HOME", (dir / "xdg/data").string()},
            {"XDG_RUNTIME_DIR", (dir / "xdg/run").string()}};
}

// Waits for a started paddock-pool to say it listens (its health service may need TLS and a
// token, so the log is what a test can read without credentials).
inline Status waitForPoolLog(Daemon &pool, std::chrono::milliseconds timeout = 60s)
{
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
        if (pool.logText().find("listening on") != std::string::npos)
            return {};
        if (!pool.running())
            return fail(ErrorCode::Unavailable, "paddock-pool exited at start:\n" + pool.logTail());
        std::this_thread::sleep_for(50ms);
    }
    return fail(ErrorCode::DeadlineExceeded, "paddock-pool did not start listening:\n" + pool.logTail());
}

// `paddockctl pools --output json` against broker (an address for --broker).
inline nlohmann::json listPools(const std::string &broker)
{
    const CliResult result = runCli({"--broker", broker, "pools", "--output", "json"});
    auto value = nlohmann::json::parse(result.out, nullptr, false);
    return result.exitCode == 0 && value.is_object() ? value : nlohmann::json();
}

inline nlohmann::json findPool(const nlohmann::json &pools, const std::string &name)
{
    if (pools.is_object() && pools.contains("pools")) {
        for (const auto &pool : pools["pools"]) {
            if (pool.value("name", std::string()) == name)
                return pool;
        }
    }
    return nlohmann::json();
}

// A session's events through `paddockctl events ID --output json`.
inline std::vector<nlohmann::json> sessionEvents(const std::string &broker, const std::string &id)
{
    std::vector<nlohmann::json> out;
    const CliResult result = runCli({"--broker", broker, "events", id, "--output", "json"});
    for (const auto &line : splitLines(result.out)) {
        auto value = nlohmann::json::parse(line, nullptr, false);
        if (!value.is_discarded())
            out.push_back(std::move(value));
    }
    return out;
}

} // namespace paddock::test
