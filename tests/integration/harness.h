#pragma once
// Integration-test harness: the real daemons as child processes in a temporary directory, and the
// real paddockctl run the way a user runs it. No gRPC in this header: tests speak to the daemons
// only through paddockctl and the processes' exit codes and logs.
//
// Known limits:
// - freeLoopbackPort() can race with another process taking the port before the daemon binds it;
//   startPool() retries with a new port when the pool exits early.
// - Child processes get PR_SET_PDEATHSIG(SIGKILL), so a test that crashes takes its daemons with it.
//
// Threads: everything here is meant for the test's main thread; Daemon is not thread-safe.

#include "common/result.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace paddock::test {

using namespace std::chrono_literals;

// A fresh directory under $TMPDIR (or /tmp), removed at destruction unless PADDOCK_KEEP_TEST_DIRS
// is set (then its path is printed so the logs can be read).
class TempDir {
public:
    explicit TempDir(std::string_view prefix = "paddock-test");
    ~TempDir();
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;

    const std::filesystem::path &path() const { return m_path; }
    std::filesystem::path operator/(std::string_view name) const { return m_path / name; }

private:
    std::filesystem::path m_path;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int freeLoopbackPort();

// A child process started with fork/exec, stdout and stderr appended to a log file. Destroying a
// Daemon that still runs kills it (SIGKILL) and reaps it.
class Daemon {
public:
    // env: variables set on top of the test's own environment.
    static Result<Daemon> start(const std::vector<std::string> &argv, const std::filesystem::path &logFile,
                                const std::map<std::string, std::string> &env = {});

    Daemon(Daemon &&other) noexcept;
    Daemon &operator=(Daemon &&other) noexcept;
    Daemon(const Daemon &) = delete;
    Daemon &operator=(const Daemon &) = delete;
    ~Daemon();

    pid_t pid() const { return m_pid; }
    bool running();
    // The exit status once it has ended within timeout: the exit code, or 128 + signal number.
    std::optional<int> waitExit(std::chrono::milliseconds timeout);
    // SIGTERM, then wait up to timeout (then SIGKILL). Returns the exit status.
    int terminate(std::chrono::milliseconds timeout = 15s);
    void kill9();
    const std::filesystem::path &logFile() const { return m_logFile; }
    std::string logText() const;
    // The last lines of the log, for failure messages.
    std::string logTail(size_t lines = 40) const;

private:
    Daemon(pid_t pid, std::filesystem::path logFile);
    pid_t m_pid = -1;
    std::optional<int> m_exitStatus;
    std::filesystem::path m_logFile;
};

// Waits until target ("127.0.0.1:7001", "unix:/path") answers grpc.health.v1.Health/Check with
// SERVING. Gives up after timeout, or at once when daemon (if given) has exited. The error names
// the address, what was seen last and the daemon's log tail.
Status waitForHealthy(const std::string &target, std::chrono::milliseconds timeout, Daemon *daemon = nullptr);

// Binaries built by this build tree (${CMAKE_BINARY_DIR}/bin) and the shipped playbooks.
std::filesystem::path binaryPath(std::string_view name);
std::filesystem::path playbookDir();
// The names among the given ones whose binaries are not built (for GTEST_SKIP).
std::vector<std::string> missingBinaries(const std::vector<std::string> &names);

struct CliResult {
    int exitCode = -1;      // 128 + signal if it was killed; -1 if it could not start
    std::string out;
    std::string err;
};

// Runs the built paddockctl with args. The test's PADDOCK_BROKER is not inherited, so only what
// env and args say reaches the CLI. Killed after timeout.
CliResult runCli(const std::vector<std::string> &args, const std::map<std::string, std::string> &env = {},
                 std::chrono::milliseconds timeout = 180s);
// The same with input on paddockctl's stdin (at most 60,000 bytes; otherwise stdin is /dev/null).
CliResult runCliWithInput(const std::vector<std::string> &args, const std::optional<std::string> &input,
                          const std::map<std::string, std::string> &env = {},
                          std::chrono::milliseconds timeout = 180s);

struct PoolProcess {
    Daemon daemon;
    std::string endpoint;   // 127.0.0.1:PORT
};

struct BrokerProcess {
    Daemon daemon;
    std::filesystem::path socketPath;
    std::string address;    // unix:<socketPath>, for --broker
};

// The daemons' own files live under the temp dir: <tmp>/pool, <tmp>/broker, <tmp>/run, with XDG
// variables pointing there too so no user configuration leaks in. Both wait for health.
// extraArgs: more paddock-pool flags (e.g. {"--config", file}).
Result<PoolProcess> startPool(const TempDir &dir, std::chrono::milliseconds healthTimeout = 30s,
                              const std::vector<std::string> &extraArgs = {});
Result<BrokerProcess> startBroker(const TempDir &dir, const std::string &poolEndpoint,
                                  std::chrono::milliseconds healthTimeout = 30s);

// The non-empty lines of text (for JSON Lines output).
std::vector<std::string> splitLines(std::string_view text);

} // namespace paddock::test
