#include "cli/app.h"
#include "cli/exit_codes.h"

#include <gtest/gtest.h>

#include <sstream>

namespace paddock::cli {
namespace {

struct Parsed {
    ParseOutcome outcome;
    std::string out;
    std::string err;
};

Parsed parse(std::vector<std::string> args)
{
    std::ostringstream out;
    std::ostringstream err;
    Parsed parsed{parseCommandLine(args, out, err), {}, {}};
    parsed.out = out.str();
    parsed.err = err.str();
    return parsed;
}

TEST(CommandLine, SubmitTakesEveryFlag)
{
    auto p = parse({"submit", "--playbook", "hello-c", "--tier", "lite", "--agent", "bob", "--tag", "a", "--tag",
                    "b", "-f"});
    ASSERT_TRUE(p.outcome.invocation) << p.err;
    const Invocation &inv = *p.outcome.invocation;
    EXPECT_EQ(inv.command, Command::Submit);
    EXPECT_EQ(inv.playbook, "hello-c");
    EXPECT_EQ(inv.tier, "lite");
    EXPECT_EQ(inv.agent, "bob");
    EXPECT_EQ(inv.tags, (std::vector<std::string>{"a", "b"}));
    EXPECT_TRUE(inv.follow);
}

TEST(CommandLine, SubmitNeedsAPlaybookOrAGoalWithAModel)
{
    auto nothing = parse({"submit"});
    EXPECT_FALSE(nothing.outcome.invocation);
    EXPECT_EQ(nothing.outcome.exitCode, 2);
    EXPECT_NE(nothing.err.find("--playbook"), std::string::npos);

    auto goalOnly = parse({"submit", "--goal", "fix the bug"});
    EXPECT_EQ(goalOnly.outcome.exitCode, 2);
    EXPECT_NE(goalOnly.err.find("--model"), std::string::npos);

    auto goalAndModel = parse({"submit", "--goal", "fix the bug", "--model", "openai"});
    ASSERT_TRUE(goalAndModel.outcome.invocation);
    EXPECT_EQ(goalAndModel.outcome.invocation->model, "openai");
}

TEST(CommandLine, GlobalOptionsWorkBeforeAndAfterTheCommand)
{
    auto before = parse({"--output", "json", "--broker", "h:1", "ls"});
    ASSERT_TRUE(before.outcome.invocation) << before.err;
    EXPECT_EQ(before.outcome.invocation->output, OutputFormat::Json);
    EXPECT_EQ(before.outcome.invocation->broker, "h:1");

    auto after = parse({"events", "s1", "--output", "json", "--from", "7", "-f", "--broker", "unix:/x"});
    ASSERT_TRUE(after.outcome.invocation) << after.err;
    const Invocation &inv = *after.outcome.invocation;
    EXPECT_EQ(inv.command, Command::Events);
    EXPECT_EQ(inv.sessionId, "s1");
    EXPECT_EQ(inv.fromSeq, 7);
    EXPECT_TRUE(inv.follow);
    EXPECT_EQ(inv.output, OutputFormat::Json);
    EXPECT_EQ(inv.broker, "unix:/x");
}

TEST(CommandLine, ListFilters)
{
    auto p = parse({"ls", "--status", "running", "--status", "failed", "--agent", "a", "--search", "hello",
                    "--limit", "5", "--all"});
    ASSERT_TRUE(p.outcome.invocation) << p.err;
    const Invocation &inv = *p.outcome.invocation;
    EXPECT_EQ(inv.command, Command::List);
    EXPECT_EQ(inv.statuses, (std::vector<std::string>{"running", "failed"}));
    EXPECT_EQ(inv.search, "hello");
    EXPECT_EQ(inv.limit, 5);
    EXPECT_TRUE(inv.all);
}

TEST(CommandLine, UsageErrorsExitTwo)
{
    for (const auto &args : std::vector<std::vector<std::string>>{
             {},
             {"frobnicate"},
             {"show"},
             {"ls", "--status", "done"},
             {"ls", "--output", "yaml"},
             {"ls", "--limit", "0"},
             {"events", "s1", "--from", "x"},
             {"cancel"},
         }) {
        auto p = parse(args);
        EXPECT_FALSE(p.outcome.invocation);
        EXPECT_EQ(p.outcome.exitCode, 2) << ::testing::PrintToString(args);
        EXPECT_FALSE(p.err.empty());
    }
}

TEST(CommandLine, HelpListsTheExitCodesAndVersionPrints)
{
    auto help = parse({"--help"});
    EXPECT_EQ(help.outcome.exitCode, 0);
    EXPECT_NE(help.out.find("Exit codes:"), std::string::npos);
    EXPECT_NE(help.out.find("4  broker unreachable"), std::string::npos);

    auto version = parse({"--version"});
    EXPECT_EQ(version.outcome.exitCode, 0);
    EXPECT_NE(version.out.find("paddockctl "), std::string::npos);
}

TEST(CommandLine, SessionActionsTakeAnIdAndAReason)
{
    for (auto [name, command] : {std::pair{"cancel", Command::Cancel}, std::pair{"pause", Command::Pause},
                                 std::pair{"resume", Command::Resume}}) {
        auto p = parse({name, "s9", "--reason", "because"});
        ASSERT_TRUE(p.outcome.invocation) << p.err;
        EXPECT_EQ(p.outcome.invocation->command, command);
        EXPECT_EQ(p.outcome.invocation->sessionId, "s9");
        EXPECT_EQ(p.outcome.invocation->reason, "because");
    }
}

TEST(CommandLine, OverrideTakesASessionATierAndAReason)
{
    auto p = parse({"override", "s9", "heavy", "--reason", "needs memory"});
    ASSERT_TRUE(p.outcome.invocation) << p.err;
    EXPECT_EQ(p.outcome.invocation->command, Command::OverrideTier);
    EXPECT_EQ(p.outcome.invocation->sessionId, "s9");
    EXPECT_EQ(p.outcome.invocation->tier, "heavy");
    EXPECT_EQ(p.outcome.invocation->reason, "needs memory");
    // The reason is what the log keeps of why a human moved it: required.
    auto noReason = parse({"override", "s9", "heavy"});
    EXPECT_FALSE(noReason.outcome.invocation);
    EXPECT_EQ(noReason.outcome.exitCode, 2);
    EXPECT_NE(noReason.err.find("--reason"), std::string::npos) << noReason.err;
    auto noTier = parse({"override", "s9", "--reason", "r"});
    EXPECT_FALSE(noTier.outcome.invocation);
    EXPECT_EQ(noTier.outcome.exitCode, 2);
}

int run(std::vector<std::string> args, const Environment &env, std::string &err)
{
    std::ostringstream out;
    std::ostringstream errStream;
    const int code = runCli(args, env, out, errStream);
    err = errStream.str();
    return code;
}

TEST(Run, MissingSocketIsBrokerUnreachableWithTheFix)
{
    Environment env;
    env.defaultSocketPath = "/nonexistent/paddock/broker.sock";
    std::string err;
    EXPECT_EQ(run({"ls"}, env, err), 4);
    EXPECT_NE(err.find("no broker at unix:/nonexistent/paddock/broker.sock"), std::string::npos) << err;
    EXPECT_NE(err.find("paddockd"), std::string::npos);

    // The environment variable is used when there is no flag, and named in the message.
    env.brokerAddress = "/also/missing.sock";
    EXPECT_EQ(run({"show", "s1"}, env, err), 4);
    EXPECT_NE(err.find("cannot show session s1: no broker at /also/missing.sock"), std::string::npos) << err;
}

TEST(Run, RefusedTcpConnectionIsBrokerUnreachable)
{
    Environment env;
    std::string err;
    // Port 1 on loopback: nothing listens there on a test machine.
    EXPECT_EQ(run({"--broker", "127.0.0.1:1", "--timeout", "5", "pools"}, env, err), 4);
    EXPECT_NE(err.find("no broker at 127.0.0.1:1"), std::string::npos) << err;
}

TEST(Run, BadAddressIsAUsageError)
{
    Environment env;
    std::string err;
    EXPECT_EQ(run({"--broker", "nonsense", "ls"}, env, err), 2);
    EXPECT_NE(err.find("host:port"), std::string::npos) << err;
}

TEST(Run, MissingPlaybookFileIsNotFoundBeforeAnyCall)
{
    Environment env;
    env.defaultSocketPath = "/dev/null";   // exists, so the pre-check passes; no call is made anyway
    std::string err;
    EXPECT_EQ(run({"submit", "--playbook", "/nonexistent/play.toml"}, env, err), 3);
    EXPECT_NE(err.find("no playbook file /nonexistent/play.toml"), std::string::npos) << err;
}

} // namespace
} // namespace paddock::cli
