// SessionService and its live streams over a real gRPC server on a unix socket in a temporary
// directory, with the real SQLite store. Events are appended straight to the store, so the tests
// control exactly what the streams must deliver.

#include "broker/server/stream_hub.h"
#include "tests/support/fake_pool_client.h"
#include "tests/support/in_process_broker.h"

#include "rpc/broker_stubs.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
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

// A pool offering the lite tier, its Status filled in every field.
std::unique_ptr<test::FakePoolClient> liteOnlyPool()
{
    pool_client::TierStatus lite{"lite", "bwrap", 2, 0, 32, 1.0, 0};
    lite.coldFallbacks = 3;
    lite.claimLatencyUsBuckets = {1000, 10000, 100000};
    lite.claimLatencyCounts = {5, 2, 1};
    lite.refillPerSecond = 0.5;
    lite.pricePerHourUsd = 0.02;
    lite.cpu = 1.5;
    lite.memoryBytes = 512LL << 20;
    lite.pids = 256;
    lite.diskBytes = 1LL << 30;
    lite.allowlistNetwork = true;
    lite.allowlist = {"example.test:443"};
    lite.warmCount = 2;
    lite.maxCount = 32;
    auto pool = std::make_unique<test::FakePoolClient>("lite-only");
    pool->setTier(lite);
    return pool;
}

class SessionServiceTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = std::filesystem::temp_directory_path()
            / ("paddock-service-test-" + std::to_string(::getpid()) + "-"
               + ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(m_dir);
        std::filesystem::create_directories(m_dir);
        m_broker = std::make_unique<test::InProcessBroker>(m_dir, PADDOCK_PLAYBOOK_DIR);
        auto started = m_broker->start();
        ASSERT_TRUE(started) << started.error().message;
        m_stub = std::make_unique<rpc::BrokerStubs>(m_broker->newChannel());
    }

    void TearDown() override
    {
        m_broker.reset();
        std::filesystem::remove_all(m_dir);
    }

    std::unique_ptr<grpc::ClientContext> context()
    {
        auto context = std::make_unique<grpc::ClientContext>();
        context->set_deadline(std::chrono::system_clock::now() + 20s);
        return context;
    }

    v1::Session submit()
    {
        v1::SubmitSessionRequest request;
        request.set_playbook_toml(kPlaybook);
        v1::Session session;
        auto status = m_stub->sessions->SubmitSession(context().get(), request, &session);
        EXPECT_TRUE(status.ok()) << status.error_message();
        return session;
    }

    // Appends n tool.result-like events in batches of `batch`.
    void appendEvents(const std::string &id, int n, int batch = 100, size_t padding = 0)
    {
        const std::string pad(padding, 'x');
        for (int done = 0; done < n; done += batch) {
            store::AppendRequest request;
            request.sessionId = id;
            for (int i = 0; i < std::min(batch, n - done); ++i)
                request.events.push_back({"test.tick", nlohmann::json{{"i", done + i}, {"pad", pad}}.dump()});
            auto appended = m_broker->store().appendSync(std::move(request));
            ASSERT_TRUE(appended) << appended.error().message;
        }
    }

    void end(const std::string &id)
    {
        store::AppendRequest request;
        request.sessionId = id;
        request.events.push_back({core::kind::StateChanged, R"({"status":"succeeded"})"});
        ASSERT_TRUE(m_broker->store().appendSync(std::move(request)));
    }

    std::filesystem::path m_dir;
    std::unique_ptr<test::InProcessBroker> m_broker;
    std::unique_ptr<rpc::BrokerStubs> m_stub;
};

TEST_F(SessionServiceTest, SubmitRecordsTheSessionAndItsPlaybook)
{
    const v1::Session session = submit();
    EXPECT_EQ(session.status(), v1::SESSION_STATUS_QUEUED);
    EXPECT_EQ(session.goal(), "say hello");
    EXPECT_EQ(session.model(), "scripted");
    EXPECT_EQ(session.tier(), "lite");
    EXPECT_EQ(session.last_seq(), 2) << "session.created and its env.decision";
    EXPECT_EQ(session.tier_chooser(), "default");

    v1::GetSessionRequest get;
    get.set_id(session.id());
    v1::Session again;
    ASSERT_TRUE(m_stub->sessions->GetSession(context().get(), get, &again).ok());
    EXPECT_EQ(again.id(), session.id());
}

