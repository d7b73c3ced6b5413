// Several brokers on one PostgreSQL database, as two (or more) stores opened on it in this process:
// each writer keeps the tails of live sessions in memory, and the others move them; appends stay
// dense and lose nothing; a commit of one reaches the other's listeners and lease waiters; a lease
// that went to the other store fences the first one's appends; a feed whose connection is cut
// catches up from the table.
#include "store_test_support.h"

#include "broker/store/pg_handle.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

namespace paddock::store::test {
namespace {

using namespace std::chrono_literals;

class PostgresBrokersTest : public paddock::test::FreshPostgresTest {
protected:
    PostgresBrokersTest() : FreshPostgresTest("brokers") {}

    std::unique_ptr<EventStore> open()
    {
        auto store = openPostgresEventStore(conninfo());
        if (!store) {
            ADD_FAILURE() << store.error().message;
            return nullptr;
        }
        return std::move(*store);
    }

    std::vector<core::Event> log(EventStore &store, const std::string &id)
    {
        auto events = store.readEvents(id, 1, 100000);
        EXPECT_TRUE(events) << events.error().message;
        return events ? *events : std::vector<core::Event>{};
    }
};

// What a commit listener heard: the newest state of each session.
class Heard {
public:
    explicit Heard(EventStore &store) : m_store(store)
    {
        m_id = store.addCommitListener([this](const CommitNotice &notice) {
            std::lock_guard lock(m_mutex);
            for (const auto &state : notice.sessions)
                m_lastSeq[state.id] = std::max(m_lastSeq[state.id], state.lastSeq);
            m_changed.notify_all();
        });
    }
    ~Heard() { m_store.removeCommitListener(m_id); }

    // Whether the listener heard session id at lastSeq or later within a (generous) bound.
    bool waitFor(const std::string &id, int64_t lastSeq)
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, 30s, [&] { return m_lastSeq[id] >= lastSeq; });
    }

private:
    EventStore &m_store;
    int m_id = 0;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::map<std::string, int64_t> m_lastSeq;
};

TEST_F(PostgresBrokersTest, TailsKeptInMemoryGiveWayToWhatTheOtherBrokerAppended)
{
    auto a = open();
    auto b = open();
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(a->appendSync(createRequest("s1")));   // a keeps s1's tail at seq 1
    for (int i = 0; i < 2; ++i) {
        auto appended = b->appendSync(appendRequest("s1", AppendRequest::kAnySeq, {event("note", R"({"by":"b"})")}));
        ASSERT_TRUE(appended) << appended.error().message;
    }

    // At whatever the tail is: numbered after b's events, with its own payload.
    auto any = a->appendSync(appendRequest("s1", AppendRequest::kAnySeq, {event("note", R"({"by":"a"})")}));
    ASSERT_TRUE(any) << any.error().message;
    EXPECT_EQ(any->events[0].seq, 4);
    // Compare-and-append at the tail the database has, not the one a kept.
    auto compared = a->appendSync(appendRequest("s1", 4, {event("note", R"({"by":"a","n":2})")}));
    ASSERT_TRUE(compared) << compared.error().message;
    // b's memory is behind now, and a tail that really is stale is still refused.
    auto stale = b->appendSync(appendRequest("s1", 3, {event("note", R"({"late":true})")}));
    ASSERT_FALSE(stale);
    EXPECT_EQ(stale.error().code, ErrorCode::Aborted) << stale.error().message;
    auto atTail = b->appendSync(appendRequest("s1", 5, {event("note", R"({"by":"b","n":3})")}));
    ASSERT_TRUE(atTail) << atTail.error().message;

    const auto events = log(*a, "s1");
    ASSERT_EQ(events.size(), 6u);
    const std::vector<std::string> payloads{R"({"by":"b"})", R"({"by":"b"})", R"({"by":"a"})", R"({"by":"a","n":2})",
                                            R"({"by":"b","n":3})"};
    for (size_t i = 1; i < events.size(); ++i) {
        EXPECT_EQ(events[i].seq, static_cast<int64_t>(i) + 1);
        EXPECT_EQ(events[i].kind, "note");
        EXPECT_EQ(events[i].payload, payloads[i - 1]);
    }
    auto session = b->getSession("s1");
    ASSERT_TRUE(session);
    EXPECT_EQ(session->lastSeq, 6);
}

