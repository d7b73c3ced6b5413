// submit --file's checks of a JSON Lines file, before anything is sent (cli/submit_file.h), and the
// command line that asks for it. The calls themselves: tests/integration/submit_file_test.cpp.
#include "cli/app.h"
#include "cli/submit_file.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace paddock::cli {
namespace {

TEST(SubmitFileParse, EveryFieldOfTheFlagsAndBlankLines)
{
    const SubmitFile parsed = parseSubmitFile(
        "{\"playbook\": \"hello-c\", \"tier\": \"lite\", \"agent\": \"bob\", \"tags\": [\"a\", \"b\"], "
        "\"secrets\": [\"TOKEN\"], \"budget\": \"0.05\"}\n"
        "\n"
        "   \r\n"
        "{\"goal\": \"fix the bug\", \"model\": \"openai\", \"budget\": 1.5}\r\n"
        "{\"playbook_toml\": \"name = 'x'\"}");
    ASSERT_TRUE(parsed.problems.empty()) << parsed.problems.front().message;
    ASSERT_EQ(parsed.lines.size(), 3u);

    const auto &first = parsed.lines[0];
    EXPECT_EQ(first.line, 1);
    EXPECT_EQ(first.request.playbook(), "hello-c");
    EXPECT_EQ(first.request.tier(), "lite");
    EXPECT_EQ(first.request.agent(), "bob");
    ASSERT_EQ(first.request.tags_size(), 2);
    EXPECT_EQ(first.request.tags(1), "b");
    ASSERT_EQ(first.request.secrets_size(), 1);
    EXPECT_EQ(first.request.budget_micros(), 50000);

    EXPECT_EQ(parsed.lines[1].line, 4);   // blank lines count
    EXPECT_EQ(parsed.lines[1].request.goal(), "fix the bug");
    EXPECT_EQ(parsed.lines[1].request.model(), "openai");
    EXPECT_EQ(parsed.lines[1].request.budget_micros(), 1500000);
    EXPECT_EQ(parsed.lines[2].line, 5);
    EXPECT_EQ(parsed.lines[2].request.playbook_toml(), "name = 'x'");
}

TEST(SubmitFileParse, EachLineGetsARequestIdOfItsOwn)
{
    std::string text;
    for (int i = 0; i < 50; ++i)
        text += "{\"playbook\": \"hello-c\"}\n";
    const SubmitFile parsed = parseSubmitFile(text);
    ASSERT_EQ(parsed.lines.size(), 50u);
    const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
    std::set<std::string> ids;
    for (const auto &line : parsed.lines) {
        EXPECT_TRUE(std::regex_match(line.request.request_id(), uuid)) << line.request.request_id();
        ids.insert(line.request.request_id());
    }
    EXPECT_EQ(ids.size(), 50u);
}

TEST(SubmitFileParse, APlaybookFileSendsItsTextOnce)
{
    const auto dir = std::filesystem::temp_directory_path() / ("paddock-submit-file-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto path = (dir / "mine.toml").string();
    std::ofstream(path) << "name = \"mine\"\n";
    const SubmitFile parsed = parseSubmitFile("{\"playbook\": \"" + path + "\"}\n{\"playbook\": \"" + path + "\"}\n");
    std::filesystem::remove_all(dir);
    ASSERT_TRUE(parsed.problems.empty()) << parsed.problems.front().message;
    ASSERT_EQ(parsed.lines.size(), 2u);
    for (const auto &line : parsed.lines) {
        EXPECT_EQ(line.request.playbook(), "");
        EXPECT_EQ(line.request.playbook_toml(), "name = \"mine\"\n");
        EXPECT_EQ(line.playbookFile, path);
    }
}

TEST(SubmitFileParse, EveryBadLineIsNamedByItsNumber)
{
    const SubmitFile parsed = parseSubmitFile("{\"playbook\": \"hello-c\"}\n"   // 1: fine
                                              "{\"playbook\": \"hello-c\"\n"    // 2: not JSON
                                              "[1, 2]\n"                        // 3: not an object
                                              "{\"tier\": \"lite\"}\n"          // 4: nothing to run
                                              "{\"goal\": \"g\"}\n"             // 5: a goal without a model
                                              "{\"playbook\": \"x\", \"tag\": [\"a\"]}\n"      // 6: unknown field
                                              "{\"playbook\": \"x\", \"tags\": \"a\"}\n"       // 7: not an array
                                              "{\"playbook\": 7}\n"                            // 8: not a string
                                              "{\"playbook\": \"x\", \"budget\": \"lots\"}\n"  // 9: not dollars
                                              "{\"playbook\": \"./nowhere.toml\"}\n"           // 10: no such file
                                              "{\"playbook\": \"x\", \"playbook_toml\": \"y\"}\n");   // 11: both
    std::map<int, SubmitLineProblem> byLine;
    for (const auto &problem : parsed.problems)
        byLine[problem.line] = problem;
    EXPECT_EQ(parsed.lines.size(), 1u);
    ASSERT_EQ(byLine.size(), 10u);
    EXPECT_EQ(byLine[2].message.rfind("not valid JSON: ", 0), 0u) << byLine[2].message;
    EXPECT_NE(byLine[3].message.find("expected a JSON object"), std::string::npos) << byLine[3].message;
    EXPECT_NE(byLine[4].message.find("say what to run"), std::string::npos) << byLine[4].message;
    EXPECT_NE(byLine[5].message.find("\"goal\" needs \"model\""), std::string::npos) << byLine[5].message;
    EXPECT_NE(byLine[6].message.find("unknown field \"tag\""), std::string::npos) << byLine[6].message;
    EXPECT_NE(byLine[7].message.find("array"), std::string::npos) << byLine[7].message;
    EXPECT_NE(byLine[8].message.find("give a string"), std::string::npos) << byLine[8].message;
    EXPECT_NE(byLine[9].message.find("US dollars"), std::string::npos) << byLine[9].message;
    EXPECT_EQ(byLine[10].code, ExitCode::NotFound);
    EXPECT_NE(byLine[10].message.find("no playbook file ./nowhere.toml"), std::string::npos) << byLine[10].message;
    EXPECT_NE(byLine[11].message.find("not both"), std::string::npos) << byLine[11].message;
}

TEST(SubmitFileParse, AFileOfBadLinesStopsBeforeTheBroker)
{
    // Nothing answers at the address: the file's problems are found and reported without a call.
    Invocation inv;
    inv.command = Command::Submit;
    inv.submitFile = "-";
    rpc::BrokerStubs stubs(grpc::CreateChannel("unix:/nonexistent/broker.sock", grpc::InsecureChannelCredentials()));
    const BrokerCall call{stubs, [](grpc::ClientContext &) {}, [] { return false; }, "unix:/nonexistent", {}};
    std::istringstream input("{\"playbook\": \"hello-c\"}\nnope\n");
    std::ostringstream out, err;
    EXPECT_EQ(runSubmitFile(inv, call, input, false, out, err), 5);
    EXPECT_NE(err.str().find("stdin:2: not valid JSON"), std::string::npos) << err.str();
    EXPECT_NE(err.str().find("nothing was submitted"), std::string::npos) << err.str();
    EXPECT_EQ(out.str(), "");
}

TEST(CommandLine, SubmitFileTakesNoPerSessionFlags)
{
    std::ostringstream out, err;
    auto alone = parseCommandLine({"submit", "--file", "jobs.jsonl"}, out, err);
    ASSERT_TRUE(alone.invocation) << err.str();
    EXPECT_EQ(alone.invocation->submitFile, "jobs.jsonl");

    for (const std::vector<std::string> &args : {std::vector<std::string>{"submit", "--file", "-", "--playbook", "x"},
                                                 std::vector<std::string>{"submit", "--file", "-", "-f"},
                                                 std::vector<std::string>{"submit", "--file", "-", "--tag", "a"}}) {
        std::ostringstream out2, err2;
        auto mixed = parseCommandLine(args, out2, err2);
        EXPECT_FALSE(mixed.invocation);
        EXPECT_EQ(mixed.exitCode, 2);
        EXPECT_NE(err2.str().find("--file "), std::string::npos) << err2.str();
        EXPECT_NE(err2.str().find(args[3] == "-f" ? "leave out -f" : "leave out --playbook"), std::string::npos)
            << err2.str();
    }
}

} // namespace
} // namespace paddock::cli
