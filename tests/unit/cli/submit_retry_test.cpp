// paddockctl submit against scripted brokers (tests/support/scripted_session_service.h) that fail a
// submit the way a broker going away does: the submit carries a request_id, and is sent again with
// the same id after UNAVAILABLE or a deadline, on the same broker or on the next one of the list;
// it gives up after its attempts, naming the broker; --request-id is sent as given.

#include "cli/app.h"
#include "tests/support/scripted_session_service.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

namespace paddock::cli {
namespace {

using Answer = test::ScriptedSessionService::Answer;

class SubmitRetryTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        static int counter = 0;
        m_dir = std::filesystem::temp_directory_path()
            / ("paddock-submit-retry-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
        m_first = std::make_unique<test::ScriptedBroker>(m_dir / "first.sock");
        m_second = std::make_unique<test::ScriptedBroker>(m_dir / "second.sock");
        ASSERT_TRUE(m_first->serving() && m_second->serving());
    }

    void TearDown() override
    {
        m_first.reset();
        m_second.reset();
        std::filesystem::remove_all(m_dir);
    }

    int run(std::vector<std::string> args)
    {
        std::ostringstream out;
        std::ostringstream err;
        Environment env;
        env.defaultSocketPath = "/nonexistent/broker.sock";
        const int code = runCli(args, env, out, err);
        m_out = out.str();
        m_err = err.str();
        return code;
    }

    static std::vector<std::string> ids(const std::vector<v1::SubmitSessionRequest> &submits)
    {
        std::vector<std::string> out;
        for (const auto &submit : submits)
            out.push_back(submit.request_id());
        return out;
    }

    std::filesystem::path m_dir;
    std::unique_ptr<test::ScriptedBroker> m_first;
    std::unique_ptr<test::ScriptedBroker> m_second;
    std::string m_out;
    std::string m_err;
};

TEST_F(SubmitRetryTest, UnavailableIsSentAgainWithTheSameId)
{
    m_first->service().script({Answer::Unavailable});
    ASSERT_EQ(run({"--broker", m_first->address(), "submit", "--playbook", "hello-c"}), 0) << m_err;
    const auto submits = m_first->service().submits();
    ASSERT_EQ(submits.size(), 2u);
    const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
    EXPECT_TRUE(std::regex_match(submits[0].request_id(), uuid)) << submits[0].request_id();
    EXPECT_EQ(submits[1].request_id(), submits[0].request_id());
    EXPECT_EQ(submits[1].playbook(), "hello-c");
    EXPECT_EQ(m_out, "s-scripted-" + submits[0].request_id() + "\n");
    EXPECT_NE(m_err.find("no answer from the broker at " + m_first->address()), std::string::npos) << m_err;
}

TEST_F(SubmitRetryTest, ADeadlineIsSentAgainWithTheSameId)
{
    m_first->service().script({Answer::NoAnswer});
    ASSERT_EQ(run({"--broker", m_first->address(), "--timeout", "1", "submit", "--playbook", "hello-c"}), 0) << m_err;
    const auto submits = m_first->service().submits();
    ASSERT_EQ(submits.size(), 2u);
    EXPECT_EQ(submits[1].request_id(), submits[0].request_id());
    EXPECT_NE(m_err.find("Deadline Exceeded"), std::string::npos) << m_err;
}

TEST_F(SubmitRetryTest, TheRetryGoesToTheNextBrokerOfTheList)
{
    m_first->service().script({Answer::Unavailable, Answer::Unavailable, Answer::Unavailable});
    const std::string list = m_first->address() + "," + m_second->address();
    ASSERT_EQ(run({"--broker", list, "submit", "--playbook", "hello-c", "--output", "json"}), 0) << m_err;
    const auto first = m_first->service().submits();
    const auto second = m_second->service().submits();
    ASSERT_EQ(first.size(), 1u);
    ASSERT_EQ(second.size(), 1u);
    EXPECT_EQ(second[0].request_id(), first[0].request_id());
    EXPECT_NE(m_err.find("trying again at " + m_second->address()), std::string::npos) << m_err;
}

TEST_F(SubmitRetryTest, ABrokerThatIsDownIsSkippedBeforeAnyCall)
{
    const std::string list = "unix:" + (m_dir / "nobody.sock").string() + "," + m_second->address();
    ASSERT_EQ(run({"--broker", list, "submit", "--playbook", "hello-c"}), 0) << m_err;
    EXPECT_EQ(m_second->service().submits().size(), 1u);
    EXPECT_TRUE(m_first->service().submits().empty());
}

TEST_F(SubmitRetryTest, ItGivesUpAfterItsAttemptsNamingTheBroker)
{
    m_first->service().script(std::vector<Answer>(10, Answer::Unavailable));
    EXPECT_EQ(run({"--broker", m_first->address(), "submit", "--playbook", "hello-c"}), 1) << m_err;
    const auto submits = m_first->service().submits();
    ASSERT_EQ(submits.size(), 3u);
    EXPECT_EQ(ids(submits), std::vector<std::string>(3, submits[0].request_id()));
    EXPECT_NE(m_err.find("cannot submit the session: lost the broker at " + m_first->address()), std::string::npos)
        << m_err;
}

TEST_F(SubmitRetryTest, AScriptMayGiveItsOwnRequestId)
{
    ASSERT_EQ(run({"--broker", m_first->address(), "submit", "--playbook", "hello-c", "--request-id", "nightly-2026-12-04"}),
              0)
        << m_err;
    ASSERT_EQ(ids(m_first->service().submits()), std::vector<std::string>{"nightly-2026-12-04"});
    EXPECT_EQ(m_out, "s-scripted-nightly-2026-12-04\n");

    // Not with --file, whose lines have ids of their own.
    EXPECT_EQ(run({"--broker", m_first->address(), "submit", "--file", "-", "--request-id", "x"}), 2);
    EXPECT_NE(m_err.find("leave out --request-id"), std::string::npos) << m_err;
}

TEST(BrokerList, EachEntryIsCheckedAndNamed)
{
    std::ostringstream out;
    std::ostringstream err;
    Environment env;
    EXPECT_EQ(runCli({"--broker", "a.example:7443,,b.example:7443", "ls"}, env, out, err), 2);
    EXPECT_NE(err.str().find("entry 2 is empty"), std::string::npos) << err.str();
    std::ostringstream err2;
    EXPECT_EQ(runCli({"--broker", "a.example:7443,nonsense", "ls"}, env, out, err2), 2);
    EXPECT_NE(err2.str().find("bad broker address 'nonsense'"), std::string::npos) << err2.str();
    // Every socket missing: unreachable at once, naming the list.
    std::ostringstream err3;
    EXPECT_EQ(runCli({"--broker", "/nonexistent/a.sock,/nonexistent/b.sock", "ls"}, env, out, err3), 4);
    EXPECT_NE(err3.str().find("no broker at /nonexistent/a.sock,/nonexistent/b.sock"), std::string::npos) << err3.str();
}

} // namespace
} // namespace paddock::cli
