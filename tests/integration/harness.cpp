#include "tests/integration/harness.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <future>
#include <iostream>
#include <netinet/in.h>
#include <poll.h>
#include <sstream>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

namespace paddock::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kPollInterval = 20ms;
constexpr int kPoolStartAttempts = 3;

// argv/envp as the char* arrays execve wants, built before fork: between fork and exec only
// async-signal-safe calls are allowed, and the test process has gRPC threads.
struct ExecImage {
    std::vector<std::string> argvStrings;
    std::vector<std::string> envStrings;
    std::vector<char *> argv;
    std::vector<char *> envp;

    ExecImage(const std::vector<std::string> &args, const std::map<std::string, std::string> &env,
              const std::vector<std::string> &unset)
        : argvStrings(args)
    {
        std::map<std::string, std::string> merged;
        for (char **entry = environ; entry && *entry; ++entry) {
            std::string_view text(*entry);
            const auto eq = text.find('=');
            if (eq != std::string_view::npos)
                merged[std::string(text.substr(0, eq))] = std::string(text.substr(eq + 1));
        }
        for (const auto &name : unset)
            merged.erase(name);
        for (const auto &[name, value] : env)
            merged[name] = value;
        for (const auto &[name, value] : merged)
            envStrings.push_back(name + "=" + value);
        for (auto &s : argvStrings)
            argv.push_back(s.data());
        argv.push_back(nullptr);
        for (auto &s : envStrings)
            envp.push_back(s.data());
        envp.push_back(nullptr);
    }
};

// In the child after fork: die with the test, then exec. Never returns.
[[noreturn]] void execChild(const ExecImage &image, pid_t parent)
{
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)   // the parent died before prctl took effect
        ::_exit(127);
    // Leave only 0, 1 and 2 open: gRPC's sockets and the test's files stay with the test.
    ::syscall(SYS_close_range, 3U, ~0U, 0U);
    ::execve(image.argv[0], image.argv.data(), image.envp.data());
    const char prefix[] = "harness: execve failed: ";
    (void)!::write(2, prefix, sizeof(prefix) - 1);
    const char *reason = ::strerror(errno);   // not strictly async-signal-safe; only on the failure path
    (void)!::write(2, reason, ::strlen(reason));
    (void)!::write(2, "\n", 1);
    ::_exit(127);
}

int statusToCode(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return -1;
}

std::string readFile(const fs::path &path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// grpc.health.v1.HealthCheckResponse{status: SERVING} on the wire: field 1, varint 1. Decoding
// these two bytes by hand keeps the health proto (and its generated code) out of the harness.
bool isServingResponse(const grpc::ByteBuffer &buffer)
{
    std::vector<grpc::Slice> slices;
    if (!buffer.Dump(&slices).ok())
        return false;
    std::string bytes;
    for (const auto &slice : slices)
        bytes.append(reinterpret_cast<const char *>(slice.begin()), slice.size());
    return bytes == std::string("\x08\x01", 2);
}

} // namespace

TempDir::TempDir(std::string_view prefix)
{
    const char *base = std::getenv("TMPDIR");
    // Unix socket paths must stay under 108 bytes: prefer a short base.
    std::string pattern = std::string(base && *base && std::strlen(base) < 40 ? base : "/tmp") + "/"
                        + std::string(prefix) + "-XXXXXX";
    if (!::mkdtemp(pattern.data()))
        throw std::runtime_error("cannot create a temporary directory from " + pattern + ": " + std::strerror(errno));
    // Not listable, but passable: a root pool's sandboxes run as host uids of their own, which
    // must pass through to their workspaces (the pool refuses a state_dir they cannot reach).
    ::chmod(pattern.c_str(), 0711);
    m_path = pattern;
}

TempDir::~TempDir()
{
    if (std::getenv("PADDOCK_KEEP_TEST_DIRS")) {
        std::cerr << "harness: kept test directory " << m_path << "\n";
        return;
    }
    std::error_code ec;
    fs::remove_all(m_path, ec);
}

int freeLoopbackPort()
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t length = sizeof(addr);
    int port = -1;
    if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0
        && ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &length) == 0)
        port = ntohs(addr.sin_port);
    ::close(fd);
    return port;
}

