// Bad input: each mistake gets the right exit code and a message that names the problem and the
// fix, and none of it disturbs what the broker has recorded.
#include "tests/integration/daemons_fixture.h"

namespace paddock::test {
namespace {

using nlohmann::json;

void expectMentions(const CliResult &result, const std::vector<std::string> &needles)
{
    for (const auto &needle : needles)
        EXPECT_NE(result.err.find(needle), std::string::npos) << "message lacks '" << needle << "': " << result.err;
}

// Needs no daemon at all: only paddockctl.
TEST(BadInputNoBroker, MissingSocketSaysHowToStartTheBroker)
{
    PADDOCK_SKIP_IF_MISSING(std::vector<std::string>{"paddockctl"});
    TempDir dir;
    const std::string address = "unix:" + (dir / "run/broker.sock").string();

    const CliResult byFlag = runCli({"--broker", address, "ls"});
    EXPECT_EQ(byFlag.exitCode, 4) << byFlag.err;
    expectMentions(byFlag, {"cannot list sessions", "no broker at " + address, "paddockd", "scripts/run", "--broker"});

    const CliResult byEnv = runCli({"show", "s-1"}, {{"PADDOCK_BROKER", address}});
    EXPECT_EQ(byEnv.exitCode, 4) << byEnv.err;
    expectMentions(byEnv, {"no broker at " + address, "paddockd"});

    // A socket file with nobody behind it is the same to the user.
    const auto stale = dir / "stale.sock";
    std::ofstream(stale) << "";
    const CliResult staleResult = runCli({"--broker", stale.string(), "pools"});
    EXPECT_EQ(staleResult.exitCode, 4) << staleResult.err;
    expectMentions(staleResult, {"no broker at " + stale.string(), "paddockd"});
}

class BadInput : public DaemonsTest {
protected:
    // Everything a user or the console could read back about the recorded sessions.
    std::string snapshot(const std::vector<std::string> &ids)
    {
        std::string out;
        const CliResult list = cli({"ls", "--all", "--output", "json"});
        EXPECT_EQ(list.exitCode, 0) << list.err;
        out += list.out;
        for (const auto &id : ids) {
            const CliResult events = cli({"events", id, "--output", "json"});
            EXPECT_EQ(events.exitCode, 0) << events.err;
            out += events.out;
        }
        return out;
    }
};

TEST_F(BadInput, EachMistakeIsNamedAndNothingRecordedIsLost)
{
    // Record something first.
    const std::string first = submitAndFollow({"--playbook", "hello-c", "--tag", "before"});
    ASSERT_FALSE(first.empty());
    const std::string second = submitAndFollow({"--playbook", "inspect"});
    ASSERT_FALSE(second.empty());
    const std::string before = snapshot({first, second});
    const json listed = json::parse(splitLines(before).empty() ? "[]" : before.substr(0, before.find("\n]") + 2));
    ASSERT_EQ(listed.size(), 2u) << before;

    const CliResult shown = cli({"show", first, "--output", "json"});
    ASSERT_EQ(shown.exitCode, 0) << shown.err;
    const int64_t lastSeq = json::parse(shown.out)["last_seq"];
    ASSERT_GT(lastSeq, 0);

    {
        SCOPED_TRACE("malformed playbook: TOML syntax");
        const auto path = writeFile("broken.toml", "name = \"broken\"\n[[step]\ntool = \"run_command\"\n");
        const CliResult result = cli({"submit", "--playbook", path.string()});
        EXPECT_EQ(result.exitCode, 5) << result.err;
        // The broker's message points into the user's file, by its path.
        expectMentions(result, {"cannot submit the session", path.string() + ":", "TOML"});
    }
    {
        SCOPED_TRACE("malformed playbook: an unknown tool");
        const auto path = writeFile("unknown-tool.toml",
                                    "name = \"unknown-tool\"\ngoal = \"x\"\n[[step]]\ntool = \"launch_missiles\"\n");
        const CliResult result = cli({"submit", "--playbook", path.string()});
        EXPECT_EQ(result.exitCode, 5) << result.err;
        expectMentions(result, {"launch_missiles", path.string() + ":", "run_command"});
    }
    {
        SCOPED_TRACE("unknown model");
        const CliResult result = cli({"submit", "--goal", "say hello", "--model", "no-such-model"});
        EXPECT_EQ(result.exitCode, 3) << result.err;
        expectMentions(result, {"cannot submit the session", "no-such-model"});
    }
    {
        SCOPED_TRACE("unknown playbook name");
        const CliResult result = cli({"submit", "--playbook", "no-such-playbook"});
        EXPECT_EQ(result.exitCode, 3) << result.err;
        // The fix: the broker names the playbooks it has.
        expectMentions(result, {"no-such-playbook", "hello-c"});
    }
    for (const std::string command : {"show", "events", "cancel", "pause", "resume"}) {
        SCOPED_TRACE("unknown session id: " + command);
        const CliResult result = cli({command, "no-such-session"});
        EXPECT_EQ(result.exitCode, 3) << result.err;
        expectMentions(result, {"no-such-session", "paddockctl ls"});
    }
    {
        SCOPED_TRACE("events from beyond the tail");
        const CliResult result = cli({"events", first, "--from", std::to_string(lastSeq + 2)});
        EXPECT_EQ(result.exitCode, 5) << result.err;
        expectMentions(result, {"cannot read the events of session " + first, "paddockctl show " + first});

        // The tail + 1 is where a follower resumes: valid, and empty.
        const CliResult atTail = cli({"events", first, "--from", std::to_string(lastSeq + 1)});
        EXPECT_EQ(atTail.exitCode, 0) << atTail.err;
        EXPECT_EQ(atTail.out, "");

        const CliResult negative = cli({"events", first, "--from", "-4"});
        EXPECT_EQ(negative.exitCode, 5) << negative.err;
        expectMentions(negative, {"--from -4", "seqs start at 1"});
    }
    {
        SCOPED_TRACE("usage errors never reach the broker");
        const CliResult result = cli({"ls", "--status", "finished"});
        EXPECT_EQ(result.exitCode, 2) << result.err;
        expectMentions(result, {"finished"});
    }

    // Nothing recorded moved: same sessions, same fields, same events.
    EXPECT_EQ(snapshot({first, second}), before);
    EXPECT_EQ(m_broker->daemon.running(), true) << "the broker died on bad input";
}

} // namespace
} // namespace paddock::test
