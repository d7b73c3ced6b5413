#include "broker/llm/scripted_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace paddock::llm {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using nlohmann::json;

constexpr const char *kPlaybook = R"(name = "hello"
goal = "say hello"
[[step]]
tool = "write_file"
path = "hello.c"
content = "int main(void) { return 0; }"
[[step]]
tool = "run_command"
command = "cc -o hello hello.c"
[[step]]
tool = "run_command"
command = "./hello"
expect_stdout = "Hello"
[[step]]
tool = "read_file"
path = "hello.c"
expect_content = "main"
[[step]]
tool = "finish"
summary = "built and ran hello"
)";

json commandResult(int exitCode, std::string out = {}, std::string err = {})
{
    return {{"exit_code", exitCode}, {"stdout", std::move(out)}, {"stderr", std::move(err)},
            {"duration_ms", 3}, {"timed_out", false}};
}

class ScriptedModelTest : public ::testing::Test {
protected:
    ScriptedModelTest()
    {
        m_context.sessionId = "s-1";
        m_context.goal = "say hello";
        m_context.playbookToml = kPlaybook;
    }

    // Asks for the next turn and records it in the history with the given result.
    ModelTurn step(const json &result)
    {
        auto turn = m_model.next(m_context);
        EXPECT_TRUE(turn) << turn.error().message;
        if (!turn)
            return {};
        m_context.history.push_back(Exchange{*turn, {result}});
        return *turn;
    }

    ModelTurn expectFinish(std::string_view status)
    {
        auto turn = m_model.next(m_context);
        EXPECT_TRUE(turn) << turn.error().message;
        if (!turn)
            return {};
        EXPECT_EQ(turn->toolCalls.size(), 1u);
        EXPECT_EQ(turn->toolCalls.at(0).name, tool::Finish);
        EXPECT_EQ(turn->toolCalls.at(0).arguments["status"], status);
        return *turn;
    }

    ScriptedModel m_model;
    ModelContext m_context;
};

TEST_F(ScriptedModelTest, PlaysStepsInOrder)
{
    ModelTurn turn = step(json::object());
    EXPECT_EQ(m_model.name(), "scripted");
    EXPECT_EQ(turn.model, "scripted");
    // Usage is an estimate, about four characters a token of what a real model would have been sent
    // (the goal, nothing before the first turn) and of what it answered: demo sessions cost something.
    ASSERT_EQ(turn.toolCalls.size(), 1u);
    EXPECT_EQ(turn.usage.inputTokens, static_cast<int64_t>((m_context.goal.size() + 3) / 4));
    EXPECT_EQ(turn.usage.outputTokens,
              static_cast<int64_t>((turn.text.size() + turn.toolCalls[0].name.size()
                                    + turn.toolCalls[0].arguments.dump().size() + 3) / 4));
    EXPECT_EQ(turn.usage.cachedTokens, 0);
    const int64_t firstInput = turn.usage.inputTokens;
    EXPECT_EQ(turn.toolCalls[0].id, "call-1");
    EXPECT_EQ(turn.toolCalls[0].name, tool::WriteFile);
    EXPECT_EQ(turn.toolCalls[0].arguments, (json{{"path", "hello.c"}, {"content", "int main(void) { return 0; }"}}));

    turn = step(commandResult(0));
    EXPECT_GT(turn.usage.inputTokens, firstInput);   // the history with its result is sent too
    EXPECT_EQ(turn.toolCalls[0].id, "call-2");
    EXPECT_EQ(turn.toolCalls[0].arguments, (json{{"command", "cc -o hello hello.c"}}));

    turn = step(commandResult(0, "Hello, world\n"));
    EXPECT_EQ(turn.toolCalls[0].id, "call-3");
    EXPECT_EQ(turn.toolCalls[0].name, tool::RunCommand);

    turn = step(json{{"content", "int main(void) { return 0; }"}});
    EXPECT_EQ(turn.toolCalls[0].name, tool::ReadFile);

    ModelTurn last = expectFinish("succeeded");
    EXPECT_EQ(last.toolCalls[0].id, "call-5");
    EXPECT_EQ(last.toolCalls[0].arguments["summary"], "built and ran hello");
    m_context.history.push_back(Exchange{last, {json::object()}});

    auto after = m_model.next(m_context);
    ASSERT_FALSE(after);
    EXPECT_EQ(after.error().code, ErrorCode::FailedPrecondition);
}

