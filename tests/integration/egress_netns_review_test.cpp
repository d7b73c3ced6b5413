// The egress matrix, end to end, for hosts a review opens: an approved egress_exception opens its
// host to that session's commands only (the broker's own parts in this process, so a test can
// approve as another principal), and the pool holds a grant for the one command it rides on. The
// network, the fake internet and the fixture are in egress_netns_fixture.h.
//
// Needs root (namespaces, bwrap); skips with a message otherwise.
//
// Threads: everything here runs on the test's main thread, except the one exec
// PoolHoldsGrantsForTheirCommandOnly runs with std::async to overlap two sandboxes' commands.

#include "broker/engine/step_engine.h"
#include "broker/llm/scripted_model.h"
#include "broker/pool_client/grpc_pool_client.h"
#include "broker/review/review_desk.h"
#include "broker/store/sqlite_event_store.h"
#include "tests/integration/egress_netns_fixture.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace paddock::test {
namespace {

// A playbook step asking for an egress_exception review of one host.
std::string egressException(const std::string &host)
{
    return "[[step]]\ntool = \"propose_change\"\nkind = \"egress_exception\"\ntargets = [\"" + host +
           "\"]\nchange = \"reach " + host + "\"\nchange_format = \"text\"\njustification = \"the test needs " + host +
           "\"\n";
}

// The tool.result of the session's (last) propose_change.
json proposalResult(const std::vector<json> &events)
{
    json out;
    for (const auto &e : events) {
        const json &p = e.at("payload");
        const json payload = p.is_string() ? json::parse(p.get<std::string>()) : p;
        if (e.value("kind", "") == "tool.result" && payload.value("name", "") == "propose_change")
            out = payload;
    }
    return out;
}

// The broker's own parts (SQLite store, step engine, scripted model, review desk) in this process,
// on the real pool: paddockd names its callers by their connection (docs/permissions.md), so only
// here can a test approve as a principal other than the session's submitter.
class ReviewingBroker {
public:
    ReviewingBroker(const fs::path &dir, const std::string &poolEndpoint)
    {
        auto store = store::openSqliteEventStore(dir / "reviewing.db");
        EXPECT_TRUE(store) << store.error().message;
        m_store = std::move(*store);
        auto queries = store::ReviewQueries::open(*m_store);
        EXPECT_TRUE(queries);
        m_queries = std::move(*queries);
        m_desk = std::make_unique<review::ReviewDesk>(*m_store, *m_queries, review::ReviewPolicy{});
        m_pools.add(pool_client::makeGrpcPoolClient("egress", poolEndpoint), true);
        m_engine = std::make_unique<engine::StepEngine>(
            *m_store, m_pools, [this](const std::string &) -> llm::ModelAdapter * { return &m_scripted; });
    }
    ~ReviewingBroker()
    {
        m_engine->stop();
        m_desk.reset();
        m_store->close();
    }

    void submit(const std::string &id, const std::string &tier, const std::string &playbook)
    {
        store::AppendRequest create;
        create.sessionId = id;
        create.expectedLastSeq = 0;
        create.events.push_back({core::kind::SessionCreated,
                                 json{{"agent", "fetcher"}, {"model", "scripted"}, {"tier", tier}, {"goal", "fetch"},
                                      {"submitted_by", "bob"}, {"playbook_toml", playbook}}.dump()});
        ASSERT_TRUE(m_store->appendSync(std::move(create)));
    }

    // Steps every session until none has anything to do (ended, or waiting for a review).
    void runUntilIdle()
    {
        for (int i = 0; i < 200; ++i) {
            auto lease = m_store->acquireLease("test", 60000, 0);
            if (!lease)
                return;
            m_engine->runOneStep(*lease);
            m_store->releaseLease(*lease);
        }
        FAIL() << "the sessions did not settle";
    }

    // Approves the session's pending review as alice, who reads it first (egress is high risk).
    std::string approvePending(const std::string &sessionId)
    {
        store::ReviewListQuery query;
        query.sessionId = sessionId;
        auto page = m_desk->list(query);
        EXPECT_TRUE(page && page->items.size() == 1) << "no single pending review for " << sessionId;
        if (!page || page->items.size() != 1)
            return {};
        const auto item = page->items.front();
        EXPECT_EQ(item.kind, "egress_exception");
        EXPECT_TRUE(m_desk->fetch(item.id, "alice"));
        review::DecideRequest approve;
        approve.ids = {item.id};
        approve.approve = true;
        approve.decider = "alice";
        approve.reason = "the test needs it";
        approve.changeHashes[item.id] = item.changeHash;
        auto decided = m_desk->decide(approve);
        EXPECT_TRUE(decided) << decided.error().message;
        return item.id;
    }

