// listSessions: filters, keyset paging newest first, page size clamp, bad tokens.
#include "store_test_support.h"

#include <set>

namespace paddock::store::test {
namespace {

class SessionListTest : public StoreTest {
protected:
    void SetUp() override
    {
        StoreTest::SetUp();
        if (IsSkipped() || HasFatalFailure())
            return;
        m_store = open();
        ASSERT_TRUE(m_store);
        // 25 sessions: agents alternate, every fifth runs, every seventh is cancelled.
        for (int i = 0; i < 25; ++i) {
            const std::string id = "sess-" + std::to_string(100 + i);
            const std::string agent = i % 2 ? "tester" : "builder";
            const std::string goal = i == 3 ? "compile the kernel" : "goal " + std::to_string(i);
            const std::string playbook = i == 4 ? "hello-kernel" : "";
            ASSERT_TRUE(m_store->appendSync(createRequest(id, agent, goal, playbook)));
            if (i % 5 == 0) {
                ASSERT_TRUE(m_store->appendSync(statusRequest(id, "running")));
            }
            if (i % 7 == 0) {
                ASSERT_TRUE(m_store->appendSync(statusRequest(id, "cancelled")));
            }
        }
    }

    std::vector<std::string> all(SessionQuery query)
    {
        std::vector<std::string> ids;
        for (int pages = 0; pages < 100; ++pages) {
            auto page = m_store->listSessions(query);
            EXPECT_TRUE(page) << page.error().message;
            if (!page)
                break;
            for (const auto &session : page->sessions)
                ids.push_back(session.id);
            if (page->nextPageToken.empty())
                break;
            query.pageToken = page->nextPageToken;
        }
        return ids;
    }

    std::unique_ptr<EventStore> m_store;
};

PADDOCK_BOTH_STORE_BACKENDS(SessionListTest);

TEST_P(SessionListTest, PagesNewestFirstWithoutGapsOrRepeats)
{
    SessionQuery query;
    query.pageSize = 10;
    auto page = m_store->listSessions(query);
    ASSERT_TRUE(page);
    ASSERT_EQ(page->sessions.size(), 10u);
    EXPECT_EQ(page->sessions.front().id, "sess-124");
    EXPECT_FALSE(page->nextPageToken.empty());

    const auto ids = all(query);
    ASSERT_EQ(ids.size(), 25u);
    for (int i = 0; i < 25; ++i)
        EXPECT_EQ(ids[static_cast<size_t>(i)], "sess-" + std::to_string(124 - i));

    query.pageSize = 25;
    page = m_store->listSessions(query);
    ASSERT_TRUE(page);
    EXPECT_EQ(page->sessions.size(), 25u);
    EXPECT_TRUE(page->nextPageToken.empty());
}

TEST_P(SessionListTest, PageSizeIsClamped)
{
    SessionQuery query;
    query.pageSize = 0;
    auto page = m_store->listSessions(query);
    ASSERT_TRUE(page);
    EXPECT_EQ(page->sessions.size(), 1u);
    query.pageSize = 1'000'000;
    page = m_store->listSessions(query);
    ASSERT_TRUE(page);
    EXPECT_EQ(page->sessions.size(), 25u);
}

TEST_P(SessionListTest, BadPageTokenIsInvalidArgument)
{
    for (const char *token : {"garbage", "zz", "763a", "76313a2d31", "v1:5"}) {
        SessionQuery query;
        query.pageToken = token;
        auto page = m_store->listSessions(query);
        ASSERT_FALSE(page) << token;
        EXPECT_EQ(page.error().code, ErrorCode::InvalidArgument) << token;
        EXPECT_NE(page.error().message.find("page token"), std::string::npos);
    }
}

TEST_P(SessionListTest, FiltersByStatus)
{
    SessionQuery query;
    query.statuses = {core::SessionStatus::Cancelled};
    EXPECT_EQ(all(query), (std::vector<std::string>{"sess-121", "sess-114", "sess-107", "sess-100"}));
    query.statuses = {core::SessionStatus::Running};
    EXPECT_EQ(all(query), (std::vector<std::string>{"sess-120", "sess-115", "sess-110", "sess-105"}));
    query.statuses = {core::SessionStatus::Running, core::SessionStatus::Cancelled};
    query.pageSize = 3;   // paging with a filter
    EXPECT_EQ(all(query).size(), 8u);
    query.statuses = {core::SessionStatus::Queued};
    EXPECT_EQ(all(query).size(), 25u - 8u);
}

TEST_P(SessionListTest, FiltersByAgentAndText)
{
    SessionQuery query;
    query.agent = "tester";
    EXPECT_EQ(all(query).size(), 12u);
    query.agent = "nobody";
    EXPECT_TRUE(all(query).empty());

    query = {};
    query.text = "kernel";   // goal of 103, playbook of 104
    EXPECT_EQ(all(query), (std::vector<std::string>{"sess-104", "sess-103"}));
    query.text = "sess-11";   // id substring
    EXPECT_EQ(all(query).size(), 10u);
    query.agent = "builder";
    query.statuses = {core::SessionStatus::Running};
    EXPECT_EQ(all(query), (std::vector<std::string>{"sess-110"}));
}

TEST_P(SessionListTest, ProjectionFollowsAppends)
{
    ASSERT_TRUE(m_store->appendSync(statusRequest("sess-101", "succeeded")));
    SessionQuery query;
    query.statuses = {core::SessionStatus::Succeeded};
    auto page = m_store->listSessions(query);
    ASSERT_TRUE(page);
    ASSERT_EQ(page->sessions.size(), 1u);
    EXPECT_EQ(page->sessions[0].id, "sess-101");
    EXPECT_EQ(page->sessions[0].agent, "tester");
    EXPECT_EQ(page->sessions[0].lastSeq, 2);
}

} // namespace
} // namespace paddock::store::test