TEST_F(ScriptedModelTest, IsDeterministic)
{
    step(json::object());
    auto first = m_model.next(m_context);
    auto second = ScriptedModel().next(m_context);
    ASSERT_TRUE(first && second);
    EXPECT_EQ(first->toolCalls[0].id, second->toolCalls[0].id);
    EXPECT_EQ(first->toolCalls[0].arguments, second->toolCalls[0].arguments);
    EXPECT_EQ(first->text, second->text);
}

TEST_F(ScriptedModelTest, FailsOnExitCodeMismatch)
{
    step(json::object());
    step(commandResult(1, "", "hello.c: In function 'main':\nhello.c:3:5: error: expected ';' before 'return'\n"
                              "compilation terminated.\n"));
    ModelTurn turn = expectFinish("failed");
    EXPECT_EQ(turn.toolCalls[0].id, "call-3");
    EXPECT_THAT(turn.toolCalls[0].arguments["summary"].get<std::string>(),
                AllOf(HasSubstr("step 2 (run_command `cc -o hello hello.c`)"), HasSubstr("expected exit code 0"),
                      HasSubstr("exited with 1"), HasSubstr("error: expected ';' before 'return'")));
}

TEST_F(ScriptedModelTest, FailsOnStdoutMismatch)
{
    step(json::object());
    step(commandResult(0));
    step(commandResult(0, "Goodbye\n"));
    ModelTurn turn = expectFinish("failed");
    EXPECT_THAT(turn.toolCalls[0].arguments["summary"].get<std::string>(),
                AllOf(HasSubstr("step 3"), HasSubstr("expected stdout to contain \"Hello\""), HasSubstr("Goodbye")));
}

TEST_F(ScriptedModelTest, FailsOnToolErrorAndTimeout)
{
    step(json{{"error", "disk full"}});
    EXPECT_THAT(expectFinish("failed").toolCalls[0].arguments["summary"].get<std::string>(),
                AllOf(HasSubstr("step 1 (write_file hello.c) failed: disk full")));

    m_context.history.clear();
    step(json::object());
    json timedOut = commandResult(137, "", "still compiling");
    timedOut["timed_out"] = true;
    step(timedOut);
    EXPECT_THAT(expectFinish("failed").toolCalls[0].arguments["summary"].get<std::string>(),
                AllOf(HasSubstr("step 2"), HasSubstr("timed out"), HasSubstr("still compiling")));
}

TEST_F(ScriptedModelTest, FailsOnReadFileContentMismatch)
{
    step(json::object());
    step(commandResult(0));
    step(commandResult(0, "Hello\n"));
    step(json{{"content", "empty"}});
    EXPECT_THAT(expectFinish("failed").toolCalls[0].arguments["summary"].get<std::string>(),
                AllOf(HasSubstr("step 4 (read_file hello.c)"), HasSubstr("expected the content to contain \"main\"")));
}

TEST_F(ScriptedModelTest, ChecksExpectationsWithoutExplicitFinish)
{
    m_context.playbookToml = "goal = \"g\"\n[[step]]\ntool = \"run_command\"\ncommand = \"false\"\nexpect_exit = 1\n";
    ModelTurn turn = step(commandResult(1));
    EXPECT_EQ(turn.toolCalls[0].id, "call-1");
    ModelTurn last = expectFinish("succeeded");
    EXPECT_EQ(last.toolCalls[0].id, "call-2");
    m_context.history.push_back(Exchange{last, {json::object()}});
    EXPECT_FALSE(m_model.next(m_context));

    m_context.history.clear();
    step(commandResult(0));
    EXPECT_THAT(expectFinish("failed").toolCalls[0].arguments["summary"].get<std::string>(),
                AllOf(HasSubstr("expected exit code 1"), HasSubstr("exited with 0")));
}

TEST_F(ScriptedModelTest, SummaryStaysValidUtf8WhenOutputIsCut)
{
    step(json::object());
    std::string err = "ab";   // shifts the 8-byte pattern so the 400-byte tail starts mid-character
    for (int i = 0; i < 300; ++i)
        err += "\u2018x\u2019 ";   // three-byte characters, so a byte cut would land mid-sequence
    step(commandResult(1, "", err));
    ModelTurn turn = expectFinish("failed");
    EXPECT_NO_THROW((void)turn.toolCalls.at(0).arguments.dump());
}

TEST_F(ScriptedModelTest, RejectsABadPlaybook)
{
    m_context.playbookToml = "goal = \"g\"\n";
    auto turn = m_model.next(m_context);
    ASSERT_FALSE(turn);
    EXPECT_EQ(turn.error().code, ErrorCode::InvalidArgument);
    EXPECT_THAT(turn.error().message, AllOf(HasSubstr("s-1"), HasSubstr("no steps")));
}

} // namespace
} // namespace paddock::llm
