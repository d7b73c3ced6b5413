// The review queue's rules with the real store, on both backends (SQLite, PostgreSQL): items opened
// by approval.requested events, decided through ReviewDesk (one transaction, synchronous=FULL),
// indexed in the same transaction.

#include "broker/review/open_review.h"
#include "broker/review/review_desk.h"
#include "broker/store/sqlite_event_store.h"
#include "tests/support/started_postgres.h"
#include "tests/support/store_backend.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>
#include <unistd.h>

namespace paddock::review {
namespace {

using nlohmann::json;

// The review desk on both backends: its items, fetches and decisions are tables beside the log.
class ReviewDeskTest : public ::testing::TestWithParam<paddock::test::StoreBackend> {
protected:
    void SetUp() override
    {
        std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
        std::replace(name.begin(), name.end(), '/', '-');   // a parameterised test's name ends in /Backend
        m_dir = std::filesystem::temp_directory_path() / ("paddock-review-test-" + std::to_string(::getpid()) + "-" + name);
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
        auto opened = paddock::test::openTestStore(GetParam(), m_dir / "broker.db");
        if (!opened.skipReason.empty())
            GTEST_SKIP() << opened.skipReason;
        ASSERT_TRUE(opened.store) << opened.error;
        m_store = std::move(opened.store);
        auto queries = store::ReviewQueries::open(*m_store);
        ASSERT_TRUE(queries) << queries.error().message;
        m_queries = std::move(*queries);
        m_desk = std::make_unique<ReviewDesk>(*m_store, *m_queries, m_policy);
    }

    void TearDown() override
    {
        m_desk.reset();
        if (m_store)
            m_store->close();
        std::filesystem::remove_all(m_dir);
    }

    // A session submitted by `requester` that waits for one review item of `kind`; returns the item id.
    std::string openItem(const std::string &kind = kind::BulkChange, const std::string &risk = "",
                         const std::string &change = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
                         const std::string &requester = "bob")
    {
        const std::string session = "s-" + std::to_string(++m_sessions);
        store::AppendRequest create;
        create.sessionId = session;
        create.expectedLastSeq = 0;
        create.events.push_back({core::kind::SessionCreated,
                                 json{{"agent", "agent-" + std::to_string(m_sessions % 2)}, {"submitted_by", requester},
                                      {"model", "scripted"}, {"tier", "lite"}}.dump()});
        EXPECT_TRUE(m_store->appendSync(std::move(create)));
        ReviewRequest request;
        request.kind = kind;
        request.summary = "change things";
        request.change = change;
        request.changeFormat = "diff";
        request.risk = risk;
        request.requester = requester;
        request.agent = "agent-" + std::to_string(m_sessions % 2);
        request.toolCallId = "call-1";
        request.targetCount = 7;
        request.costMicros = kind == kind::BudgetExtension ? 5000 : 0;
        store::AppendRequest append;
        append.sessionId = session;
        append.events.push_back(openReview(request, m_policy, nowMs()));
        auto appended = m_store->appendSync(std::move(append));
        EXPECT_TRUE(appended) << appended.error().message;
        EXPECT_EQ(appended->state.status, core::SessionStatus::WaitingApproval);
        return json::parse(appended->events.back().payload)["review_id"].get<std::string>();
    }

    static int64_t nowMs()
    {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch()).count();
    }

    store::ReviewRow item(const std::string &id)
    {
        auto row = m_queries->get(id);
        EXPECT_TRUE(row) << row.error().message;
        return row ? *row : store::ReviewRow{};
    }

    DecideRequest approval(const std::vector<std::string> &ids, const std::string &decider = "alice")
    {
        DecideRequest request;
        request.ids = ids;
        request.approve = true;
        request.decider = decider;
        request.reason = "looks right";
        for (const auto &id : ids)
            request.changeHashes[id] = item(id).changeHash;
        return request;
    }

    int decisionsInLog(const std::string &sessionId)
    {
        auto log = m_store->readEvents(sessionId, 1, 1000);
        EXPECT_TRUE(log);
        return static_cast<int>(std::count_if(log->begin(), log->end(), [](const core::Event &e) {
            return e.kind == core::kind::ApprovalDecided;
        }));
    }

