// paddockctl submit --file against the real paddockd: every line of a JSON Lines file becomes a
// session; a malformed line stops the file before anything is sent; a line the broker refuses is
// named with the broker's message while the others go in. The broker's pool is an address nothing
// listens on, so the sessions stay queued (waiting for a pool) and nothing runs.
#include "tests/integration/harness.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace paddock::test {
namespace {

using nlohmann::json;

class SubmitFile : public ::testing::Test {
protected:
    void SetUp() override
    {
        const auto missing = missingBinaries({"paddockd", "paddockctl"});
        if (!missing.empty())
            GTEST_SKIP() << "not built: " << missing.front();
        m_dir = std::make_unique<TempDir>("paddock-submit-file");
        auto broker = startBroker(*m_dir, "127.0.0.1:" + std::to_string(freeLoopbackPort()));
        ASSERT_TRUE(broker) << "cannot start paddockd: " << broker.error().message;
        m_broker = std::make_unique<BrokerProcess>(std::move(*broker));
    }

    void TearDown() override
    {
        if (m_broker && HasFailure())
            std::cerr << "---- paddockd log (tail) ----\n" << m_broker->daemon.logTail(60);
        if (m_broker)
            m_broker->daemon.terminate();
    }

    CliResult cli(std::vector<std::string> args, const std::optional<std::string> &input = std::nullopt)
    {
        args.insert(args.begin(), {"--broker", m_broker->address});
        return runCliWithInput(args, input);
    }

    std::string writeLines(const std::vector<std::string> &lines)
    {
        const auto path = *m_dir / "sessions.jsonl";
        std::ofstream file(path);
        for (const auto &line : lines)
            file << line << "\n";
        return path.string();
    }

    // Every session the broker holds, by id.
    std::map<std::string, json> sessions()
    {
        const CliResult listed = cli({"ls", "--all", "--output", "json"});
        EXPECT_EQ(listed.exitCode, 0) << listed.err;
        std::map<std::string, json> out;
        for (auto &session : json::parse(listed.out, nullptr, false))
            out[session["id"].get<std::string>()] = session;
        return out;
    }

    std::unique_ptr<TempDir> m_dir;
    std::unique_ptr<BrokerProcess> m_broker;
};

TEST_F(SubmitFile, HundredSessionsFromAFileAreAllCreated)
{
    std::vector<std::string> lines;
    for (int i = 1; i <= 100; ++i) {
        lines.push_back(json{{"playbook", "hello-c"}, {"tags", {"bulk", "n" + std::to_string(i)}}}.dump());
        if (i == 50)
            lines.push_back("");   // blank lines are allowed, and still counted
    }
    const CliResult submitted = cli({"submit", "--file", writeLines(lines)});
    ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
    const auto ids = splitLines(submitted.out);
    ASSERT_EQ(ids.size(), 100u) << submitted.out;
    EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 100u);

    const auto held = sessions();
    EXPECT_EQ(held.size(), 100u);
    // In line order: the n-th id printed is the session of the n-th line.
    for (size_t i = 0; i < ids.size(); ++i) {
        ASSERT_TRUE(held.contains(ids[i])) << ids[i];
        const json &session = held.at(ids[i]);
        EXPECT_EQ(session["playbook"], "hello-c");
        EXPECT_EQ(session["tags"], json({"bulk", "n" + std::to_string(i + 1)})) << session.dump();
    }
}

TEST_F(SubmitFile, JsonOutputIsAnArrayOfTheSessionsWithTheirLines)
{
    const std::string playbook = (*m_dir / "mine.toml").string();
    std::ofstream(playbook) << "name = \"mine\"\ngoal = \"say hi\"\n[[step]]\ntool = \"run_command\"\ncommand = \"echo hi\"\n";
    const CliResult submitted =
        cli({"submit", "--file", "-", "--output", "json"},
            json{{"playbook", playbook}}.dump() + "\n" + json{{"playbook", "inspect"}, {"budget", "0.5"}}.dump() + "\n");
    ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
    const json created = json::parse(submitted.out);
    ASSERT_EQ(created.size(), 2u) << submitted.out;
    EXPECT_EQ(created[0]["line"], 1);
    EXPECT_EQ(created[0]["playbook"], "mine");
    EXPECT_EQ(created[0]["goal"], "say hi");
    EXPECT_EQ(created[1]["line"], 2);
    EXPECT_EQ(created[1]["playbook"], "inspect");
    EXPECT_EQ(sessions().size(), 2u);
}

TEST_F(SubmitFile, MalformedLineSevenIsNamedAndNothingIsSubmitted)
{
    std::vector<std::string> lines(10, R"({"playbook": "hello-c"})");
    lines[6] = R"({"playbook": "hello-c", )";   // line 7: cut short
    const CliResult submitted = cli({"submit", "--file", writeLines(lines)});
    EXPECT_EQ(submitted.exitCode, 5) << submitted.err;
    EXPECT_NE(submitted.err.find("sessions.jsonl:7: not valid JSON"), std::string::npos) << submitted.err;
    EXPECT_NE(submitted.err.find("nothing was submitted"), std::string::npos) << submitted.err;
    EXPECT_EQ(submitted.out, "");
    EXPECT_TRUE(sessions().empty());

    // A line that is JSON but says nothing to run is named the same way, before anything is sent.
    lines[6] = R"({"tier": "lite"})";
    const CliResult incomplete = cli({"submit", "--file", writeLines(lines)});
    EXPECT_EQ(incomplete.exitCode, 5) << incomplete.err;
    EXPECT_NE(incomplete.err.find(":7: say what to run"), std::string::npos) << incomplete.err;
    EXPECT_TRUE(sessions().empty());
}

TEST_F(SubmitFile, RefusedLineIsNamedWithTheBrokersMessageAndTheOthersGoIn)
{
    std::vector<std::string> lines(10, R"({"playbook": "hello-c"})");
    lines[3] = R"({"playbook": "hello-c", "agent": "nobody"})";       // line 4: no such agent
    lines[8] = R"({"playbook": "no-such-playbook"})";                 // line 9: the broker ships none
    const CliResult submitted = cli({"submit", "--file", writeLines(lines)});
    EXPECT_EQ(submitted.exitCode, 5) << submitted.err;   // the first refused line's: invalid argument
    EXPECT_NE(submitted.err.find("sessions.jsonl:4: cannot submit the session: unknown agent 'nobody'"),
              std::string::npos)
        << submitted.err;
    EXPECT_NE(submitted.err.find("sessions.jsonl:9: cannot submit the session"), std::string::npos) << submitted.err;
    EXPECT_NE(submitted.err.find("8 of 10 sessions"), std::string::npos) << submitted.err;
    EXPECT_NE(submitted.err.find("lines 4, 9"), std::string::npos) << submitted.err;
    EXPECT_EQ(splitLines(submitted.out).size(), 8u) << submitted.out;
    EXPECT_EQ(sessions().size(), 8u);
}

} // namespace
} // namespace paddock::test
