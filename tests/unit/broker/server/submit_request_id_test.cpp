// SubmitSession's request_id (proto/paddock/v1/sessions.proto) over a real gRPC server and store:
// the same id twice gives one session, the same id with another request is ALREADY_EXISTS naming
// the session, submits racing with one id (threads on one broker, or two brokers sharing one
// PostgreSQL database) make one session, and a bad id is refused naming the rule.

#include "tests/support/in_process_broker.h"
#include "tests/support/started_postgres.h"

#include "rpc/broker_stubs.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

namespace paddock::server {
namespace {

using namespace std::chrono_literals;

constexpr const char *kPlaybook = R"(
name = "one"
goal = "say hello"
[[step]]
tool = "run_command"
command = "echo hello"
)";

std::filesystem::path testDir(const std::string &suffix = {})
{
    auto dir = std::filesystem::temp_directory_path()
        / ("paddock-request-id-test-" + std::to_string(::getpid()) + "-"
           + ::testing::UnitTest::GetInstance()->current_test_info()->name() + suffix);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

v1::SubmitSessionRequest submitRequest(const std::string &requestId, const std::string &tag = "a")
{
    v1::SubmitSessionRequest request;
    request.set_playbook_toml(kPlaybook);
    request.add_tags(tag);
    request.set_request_id(requestId);
    return request;
}

grpc::Status submit(rpc::BrokerStubs &stubs, const v1::SubmitSessionRequest &request, v1::Session *session)
{
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 20s);
    return stubs.sessions->SubmitSession(&context, request, session);
}

int sessionCount(rpc::BrokerStubs &stubs)
{
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 20s);
    v1::ListSessionsRequest request;
    request.set_page_size(1000);
    v1::ListSessionsResponse response;
    const auto status = stubs.sessions->ListSessions(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.sessions_size();
}

// Submits request from one thread per stub (all released at once); the session ids answered.
std::vector<std::string> race(const std::vector<rpc::BrokerStubs *> &stubs, const v1::SubmitSessionRequest &request)
{
    std::atomic<bool> go{false};
    std::vector<std::string> ids(stubs.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < stubs.size(); ++i) {
        threads.emplace_back([&, i] {
            while (!go.load())
                std::this_thread::yield();
            v1::Session session;
            const auto status = submit(*stubs[i], request, &session);
            EXPECT_TRUE(status.ok()) << status.error_message();
            ids[i] = session.id();
        });
    }
    go = true;
    for (auto &thread : threads)
        thread.join();
    return ids;
}

class SubmitRequestIdTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = testDir();
        m_broker = std::make_unique<test::InProcessBroker>(m_dir);
        auto started = m_broker->start();
        ASSERT_TRUE(started) << started.error().message;
        m_stubs = std::make_unique<rpc::BrokerStubs>(m_broker->newChannel());
    }

    void TearDown() override
    {
        m_broker.reset();
        std::filesystem::remove_all(m_dir);
    }

    std::filesystem::path m_dir;
    std::unique_ptr<test::InProcessBroker> m_broker;
    std::unique_ptr<rpc::BrokerStubs> m_stubs;
};

TEST_F(SubmitRequestIdTest, TheSameIdTwiceGivesOneSession)
{
    v1::Session first;
    ASSERT_TRUE(submit(*m_stubs, submitRequest("7f0c1c9e-2d7a-4b1e-9a53-0f6f2f3e8b11"), &first).ok());
    v1::Session second;
    const auto status = submit(*m_stubs, submitRequest("7f0c1c9e-2d7a-4b1e-9a53-0f6f2f3e8b11"), &second);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(second.id(), first.id());
    EXPECT_EQ(second.goal(), "say hello");
    EXPECT_EQ(second.last_seq(), first.last_seq()) << "nothing was appended for the repeat";
    EXPECT_EQ(sessionCount(*m_stubs), 1);

    // Another id, or none, is another session.
    v1::Session other;
    ASSERT_TRUE(submit(*m_stubs, submitRequest("another"), &other).ok());
    EXPECT_NE(other.id(), first.id());
    v1::Session noId;
    ASSERT_TRUE(submit(*m_stubs, submitRequest(""), &noId).ok());
    ASSERT_TRUE(submit(*m_stubs, submitRequest(""), &noId).ok());
    EXPECT_EQ(sessionCount(*m_stubs), 4);
}