Daemon::Daemon(pid_t pid, fs::path logFile)
    : m_pid(pid)
    , m_logFile(std::move(logFile))
{
}

Daemon::Daemon(Daemon &&other) noexcept
    : m_pid(std::exchange(other.m_pid, -1))
    , m_exitStatus(std::move(other.m_exitStatus))
    , m_logFile(std::move(other.m_logFile))
{
}

Daemon &Daemon::operator=(Daemon &&other) noexcept
{
    if (this != &other) {
        if (running())
            kill9();
        m_pid = std::exchange(other.m_pid, -1);
        m_exitStatus = std::move(other.m_exitStatus);
        m_logFile = std::move(other.m_logFile);
    }
    return *this;
}

Daemon::~Daemon()
{
    if (m_pid > 0 && running())
        kill9();
}

Result<Daemon> Daemon::start(const std::vector<std::string> &argv, const fs::path &logFile,
                             const std::map<std::string, std::string> &env)
{
    if (argv.empty())
        return fail(ErrorCode::InvalidArgument, "Daemon::start needs a command");
    if (::access(argv[0].c_str(), X_OK) != 0)
        return fail(ErrorCode::NotFound, argv[0] + " is not an executable: build it first");
    const ExecImage image(argv, env, {});
    const int logFd = ::open(logFile.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logFd < 0)
        return fail(ErrorCode::Internal, "cannot open log " + logFile.string() + ": " + std::strerror(errno));
    // Record the command line first: a failed test's log then says exactly what ran.
    std::string header = "harness: starting";
    for (const auto &arg : argv)
        header += " " + arg;
    header += "\n";
    (void)!::write(logFd, header.data(), header.size());

    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(logFd);
        return fail(ErrorCode::Internal, std::string("fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
        const int devNull = ::open("/dev/null", O_RDONLY);
        ::dup2(devNull, 0);
        ::dup2(logFd, 1);
        ::dup2(logFd, 2);
        execChild(image, parent);
    }
    ::close(logFd);
    return Daemon(pid, logFile);
}

bool Daemon::running()
{
    if (m_pid <= 0 || m_exitStatus)
        return false;
    int status = 0;
    const pid_t done = ::waitpid(m_pid, &status, WNOHANG);
    if (done == m_pid) {
        m_exitStatus = statusToCode(status);
        return false;
    }
    return done == 0;
}

std::optional<int> Daemon::waitExit(std::chrono::milliseconds timeout)
{
    const auto deadline = Clock::now() + timeout;
    while (running()) {
        if (Clock::now() >= deadline)
            return std::nullopt;
        std::this_thread::sleep_for(kPollInterval);
    }
    return m_exitStatus;
}

int Daemon::terminate(std::chrono::milliseconds timeout)
{
    if (!running())
        return m_exitStatus.value_or(-1);
    ::kill(m_pid, SIGTERM);
    if (auto status = waitExit(timeout))
        return *status;
    kill9();
    return m_exitStatus.value_or(-1);
}

void Daemon::kill9()
{
    if (!running())
        return;
    ::kill(m_pid, SIGKILL);
    int status = 0;
    if (::waitpid(m_pid, &status, 0) == m_pid)
        m_exitStatus = statusToCode(status);
}

std::string Daemon::logText() const { return readFile(m_logFile); }

std::string Daemon::logTail(size_t lines) const
{
    const std::string text = logText();
    size_t start = text.size();
    size_t seen = 0;
    while (start > 0 && seen <= lines) {
        --start;
        if (text[start] == '\n')
            ++seen;
    }
    return text.substr(start);
}

Status waitForHealthy(const std::string &target, std::chrono::milliseconds timeout, Daemon *daemon)
{
    auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    grpc::GenericStub stub(channel);
    const auto deadline = Clock::now() + timeout;
    std::string lastSeen = "no answer yet";
    while (Clock::now() < deadline) {
        if (daemon && !daemon->running()) {
            return fail(ErrorCode::Unavailable, "the daemon for " + target + " exited (status "
                                                    + std::to_string(daemon->waitExit(0ms).value_or(-1))
                                                    + ") before it was healthy; its log ends:\n" + daemon->logTail());
        }
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + 1s);
        // HealthCheckRequest{service: ""} (the server as a whole) is zero bytes, but it must be a
        // buffer that exists: a default ByteBuffer is "no message" to gRPC.
        grpc::Slice emptySlice("", 0);
        grpc::ByteBuffer request(&emptySlice, 1);
        grpc::ByteBuffer response;
        std::promise<grpc::Status> done;
        stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                       [&done](grpc::Status status) { done.set_value(std::move(status)); });
        const grpc::Status status = done.get_future().get();
        if (status.ok() && isServingResponse(response))
            return {};
        lastSeen = status.ok() ? "answered, but not SERVING"
                               : "status " + std::to_string(status.error_code()) + ": " + status.error_message();
        std::this_thread::sleep_for(50ms);
    }
    std::string message = target + " was not healthy within " + std::to_string(timeout.count()) + " ms (last: "
                        + lastSeen + ")";
    if (daemon)
        message += "; its log ends:\n" + daemon->logTail();
    return fail(ErrorCode::DeadlineExceeded, message);
}

