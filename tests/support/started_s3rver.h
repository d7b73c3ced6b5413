#pragma once
// A real S3-compatible server for tests: npm's s3rver 3.7 (scripts/setup-deps installs it into
// third_party/node/), on 127.0.0.1 at a free port, with one bucket and its data in a temporary
// directory. Stopped, and its directory removed, with the object; it dies with the test process
// too (PR_SET_PDEATHSIG), so a killed test leaves no server behind.
//
// What s3rver checks: the access key id (S3RVER is its only one: any other is InvalidAccessKeyId),
// NOT the SigV4 signature (3.7's authentication.js accepts any well-formed one), so a wrong secret
// goes through: signatures are tested against AWS's published examples instead.
//
// Node 18+ builds on OpenSSL 3, which keeps DES in its legacy provider; s3rver makes its
// ListObjectsV2 continuation tokens with DES, so it runs with NODE_OPTIONS=--openssl-legacy-provider
// (without it every truncated list answers 500 ERR_OSSL_EVP_UNSUPPORTED).
//
// Virtual-host style: s3rver takes the bucket from a Host of <bucket>.s3.<kServiceDomain>, which the
// client resolves to 127.0.0.1 through resolveEntry() (CURLOPT_RESOLVE).
//
// Elsewhere (S3rverOptions): a test whose broker runs in a network namespace starts s3rver in that
// namespace (argvPrefix `ip netns exec NS`) on that namespace's loopback. This process cannot
// connect there, so the server counts as started once its log says it listens.
//
// Threads: the test's main thread.

#include "tests/support/loopback_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace paddock::test {

struct S3rverOptions {
    // Prepended to s3rver's argv (its first element a full path): {"/usr/sbin/ip", "netns", "exec",
    // NS} runs the server in namespace NS. s3rver keeps the process id ip had, so it still dies
    // with the test.
    std::vector<std::string> argvPrefix;
    // The address s3rver binds, in its namespace.
    std::string address = "127.0.0.1";
};

class StartedS3rver {
public:
    static constexpr const char *kAccessKeyId = "S3RVER";
    static constexpr const char *kSecretAccessKey = "S3RVER";
    static constexpr const char *kServiceDomain = "paddock.test";

    StartedS3rver() = default;
    ~StartedS3rver()
    {
        stop();
        std::error_code ec;
        if (!m_dir.empty())
            std::filesystem::remove_all(m_dir, ec);
    }
    StartedS3rver(const StartedS3rver &) = delete;
    StartedS3rver &operator=(const StartedS3rver &) = delete;

    // $PADDOCK_S3RVER, else the path the build gave (PADDOCK_S3RVER_DEFAULT).
    static std::string executable()
    {
        if (const char *path = std::getenv("PADDOCK_S3RVER"); path && *path)
            return path;
#ifdef PADDOCK_S3RVER_DEFAULT
        return PADDOCK_S3RVER_DEFAULT;
#else
        return {};
#endif
    }

    // "" when it runs, else what went wrong and what to do. Tries a few ports: another process
    // may take the one picked between its probe and s3rver's bind.
    std::string start(const std::string &bucket) { return start(bucket, S3rverOptions()); }
    std::string start(const std::string &bucket, S3rverOptions options)
    {
        m_options = std::move(options);
        const std::string program = executable();
        if (program.empty() || ::access(program.c_str(), X_OK) != 0)
            return "s3rver is not installed at '" + program
                + "' (set PADDOCK_S3RVER to override): run scripts/setup-deps, which installs it into "
                  "third_party/node/";
        char dirTemplate[] = "/tmp/paddock-s3rver-XXXXXX";
        if (!::mkdtemp(dirTemplate))
            return "cannot make a temporary directory for s3rver";
        m_dir = dirTemplate;
        std::string lastLog;
        for (int attempt = 0; attempt < 3; ++attempt) {
            if (launch(program, bucket) && waitUntilListening())
                return {};
            lastLog = log();
            stop();
        }
        return "s3rver did not start; its output:\n" + lastLog;
    }