TEST_F(SessionServiceTest, BadSubmissionsAreRefusedWithTheRightStatus)
{
    v1::Session session;
    v1::SubmitSessionRequest empty;
    EXPECT_EQ(m_stub->sessions->SubmitSession(context().get(), empty, &session).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

    v1::SubmitSessionRequest malformed;
    malformed.set_playbook_toml("[[step]]\ntool = \"run_command\"\n");
    auto status = m_stub->sessions->SubmitSession(context().get(), malformed, &session);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

    v1::SubmitSessionRequest unknownModel;
    unknownModel.set_goal("g");
    unknownModel.set_model("no-such-model");
    status = m_stub->sessions->SubmitSession(context().get(), unknownModel, &session);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(status.error_message().find("scripted"), std::string::npos) << "should list the configured models";

    v1::SubmitSessionRequest unknownPlaybook;
    unknownPlaybook.set_playbook("no-such-playbook");
    EXPECT_EQ(m_stub->sessions->SubmitSession(context().get(), unknownPlaybook, &session).error_code(),
              grpc::StatusCode::NOT_FOUND);

    v1::ListSessionsResponse list;
    ASSERT_TRUE(m_stub->sessions->ListSessions(context().get(), {}, &list).ok());
    EXPECT_EQ(list.sessions_size(), 0) << "a refused submission must record nothing";
}

TEST_F(SessionServiceTest, ATierNoPoolOffersIsRefusedAtSubmit)
{
    m_broker->pools().add(liteOnlyPool(), false);
    v1::SubmitSessionRequest request;
    request.set_playbook_toml(kPlaybook);
    request.set_tier("heavy");
    v1::Session session;
    const auto status = m_stub->sessions->SubmitSession(context().get(), request, &session);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("offer: lite"), std::string::npos) << status.error_message();

    request.set_tier("lite");
    EXPECT_TRUE(m_stub->sessions->SubmitSession(context().get(), request, &session).ok());
}

TEST_F(SessionServiceTest, ListPoolsCarriesEverythingTheTierStatusSays)
{
    m_broker->pools().add(liteOnlyPool(), false);
    v1::ListPoolsResponse pools;
    ASSERT_TRUE(m_stub->operations->ListPools(context().get(), {}, &pools).ok());
    ASSERT_EQ(pools.pools_size(), 1);
    ASSERT_EQ(pools.pools(0).tiers_size(), 1);
    const v1::TierStatus &tier = pools.pools(0).tiers(0);
    EXPECT_EQ(tier.tier().name(), "lite");
    EXPECT_EQ(tier.warm(), 2);
    EXPECT_EQ(tier.cold_fallbacks(), 3);
    ASSERT_EQ(tier.claim_latency_us_buckets_size(), 3);
    ASSERT_EQ(tier.claim_latency_counts_size(), 3);
    EXPECT_EQ(tier.claim_latency_us_buckets(1), 10000);
    EXPECT_EQ(tier.claim_latency_counts(0), 5);
    EXPECT_EQ(tier.claim_latency_counts(2), 1);
    EXPECT_DOUBLE_EQ(tier.refill_per_second(), 0.5);
    EXPECT_DOUBLE_EQ(tier.tier().price_per_hour_usd(), 0.02);
    EXPECT_DOUBLE_EQ(tier.tier().limits().cpu(), 1.5);
    EXPECT_EQ(tier.tier().limits().memory_bytes(), 512LL << 20);
    EXPECT_EQ(tier.tier().limits().pids(), 256);
    EXPECT_EQ(tier.tier().limits().disk_bytes(), 1LL << 30);
    EXPECT_EQ(tier.tier().network(), v1::NETWORK_POLICY_ALLOWLIST);
    ASSERT_EQ(tier.tier().allowlist_size(), 1);
    EXPECT_EQ(tier.tier().allowlist(0), "example.test:443");
    EXPECT_EQ(tier.tier().warm_count(), 2);
    EXPECT_EQ(tier.tier().max_count(), 32);
}

TEST_F(SessionServiceTest, ListSessionsPagesAndFilters)
{
    for (int i = 0; i < 5; ++i)
        submit();
    v1::ListSessionsRequest request;
    request.set_page_size(2);
    std::set<std::string> seen;
    for (int page = 0; page < 10; ++page) {
        v1::ListSessionsResponse response;
        ASSERT_TRUE(m_stub->sessions->ListSessions(context().get(), request, &response).ok());
        for (const auto &s : response.sessions())
            seen.insert(s.id());
        if (response.next_page_token().empty())
            break;
        request.set_page_token(response.next_page_token());
    }
    EXPECT_EQ(seen.size(), 5u);

    v1::ListSessionsRequest running;
    running.mutable_filter()->add_statuses(v1::SESSION_STATUS_RUNNING);
    v1::ListSessionsResponse none;
    ASSERT_TRUE(m_stub->sessions->ListSessions(context().get(), running, &none).ok());
    EXPECT_EQ(none.sessions_size(), 0);
}

