// Leases: exclusivity, expiry, backoff, waking on commit, fairness; on both backends.
#include "store_test_support.h"

#include <set>
#include <thread>

namespace paddock::store::test {
namespace {

constexpr int64_t kLongMs = 60'000;

class LeaseTest : public StoreTest {};
PADDOCK_BOTH_STORE_BACKENDS(LeaseTest);

TEST_P(LeaseTest, OneWorkerPerSession)
{
    auto store = open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->appendSync(createRequest("a")));
    ASSERT_TRUE(store->appendSync(createRequest("b")));
    auto first = store->acquireLease("w1", kLongMs, 0);
    auto second = store->acquireLease("w2", kLongMs, 0);
    ASSERT_TRUE(first && second);
    EXPECT_NE(first->sessionId, second->sessionId);
    EXPECT_EQ(first->workerId, "w1");
    EXPECT_NE(first->token, second->token);
    EXPECT_FALSE(store->acquireLease("w3", kLongMs, 0));

    // A commit to a leased session keeps it with its holder.
    ASSERT_TRUE(store->appendSync(statusRequest(first->sessionId, "running")));
    EXPECT_FALSE(store->acquireLease("w3", kLongMs, 0));

    EXPECT_TRUE(store->renewLease(*first, kLongMs));
    Lease forged = *first;
    forged.token += 1000;
    EXPECT_FALSE(store->renewLease(forged, kLongMs));
    store->releaseLease(forged);   // a wrong token releases nothing
    EXPECT_FALSE(store->acquireLease("w3", kLongMs, 0));

    store->releaseLease(*first);
    auto third = store->acquireLease("w3", kLongMs, 0);
    ASSERT_TRUE(third);
    EXPECT_EQ(third->sessionId, first->sessionId);
    EXPECT_FALSE(store->renewLease(*first, kLongMs));   // the old grant is void
}

TEST_P(LeaseTest, OnlySessionsThatNeedWork)
{
    auto store = open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->appendSync(createRequest("paused")));
    ASSERT_TRUE(store->appendSync(statusRequest("paused", "paused")));
    ASSERT_TRUE(store->appendSync(createRequest("done")));
    ASSERT_TRUE(store->appendSync(statusRequest("done", "succeeded")));
    EXPECT_FALSE(store->acquireLease("w", kLongMs, 0));

    // A finished session still holding a sandbox needs a worker to release it.
    ASSERT_TRUE(store->appendSync(createRequest("holding")));
    ASSERT_TRUE(store->appendSync(appendRequest(
        "holding", AppendRequest::kAnySeq,
        {event(core::kind::SandboxClaimed, R"({"sandbox_id":"sb"})"),
         event(core::kind::StateChanged, R"({"status":"failed"})")})));
    auto lease = store->acquireLease("w", kLongMs, 0);
    ASSERT_TRUE(lease);
    EXPECT_EQ(lease->sessionId, "holding");
    ASSERT_TRUE(store->appendSync(appendRequest("holding", AppendRequest::kAnySeq, {event(core::kind::SandboxReleased)})));
    store->releaseLease(*lease);
    EXPECT_FALSE(store->acquireLease("w", kLongMs, 0));

    ASSERT_TRUE(store->appendSync(statusRequest("paused", "running")));
    lease = store->acquireLease("w", kLongMs, 0);
    ASSERT_TRUE(lease);
    EXPECT_EQ(lease->sessionId, "paused");
}

TEST_P(LeaseTest, ExpiredLeaseGoesToTheNextWorker)
{
    auto store = open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->appendSync(createRequest("a")));
    auto dead = store->acquireLease("dead-worker", 1, 0);
    ASSERT_TRUE(dead);
    // Waits until the 1 ms lease runs out, however long the machine takes to get there.
    auto next = store->acquireLease("w2", kLongMs, kLongMs);
    ASSERT_TRUE(next);
    EXPECT_EQ(next->sessionId, "a");
    EXPECT_NE(next->token, dead->token);
    EXPECT_FALSE(store->renewLease(*dead, kLongMs));
    store->releaseLease(*dead);   // void: the new holder keeps it
    EXPECT_FALSE(store->acquireLease("w3", kLongMs, 0));
    EXPECT_TRUE(store->renewLease(*next, kLongMs));
}

