// The init protocol, end to end without bwrap: frames over a socketpair, then the real
// paddock-sandbox-init started as an ordinary process with a temporary workspace.

#include "pool/init/init_client.h"
#include "pool/init/init_protocol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace paddock;
using namespace paddock::pool;

TEST(InitProtocol, AnExitRecordWithFieldsOfTheWrongTypeIsAnErrorNotACrash)
{
    // The init shares its sandbox with the agent's code, so its frames are read as hostile.
    auto ok = detail::parseExitRecord(R"({"exit_code":3,"signal":0,"started_unix_us":7})");
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(ok->exitCode, 3);
    for (const char *text : {R"({"exit_code":1e47})", R"({"exit_code":"3"})", R"({"signal":4294967296})",
                             R"({"timed_out":"yes"})", "[1]"}) {
        auto parsed = detail::parseExitRecord(text);
        ASSERT_FALSE(parsed) << text;
        EXPECT_NE(parsed.error().message.find("malformed exit record"), std::string::npos) << parsed.error().message;
    }
}

TEST(InitProtocol, FramesRoundTripOverASocket)
{
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    std::string big(3 << 20, 'x');
    big[12345] = '\0';   // bulk frames carry any byte
    std::thread writer([&] {
        EXPECT_TRUE(init::writeFrame(sv[0], init::kExec, R"({"argv":["true"]})"));
        EXPECT_TRUE(init::writeFrame(sv[0], init::kStdin, ""));
        EXPECT_TRUE(init::writeFrame(sv[0], init::kData, big));
        ::close(sv[0]);
    });
    auto a = init::readFrame(sv[1]);
    auto b = init::readFrame(sv[1]);
    auto c = init::readFrame(sv[1]);
    auto end = init::readFrame(sv[1]);
    writer.join();
    ::close(sv[1]);
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(a->type, init::kExec);
    EXPECT_EQ(a->payload, R"({"argv":["true"]})");
    EXPECT_EQ(b->type, init::kStdin);
    EXPECT_TRUE(b->payload.empty());
    EXPECT_EQ(c->payload, big);
    EXPECT_FALSE(end);   // clean EOF
}

TEST(InitProtocol, OversizedLengthIsRejected)
{
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    const unsigned char header[5] = {'D', 0xff, 0xff, 0xff, 0xff};
    ASSERT_TRUE(init::writeAll(sv[0], header, sizeof header));
    EXPECT_FALSE(init::readFrame(sv[1]));
    ::close(sv[0]);
    ::close(sv[1]);
}

class InitProcess : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/paddock-init-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
        fs::create_directories(m_dir / "ws");
        int ready[2];
        ASSERT_EQ(::pipe(ready), 0);
        m_pid = ::fork();
        ASSERT_GE(m_pid, 0);
        if (m_pid == 0) {
            ::close(ready[0]);
            const std::string fd = std::to_string(ready[1]);
            const std::string sock = (m_dir / "init.sock").string();
            const std::string ws = (m_dir / "ws").string();
            ::execl(PADDOCK_SANDBOX_INIT, "paddock-sandbox-init", "--socket", sock.c_str(), "--ready-fd", fd.c_str(),
                    "--workspace", ws.c_str(), nullptr);
            _exit(127);
        }
        ::close(ready[1]);
        char byte = 0;
        ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the init did not report ready";
        ::close(ready[0]);
        m_client = std::make_unique<InitClient>(m_dir / "init.sock");
    }

    void TearDown() override
    {
        if (m_pid > 0) {
            ::kill(m_pid, SIGTERM);
            int status = 0;
            ::waitpid(m_pid, &status, 0);
            EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the init should exit cleanly on SIGTERM";
        }
        std::error_code ec;
        fs::remove_all(m_dir, ec);
    }

    struct Run {
        InitExecResult exit;
        std::string out, err;
    };
    Run run(std::vector<std::string> argv, std::string stdinData = {}, int64_t timeoutMs = 20000,
            std::map<std::string, std::string> env = {})
    {
        InitExecRequest req;
        req.argv = std::move(argv);
        req.stdinData = std::move(stdinData);
        req.timeoutMs = timeoutMs;
        req.env = std::move(env);
        Run r;
        auto res = m_client->exec(req, [&](int stream, std::string_view chunk) { (stream == 1 ? r.out : r.err) += chunk; });
        EXPECT_TRUE(res.has_value()) << (res ? "" : res.error().message);
        if (res)
            r.exit = *res;
        return r;
    }

    fs::path m_dir;
    pid_t m_pid = -1;
    std::unique_ptr<InitClient> m_client;
};