    std::filesystem::path m_dir;
    ReviewPolicy m_policy;
    std::unique_ptr<store::EventStore> m_store;
    std::unique_ptr<store::ReviewQueries> m_queries;
    std::unique_ptr<ReviewDesk> m_desk;
    int m_sessions = 0;
};

INSTANTIATE_TEST_SUITE_P(Backends, ReviewDeskTest, PADDOCK_STORE_BACKENDS);

TEST_P(ReviewDeskTest, RequestIsIndexedWithHashRiskAndExpiry)
{
    const std::string id = openItem();
    const auto row = item(id);
    EXPECT_EQ(row.state, "pending");
    EXPECT_EQ(row.kind, "bulk_change");
    EXPECT_EQ(row.requester, "bob");
    EXPECT_EQ(row.risk, "medium");   // the policy's default for bulk_change of 7 targets
    EXPECT_EQ(row.changeHash, changeHash("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"));
    EXPECT_TRUE(row.changeHash.starts_with("sha256:"));
    EXPECT_EQ(row.changeHash.size(), 7u + 64u);
    // The expiry counts from when the item was opened (the engine's clock; the store stamps the event).
    EXPECT_NEAR(static_cast<double>(row.expiresUnixMs - row.createdUnixMs), static_cast<double>(m_policy.expiryMs), 5000);
    auto page = m_desk->list({});
    ASSERT_TRUE(page);
    ASSERT_EQ(page->items.size(), 1u);
    EXPECT_EQ(page->items[0].id, id);
}

TEST_P(ReviewDeskTest, ApprovalResumesTheSessionAndIsRecordedWithDecider)
{
    const std::string id = openItem();
    auto decided = m_desk->decide(approval({id}));
    ASSERT_TRUE(decided) << decided.error().message;
    ASSERT_EQ(decided->size(), 1u);
    EXPECT_EQ((*decided)[0].state, "approved");
    EXPECT_EQ((*decided)[0].decider, "alice");
    auto session = m_store->getSession(item(id).sessionId);
    ASSERT_TRUE(session);
    EXPECT_EQ(session->status, core::SessionStatus::Running);
    EXPECT_TRUE(session->pendingReviewId.empty());
}

TEST_P(ReviewDeskTest, ADecisionWhoseAuditRecordCannotBeWrittenIsNotMade)
{
    const std::string a = openItem();
    const std::string b = openItem();
    auto request = approval({a, b});
    // The server passes the audit record here; a statement that cannot run stands in for a full
    // or refusing audit table.
    request.writes.push_back({"INSERT INTO no_such_audit_table VALUES (1)", {}});
    auto decided = m_desk->decide(request);
    ASSERT_FALSE(decided);
    for (const auto &id : {a, b}) {
        EXPECT_EQ(item(id).state, "pending");
        EXPECT_EQ(decisionsInLog(item(id).sessionId), 0);
    }

    // The same decision with a statement that runs is made, and the statement with it.
    request.writes = {{"CREATE TABLE audit_probe (x INTEGER)", {}}};
    ASSERT_TRUE(m_desk->decide(request));
    EXPECT_EQ(item(a).state, "approved");
    auto probe = m_store->query({"SELECT count(*) FROM audit_probe", {}});
    EXPECT_TRUE(probe) << (probe ? "" : probe.error().message);
}

TEST_P(ReviewDeskTest, SelfApprovalIsRefused)
{
    const std::string id = openItem();
    auto decided = m_desk->decide(approval({id}, "bob"));
    ASSERT_FALSE(decided);
    EXPECT_EQ(decided.error().code, ErrorCode::PermissionDenied);
    EXPECT_NE(decided.error().message.find("nobody approves their own request"), std::string::npos)
        << decided.error().message;
    EXPECT_EQ(item(id).state, "pending");
    EXPECT_EQ(decisionsInLog(item(id).sessionId), 0);
}

TEST_P(ReviewDeskTest, HighRiskApprovalNeedsAPriorFetchByTheDecider)
{
    const std::string id = openItem(kind::EgressException);   // high risk by the policy's defaults
    EXPECT_EQ(item(id).risk, "high");
    auto refused = m_desk->decide(approval({id}));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(refused.error().message.find("GetReviewItem"), std::string::npos) << refused.error().message;
    EXPECT_NE(refused.error().message.find("paddockctl reviews show " + id), std::string::npos);

    // Someone else's fetch does not count.
    ASSERT_TRUE(m_desk->fetch(id, "carol"));
    EXPECT_FALSE(m_desk->decide(approval({id})));
    // Nor does an approval without a reason.
    ASSERT_TRUE(m_desk->fetch(id, "alice"));
    auto noReason = approval({id});
    noReason.reason.clear();
    auto refusedNoReason = m_desk->decide(noReason);
    ASSERT_FALSE(refusedNoReason);
    EXPECT_EQ(refusedNoReason.error().code, ErrorCode::InvalidArgument);

    auto decided = m_desk->decide(approval({id}));
    ASSERT_TRUE(decided) << decided.error().message;
    EXPECT_EQ((*decided)[0].state, "approved");
}

TEST_P(ReviewDeskTest, BulkDecisionWithOneInvalidIdAppliesNothing)
{
    const std::string a = openItem();
    const std::string b = openItem();
    auto request = approval({a, b});
    request.ids.push_back("r-doesnotexist");
    auto decided = m_desk->decide(request);
    ASSERT_FALSE(decided);
    EXPECT_EQ(decided.error().code, ErrorCode::NotFound);
    EXPECT_NE(decided.error().message.find("r-doesnotexist"), std::string::npos) << decided.error().message;
    for (const auto &id : {a, b}) {
        EXPECT_EQ(item(id).state, "pending");
        EXPECT_EQ(decisionsInLog(item(id).sessionId), 0);
    }

    // One item already decided also refuses the whole bulk request: the other stays pending.
    ASSERT_TRUE(m_desk->decide(approval({a})));
    auto again = m_desk->decide(approval({b, a}));
    ASSERT_FALSE(again);
    EXPECT_EQ(item(b).state, "pending");
    EXPECT_EQ(decisionsInLog(item(b).sessionId), 0);

    // A bulk decision of items of one kind decides them all.
    const std::string c = openItem();
    auto both = m_desk->decide(approval({b, c}));
    ASSERT_TRUE(both) << both.error().message;
    EXPECT_EQ(item(b).state, "approved");
    EXPECT_EQ(item(c).state, "approved");
}

TEST_P(ReviewDeskTest, ItemsOfDifferentKindsAreDecidedSeparately)
{
    const std::string a = openItem();
    const std::string b = openItem(kind::BudgetExtension);
    auto decided = m_desk->decide(approval({a, b}));
    ASSERT_FALSE(decided);
    EXPECT_EQ(decided.error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(item(a).state, "pending");
}

TEST_P(ReviewDeskTest, ReplayedApprovalIsRefusedNamingTheFirstDecision)
{
    const std::string id = openItem();
    ASSERT_TRUE(m_desk->decide(approval({id})));
    auto replay = m_desk->decide(approval({id}, "dave"));
    ASSERT_FALSE(replay);
    EXPECT_EQ(replay.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(replay.error().message.find("already approved by alice at"), std::string::npos) << replay.error().message;
    EXPECT_EQ(decisionsInLog(item(id).sessionId), 1);
}

TEST_P(ReviewDeskTest, ChangedHashIsRefused)
{
    const std::string id = openItem();
    auto request = approval({id});
    request.changeHashes[id] = changeHash("a different change");
    auto decided = m_desk->decide(request);
    ASSERT_FALSE(decided);
    EXPECT_EQ(decided.error().code, ErrorCode::FailedPrecondition);
    EXPECT_NE(decided.error().message.find("not the one you saw"), std::string::npos);
    request.changeHashes.clear();
    auto noHash = m_desk->decide(request);
    ASSERT_FALSE(noHash);
    EXPECT_EQ(noHash.error().code, ErrorCode::InvalidArgument);
    EXPECT_EQ(item(id).state, "pending");
}

TEST_P(ReviewDeskTest, RejectionNeedsAReasonAndMayComeFromTheRequester)
{
    const std::string id = openItem();
    DecideRequest reject;
    reject.ids = {id};
    reject.decider = "bob";
    auto noReason = m_desk->decide(reject);
    ASSERT_FALSE(noReason);
    EXPECT_EQ(noReason.error().code, ErrorCode::InvalidArgument);
    reject.reason = "wrong files";
    auto decided = m_desk->decide(reject);
    ASSERT_TRUE(decided) << decided.error().message;
    EXPECT_EQ(item(id).state, "rejected");
    EXPECT_EQ(item(id).decisionReason, "wrong files");
    // A rejected bulk change resumes the session (the tool's result carries the rejection).
    EXPECT_EQ(m_store->getSession(item(id).sessionId)->status, core::SessionStatus::Running);
}

TEST_P(ReviewDeskTest, RejectedBudgetExtensionFailsTheSessionAndApprovedOneRaisesItsBudget)
{
    const std::string rejected = openItem(kind::BudgetExtension);
    DecideRequest reject;
    reject.ids = {rejected};
    reject.decider = "alice";
    reject.reason = "too expensive";
    ASSERT_TRUE(m_desk->decide(reject));
    auto failedSession = m_store->getSession(item(rejected).sessionId);
    EXPECT_EQ(failedSession->status, core::SessionStatus::Failed);
    EXPECT_NE(failedSession->statusReason.find("too expensive"), std::string::npos) << failedSession->statusReason;

    const std::string approved = openItem(kind::BudgetExtension);
    ASSERT_TRUE(m_desk->decide(approval({approved})));
    auto session = m_store->getSession(item(approved).sessionId);
    EXPECT_EQ(session->status, core::SessionStatus::Running);
    EXPECT_EQ(session->budgetMicros, 5000);   // 0 + the extension asked for
}

TEST_P(ReviewDeskTest, ItemsExpireAndCannotBeDecidedAfterwards)
{
    const std::string id = openItem();
    EXPECT_EQ(m_desk->expireDue(nowMs()), 0);
    EXPECT_EQ(m_desk->expireDue(item(id).expiresUnixMs + 1), 1);
    EXPECT_EQ(item(id).state, "expired");
    EXPECT_EQ(item(id).decisionReason, "expired");
    EXPECT_EQ(decisionsInLog(item(id).sessionId), 1);
    EXPECT_EQ(m_store->getSession(item(id).sessionId)->status, core::SessionStatus::Running);
    auto late = m_desk->decide(approval({id}));
    ASSERT_FALSE(late);
    EXPECT_NE(late.error().message.find("expired at"), std::string::npos) << late.error().message;
    EXPECT_EQ(m_desk->expireDue(item(id).expiresUnixMs + 1), 0);   // once
}

TEST_P(ReviewDeskTest, ApproverStatsCountRateAndMedianTime)
{
    std::vector<std::string> ids;
    for (int i = 0; i < 3; ++i)
        ids.push_back(openItem());
    ASSERT_TRUE(m_desk->decide(approval({ids[0]}, "alice")));
    ASSERT_TRUE(m_desk->decide(approval({ids[1]}, "alice")));
    DecideRequest reject;
    reject.ids = {ids[2]};
    reject.decider = "alice";
    reject.reason = "no";
    ASSERT_TRUE(m_desk->decide(reject));
    const std::string other = openItem();
    ASSERT_TRUE(m_desk->decide(approval({other}, "carol")));

    auto stats = m_desk->approverStats();
    ASSERT_TRUE(stats) << stats.error().message;
    ASSERT_EQ(stats->size(), 2u);
    const auto &alice = (*stats)[0];
    EXPECT_EQ(alice.principal, "alice");
    EXPECT_EQ(alice.decided, 3);
    EXPECT_EQ(alice.approved, 2);
    EXPECT_EQ(alice.rejected, 1);
    EXPECT_NEAR(alice.approvalRate, 2.0 / 3.0, 1e-9);
    std::vector<int64_t> times;
    for (const auto &id : ids)
        times.push_back(item(id).decidedUnixMs - item(id).createdUnixMs);
    std::sort(times.begin(), times.end());
    EXPECT_EQ(alice.medianDecideMs, times[1]);
    EXPECT_EQ((*stats)[1].principal, "carol");
    EXPECT_EQ((*stats)[1].decided, 1);
}

TEST_P(ReviewDeskTest, FetchIsRecordedInTheSessionLog)
{
    const std::string id = openItem();
    ASSERT_TRUE(m_desk->fetch(id, "alice"));
    auto log = m_store->readEvents(item(id).sessionId, 1, 100);
    ASSERT_TRUE(log);
    EXPECT_EQ(log->back().kind, core::kind::ApprovalFetched);
    EXPECT_EQ(json::parse(log->back().payload)["principal"], "alice");
    EXPECT_TRUE(*m_desk->fetchedBy(id, "alice"));
    EXPECT_FALSE(*m_desk->fetchedBy(id, "bob"));
    auto missing = m_desk->fetch("r-nope", "alice");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::NotFound);
}

// Two brokers on one PostgreSQL database, an approver on each, deciding the same items at the same
// moment: exactly one decision of each item is made, and the other approver is told whose it is.
class TwoBrokersReviewTest : public paddock::test::FreshPostgresTest {
protected:
    TwoBrokersReviewTest() : FreshPostgresTest("reviews") {}

    struct Broker {
        std::unique_ptr<store::EventStore> store;
        std::unique_ptr<store::ReviewQueries> queries;
        std::unique_ptr<ReviewDesk> desk;
    };

    Broker open()
    {
        Broker broker;
        auto store = store::openPostgresEventStore(conninfo());
        EXPECT_TRUE(store) << store.error().message;
        if (!store)
            return broker;
        broker.store = std::move(*store);
        auto queries = store::ReviewQueries::open(*broker.store);
        EXPECT_TRUE(queries) << queries.error().message;
        broker.queries = std::move(*queries);
        broker.desk = std::make_unique<ReviewDesk>(*broker.store, *broker.queries, ReviewPolicy{});
        return broker;
    }
};

TEST_F(TwoBrokersReviewTest, TwoApproversOnTwoBrokersExactlyOneWinsAndTheOtherIsToldWho)
{
    Broker a = open();
    Broker b = open();
    ASSERT_TRUE(a.desk && b.desk);
    constexpr int kItems = 20;
    int aWon = 0, bWon = 0;
    for (int i = 0; i < kItems; ++i) {
        const std::string session = "s-" + std::to_string(i);
        store::AppendRequest create;
        create.sessionId = session;
        create.expectedLastSeq = 0;
        create.events.push_back({core::kind::SessionCreated, json{{"agent", "builder"}, {"submitted_by", "bob"},
                                                                  {"model", "scripted"}, {"tier", "lite"}}.dump()});
        ASSERT_TRUE(a.store->appendSync(std::move(create)));
        ReviewRequest request;
        request.kind = kind::BulkChange;
        request.summary = "change things";
        request.change = "--- a/x\n+++ b/x\n";
        request.changeFormat = "diff";
        request.requester = "bob";
        request.agent = "builder";
        request.toolCallId = "call-1";
        request.targetCount = 3;
        store::AppendRequest append;
        append.sessionId = session;
        append.events.push_back(openReview(request, ReviewPolicy{},
                                           std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::system_clock::now().time_since_epoch()).count()));
        auto opened = b.store->appendSync(std::move(append));   // b's memory of the session moves on
        ASSERT_TRUE(opened) << opened.error().message;
        const std::string id = json::parse(opened->events.back().payload)["review_id"].get<std::string>();
        auto row = a.queries->get(id);
        ASSERT_TRUE(row) << row.error().message;

        auto decide = [&](Broker &broker, const std::string &decider) {
            DecideRequest decision;
            decision.ids = {id};
            decision.approve = true;
            decision.decider = decider;
            decision.reason = "looks right";
            decision.changeHashes[id] = row->changeHash;
            return broker.desk->decide(decision);
        };
        Result<std::vector<store::ReviewRow>> byAlice = fail(ErrorCode::Internal, "not run");
        Result<std::vector<store::ReviewRow>> byDave = fail(ErrorCode::Internal, "not run");
        std::thread alice([&] { byAlice = decide(a, "alice"); });
        std::thread dave([&] { byDave = decide(b, "dave"); });
        alice.join();
        dave.join();
        ASSERT_NE(byAlice.has_value(), byDave.has_value())
            << "item " << id << ": alice " << (byAlice ? "won" : byAlice.error().message) << "; dave "
            << (byDave ? "won" : byDave.error().message);
        const auto &lost = byAlice ? byDave : byAlice;
        const std::string winner = byAlice ? "alice" : "dave";
        (byAlice ? aWon : bWon) += 1;
        EXPECT_EQ(lost.error().code, ErrorCode::FailedPrecondition) << lost.error().message;
        EXPECT_NE(lost.error().message.find("already approved by " + winner), std::string::npos) << lost.error().message;
        auto log = a.store->readEvents(session, 1, 100);
        ASSERT_TRUE(log);
        EXPECT_EQ(std::count_if(log->begin(), log->end(),
                                [](const core::Event &e) { return e.kind == core::kind::ApprovalDecided; }),
                  1);
    }
    std::cout << "of " << kItems << " items decided at once on two brokers: alice (broker a) won " << aWon
              << ", dave (broker b) won " << bWon << "\n";
}

} // namespace
} // namespace paddock::review