TEST_F(PostgresBrokersTest, ConcurrentAppendsFromTwoBrokersToOneSessionStayDense)
{
    auto a = open();
    auto b = open();
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(a->appendSync(createRequest("shared")));
    constexpr int kThreads = 3, kEach = 150;
    std::atomic<int> failures = 0;
    std::string firstFailure;
    std::mutex failureMutex;
    std::vector<std::thread> threads;
    for (int t = 0; t < 2 * kThreads; ++t) {
        threads.emplace_back([&, t] {
            EventStore &store = t % 2 == 0 ? *a : *b;
            for (int i = 0; i < kEach; ++i) {
                const std::string payload = R"({"t":)" + std::to_string(t) + R"(,"i":)" + std::to_string(i) + "}";
                auto appended = store.appendSync(appendRequest("shared", AppendRequest::kAnySeq, {event("note", payload)}));
                if (!appended) {
                    std::lock_guard lock(failureMutex);
                    if (failures++ == 0)
                        firstFailure = appended.error().message;
                }
            }
        });
    }
    for (auto &thread : threads)
        thread.join();
    EXPECT_EQ(failures.load(), 0) << firstFailure;

    const auto events = log(*b, "shared");
    ASSERT_EQ(events.size(), 1u + 2 * kThreads * kEach);
    std::set<std::string> payloads;
    for (size_t i = 0; i < events.size(); ++i) {
        ASSERT_EQ(events[i].seq, static_cast<int64_t>(i) + 1);
        if (i > 0)
            payloads.insert(events[i].payload);
    }
    EXPECT_EQ(payloads.size(), static_cast<size_t>(2 * kThreads * kEach)) << "an append was lost or written twice";
}

TEST_F(PostgresBrokersTest, ACommitOfOneBrokerReachesTheOthersListenersAndLeaseWaiters)
{
    auto a = open();
    auto b = open();
    ASSERT_TRUE(a && b);
    Heard heardByB(*b);
    ASSERT_TRUE(a->appendSync(createRequest("s1")));
    EXPECT_TRUE(heardByB.waitFor("s1", 1)) << "b never heard of the session a created";
    ASSERT_TRUE(a->appendSync(appendRequest("s1", 1, {event("note")})));
    EXPECT_TRUE(heardByB.waitFor("s1", 2));

    // A waiter of b gets the session a's commit made need work (created sessions are queued).
    auto lease = b->acquireLease("b-worker", 5000, 30000);
    ASSERT_TRUE(lease.has_value()) << "b's lease waiter never got the session a created";
    EXPECT_EQ(lease->sessionId, "s1");
    EXPECT_FALSE(a->acquireLease("a-worker", 5000, 0).has_value()) << "two brokers hold the same session";
}

TEST_F(PostgresBrokersTest, AnAppendUnderALeaseThatWentToTheOtherBrokerIsRefused)
{
    auto a = open();
    auto b = open();
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(a->appendSync(createRequest("s1")));
    auto first = a->acquireLease("a-worker", 50, 1000);   // a pauses past this one
    ASSERT_TRUE(first.has_value());
    std::optional<Lease> second;
    for (int i = 0; i < 200 && !second; ++i)
        second = b->acquireLease("b-worker", 30000, 100);
    ASSERT_TRUE(second.has_value()) << "the expired lease never went to b";
    EXPECT_GT(second->token, first->token);

    auto late = appendRequest("s1", 1, {event("note", R"({"by":"a"})")});
    late.leaseToken = first->token;
    auto refused = a->appendSync(std::move(late));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::FailedPrecondition) << refused.error().message;
    auto owned = appendRequest("s1", 1, {event("note", R"({"by":"b"})")});
    owned.leaseToken = second->token;
    auto written = b->appendSync(std::move(owned));
    ASSERT_TRUE(written) << written.error().message;
    const auto events = log(*a, "s1");
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[1].payload, R"({"by":"b"})");
}

TEST_F(PostgresBrokersTest, AFeedWhoseConnectionWasCutCatchesUpFromTheTable)
{
    auto a = open();
    auto b = open();
    ASSERT_TRUE(a && b);
    Heard heardByB(*b);
    ASSERT_TRUE(a->appendSync(createRequest("s1")));
    ASSERT_TRUE(heardByB.waitFor("s1", 1));

    // Cut every listening connection (b's feed, and a's), then commit while they are away.
    auto admin = pg::Connection::open(conninfo());
    ASSERT_TRUE(admin) << admin.error().message;
    auto cut = admin->exec("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND query LIKE 'LISTEN%'");
    ASSERT_TRUE(pg::ok(cut.get())) << PQerrorMessage(admin->get());
    ASSERT_GE(pg::cellInt(cut.get(), 0, 0), 1) << "no feed was listening";
    for (int i = 0; i < 3; ++i)
        ASSERT_TRUE(a->appendSync(appendRequest("s1", AppendRequest::kAnySeq, {event("note")})));
    EXPECT_TRUE(heardByB.waitFor("s1", 4)) << "b's feed did not catch up after its connection was cut";
}

} // namespace
} // namespace paddock::store::test