TEST_F(InitProcess, ExecStreamsOutputAndReportsExit)
{
    auto r = run({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
    EXPECT_EQ(r.out, "out\n");
    EXPECT_EQ(r.err, "err\n");
    EXPECT_EQ(r.exit.exitCode, 3);
    EXPECT_EQ(r.exit.signal, 0);
    EXPECT_FALSE(r.exit.timedOut);
    EXPECT_GE(r.exit.durationMs, 0.0);
}

TEST_F(InitProcess, StdinReachesTheCommand)
{
    std::string input(200000, 'a');   // more than a pipe buffer
    auto r = run({"wc", "-c"}, input);
    EXPECT_EQ(std::stoll(r.out), 200000);
    EXPECT_EQ(r.exit.exitCode, 0);
}

TEST_F(InitProcess, EnvironmentIsBuiltFromNothing)
{
    ::setenv("PADDOCK_INIT_TEST_LEAK", "secret", 1);
    auto r = run({"env"}, {}, 20000, {{"EXTRA", "1"}});
    EXPECT_EQ(r.out.find("PADDOCK_INIT_TEST_LEAK"), std::string::npos);
    EXPECT_NE(r.out.find("PATH=/usr/local/bin:/usr/bin:/bin\n"), std::string::npos);
    EXPECT_NE(r.out.find("LANG=C.UTF-8\n"), std::string::npos);
    EXPECT_NE(r.out.find("EXTRA=1\n"), std::string::npos);
}

TEST_F(InitProcess, TimeoutKillsTheProcessGroup)
{
    // The background sleep is in the same group and must die too (the pipe closes).
    auto r = run({"/bin/sh", "-c", "sleep 30 & sleep 30"}, {}, 300);
    EXPECT_TRUE(r.exit.timedOut);
    EXPECT_EQ(r.exit.exitCode, -1);
    EXPECT_EQ(r.exit.signal, SIGKILL);
}

TEST_F(InitProcess, UnknownCommandIs127)
{
    auto r = run({"no-such-command-paddock"});
    EXPECT_EQ(r.exit.exitCode, 127);
    EXPECT_NE(r.err.find("command not found"), std::string::npos);
}

// A command that cannot start (a file without an exec bit: EACCES at spawn) is 126, and costs the
// init nothing: its handlers live as long as the sandbox, so the six pipe ends a failed start used
// to leave open would add up until no command could run.
TEST_F(InitProcess, CommandsThatCannotStartLeakNoDescriptors)
{
    const fs::path script = m_dir / "ws" / "not-executable.sh";
    std::ofstream(script) << "#!/bin/sh\necho never\n";
    fs::permissions(script, fs::perms::owner_read | fs::perms::owner_write);
    // The most descriptors any handler process holds. Handlers are forked ahead and kept, so what
    // one leaks stays with it; PID 1 may fork another while the loop runs, which has the same
    // start as the others, so the most (not the sum) is what a leak raises.
    auto openDescriptors = [&] {
        long most = 0;
        std::error_code ec;
        for (const auto &entry : fs::directory_iterator("/proc", ec)) {
            const std::string name = entry.path().filename();
            if (name.find_first_not_of("0123456789") != std::string::npos)
                continue;
            std::ifstream stat(entry.path() / "stat");
            std::string line;
            std::getline(stat, line);
            const auto close = line.rfind(')');
            if (close == std::string::npos)
                continue;
            std::istringstream fields(line.substr(close + 2));
            char state = 0;
            long ppid = 0;
            fields >> state >> ppid;
            if (ppid != m_pid)
                continue;
            std::error_code fdEc;
            most = std::max<long>(most, std::distance(fs::directory_iterator(entry.path() / "fd", fdEc),
                                                      fs::directory_iterator()));
        }
        return most;
    };
    run({"/bin/true"});   // the init's own descriptors settle after its first command
    const auto before = openDescriptors();
    ASSERT_GT(before, 0);
    for (int i = 0; i < 20; ++i) {
        auto r = run({script.string()});
        EXPECT_EQ(r.exit.exitCode, 126) << r.err;
        EXPECT_NE(r.err.find("cannot run"), std::string::npos) << r.err;
    }
    EXPECT_EQ(openDescriptors(), before) << "a failed start left descriptors open in the init";
}

TEST_F(InitProcess, FilesRoundTrip)
{
    auto w = m_client->writeFile("sub/dir/a.txt", "hello", 0600);
    ASSERT_TRUE(w) << w.error().message;
    EXPECT_EQ(*w, 5);
    auto r = m_client->readFile("sub/dir/a.txt", 0);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->content, "hello");
    EXPECT_FALSE(r->truncated);
    auto t = m_client->readFile((m_dir / "ws/sub/dir/a.txt").string(), 2);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->content, "he");
    EXPECT_TRUE(t->truncated);
    auto l = m_client->listDir("sub/dir");
    ASSERT_TRUE(l) << l.error().message;
    ASSERT_EQ(l->size(), 1u);
    EXPECT_EQ((*l)[0].name, "a.txt");
    EXPECT_EQ((*l)[0].size, 5);
    EXPECT_EQ((*l)[0].mode & 0777, 0600u);
    auto missing = m_client->readFile("nope", 0);
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::NotFound);
}

TEST_F(InitProcess, WritesOutsideTheWorkspaceAreRefused)
{
    fs::create_directories(m_dir / "outside");
    fs::create_symlink(m_dir / "outside", m_dir / "ws/link");
    fs::create_symlink("../outside/f", m_dir / "ws/rel");
    for (const std::string &path : std::vector<std::string>{"link/x", "rel", "../outside/y", (m_dir / "outside/z").string()}) {
        auto w = m_client->writeFile(path, "no", 0644);
        ASSERT_FALSE(w) << path;
        EXPECT_EQ(w.error().code, ErrorCode::PermissionDenied) << path << ": " << w.error().message;
    }
    EXPECT_TRUE(fs::is_empty(m_dir / "outside"));
}
