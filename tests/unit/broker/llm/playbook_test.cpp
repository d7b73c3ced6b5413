#include "broker/llm/playbook.h"

#include "broker/llm/model_adapter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace paddock::llm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr const char *kGood = R"(name = "hello-c"
goal = "Compile and run a C program"

[[step]]
tool = "write_file"
path = "hello.c"
content = '''
int main(void) { return 0; }
'''

[[step]]
tool = "run_command"
command = "cc -Wall -o hello hello.c && ./hello"
expect_exit = 0
expect_stdout = "Hello"
timeout_ms = 5000

[[step]]
tool = "read_file"
path = "hello.c"
expect_content = "main"

[[step]]
tool = "finish"
summary = "done"
)";

// Parses text that must fail and returns the message.
std::string errorOf(std::string_view text)
{
    auto result = parsePlaybook(text, "bad.toml");
    EXPECT_FALSE(result.has_value());
    if (result)
        return {};
    EXPECT_EQ(result.error().code, ErrorCode::InvalidArgument);
    return result.error().message;
}

TEST(PlaybookTest, ParsesAGoodPlaybook)
{
    auto playbook = parsePlaybook(kGood, "hello-c.toml");
    ASSERT_TRUE(playbook) << playbook.error().message;
    EXPECT_EQ(playbook->name, "hello-c");
    EXPECT_EQ(playbook->goal, "Compile and run a C program");
    ASSERT_EQ(playbook->steps.size(), 4u);

    const PlaybookStep &write = playbook->steps[0];
    EXPECT_EQ(write.number, 1);
    EXPECT_EQ(write.line, 4);
    EXPECT_EQ(write.tool, tool::WriteFile);
    EXPECT_EQ(write.arguments["path"], "hello.c");
    EXPECT_EQ(write.arguments["content"], "int main(void) { return 0; }\n");
    EXPECT_FALSE(write.expectExit);

    const PlaybookStep &run = playbook->steps[1];
    EXPECT_EQ(run.tool, tool::RunCommand);
    EXPECT_EQ(run.arguments, (nlohmann::json{{"command", "cc -Wall -o hello hello.c && ./hello"},
                                             {"timeout_ms", 5000}}));
    EXPECT_EQ(run.expectExit, 0);
    EXPECT_EQ(run.expectStdout, "Hello");

    EXPECT_EQ(playbook->steps[2].arguments, (nlohmann::json{{"path", "hello.c"}}));
    EXPECT_EQ(playbook->steps[2].expectContent, "main");
    EXPECT_EQ(playbook->steps[3].arguments, (nlohmann::json{{"status", "succeeded"}, {"summary", "done"}}));
}

TEST(PlaybookTest, DefaultsNameExitCodeAndFinishStatus)
{
    auto playbook = parsePlaybook("goal = \"g\"\n[[step]]\ntool = \"run_command\"\ncommand = \"true\"\n"
                                  "[[step]]\ntool = \"finish\"\nsummary = \"s\"\nstatus = \"failed\"\n",
                                  "dir/quick.toml");
    ASSERT_TRUE(playbook) << playbook.error().message;
    EXPECT_EQ(playbook->name, "quick");
    EXPECT_EQ(playbook->steps[0].expectExit, 0);
    EXPECT_EQ(playbook->steps[1].arguments["status"], "failed");
}

TEST(PlaybookTest, RejectsInvalidToml)
{
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]\ntool = \"finish\"\n"),
                AllOf(HasSubstr("bad.toml:2"), HasSubstr("not valid TOML")));
}

TEST(PlaybookTest, RejectsMissingGoal)
{
    EXPECT_THAT(errorOf("name = \"x\"\n[[step]]\ntool = \"finish\"\nsummary = \"s\"\n"),
                AllOf(HasSubstr("bad.toml"), HasSubstr("'goal' is missing"), HasSubstr("Add goal =")));
}