TEST_F(SessionServiceTest, StreamGivesHistoryThenTheLiveTailInBatchesThenEnds)
{
    const v1::Session session = submit();
    appendEvents(session.id(), 3000);

    v1::StreamEventsRequest request;
    request.set_session_id(session.id());
    request.set_from_seq(1);
    request.set_follow(true);
    auto ctx = context();
    auto reader = m_stub->sessions->StreamEvents(ctx.get(), request);

    std::thread producer([&] {
        appendEvents(session.id(), 5000, 250);
        end(session.id());
    });

    int64_t expected = 1;
    int messages = 0;
    bool ended = false;
    v1::EventBatch batch;
    while (reader->Read(&batch)) {
        ++messages;
        for (const auto &event : batch.events())
            ASSERT_EQ(event.seq(), expected++) << "out of order or missing";
        ended = ended || batch.end_of_session();
    }
    producer.join();
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_TRUE(ended);
    EXPECT_EQ(expected - 1, 2 + 3000 + 5000 + 1);   // session.created, env.decision, the appends, the end
    EXPECT_LT(messages, 8002 / 10) << "events should come in batches, not one per message";
}

TEST_F(SessionServiceTest, StalledFollowerDoesNotHoldAppendsAndCatchesUpFromTheStore)
{
    const v1::Session session = submit();
    v1::StreamEventsRequest request;
    request.set_session_id(session.id());
    request.set_follow(true);
    request.set_max_batch(500);
    auto ctx = context();
    auto reader = m_stub->sessions->StreamEvents(ctx.get(), request);
    v1::EventBatch batch;
    ASSERT_TRUE(reader->Read(&batch));   // the stream is open and caught up

    // Far more than a stream may queue, and far more bytes than gRPC's flow-control window holds,
    // while the client reads nothing.
    const int n = static_cast<int>(server::StreamHub::kMaxQueuedEvents) * 2;
    appendEvents(session.id(), n, 1000, 1024);
    end(session.id());

    int64_t expected = batch.events_size() + 1;
    while (reader->Read(&batch)) {
        for (const auto &event : batch.events())
            ASSERT_EQ(event.seq(), expected++);
    }
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_EQ(expected - 1, 2 + n + 1);
    EXPECT_GE(m_broker->streamCatchUps(), 1) << "the stream never fell back to the store, so this test proved nothing";
}

TEST_F(SessionServiceTest, StreamRefusesUnknownSessionsAndSeqsPastTheTail)
{
    const v1::Session session = submit();
    v1::StreamEventsRequest request;
    request.set_session_id("s-nope");
    v1::EventBatch batch;
    auto ctx = context();
    auto reader = m_stub->sessions->StreamEvents(ctx.get(), request);
    EXPECT_FALSE(reader->Read(&batch));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);

    request.set_session_id(session.id());
    request.set_from_seq(4);   // the log has two events (session.created, env.decision): 1 to 3 are fine
    auto ctx2 = context();
    auto past = m_stub->sessions->StreamEvents(ctx2.get(), request);
    EXPECT_FALSE(past->Read(&batch));
    const auto status = past->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
    EXPECT_NE(status.error_message().find("from 1 to 3"), std::string::npos) << status.error_message();
}

TEST_F(SessionServiceTest, PauseResumeCancelFollowTheStateMachine)
{
    const v1::Session session = submit();
    v1::SessionActionRequest action;
    action.set_id(session.id());
    v1::Session out;
    EXPECT_EQ(m_stub->sessions->ResumeSession(context().get(), action, &out).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    ASSERT_TRUE(m_stub->sessions->PauseSession(context().get(), action, &out).ok());
    EXPECT_EQ(out.status(), v1::SESSION_STATUS_PAUSED);
    ASSERT_TRUE(m_stub->sessions->ResumeSession(context().get(), action, &out).ok());
    EXPECT_EQ(out.status(), v1::SESSION_STATUS_RUNNING);
    ASSERT_TRUE(m_stub->sessions->CancelSession(context().get(), action, &out).ok());
    EXPECT_EQ(out.status(), v1::SESSION_STATUS_CANCELLED);
    const auto again = m_stub->sessions->CancelSession(context().get(), action, &out);
    EXPECT_EQ(again.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(again.error_message().find("cancelled"), std::string::npos);

    action.set_id("s-nope");
    EXPECT_EQ(m_stub->sessions->CancelSession(context().get(), action, &out).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(SessionServiceTest, WatchSendsTheSnapshotThenChanges)
{
    const v1::Session first = submit();
    auto ctx = context();
    auto reader = m_stub->sessions->WatchSessions(ctx.get(), {});
    v1::SessionChanges changes;
    ASSERT_TRUE(reader->Read(&changes));
    EXPECT_TRUE(changes.initial());
    ASSERT_EQ(changes.sessions_size(), 1);
    EXPECT_EQ(changes.sessions(0).id(), first.id());

    const v1::Session second = submit();
    bool sawSecond = false;
    while (!sawSecond && reader->Read(&changes)) {
        EXPECT_FALSE(changes.initial());
        for (const auto &s : changes.sessions())
            sawSecond = sawSecond || s.id() == second.id();
    }
    EXPECT_TRUE(sawSecond);
    ctx->TryCancel();
    reader->Finish();
}

} // namespace
} // namespace paddock::server
