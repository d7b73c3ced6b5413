// The submit_requests table (broker/store/submit_requests.h) on both backends: its row commits with
// the session it names or not at all, its key refuses a second session for one (principal,
// request_id) whole (no event, no projection row), concurrent creates with one id make one session,
// and on PostgreSQL two stores on one database (two brokers) racing make one session too.

#include "store_test_support.h"

#include "broker/store/submit_requests.h"

#include <atomic>
#include <thread>

namespace paddock::store::test {
namespace {

class SubmitRequestsTest : public StoreTest {
protected:
    // A create of sessionId carrying the row of (principal, requestId).
    static AppendRequest createWithRequestId(const std::string &sessionId, const std::string &principal,
                                             const std::string &requestId)
    {
        AppendRequest request = createRequest(sessionId);
        request.writes.push_back(submitRequestInsert({principal, requestId, sessionId, "fp-" + requestId, 1700000000000}));
        return request;
    }

    static int64_t sessionCount(EventStore &store)
    {
        auto rows = store.query({"SELECT count(*) FROM sessions", {}});
        EXPECT_TRUE(rows) << rows.error().message;
        return rows ? std::get<int64_t>(rows->at(0).at(0)) : -1;
    }

    // Appends the creates from one thread each, all released at once; the ids of those that committed.
    static std::vector<std::string> race(const std::vector<std::pair<EventStore *, AppendRequest>> &creates)
    {
        std::atomic<bool> go{false};
        std::vector<std::string> committed(creates.size());
        std::vector<std::thread> threads;
        for (size_t i = 0; i < creates.size(); ++i) {
            threads.emplace_back([&, i] {
                while (!go.load())
                    std::this_thread::yield();
                auto appended = creates[i].first->appendSync(creates[i].second);
                if (appended)
                    committed[i] = creates[i].second.sessionId;
            });
        }
        go = true;
        for (auto &thread : threads)
            thread.join();
        std::erase(committed, std::string());
        return committed;
    }
};

PADDOCK_BOTH_STORE_BACKENDS(SubmitRequestsTest);

TEST_P(SubmitRequestsTest, TheRowCommitsWithItsSession)
{
    auto store = open();
    ASSERT_TRUE(store);
    auto none = findSubmitRequest(*store, "alice", "r-1");
    ASSERT_TRUE(none) << none.error().message;
    EXPECT_FALSE(*none);

    ASSERT_TRUE(store->appendSync(createWithRequestId("s1", "alice", "r-1")));
    auto found = findSubmitRequest(*store, "alice", "r-1");
    ASSERT_TRUE(found) << found.error().message;
    ASSERT_TRUE(*found);
    EXPECT_EQ((*found)->sessionId, "s1");
    EXPECT_EQ((*found)->fingerprint, "fp-r-1");
    EXPECT_EQ((*found)->createdUnixMs, 1700000000000);

    // Request ids are per principal: bob's r-1 is another request.
    auto bobs = findSubmitRequest(*store, "bob", "r-1");
    ASSERT_TRUE(bobs);
    EXPECT_FALSE(*bobs);
    ASSERT_TRUE(store->appendSync(createWithRequestId("s2", "bob", "r-1")));
    EXPECT_EQ(sessionCount(*store), 2);

    // Kept across a restart.
    store->close();
    store = open();
    ASSERT_TRUE(store);
    found = findSubmitRequest(*store, "alice", "r-1");
    ASSERT_TRUE(found && *found);
    EXPECT_EQ((*found)->sessionId, "s1");
}

TEST_P(SubmitRequestsTest, ASecondSessionForOneIdIsRefusedWhole)
{
    auto store = open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->appendSync(createWithRequestId("s1", "alice", "r-1")));

    auto again = store->appendSync(createWithRequestId("s2", "alice", "r-1"));
    ASSERT_FALSE(again);
    EXPECT_NE(again.error().message.find("submit_requests"), std::string::npos) << again.error().message;
    EXPECT_NE(again.error().message.find("nothing of this call was recorded"), std::string::npos)
        << again.error().message;
    EXPECT_EQ(store->getSession("s2").error().code, ErrorCode::NotFound);
    EXPECT_EQ(sessionCount(*store), 1);
    auto events = store->query({"SELECT count(*) FROM events WHERE session_id = 's2'", {}});
    ASSERT_TRUE(events);
    EXPECT_EQ(std::get<int64_t>(events->at(0).at(0)), 0);

    // And the other way round: a create refused for its session id leaves no request row behind.
    auto taken = store->appendSync(createWithRequestId("s1", "alice", "r-2"));
    ASSERT_FALSE(taken);
    EXPECT_EQ(taken.error().code, ErrorCode::AlreadyExists);
    auto orphan = findSubmitRequest(*store, "alice", "r-2");
    ASSERT_TRUE(orphan);
    EXPECT_FALSE(*orphan);

    // The store goes on: the next create commits.
    EXPECT_TRUE(store->appendSync(createWithRequestId("s3", "alice", "r-3")));
}

TEST_P(SubmitRequestsTest, ConcurrentCreatesWithOneIdMakeOneSession)
{
    // A wide group window, so that several of the creates share one transaction.
    auto store = open({10000, 20000});
    ASSERT_TRUE(store);
    for (int round = 0; round < 5; ++round) {
        const std::string requestId = "r-" + std::to_string(round);
        std::vector<std::pair<EventStore *, AppendRequest>> creates;
        for (int i = 0; i < 8; ++i)
            creates.emplace_back(store.get(), createWithRequestId(requestId + "-s" + std::to_string(i), "alice", requestId));
        const auto committed = race(creates);
        ASSERT_EQ(committed.size(), 1u) << "round " << round;
        auto found = findSubmitRequest(*store, "alice", requestId);
        ASSERT_TRUE(found && *found);
        EXPECT_EQ((*found)->sessionId, committed.front());
    }
    EXPECT_EQ(sessionCount(*store), 5);
}

TEST_P(SubmitRequestsTest, TwoStoresOnOneDatabaseRacingMakeOneSession)
{
    if (!postgres())
        GTEST_SKIP() << "a SQLite file has one broker (its lock file): two stores race only on PostgreSQL";
    auto first = open();
    auto second = open();
    ASSERT_TRUE(first && second);
    for (int round = 0; round < 10; ++round) {
        const std::string requestId = "r-" + std::to_string(round);
        std::vector<std::pair<EventStore *, AppendRequest>> creates;
        for (int i = 0; i < 4; ++i) {
            EventStore *store = i % 2 ? second.get() : first.get();
            creates.emplace_back(store, createWithRequestId(requestId + "-s" + std::to_string(i), "alice", requestId));
        }
        const auto committed = race(creates);
        ASSERT_EQ(committed.size(), 1u) << "round " << round;
        for (EventStore *store : {first.get(), second.get()}) {
            auto found = findSubmitRequest(*store, "alice", requestId);
            ASSERT_TRUE(found && *found);
            EXPECT_EQ((*found)->sessionId, committed.front());
        }
    }
    EXPECT_EQ(sessionCount(*first), 10);
}

} // namespace
} // namespace paddock::store::test
