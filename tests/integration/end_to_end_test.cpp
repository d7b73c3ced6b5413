// End to end: a real pool and broker in a temporary directory, driven only through paddockctl.
#include "tests/integration/daemons_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

namespace paddock::test {
namespace {

using nlohmann::json;

std::vector<json> toolResults(const std::vector<json> &events)
{
    std::vector<json> results;
    for (const auto &event : events) {
        if (event.value("kind", "") == "tool.result")
            results.push_back(event);
    }
    return results;
}

void expectDenseSeqs(const std::vector<json> &events)
{
    for (size_t i = 0; i < events.size(); ++i)
        EXPECT_EQ(events[i].value("seq", int64_t{-1}), static_cast<int64_t>(i + 1)) << events[i].dump();
}

class EndToEnd : public DaemonsTest {};

TEST_F(EndToEnd, HelloCCompilesAndRunsInTheSandbox)
{
    const std::string id = submitAndFollow({"--playbook", "hello-c"});
    ASSERT_FALSE(id.empty());

    const CliResult events = cli({"events", id, "--output", "json"});
    ASSERT_EQ(events.exitCode, 0) << events.err;
    const auto lines = jsonLines(events.out);
    ASSERT_FALSE(lines.empty());
    expectDenseSeqs(lines);
    EXPECT_EQ(lines.front()["kind"], "session.created");

    // The recorded results hold the real compiler and program output.
    bool compiled = false;
    bool ran = false;
    for (const auto &result : toolResults(lines)) {
        const json &payload = result["payload"];
        const std::string command = payload.value("command", "");
        if (command.starts_with("gcc")) {
            compiled = true;
            EXPECT_EQ(payload.value("exit_code", -1), 0) << payload.dump();
        }
        // How long after its tool.call was recorded the pool spawned the command: one machine's
        // clock here, so never negative.
        if (!command.empty()) {
            ASSERT_TRUE(payload.contains("start_after_ms")) << payload.dump();
            EXPECT_GE(payload["start_after_ms"].get<double>(), 0.0) << payload.dump();
        }
        if (command == "./hello") {
            ran = true;
            EXPECT_EQ(payload.value("exit_code", -1), 0) << payload.dump();
            EXPECT_NE(payload.value("stdout", "").find("Hello from the sandbox"), std::string::npos) << payload.dump();
            EXPECT_NE(payload.value("stdout", "").find("sum 1..10 = 55"), std::string::npos) << payload.dump();
        }
    }
    EXPECT_TRUE(compiled) << events.out;
    EXPECT_TRUE(ran) << events.out;

    // The same, as people read it: the output indented under its tool.result.
    const CliResult table = cli({"events", id});
    ASSERT_EQ(table.exitCode, 0) << table.err;
    EXPECT_NE(table.out.find("tool.result"), std::string::npos);
    EXPECT_NE(table.out.find("\n        Hello from the sandbox\n"), std::string::npos) << table.out;

    const CliResult show = cli({"show", id, "--output", "json"});
    ASSERT_EQ(show.exitCode, 0) << show.err;
    const json session = json::parse(show.out);
    EXPECT_EQ(session["status"], "succeeded");
    EXPECT_EQ(session["playbook"], "hello-c");
    EXPECT_EQ(session["last_seq"], static_cast<int64_t>(lines.size()));
    EXPECT_GE(session["steps"].get<int64_t>(), 4);

    const CliResult list = cli({"ls"});
    ASSERT_EQ(list.exitCode, 0) << list.err;
    EXPECT_NE(list.out.find(id), std::string::npos);
    EXPECT_NE(list.out.find("succeeded"), std::string::npos);

    // Reading from the middle gives the tail only.
    const CliResult tail = cli({"events", id, "--from", "3", "--output", "json"});
    ASSERT_EQ(tail.exitCode, 0) << tail.err;
    const auto tailLines = jsonLines(tail.out);
    ASSERT_FALSE(tailLines.empty());
    EXPECT_EQ(tailLines.front()["seq"], 3);
    EXPECT_EQ(tailLines.size(), lines.size() - 2);
}

TEST_F(EndToEnd, APlaybookFileIsSentAsText)
{
    // A name the broker does not ship: only the file's text can make this session run. The shell
    // arithmetic proves the command really ran rather than being echoed back.
    const auto path = writeFile("from-file.toml", R"toml(
name = "from-file"
goal = "A playbook that exists only as a file on the client"

[[step]]
tool = "write_file"
path = "note.txt"
content = "written from a playbook file\n"

[[step]]
tool = "run_command"
command = "cat note.txt && echo from-file-$((6 * 7))"
expect_stdout = "from-file-42"

[[step]]
tool = "finish"
summary = "the file playbook ran"
)toml");
    // The broker address from the environment this time, the way scripts/run sets it.
    const CliResult submitted = runCli({"submit", "--playbook", path.string(), "-f", "--output", "json"},
                                       {{"PADDOCK_BROKER", m_broker->address}});
    ASSERT_EQ(submitted.exitCode, 0) << submitted.err << submitted.out;
    const auto lines = jsonLines(submitted.out);
    ASSERT_GE(lines.size(), 2u);
    const std::string id = lines.front()["id"];

    bool found = false;
    for (const auto &result : toolResults(std::vector<json>(lines.begin() + 1, lines.end()))) {
        if (result["payload"].value("stdout", "").find("from-file-42") != std::string::npos)
            found = true;
    }
    EXPECT_TRUE(found) << submitted.out;

    const CliResult show = cli({"show", id});
    ASSERT_EQ(show.exitCode, 0) << show.err;
    EXPECT_NE(show.out.find("succeeded"), std::string::npos) << show.out;
}

TEST_F(EndToEnd, FailedSessionExitsSeven)
{
    const auto path = writeFile("fails.toml", R"(
name = "fails"
goal = "A command that fails where success is expected"

[[step]]
tool = "run_command"
command = "echo about to fail; exit 3"
expect_exit = 0
)");
    const CliResult result = cli({"submit", "--playbook", path.string(), "-f"});
    EXPECT_EQ(result.exitCode, 7) << result.err << result.out;
    EXPECT_NE(result.err.find("failed"), std::string::npos) << result.err;
    // Table mode shows the output of the failing command under its result.
    EXPECT_NE(result.out.find("        about to fail\n"), std::string::npos) << result.out;
}

// What an agent's commands can see from inside a lite sandbox.
TEST_F(EndToEnd, SandboxIsIsolatedFromTheHost)
{
    // A TCP service on the host's loopback that the sandbox must not reach.
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ASSERT_GE(listener, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(addr);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::listen(listener, 4), 0);
    ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr *>(&addr), &length), 0);
    const int port = ntohs(addr.sin_port);