TEST_P(LeaseTest, RetryAfterHoldsTheSessionBack)
{
    auto store = open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->appendSync(createRequest("a")));
    auto lease = store->acquireLease("w", kLongMs, 0);
    ASSERT_TRUE(lease);
    store->releaseLease(*lease, kLongMs);
    EXPECT_FALSE(store->acquireLease("w", kLongMs, 0));

    ASSERT_TRUE(store->appendSync(createRequest("b")));
    auto other = store->acquireLease("w", kLongMs, 0);
    ASSERT_TRUE(other);
    EXPECT_EQ(other->sessionId, "b");
    store->releaseLease(*other, 1);
    auto again = store->acquireLease("w", kLongMs, kLongMs);   // wakes when the 1 ms backoff ends
    ASSERT_TRUE(again);
    EXPECT_EQ(again->sessionId, "b");
}

TEST_P(LeaseTest, WaitingWorkerWakesOnCommit)
{
    auto store = open();
    ASSERT_TRUE(store);
    std::optional<Lease> got;
    std::thread worker([&] { got = store->acquireLease("w", kLongMs, kLongMs); });
    ASSERT_TRUE(store->appendSync(createRequest("late")));
    worker.join();
    ASSERT_TRUE(got);
    EXPECT_EQ(got->sessionId, "late");
}

TEST_P(LeaseTest, CloseWakesWaitingWorkers)
{
    auto store = open();
    ASSERT_TRUE(store);
    std::optional<Lease> got = Lease{};
    std::thread worker([&] { got = store->acquireLease("w", kLongMs, kLongMs); });
    store->close();
    worker.join();
    EXPECT_FALSE(got);
}

TEST_P(LeaseTest, RoundRobinSoNoSessionStarves)
{
    auto store = open();
    ASSERT_TRUE(store);
    for (const char *id : {"a", "b", "c"})
        ASSERT_TRUE(store->appendSync(createRequest(id)));
    std::vector<std::string> order;
    for (int i = 0; i < 9; ++i) {
        auto lease = store->acquireLease("w", kLongMs, 0);
        ASSERT_TRUE(lease);
        order.push_back(lease->sessionId);
        // A busy session commits on every step and goes straight back.
        ASSERT_TRUE(store->appendSync(appendRequest(lease->sessionId, AppendRequest::kAnySeq, {event("tool.call")})));
        store->releaseLease(*lease);
    }
    for (int i = 0; i < 3; ++i) {
        std::set<std::string> round(order.begin() + i * 3, order.begin() + i * 3 + 3);
        EXPECT_EQ(round.size(), 3u) << "round " << i;
    }
    EXPECT_EQ(order[0], "a");   // oldest first
}

// Fencing: an append carrying a lease token commits only while that grant is the current one.
TEST_P(LeaseTest, AppendWithALeaseThatWasLostIsRefused)
{
    auto store = open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->appendSync(createRequest("a")));
    auto first = store->acquireLease("slow-worker", 1, 0);
    ASSERT_TRUE(first);
    // The 1 ms lease runs out and goes to the next worker, however long that takes.
    auto second = store->acquireLease("w2", kLongMs, kLongMs);
    ASSERT_TRUE(second);
    ASSERT_EQ(second->sessionId, "a");

    auto late = appendRequest("a", 1, {event("tool.result")});
    late.leaseToken = first->token;
    auto refused = store->appendSync(std::move(late));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(refused.error().message.find("no longer held"), std::string::npos) << refused.error().message;
    EXPECT_EQ(store->getSession("a")->lastSeq, 1);

    auto current = appendRequest("a", 1, {event("tool.result")});
    current.leaseToken = second->token;
    auto accepted = store->appendSync(std::move(current));
    ASSERT_TRUE(accepted) << accepted.error().message;
    EXPECT_EQ(accepted->events[0].seq, 2);

    store->releaseLease(*second);
    auto released = appendRequest("a", 2, {event("tool.result")});
    released.leaseToken = second->token;
    EXPECT_EQ(store->appendSync(std::move(released)).error().code, ErrorCode::FailedPrecondition);
}

TEST_P(LeaseTest, WorkIsKnownAgainAfterReopen)
{
    {
        auto store = open();
        ASSERT_TRUE(store);
        ASSERT_TRUE(store->appendSync(createRequest("live")));
        ASSERT_TRUE(store->appendSync(createRequest("done")));
        ASSERT_TRUE(store->appendSync(statusRequest("done", "cancelled")));
        ASSERT_TRUE(store->acquireLease("w", kLongMs, 0));   // leases do not survive a restart
    }
    auto store = open();
    ASSERT_TRUE(store);
    auto lease = store->acquireLease("w", kLongMs, 0);
    ASSERT_TRUE(lease);
    EXPECT_EQ(lease->sessionId, "live");
    EXPECT_FALSE(store->acquireLease("w", kLongMs, 0));
}

} // namespace
} // namespace paddock::store::test