TEST(PlaybookTest, RejectsWrongTopLevelTypes)
{
    EXPECT_THAT(errorOf("goal = 3\n"), AllOf(HasSubstr("bad.toml:1"), HasSubstr("'goal' is an integer")));
}

TEST(PlaybookTest, RejectsNoSteps)
{
    EXPECT_THAT(errorOf("goal = \"g\"\n"), HasSubstr("there are no steps"));
    EXPECT_THAT(errorOf("goal = \"g\"\nstep = []\n"), HasSubstr("there are no steps"));
    EXPECT_THAT(errorOf("goal = \"g\"\nstep = [1, 2]\n"), HasSubstr("not a list of tables"));
    EXPECT_THAT(errorOf("goal = \"g\"\n[step]\ntool = \"finish\"\n"),
                AllOf(HasSubstr("single table"), HasSubstr("[[step]] (two brackets)")));
}

TEST(PlaybookTest, RejectsUnknownTopLevelKey)
{
    EXPECT_THAT(errorOf("goal = \"g\"\ngaol = \"x\"\n[[step]]\ntool = \"finish\"\nsummary = \"s\"\n"),
                AllOf(HasSubstr("bad.toml:2"), HasSubstr("unknown top-level key 'gaol'"),
                      HasSubstr("Did you mean 'goal'")));
}

TEST(PlaybookTest, RejectsMissingTool)
{
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ncommand = \"ls\"\n"),
                AllOf(HasSubstr("bad.toml:2"), HasSubstr("step 1: 'tool' is missing"), HasSubstr("run_command")));
}

TEST(PlaybookTest, RejectsUnknownTool)
{
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"run_comand\"\ncommand = \"ls\"\n"),
                AllOf(HasSubstr("bad.toml:3"), HasSubstr("step 1: unknown tool 'run_comand'"),
                      HasSubstr("Did you mean 'run_command'"), HasSubstr("run_command, write_file, read_file, read_records, request_environment, finish")));
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = 7\n"), HasSubstr("'tool' is an integer, not a string"));
}

TEST(PlaybookTest, RejectsMissingRequiredField)
{
    const std::string text = "goal = \"g\"\n[[step]]\ntool = \"write_file\"\npath = \"a\"\ncontent = \"x\"\n"
                             "\n[[step]]\ntool = \"run_command\"\nexpect_exit = 1\n";
    EXPECT_THAT(errorOf(text), AllOf(HasSubstr("bad.toml:7"), HasSubstr("step 2 (run_command): 'command' is missing"),
                                     HasSubstr("Add command =")));
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"write_file\"\npath = \"a\"\n"),
                HasSubstr("step 1 (write_file): 'content' is missing"));
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"read_file\"\n"),
                HasSubstr("step 1 (read_file): 'path' is missing"));
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"finish\"\n"),
                HasSubstr("step 1 (finish): 'summary' is missing"));
}

TEST(PlaybookTest, RejectsWrongFieldType)
{
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"run_command\"\ncommand = 5\n"),
                AllOf(HasSubstr("bad.toml:4"), HasSubstr("step 1 (run_command): 'command' is an integer, not a string"),
                      HasSubstr("Write it like command =")));
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"run_command\"\ncommand = \"ls\"\nexpect_exit = \"0\"\n"),
                AllOf(HasSubstr("bad.toml:5"), HasSubstr("'expect_exit' is a string, not an integer")));
}

TEST(PlaybookTest, RejectsBadValues)
{
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"run_command\"\ncommand = \"\"\n"),
                HasSubstr("'command' is empty"));
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"run_command\"\ncommand = \"ls\"\ntimeout_ms = 0\n"),
                HasSubstr("timeout_ms is 0, it must be positive"));
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"run_command\"\ncommand = \"ls\"\nexpect_exit = 300\n"),
                HasSubstr("expect_exit is 300, outside 0..255"));
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"finish\"\nsummary = \"s\"\nstatus = \"ok\"\n"),
                AllOf(HasSubstr("status is 'ok'"), HasSubstr("\"succeeded\" or status = \"failed\"")));
}