    // The daemons inherited this process's environment; the sandbox must show none of it.
    const char *home = std::getenv("HOME");
    const auto path = writeFile("isolation.toml", "name = \"isolation\"\n"
                                                  "goal = \"Look at the sandbox from inside\"\n"
                                                  "[[step]]\ntool = \"run_command\"\n"
                                                  "command = \"tr '\\\\0' ' ' < /proc/1/cmdline; echo\"\n"
                                                  "[[step]]\ntool = \"run_command\"\ncommand = \"env\"\n"
                                                  "[[step]]\ntool = \"run_command\"\n"
                                                  "command = \"if bash -c 'exec 3<>/dev/tcp/127.0.0.1/"
                                                      + std::to_string(port)
                                                      + "' 2>/dev/null; then echo LOOPBACK-REACHED; "
                                                        "else echo LOOPBACK-BLOCKED; fi\"\n"
                                                        "[[step]]\ntool = \"finish\"\nsummary = \"looked\"\n");
    const std::string id = submitAndFollow({"--playbook", path.string()});
    ASSERT_FALSE(id.empty());
    const CliResult events = cli({"events", id, "--output", "json"});
    ASSERT_EQ(events.exitCode, 0) << events.err;
    const auto results = toolResults(jsonLines(events.out));
    ASSERT_GE(results.size(), 3u) << events.out;

    const std::string pid1 = results[0]["payload"].value("stdout", "");
    EXPECT_NE(pid1.find("paddock-sandbox-init"), std::string::npos) << "PID 1 is: " << pid1;

    const std::string env = results[1]["payload"].value("stdout", "");
    EXPECT_NE(env.find("PATH="), std::string::npos) << env;
    std::set<std::string> visible;
    for (const auto &line : splitLines(env))
        visible.insert(line.substr(0, line.find('=')));
    for (char **entry = environ; entry && *entry; ++entry) {
        const std::string variable(*entry);
        const std::string name = variable.substr(0, variable.find('='));
        // PATH, HOME and LANG are rebuilt for the sandbox and the shell sets PWD itself; the values
        // are checked below where they could leak.
        if (name == "PATH" || name == "HOME" || name == "LANG" || name == "PWD" || name == "SHLVL" || name == "_")
            continue;
        EXPECT_FALSE(visible.contains(name)) << "the sandbox sees the test's " << name;
    }
    if (home && std::string(home).size() > 1) {
        EXPECT_EQ(env.find("HOME=" + std::string(home) + "\n"), std::string::npos) << env;
    }

    EXPECT_NE(results[2]["payload"].value("stdout", "").find("LOOPBACK-BLOCKED"), std::string::npos)
        << results[2]["payload"].dump();
    // Nothing arrived at the listener either.
    EXPECT_LT(::accept(listener, nullptr, nullptr), 0);
    ::close(listener);
}

} // namespace
} // namespace paddock::test
