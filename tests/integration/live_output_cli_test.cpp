// A running command's output reaches the log and `paddockctl events -f` while it runs: the real
// broker and pool, a command that prints a line, sleeps 3 s and prints another. "While it runs" is
// checked against the log and the command's own timing, never against a guess of wall-clock time:
// when `events -f` has printed the first line, the log holds no result for the command yet, and
// the first line's event is older than the command's end by most of its sleep.
#include "tests/integration/daemons_fixture.h"

#include <cstdio>

namespace paddock::test {
namespace {

using nlohmann::json;

class LiveOutput : public DaemonsTest {};

TEST_F(LiveOutput, TheFirstLineIsShownBeforeTheCommandEnds)
{
    const auto playbook = writeFile("slow.toml", R"(
name = "slow"
goal = "print, wait, print"

[[step]]
tool = "run_command"
command = 'echo first line; sleep 3; echo second line; echo a warning >&2; printf "\033[31mred\033[0m \377\376 end\n"'
)");
    const CliResult submitted = cli({"submit", "--playbook", playbook.string(), "--output", "json"});
    ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
    const std::string id = json::parse(submitted.out).value("id", "");
    ASSERT_FALSE(id.empty()) << submitted.out;

    // `events -f` as a person runs it, read line by line as it prints.
    const std::string command = binaryPath("paddockctl").string() + " --broker '" + m_broker->address + "' events " + id + " -f";
    FILE *follow = ::popen(command.c_str(), "r");
    ASSERT_NE(follow, nullptr);
    std::string printed;
    bool resultLoggedWhenShown = true;
    char line[4096];
    while (std::fgets(line, sizeof line, follow)) {
        printed += line;
        if (std::string_view(line).find("first line") != std::string_view::npos && resultLoggedWhenShown) {
            const json log = eventsOf(id);
            resultLoggedWhenShown = std::any_of(log.begin(), log.end(), [](const json &e) { return e["kind"] == "tool.result"; });
            if (resultLoggedWhenShown)
                break;
        }
    }
    const int followExit = ::pclose(follow);
    EXPECT_FALSE(resultLoggedWhenShown) << "`events -f` showed the first line only once the command had ended:\n" << printed;
    EXPECT_EQ(WEXITSTATUS(followExit), 0) << printed;
    // The terminal got the escape sequence as text, never as a command, and no byte that is not UTF-8.
    EXPECT_EQ(printed.find('\x1b'), std::string::npos) << printed;
    EXPECT_NE(printed.find("\\x1b[31mred\\x1b[0m"), std::string::npos) << printed;
    EXPECT_NE(printed.find("second line"), std::string::npos) << printed;
    EXPECT_NE(printed.find("output shown above as it ran"), std::string::npos) << printed;

    // In the log: the first line's event before the command's end by most of its 3 s sleep, by
    // the command's own start and duration.
    const json log = eventsOf(id);
    int64_t callMs = 0;
    int64_t firstLineMs = 0;
    bool sawStderr = false;
    json result;
    for (const auto &e : log) {
        if (e["kind"] == "tool.call")
            callMs = e["time_unix_ms"].get<int64_t>();
        if (e["kind"] == "tool.output" && firstLineMs == 0
            && e["payload"].value("text", "").find("first line") != std::string::npos) {
            firstLineMs = e["time_unix_ms"].get<int64_t>();
            EXPECT_EQ(e["payload"]["stream"], "stdout") << e.dump();
        }
        if (e["kind"] == "tool.output" && e["payload"].value("text", "").find("a warning") != std::string::npos) {
            EXPECT_EQ(e["payload"]["stream"], "stderr") << e.dump();
            sawStderr = true;
        }
        if (e["kind"] == "tool.result" && e["payload"].contains("command"))
            result = e["payload"];
    }
    ASSERT_GT(firstLineMs, 0) << log.dump(1);
    EXPECT_TRUE(sawStderr) << "stderr was not recorded live: " << log.dump(1);
    ASSERT_TRUE(result.is_object()) << log.dump(1);
    EXPECT_EQ(result["stdout"].get<std::string>().substr(0, 23), "first line\nsecond line\n");
    const double commandEndMs = static_cast<double>(callMs) + result.value("start_after_ms", 0.0) + result.value("duration_ms", 0.0);
    EXPECT_LT(static_cast<double>(firstLineMs), commandEndMs - 1500) << "recorded " << commandEndMs - static_cast<double>(firstLineMs)
                                                                      << " ms before the command ended";
}

TEST_F(LiveOutput, ATenMegabyteLineIsCutAtTheLimitAndSaysSo)
{
    const auto playbook = writeFile("flood.toml", R"(
name = "flood"
goal = "one 10 MB line, no newline"

[[step]]
tool = "run_command"
command = "head -c 10000000 /dev/zero | tr '\\0' x"
)");
    const std::string id = submitAndFollow({"--playbook", playbook.string()});
    ASSERT_FALSE(id.empty());
    const json log = eventsOf(id);
    int64_t liveBytes = 0;
    int64_t dropped = 0;
    int cuts = 0;
    for (const auto &e : log) {
        if (e["kind"] != "tool.output")
            continue;
        liveBytes += static_cast<int64_t>(e["payload"].value("text", "").size());
        dropped += e["payload"].value("dropped_bytes", int64_t{0});
        cuts += e["payload"].value("cut", false) ? 1 : 0;
    }
    EXPECT_EQ(liveBytes, 64 * 1024) << "recorded live up to the limit";
    EXPECT_EQ(cuts, 1);
    EXPECT_EQ(dropped, 10'000'000 - 64 * 1024);
    // The result is as it always was: head and tail, the middle said to be left out.
    for (const auto &e : log) {
        if (e["kind"] == "tool.result" && e["payload"].contains("command")) {
            EXPECT_TRUE(e["payload"].value("stdout_clipped", false));
            EXPECT_EQ(e["payload"].value("exit_code", -1), 0);
        }
    }
    // The human view of it stays bounded too.
    const CliResult shown = cli({"events", id});
    EXPECT_EQ(shown.exitCode, 0) << shown.err;
    EXPECT_LT(shown.out.size(), 64u * 1024) << "events printed " << shown.out.size() << " bytes";
}

} // namespace
} // namespace paddock::test
