// paddockctl secrets and submit --secret: what the command line turns into, and how the value read
// from stdin is stored. (The calls themselves run against a real broker in
// tests/integration/secrets_test.cpp.)
#include "cli/exit_codes.h"
#include "cli/secrets_commands.h"

#include <gtest/gtest.h>

#include <sstream>

namespace paddock::cli {
namespace {

ParseOutcome parse(const std::vector<std::string> &args, std::string *err = nullptr)
{
    std::ostringstream out;
    std::ostringstream errors;
    auto outcome = parseCommandLine(args, out, errors);
    if (err)
        *err = errors.str();
    return outcome;
}

TEST(SecretsCommands, ParseSetListRemove)
{
    auto set = parse({"secrets", "set", "GITHUB_TOKEN"});
    ASSERT_TRUE(set.invocation);
    EXPECT_EQ(set.invocation->command, Command::SecretsSet);
    EXPECT_EQ(set.invocation->secretName, "GITHUB_TOKEN");
    auto list = parse({"secrets", "ls", "--output", "json"});
    ASSERT_TRUE(list.invocation);
    EXPECT_EQ(list.invocation->command, Command::SecretsList);
    EXPECT_EQ(list.invocation->output, OutputFormat::Json);
    auto remove = parse({"secrets", "rm", "OLD"});
    ASSERT_TRUE(remove.invocation);
    EXPECT_EQ(remove.invocation->command, Command::SecretsRemove);
    EXPECT_EQ(remove.invocation->secretName, "OLD");
}

TEST(SecretsCommands, MissingPartsAreUsageErrors)
{
    EXPECT_EQ(parse({"secrets"}).exitCode, toInt(ExitCode::Usage));
    EXPECT_EQ(parse({"secrets", "set"}).exitCode, toInt(ExitCode::Usage));
    EXPECT_EQ(parse({"secrets", "rm"}).exitCode, toInt(ExitCode::Usage));
    // A value is never an argument (it would land in the shell's history and in ps).
    EXPECT_EQ(parse({"secrets", "set", "NAME", "the-value"}).exitCode, toInt(ExitCode::Usage));
}

TEST(SecretsCommands, SubmitGrantsEverySecretNamed)
{
    auto submit = parse({"submit", "--playbook", "hello-c", "--secret", "A_TOKEN", "--secret", "B_TOKEN"});
    ASSERT_TRUE(submit.invocation);
    EXPECT_EQ(submit.invocation->secrets, (std::vector<std::string>{"A_TOKEN", "B_TOKEN"}));
}

TEST(SecretsCommands, OneTrailingNewlineIsDropped)
{
    EXPECT_EQ(secretValueFromInput("token\n"), "token");
    EXPECT_EQ(secretValueFromInput("token\r\n"), "token");
    EXPECT_EQ(secretValueFromInput("token"), "token");
    EXPECT_EQ(secretValueFromInput("token\n\n"), "token\n");   // only one: a value may end in a newline
    EXPECT_EQ(secretValueFromInput("line one\nline two\n"), "line one\nline two");
}

} // namespace
} // namespace paddock::cli