fs::path binaryPath(std::string_view name)
{
    // CMake passes the real output path of every binary target this build defines.
#ifdef PADDOCK_TEST_BINARY_PADDOCKD
    if (name == "paddockd")
        return PADDOCK_TEST_BINARY_PADDOCKD;
#endif
#ifdef PADDOCK_TEST_BINARY_PADDOCK_POOL
    if (name == "paddock-pool")
        return PADDOCK_TEST_BINARY_PADDOCK_POOL;
#endif
#ifdef PADDOCK_TEST_BINARY_PADDOCK_SANDBOX_INIT
    if (name == "paddock-sandbox-init")
        return PADDOCK_TEST_BINARY_PADDOCK_SANDBOX_INIT;
#endif
#ifdef PADDOCK_TEST_BINARY_PADDOCKCTL
    if (name == "paddockctl")
        return PADDOCK_TEST_BINARY_PADDOCKCTL;
#endif
    return fs::path(PADDOCK_TEST_BIN_DIR) / name;
}
fs::path playbookDir() { return fs::path(PADDOCK_TEST_PLAYBOOK_DIR); }

std::vector<std::string> missingBinaries(const std::vector<std::string> &names)
{
    std::vector<std::string> missing;
    for (const auto &name : names) {
        if (::access(binaryPath(name).c_str(), X_OK) != 0)
            missing.push_back(name);
    }
    return missing;
}

CliResult runCli(const std::vector<std::string> &args, const std::map<std::string, std::string> &env,
                 std::chrono::milliseconds timeout)
{
    return runCliWithInput(args, std::nullopt, env, timeout);
}

CliResult runCliWithInput(const std::vector<std::string> &args, const std::optional<std::string> &input,
                          const std::map<std::string, std::string> &env, std::chrono::milliseconds timeout)
{
    CliResult result;
    // The input goes through a pipe filled before the fork: enough for a value, not for megabytes.
    int inPipe[2] = {-1, -1};
    if (input) {
        if (input->size() > 60000 || ::pipe2(inPipe, O_CLOEXEC) != 0)
            return result;
        if (::write(inPipe[1], input->data(), input->size()) != static_cast<ssize_t>(input->size()))
            return result;
        ::close(inPipe[1]);
    }
    struct CloseInput {
        int fd;
        ~CloseInput()
        {
            if (fd >= 0)
                ::close(fd);
        }
    } closeInput{inPipe[0]};
    std::vector<std::string> argv{binaryPath("paddockctl").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    const ExecImage image(argv, env, {"PADDOCK_BROKER"});

    int outPipe[2];
    int errPipe[2];
    if (::pipe2(outPipe, O_CLOEXEC) != 0)
        return result;
    if (::pipe2(errPipe, O_CLOEXEC) != 0) {
        ::close(outPipe[0]);
        ::close(outPipe[1]);
        return result;
    }
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
        const int devNull = ::open("/dev/null", O_RDONLY);
        ::dup2(input ? inPipe[0] : devNull, 0);
        ::dup2(outPipe[1], 1);
        ::dup2(errPipe[1], 2);
        execChild(image, parent);
    }
    ::close(outPipe[1]);
    ::close(errPipe[1]);
    if (pid < 0) {
        ::close(outPipe[0]);
        ::close(errPipe[0]);
        return result;
    }

    const auto deadline = Clock::now() + timeout;
    pollfd fds[2] = {{outPipe[0], POLLIN, 0}, {errPipe[0], POLLIN, 0}};
    std::string *sinks[2] = {&result.out, &result.err};
    int open = 2;
    bool timedOut = false;
    char buffer[8192];
    while (open > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
            timedOut = true;
            break;
        }
        if (::poll(fds, 2, static_cast<int>(std::min<int64_t>(left, 1000))) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
            if (n > 0) {
                sinks[i]->append(buffer, static_cast<size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open;
            }
        }
    }
    for (auto &fd : fds) {
        if (fd.fd >= 0)
            ::close(fd.fd);
    }
    if (timedOut)
        ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    result.exitCode = statusToCode(status);
    if (timedOut)
        result.err += "\nharness: paddockctl was killed after " + std::to_string(timeout.count()) + " ms\n";
    return result;
}