    void stop()
    {
        if (m_pid > 0) {
            ::kill(m_pid, SIGTERM);
            for (int i = 0; i < 100 && ::waitpid(m_pid, nullptr, WNOHANG) == 0; ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (::kill(m_pid, 0) == 0) {
                ::kill(m_pid, SIGKILL);
                ::waitpid(m_pid, nullptr, 0);
            }
            m_pid = -1;
        }
    }

    int port() const { return m_port; }
    std::string endpoint() const { return "http://" + m_options.address + ":" + std::to_string(m_port); }
    // Where s3rver keeps the buckets: <dataDir>/<bucket>/<key>._S3rver_object and its metadata.
    std::filesystem::path dataDir() const { return m_dir / "data"; }
    // The endpoint a virtual-host style client names; its bucket host needs resolveEntry().
    std::string vhostEndpoint() const
    {
        return "http://s3." + std::string(kServiceDomain) + ":" + std::to_string(m_port);
    }
    std::string resolveEntry(const std::string &bucket) const
    {
        return bucket + ".s3." + kServiceDomain + ":" + std::to_string(m_port) + ":127.0.0.1";
    }

    std::string log() const
    {
        std::ifstream in(m_dir / "s3rver.log");
        std::ostringstream text;
        text << in.rdbuf();
        return text.str();
    }

private:
    bool launch(const std::string &program, const std::string &bucket)
    {
        int probe = listenOnLoopback(m_port);
        if (probe < 0)
            return false;
        ::close(probe);
        const std::string port = std::to_string(m_port);
        const std::string data = (m_dir / "data").string();
        const std::string logPath = (m_dir / "s3rver.log").string();
        std::filesystem::create_directories(data);
        std::vector<std::string> args = m_options.argvPrefix;
        args.insert(args.end(), {program, "-d", data, "-a", m_options.address, "-p", port, "--configure-bucket", bucket,
                                 "--service-endpoint", kServiceDomain});
        std::vector<char *> argv;
        for (std::string &arg : args)
            argv.push_back(arg.data());
        argv.push_back(nullptr);
        std::vector<std::string> environment = nodeEnvironment();
        std::vector<char *> envp;
        for (std::string &entry : environment)
            envp.push_back(entry.data());
        envp.push_back(nullptr);

        const pid_t parent = ::getpid();
        m_pid = ::fork();
        if (m_pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent)
                ::_exit(127);
            const int log = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            ::dup2(log, STDOUT_FILENO);
            ::dup2(log, STDERR_FILENO);
            ::execve(argv[0], argv.data(), envp.data());
            ::_exit(127);
        }
        return m_pid > 0;
    }

    // This process's environment with --openssl-legacy-provider added to NODE_OPTIONS.
    static std::vector<std::string> nodeEnvironment()
    {
        constexpr std::string_view kNodeOptions = "NODE_OPTIONS=";
        std::vector<std::string> environment;
        std::string nodeOptions = std::string(kNodeOptions) + "--openssl-legacy-provider";
        for (char **entry = environ; *entry; ++entry) {
            const std::string_view text = *entry;
            if (text.starts_with(kNodeOptions))
                nodeOptions += " " + std::string(text.substr(kNodeOptions.size()));
            else
                environment.emplace_back(text);
        }
        environment.push_back(nodeOptions);
        return environment;
    }

    bool waitUntilListening()
    {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (std::chrono::steady_clock::now() < deadline) {
            if (::waitpid(m_pid, nullptr, WNOHANG) == m_pid) {
                m_pid = -1;
                return false;
            }
            if (listensHere() ? accepts() : log().find("S3rver listening on") != std::string::npos)
                return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }

    // Whether this process can connect to the server: on its own loopback, in its own namespace.
    bool listensHere() const { return m_options.argvPrefix.empty() && m_options.address == "127.0.0.1"; }

    bool accepts() const
    {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<uint16_t>(m_port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        const bool connected = ::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0;
        ::close(fd);
        return connected;
    }

    S3rverOptions m_options;
    std::filesystem::path m_dir;
    pid_t m_pid = -1;
    int m_port = 0;
};

} // namespace paddock::test