TEST_F(SubmitRequestIdTest, TheSameIdWithAnotherRequestIsRefusedNamingItsSession)
{
    v1::Session first;
    ASSERT_TRUE(submit(*m_stubs, submitRequest("r-1", "a"), &first).ok());
    v1::Session second;
    const auto status = submit(*m_stubs, submitRequest("r-1", "b"), &second);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS) << status.error_message();
    EXPECT_NE(status.error_message().find("request_id 'r-1' was used for session " + first.id()), std::string::npos)
        << status.error_message();
    EXPECT_NE(status.error_message().find("send a new request_id"), std::string::npos) << status.error_message();
    EXPECT_EQ(sessionCount(*m_stubs), 1);
}

TEST_F(SubmitRequestIdTest, SubmitsRacingWithOneIdMakeOneSession)
{
    std::vector<std::unique_ptr<rpc::BrokerStubs>> owned;
    std::vector<rpc::BrokerStubs *> stubs;
    for (int i = 0; i < 8; ++i) {
        owned.push_back(std::make_unique<rpc::BrokerStubs>(m_broker->newChannel()));
        stubs.push_back(owned.back().get());
    }
    for (int round = 0; round < 5; ++round) {
        const auto ids = race(stubs, submitRequest("race-" + std::to_string(round)));
        const std::set<std::string> distinct(ids.begin(), ids.end());
        EXPECT_EQ(distinct.size(), 1u) << "round " << round;
        EXPECT_FALSE(ids.front().empty());
    }
    EXPECT_EQ(sessionCount(*m_stubs), 5);
}

TEST_F(SubmitRequestIdTest, ABadIdIsRefusedNamingTheRule)
{
    v1::Session session;
    const auto tooLong = submit(*m_stubs, submitRequest(std::string(129, 'x')), &session);
    EXPECT_EQ(tooLong.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(tooLong.error_message().find("1 to 128 printable ASCII characters"), std::string::npos)
        << tooLong.error_message();
    const auto control = submit(*m_stubs, submitRequest("a\tb"), &session);
    EXPECT_EQ(control.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(sessionCount(*m_stubs), 0);
}

// Two brokers (each its own server and store) on one PostgreSQL database, as a team runs them.
class SubmitRequestIdTwoBrokersTest : public test::FreshPostgresTest {
protected:
    SubmitRequestIdTwoBrokersTest() : FreshPostgresTest("requestid") {}

    void SetUp() override
    {
        FreshPostgresTest::SetUp();
        if (IsSkipped() || HasFatalFailure())
            return;
        for (int i = 0; i < 2; ++i) {
            m_dirs.push_back(testDir("-" + std::to_string(i)));
            auto broker = std::make_unique<test::InProcessBroker>(m_dirs.back());
            broker->useStore(conninfo());
            auto started = broker->start();
            ASSERT_TRUE(started) << started.error().message;
            m_stubs.push_back(std::make_unique<rpc::BrokerStubs>(broker->newChannel()));
            m_brokers.push_back(std::move(broker));
        }
    }

    void TearDown() override
    {
        m_brokers.clear();
        for (const auto &dir : m_dirs)
            std::filesystem::remove_all(dir);
    }

    std::vector<std::filesystem::path> m_dirs;
    std::vector<std::unique_ptr<test::InProcessBroker>> m_brokers;
    std::vector<std::unique_ptr<rpc::BrokerStubs>> m_stubs;
};

TEST_F(SubmitRequestIdTwoBrokersTest, SubmitsRacingOnTwoBrokersMakeOneSession)
{
    // The retry of a submit answered by the other broker.
    v1::Session first;
    ASSERT_TRUE(submit(*m_stubs[0], submitRequest("moved"), &first).ok());
    v1::Session again;
    const auto status = submit(*m_stubs[1], submitRequest("moved"), &again);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(again.id(), first.id());

    std::vector<std::unique_ptr<rpc::BrokerStubs>> owned;
    std::vector<rpc::BrokerStubs *> stubs;
    for (int i = 0; i < 6; ++i) {
        owned.push_back(std::make_unique<rpc::BrokerStubs>(m_brokers[static_cast<size_t>(i % 2)]->newChannel()));
        stubs.push_back(owned.back().get());
    }
    for (int round = 0; round < 10; ++round) {
        const auto ids = race(stubs, submitRequest("race-" + std::to_string(round)));
        const std::set<std::string> distinct(ids.begin(), ids.end());
        EXPECT_EQ(distinct.size(), 1u) << "round " << round;
    }
    EXPECT_EQ(sessionCount(*m_stubs[0]), 11);
    EXPECT_EQ(sessionCount(*m_stubs[1]), 11);
}

} // namespace
} // namespace paddock::server