    core::SessionStatus status(const std::string &id) { return m_store->getSession(id)->status; }
    std::string statusReason(const std::string &id) { return m_store->getSession(id)->statusReason; }

    // The session's log as paddockctl prints it: {"kind", "payload"}.
    std::vector<json> events(const std::string &id)
    {
        std::vector<json> out;
        auto log = m_store->readEvents(id, 1, 100000);
        EXPECT_TRUE(log);
        if (log)
            for (const auto &e : *log)
                out.push_back({{"kind", e.kind}, {"payload", json::parse(e.payload)}});
        return out;
    }

private:
    std::unique_ptr<store::EventStore> m_store;
    std::unique_ptr<store::ReviewQueries> m_queries;
    std::unique_ptr<review::ReviewDesk> m_desk;
    placement::PoolSet m_pools;
    llm::ScriptedModel m_scripted;
    std::unique_ptr<engine::StepEngine> m_engine;
};

// How many requests for a path the fake internet saw since the test began.
using ReachedCount = std::function<size_t(const std::string &path)>;

// Another session on the same pool and tier: the approval is not its own.
void expectOtherSessionNotOpened(ReviewingBroker &broker, const std::string &tier, const ReachedCount &reached)
{
    broker.submit("s-other", tier, R"(goal = "try approved.test without a review"
[[step]]
tool = "run_command"
command = "curl -s -o /dev/null -w 'other=%{http_code}' --max-time 20 http://approved.test:8080/other-session"
expect_stdout = "other=403"
)");
    broker.runUntilIdle();
    EXPECT_EQ(broker.status("s-other"), core::SessionStatus::Succeeded) << broker.statusReason("s-other");
    auto events = broker.events("s-other");
    ASSERT_EQ(ofKind(events, "egress.refused").size(), 1u);
    EXPECT_EQ(ofKind(events, "egress.refused")[0].value("reason", ""), "not_allowlisted");
    EXPECT_TRUE(ofKind(events, "egress.allowed").empty());
    EXPECT_EQ(reached("/other-session"), 0u);
}

// A tier without network: approved, and still nothing gets out; the result names this tier.
void expectLiteTierNotOpened(ReviewingBroker &broker, const std::string &tier, const ReachedCount &reached)
{
    broker.submit("s-lite", "lite", R"(goal = "approved on a tier without network"
)" + egressException("approved.test") + R"([[step]]
tool = "run_command"
command = "curl -sS --max-time 10 -x http://127.0.0.1:3128 http://approved.test:8080/lite-approved"
expect_exit = 7
)");
    broker.runUntilIdle();
    ASSERT_FALSE(broker.approvePending("s-lite").empty());
    broker.runUntilIdle();
    EXPECT_EQ(broker.status("s-lite"), core::SessionStatus::Succeeded) << broker.statusReason("s-lite");
    auto events = broker.events("s-lite");
    const json liteDecided = proposalResult(events);
    EXPECT_EQ(liteDecided.value("reachable", true), false) << liteDecided.dump();
    const std::string note = liteDecided.value("note", "");
    EXPECT_NE(note.find("tier 'lite' has no network at all"), std::string::npos) << note;
    EXPECT_NE(note.find("paddockctl override s-lite " + tier), std::string::npos) << note;
    EXPECT_EQ(reached("/lite-approved"), 0u);
}

// Approvals that name the metadata service: every spelling is still refused as metadata.
void expectMetadataNotOpened(ReviewingBroker &broker, const std::string &tier, const ReachedCount &reached)
{
    std::string script = kProbe;
    for (const auto &spelling : kMetadataSpellings)
        script += "probe 'GET http://" + spelling + ":8080/approved-meta HTTP/1.1'\n";
    broker.submit("s-meta", tier, R"(goal = "metadata, approved"
)" + egressException("169.254.169.254") + egressException("metadata.google.internal") + R"([[step]]
tool = "write_file"
path = "probe.sh"
content = )" + json(script).dump() + R"(
[[step]]
tool = "run_command"
command = "bash probe.sh"
)");
    broker.runUntilIdle();
    ASSERT_FALSE(broker.approvePending("s-meta").empty());
    broker.runUntilIdle();
    ASSERT_FALSE(broker.approvePending("s-meta").empty());
    broker.runUntilIdle();
    EXPECT_EQ(broker.status("s-meta"), core::SessionStatus::Succeeded) << broker.statusReason("s-meta");
    auto events = broker.events("s-meta");
    const std::string out = stdoutOf(events, "bash probe.sh");
    for (const auto &spelling : kMetadataSpellings)
        EXPECT_NE(out.find("GET http://" + spelling + ":8080/approved-meta HTTP/1.1 => HTTP/1.1 403 Forbidden"),
                  std::string::npos) << spelling << "\n" << out;
    const auto metaRefused = ofKind(events, "egress.refused");
    ASSERT_EQ(metaRefused.size(), kMetadataSpellings.size()) << out;
    for (const auto &r : metaRefused) {
        EXPECT_EQ(r.value("reason", ""), "metadata") << r.dump();
        EXPECT_FALSE(r.contains("review_id")) << r.dump();
    }
    EXPECT_TRUE(ofKind(events, "egress.allowed").empty());
    EXPECT_EQ(reached("/approved-meta"), 0u);
    for (const auto &request : g_server.requests())
        EXPECT_EQ(request.find("169.254.169.254"), std::string::npos) << "the fake metadata server was reached: " << request;
}

// An approved egress_exception opens its host to that session's commands, through the proxy:
// refused before the review, reached after it (plain and CONNECT), and recorded as allowed by
// that review. Another session on the same pool still cannot reach the host, a tier without
// network reaches nothing even when approved (and the approval says so), and an approval that
// names the metadata service opens none of its spellings.
TEST_P(EgressNetnsTest, ApprovedHostReachedOnlyByThatSession)
{
    const std::string tier = GetParam().name;
    ReviewingBroker broker(m_dir->path(), "127.0.0.1:" + std::to_string(m_poolPort));
    const size_t requestsBefore = g_server.requests().size();   // earlier tests in this process
    const auto reached = [&](const std::string &path) {
        size_t n = 0;
        const auto requests = g_server.requests();
        for (size_t i = requestsBefore; i < requests.size(); ++i)
            n += requests[i].find(" " + path + " ") != std::string::npos ? 1 : 0;
        return n;
    };

    broker.submit("s-approved", tier, R"(goal = "reach approved.test after a review"
[[step]]
tool = "run_command"
command = "curl -s -o /dev/null -w 'before=%{http_code}' --max-time 20 http://approved.test:8080/before"
expect_stdout = "before=403"
)" + egressException("approved.test") + R"([[step]]
tool = "run_command"
command = "curl -sS -f --max-time 20 http://approved.test:8080/approved"
expect_stdout = "hello from 198.51.100.4 GET /approved"
[[step]]
tool = "run_command"
command = "curl -sS -f -p --max-time 20 http://approved.test:8080/approved-tunnel"
expect_stdout = "hello from 198.51.100.4 GET /approved-tunnel"
)");
    broker.runUntilIdle();
    ASSERT_EQ(broker.status("s-approved"), core::SessionStatus::WaitingApproval) << broker.statusReason("s-approved");
    EXPECT_EQ(reached("/before"), 0u);
    const std::string reviewId = broker.approvePending("s-approved");
    ASSERT_FALSE(reviewId.empty());
    broker.runUntilIdle();
    auto events = broker.events("s-approved");
    EXPECT_EQ(broker.status("s-approved"), core::SessionStatus::Succeeded) << broker.statusReason("s-approved");
    EXPECT_EQ(reached("/approved"), 1u);
    EXPECT_EQ(reached("/approved-tunnel"), 1u);
    const json decided = proposalResult(events);
    EXPECT_EQ(decided.value("reachable", false), true) << decided.dump();
    const auto refused = ofKind(events, "egress.refused");
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_EQ(refused[0].value("host", ""), "approved.test");
    EXPECT_EQ(refused[0].value("reason", ""), "not_allowlisted");
    const auto allowed = ofKind(events, "egress.allowed");
    ASSERT_EQ(allowed.size(), 2u);
    for (const auto &a : allowed) {
        EXPECT_EQ(a.value("host", ""), "approved.test") << a.dump();
        EXPECT_EQ(a.value("address", ""), "198.51.100.4") << a.dump();
        EXPECT_EQ(a.value("review_id", ""), reviewId) << a.dump();
        EXPECT_EQ(a.value("detail", ""), "approved in review " + reviewId) << a.dump();
        EXPECT_GT(a.value("bytes_in", 0), 0) << a.dump();
    }
    EXPECT_EQ(allowed[0].value("method", ""), "GET");
    EXPECT_EQ(allowed[1].value("method", ""), "CONNECT");

    ASSERT_NO_FATAL_FAILURE(expectOtherSessionNotOpened(broker, tier, reached));
    ASSERT_NO_FATAL_FAILURE(expectLiteTierNotOpened(broker, tier, reached));
    ASSERT_NO_FATAL_FAILURE(expectMetadataNotOpened(broker, tier, reached));
}

// The pool's API directly: grants ride on one exec and hold for that command only, in that
// sandbox only, even while another sandbox of the same tier runs a command at the same time.
TEST_P(EgressNetnsTest, PoolHoldsGrantsForTheirCommandOnly)
{
    const size_t requestsBefore = g_server.requests().size();
    auto client = pool_client::makeGrpcPoolClient("egress", "127.0.0.1:" + std::to_string(m_poolPort));
    auto mine = client->claim(GetParam().name, "s-grant", "s-grant:claim");
    auto theirs = client->claim(GetParam().name, "s-nogrant", "s-nogrant:claim");
    ASSERT_TRUE(mine) << mine.error().message;
    ASSERT_TRUE(theirs) << theirs.error().message;
    const std::string curl = "curl -s -o /dev/null -w '%{http_code}' --max-time 20 http://approved.test:8080/";

    // While the granted command runs (it waits for the other to finish), the other sandbox tries.
    pool_client::ExecSpec granted;
    granted.sandboxId = mine->sandboxId;
    granted.argv = {"/bin/sh", "-c", "sleep 2; " + curl + "grant-held"};
    granted.egressGrants = {{"approved.test", "rev-held"}};
    auto running = std::async(std::launch::async, [&] { return client->exec(granted); });
    pool_client::ExecSpec other;
    other.sandboxId = theirs->sandboxId;
    other.argv = {"/bin/sh", "-c", curl + "grant-elsewhere"};
    auto elsewhere = client->exec(other);
    auto during = running.get();
    ASSERT_TRUE(during) << during.error().message;
    ASSERT_TRUE(elsewhere) << elsewhere.error().message;
    EXPECT_EQ(during->stdoutData, "200");
    ASSERT_EQ(during->egress.size(), 1u);
    EXPECT_TRUE(during->egress[0].allowed);
    EXPECT_EQ(during->egress[0].reviewId, "rev-held");
    EXPECT_EQ(elsewhere->stdoutData, "403");
    ASSERT_EQ(elsewhere->egress.size(), 1u);
    EXPECT_EQ(elsewhere->egress[0].reason, "not_allowlisted");

    // The next command of the same sandbox without the grant: refused again.
    pool_client::ExecSpec after;
    after.sandboxId = mine->sandboxId;
    after.argv = {"/bin/sh", "-c", curl + "grant-gone"};
    auto gone = client->exec(after);
    ASSERT_TRUE(gone) << gone.error().message;
    EXPECT_EQ(gone->stdoutData, "403");

    // A grant that is not an allowlist entry: INVALID_ARGUMENT naming it, and nothing runs.
    pool_client::ExecSpec bad = after;
    bad.argv = {"/bin/sh", "-c", curl + "grant-bad"};
    bad.egressGrants = {{"http://approved.test/", "rev-bad"}};
    auto refused = client->exec(bad);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(refused.error().message.find("rev-bad"), std::string::npos) << refused.error().message;
    size_t held = 0, others = 0;
    const auto requests = g_server.requests();
    for (size_t i = requestsBefore; i < requests.size(); ++i) {
        held += requests[i].find("/grant-held ") != std::string::npos ? 1 : 0;
        others += requests[i].find("/grant-") != std::string::npos && requests[i].find("/grant-held ") == std::string::npos;
    }
    EXPECT_EQ(held, 1u);
    EXPECT_EQ(others, 0u) << "a command without the grant reached approved.test";
    EXPECT_TRUE(client->release(mine->sandboxId));
    EXPECT_TRUE(client->release(theirs->sandboxId));
}

INSTANTIATE_TEST_SUITE_P(Tiers, EgressNetnsTest, ::testing::ValuesIn(kTierCases),
                         [](const ::testing::TestParamInfo<TierCase> &tier) { return tier.param.runtime; });

} // namespace
} // namespace paddock::test