namespace {

// Keep the daemons away from the user's own configuration, data and sockets.
std::map<std::string, std::string> hermeticEnv(const TempDir &dir)
{
    return {{"XDG_CONFIG_HOME", (dir / "xdg/config").string()},
            {"XDG_DATA_HOME", (dir / "xdg/data").string()},
            {"XDG_RUNTIME_DIR", (dir / "xdg/run").string()}};
}

} // namespace

Result<PoolProcess> startPool(const TempDir &dir, std::chrono::milliseconds healthTimeout,
                              const std::vector<std::string> &extraArgs)
{
    std::error_code ec;
    fs::create_directories(dir / "pool", ec);
    fs::create_directories(dir / "xdg/run", ec);
    Error last{ErrorCode::Internal, "paddock-pool did not start"};
    for (int attempt = 1; attempt <= kPoolStartAttempts; ++attempt) {
        const int port = freeLoopbackPort();
        if (port <= 0)
            return fail(ErrorCode::Internal, "no free loopback port");
        const std::string endpoint = "127.0.0.1:" + std::to_string(port);
        std::vector<std::string> args = {binaryPath("paddock-pool").string(), "--listen", endpoint, "--state-dir",
                                         (dir / "pool").string(), "--warm", "2"};
        args.insert(args.end(), extraArgs.begin(), extraArgs.end());
        auto daemon = Daemon::start(args, dir / "pool.log", hermeticEnv(dir));
        if (!daemon)
            return std::unexpected(daemon.error());
        auto healthy = waitForHealthy(endpoint, healthTimeout, &*daemon);
        if (healthy)
            return PoolProcess{std::move(*daemon), endpoint};
        last = healthy.error();
        // Exited early: most likely someone took the port between our probe and its bind. Retry.
        if (daemon->running())
            break;
    }
    return std::unexpected(last);
}

Result<BrokerProcess> startBroker(const TempDir &dir, const std::string &poolEndpoint,
                                  std::chrono::milliseconds healthTimeout)
{
    std::error_code ec;
    fs::create_directories(dir / "broker", ec);
    fs::create_directories(dir / "xdg/run", ec);
    const fs::path socket = dir / "run/broker.sock";
    auto daemon = Daemon::start({binaryPath("paddockd").string(), "--data-dir", (dir / "broker").string(),
                                 "--socket", socket.string(), "--pool", "local=" + poolEndpoint, "--playbook-dir",
                                 playbookDir().string(), "--allow-local-execution", "--workers", "4"},
                                dir / "broker.log", hermeticEnv(dir));
    if (!daemon)
        return std::unexpected(daemon.error());
    const std::string address = "unix:" + socket.string();
    if (auto healthy = waitForHealthy(address, healthTimeout, &*daemon); !healthy)
        return std::unexpected(healthy.error());
    return BrokerProcess{std::move(*daemon), socket, address};
}

std::vector<std::string> splitLines(std::string_view text)
{
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos)
            end = text.size();
        if (end > start)
            lines.emplace_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

} // namespace paddock::test