TEST(PlaybookTest, RejectsUnknownStepKey)
{
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"run_command\"\ncommand = \"ls\"\nexpect_stdot = \"x\"\n"),
                AllOf(HasSubstr("bad.toml:5"), HasSubstr("step 1 (run_command): unknown key 'expect_stdot'"),
                      HasSubstr("Did you mean 'expect_stdout'"), HasSubstr("accepts: tool, command")));
    // A key that belongs to another tool.
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"write_file\"\npath = \"a\"\ncontent = \"\"\n"
                        "expect_exit = 0\n"),
                HasSubstr("step 1 (write_file): unknown key 'expect_exit'"));
}

TEST(PlaybookTest, RejectsFinishBeforeTheEnd)
{
    EXPECT_THAT(errorOf("goal = \"g\"\n[[step]]\ntool = \"finish\"\nsummary = \"s\"\n"
                        "[[step]]\ntool = \"run_command\"\ncommand = \"ls\"\n"),
                AllOf(HasSubstr("bad.toml:2"), HasSubstr("step 1 (finish): finish must be the last step"),
                      HasSubstr("1 more step(s)"), HasSubstr("Move the finish step")));
}

TEST(PlaybookTest, ShippedPlaybooksParse)
{
    const std::filesystem::path dir = PADDOCK_PLAYBOOK_DIR;
    const std::vector<std::string> names = listPlaybooks(dir);
    for (const char *expected : {"hello-c", "inspect", "data-pipeline", "failing-build"})
        EXPECT_NE(std::ranges::find(names, expected), names.end()) << expected << " is not shipped";
    for (const std::string &name : names) {
        auto text = loadPlaybookText(dir, name);
        ASSERT_TRUE(text) << text.error().message;
        auto playbook = parsePlaybook(*text, name + ".toml");
        ASSERT_TRUE(playbook) << playbook.error().message;
        EXPECT_EQ(playbook->name, name);
        EXPECT_FALSE(playbook->goal.empty());
    }
}

class PlaybookDirTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = std::filesystem::temp_directory_path()
            / ("paddock-playbooks-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-"
               + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
        std::ofstream(m_dir / "beta.toml") << "goal = \"b\"\n";
        std::ofstream(m_dir / "alpha.toml") << "goal = \"a\"\n";
        std::ofstream(m_dir / "notes.txt") << "not a playbook\n";
    }
    void TearDown() override { std::filesystem::remove_all(m_dir); }
    std::filesystem::path m_dir;
};

TEST_F(PlaybookDirTest, ListsAndLoads)
{
    EXPECT_EQ(listPlaybooks(m_dir), (std::vector<std::string>{"alpha", "beta"}));
    EXPECT_EQ(loadPlaybookText(m_dir, "alpha").value(), "goal = \"a\"\n");
    EXPECT_EQ(loadPlaybookText(m_dir, "beta.toml").value(), "goal = \"b\"\n");
    EXPECT_TRUE(listPlaybooks(m_dir / "missing").empty());
}

TEST_F(PlaybookDirTest, UnknownNameListsTheAvailableOnes)
{
    auto text = loadPlaybookText(m_dir, "gamma");
    ASSERT_FALSE(text);
    EXPECT_EQ(text.error().code, ErrorCode::NotFound);
    EXPECT_THAT(text.error().message, AllOf(HasSubstr("no playbook 'gamma'"), HasSubstr("Available: alpha, beta")));
}

TEST_F(PlaybookDirTest, RejectsPathsAsNames)
{
    for (const char *name : {"../etc/passwd", "a/b", "", ".hidden"}) {
        auto text = loadPlaybookText(m_dir, name);
        ASSERT_FALSE(text) << name;
        EXPECT_EQ(text.error().code, ErrorCode::InvalidArgument) << name;
    }
}

} // namespace
} // namespace paddock::llm
