// The exporter against a real store (SQLite in a temporary directory and PostgreSQL in a fresh
// database of the test's own server) and the fake OTLP/HTTP receiver on loopback: every span once,
// the cursor moved only by an acknowledged batch, retries that honour Retry-After and count one
// outage, 400 and 413 answers, spans of a running session sent as they end, the cursor table's
// compare-and-set and leases, and two exporters on one PostgreSQL database.

#include "broker/otlp/export_cursor.h"
#include "broker/otlp/otlp_exporter.h"
#include "broker/otlp/otlp_http.h"
#include "broker/otlp/span_mapping.h"
#include "tests/support/fake_otlp_receiver.h"
#include "tests/support/store_backend.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <thread>

namespace paddock::otlp {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::FakeOtlpReceiver;

constexpr auto kWait = 30s;

// Polls until ready() or timeout (no assertion on how long it took).
template <typename Predicate>
bool eventually(Predicate ready, std::chrono::milliseconds timeout = kWait)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!ready()) {
        if (std::chrono::steady_clock::now() > deadline)
            return false;
        std::this_thread::sleep_for(10ms);
    }
    return true;
}

class TempDir {
public:
    TempDir()
    {
        std::string pattern = (std::filesystem::temp_directory_path() / "paddock-otlp-XXXXXX").string();
        m_path = ::mkdtemp(pattern.data());
    }
    ~TempDir()
    {
        std::error_code ec;
        std::filesystem::remove_all(m_path, ec);
    }
    const std::filesystem::path &path() const { return m_path; }

private:
    std::filesystem::path m_path;
};

core::NewEvent newEvent(const char *kind, const json &payload, int64_t cost = 0)
{
    return core::NewEvent{kind, payload.dump(), cost};
}

class OtlpExporterTest : public ::testing::TestWithParam<test::StoreBackend> {
protected:
    void SetUp() override
    {
        auto opened = test::openTestStore(GetParam(), m_dir.path() / "broker.db");
        if (!opened.skipReason.empty())
            GTEST_SKIP() << opened.skipReason;
        ASSERT_TRUE(opened.store) << opened.error;
        m_store = std::move(opened.store);
        ASSERT_TRUE(m_receiver.start());
    }

    void TearDown() override
    {
        if (HasFailure()) {
            for (const auto &post : m_receiver.posts())
                std::cerr << "post " << post.path << " -> " << post.status << " (" << post.items << " items)\n";
        }
    }

    ExporterOptions options(int batchSize = 512)
    {
        ExporterOptions options;
        options.endpoint = m_receiver.endpoint();
        options.headers = {{"Authorization", "Basic dGVzdDp0ZXN0"}};
        options.timeoutMs = 5000;
        options.batchSize = batchSize;
        options.intervalMs = 20;
        options.initialBackoffMs = 20;
        options.maxBackoffMs = 200;
        options.exclusiveStore = GetParam() == test::StoreBackend::Sqlite;
        return options;
    }

    void append(const std::string &id, std::vector<core::NewEvent> events, bool create = false)
    {
        store::AppendRequest request;
        request.sessionId = id;
        request.expectedLastSeq = create ? 0 : store::AppendRequest::kAnySeq;
        request.events = std::move(events);
        auto done = m_store->appendSync(std::move(request));
        ASSERT_TRUE(done) << done.error().message;
    }

    // A session with `commands` run_command calls; ended (succeeded) unless open. Spans: a chat and
    // a tool span per command, a chat and a tool span for finish, and the root: 2 x commands + 3.
    void session(const std::string &id, int commands, bool open = false)
    {
        append(id, {newEvent("session.created", {{"agent", "builder"}, {"model", "scripted"}, {"tier", "lite"}})}, true);
        append(id, {newEvent("sandbox.claimed", {{"pool", "local"}, {"sandbox_id", "sb-" + id}, {"tier", "lite"}})});
        for (int i = 0; i <= commands; ++i) {
            const std::string call = "call-" + std::to_string(i + 1);
            const std::string tool = i < commands ? "run_command" : "finish";
            append(id, {newEvent("model.response", {{"model", "scripted"},
                                                    {"tool_calls", {{{"id", call}, {"name", tool}}}},
                                                    {"usage", {{"input_tokens", 100 + i}, {"output_tokens", 10}, {"cached_tokens", 0}}},
                                                    {"latency_ms", 5}}),
                        newEvent("cost", {{"kind", "model"}}, 300), newEvent("tool.call", {{"call_id", call}, {"name", tool}})});
            append(id, {newEvent("tool.result", {{"call_id", call}, {"name", tool}, {"exit_code", 0}, {"duration_ms", 1}})});
        }
        if (!open)
            append(id, {newEvent("state.changed", {{"status", "succeeded"}, {"reason", "done"}})});
    }

    int64_t lastSeq(const std::string &id)
    {
        auto state = m_store->getSession(id);
        return state ? state->lastSeq : -1;
    }

    // (span_seq, metric_seq, owner) of the session's cursor row; span_seq -1 when there is none.
    std::tuple<int64_t, int64_t, std::string> cursor(const std::string &id)
    {
        std::string owner;
        auto row = cursorRow(*m_store, id, &owner);
        if (!row || row->sessionId.empty())
            return {-1, -1, ""};
        return {row->spanSeq, row->metricSeq, owner};
    }

    // The seq of the session's first span's end (its first model response's cost): a cursor below
    // it has acknowledged no span.
    int64_t firstSpanEnd(const std::string &id)
    {
        auto events = m_store->readEvents(id, 1, 1000);
        for (const auto &e : events ? *events : std::vector<core::Event>{}) {
            if (e.kind == "cost")
                return e.seq;
        }
        return -1;
    }

    bool exported(const std::string &id)
    {
        auto [spanSeq, metricSeq, owner] = cursor(id);
        return spanSeq == lastSeq(id) && metricSeq == lastSeq(id);
    }

    void expectEverySpanOnce(size_t expected)
    {
        EXPECT_TRUE(m_receiver.problems().empty()) << ::testing::PrintToString(m_receiver.problems());
        EXPECT_TRUE(m_receiver.parentProblems().empty()) << ::testing::PrintToString(m_receiver.parentProblems());
        const auto counts = m_receiver.spanCounts();
        EXPECT_EQ(counts.size(), expected);
        for (const auto &[id, count] : counts)
            EXPECT_EQ(count, 1) << "span " << id << " was taken " << count << " times";
    }

    TempDir m_dir;
    std::unique_ptr<store::EventStore> m_store;
    FakeOtlpReceiver m_receiver;
};

TEST_P(OtlpExporterTest, ExportsEverySpanOnceInBatchesAndARestartSendsNothingAgain)
{
    for (const char *id : {"s-a", "s-b", "s-c"})
        session(id, 2);
    {
        OtlpExporter exporter(*m_store, options(3));
        exporter.start();
        ASSERT_TRUE(m_receiver.waitUntil(kWait, [](FakeOtlpReceiver &r) { return r.distinctSpansLocked() == 21; }));
        ASSERT_TRUE(eventually([&] { return exported("s-a") && exported("s-b") && exported("s-c"); }));
        EXPECT_EQ(exporter.stats().spansDelivered, 21);
        EXPECT_EQ(exporter.stats().callsDelivered, 9);
    }
    expectEverySpanOnce(21);
    for (const auto &post : m_receiver.posts()) {
        EXPECT_EQ(post.authorization, "Basic dGVzdDp0ZXN0");
        EXPECT_EQ(post.contentType, "application/json");
        if (post.path == "/v1/traces") {
            EXPECT_LE(post.items, 3u) << "batches of at most batch_size spans";
        }
    }
    // Complete sessions are given back: a finished export holds no lease.
    EXPECT_EQ(std::get<2>(cursor("s-a")), "");
    const auto points = m_receiver.metricPoints();
    int64_t inputTokens = 0;
    for (const auto &point : points) {
        if (point["name"] == "gen_ai.client.token.usage"
            && test::otlp_check::attribute(point["point"], "gen_ai.token.type") == "input")
            inputTokens += static_cast<int64_t>(point["point"]["sum"].get<double>());
    }
    EXPECT_EQ(inputTokens, 3 * (100 + 101 + 102));

    // Another exporter on the same store (a broker restarted): nothing is sent again.
    const size_t before = m_receiver.posts().size();
    OtlpExporter again(*m_store, options(3));
    again.start();
    ASSERT_TRUE(eventually([&] { return again.stats().passes >= 5; }));
    again.stop();
    EXPECT_EQ(m_receiver.posts().size(), before);
    expectEverySpanOnce(21);
}

TEST_P(OtlpExporterTest, ASpanIsSentWhenItEndsAndTheRootWhenTheSessionEnds)
{
    session("s-live", 1, /*open=*/true);   // chat + run_command, chat + finish; not ended yet
    OtlpExporter exporter(*m_store, options());
    exporter.start();
    ASSERT_TRUE(m_receiver.waitUntil(kWait, [](FakeOtlpReceiver &r) { return r.distinctSpansLocked() == 4; }));
    for (const auto &span : m_receiver.spans())
        EXPECT_TRUE(span.contains("parentSpanId")) << "no root before the session ends: " << span.dump();
    append("s-live", {newEvent("state.changed", {{"status", "succeeded"}, {"reason", "done"}})});
    ASSERT_TRUE(m_receiver.waitUntil(kWait, [](FakeOtlpReceiver &r) { return r.distinctSpansLocked() == 5; }));
    exporter.stop();
    expectEverySpanOnce(5);
    const auto spans = m_receiver.spans();
    EXPECT_FALSE(spans.back().contains("parentSpanId"));
    EXPECT_EQ(spans.back()["spanId"], spanIdFor("s-live", "session", 0));
}

TEST_P(OtlpExporterTest, TheCursorMovesOnlyOnceTheReceiverAcknowledged)
{
    session("s-1", 1);
    m_receiver.hold();
    OtlpExporter exporter(*m_store, options());
    exporter.start();
    ASSERT_TRUE(m_receiver.waitHeld(kWait, 1));
    EXPECT_LT(std::get<0>(cursor("s-1")), firstSpanEnd("s-1")) << "a post in flight moved the cursor past a span";
    // Not taken: the cursor stays, and the same spans come again.
    m_receiver.release({503, "0", "{}"}, /*keepHolding=*/true);
    ASSERT_TRUE(m_receiver.waitHeld(kWait, 2));
    EXPECT_LT(std::get<0>(cursor("s-1")), firstSpanEnd("s-1"));
    m_receiver.release({200, "", "{}"});
    ASSERT_TRUE(eventually([&] { return exported("s-1"); }));
    exporter.stop();
    expectEverySpanOnce(5);
}

TEST_P(OtlpExporterTest, FailuresAreRetriedWithBackoffAsOneOutage)
{
    session("s-1", 1);
    m_receiver.script({{503, "0", "{}"}, {429, "", "{}"}, {500, "", "{}"}, {502, "", "{}"}});
    OtlpExporter exporter(*m_store, options());
    exporter.start();
    ASSERT_TRUE(eventually([&] { return exported("s-1"); }));
    exporter.stop();
    expectEverySpanOnce(5);
    EXPECT_EQ(exporter.stats().failedPosts, 4);
    EXPECT_EQ(exporter.stats().outages, 1) << "one outage, logged once";
}

TEST_P(OtlpExporterTest, AnEndpointThatIsDownKeepsTheCursorUntilItIsBack)
{
    session("s-1", 1);
    const int port = m_receiver.port();
    m_receiver.stop();   // nothing listens there now
    OtlpExporter exporter(*m_store, options());
    exporter.start();
    ASSERT_TRUE(eventually([&] { return exporter.stats().failedPosts >= 5; }));
    EXPECT_LT(std::get<0>(cursor("s-1")), firstSpanEnd("s-1"));
    EXPECT_EQ(exporter.stats().outages, 1);
    EXPECT_EQ(exporter.stats().spansDelivered, 0);
    ASSERT_TRUE(m_receiver.start(port));
    ASSERT_TRUE(eventually([&] { return exported("s-1"); }));
    exporter.stop();
    expectEverySpanOnce(5);
    EXPECT_EQ(exporter.stats().outages, 1);
}

TEST_P(OtlpExporterTest, RetryAfterIsHonoured)
{
    session("s-1", 1);
    // The receiver asks for an hour: the exporter's own backoff (at most 200 ms here) does not
    // override it, however many passes it makes meanwhile.
    m_receiver.script({{429, "3600", "{}"}});
    OtlpExporter exporter(*m_store, options());
    exporter.start();
    ASSERT_TRUE(m_receiver.waitUntil(kWait, [](FakeOtlpReceiver &r) { return r.postsLocked() == 1; }));
    const int64_t passes = exporter.stats().passes;
    ASSERT_TRUE(eventually([&] { return exporter.stats().passes >= passes + 20; }));
    EXPECT_EQ(m_receiver.posts().size(), 1u);
    EXPECT_LT(std::get<0>(cursor("s-1")), firstSpanEnd("s-1")) << "nothing was acknowledged";
    exporter.stop();
    // A broker started later goes on from the cursor.
    OtlpExporter next(*m_store, options());
    next.start();
    ASSERT_TRUE(eventually([&] { return exported("s-1"); }));
    next.stop();
    expectEverySpanOnce(5);
}

TEST_P(OtlpExporterTest, ABatchRefusedFor400IsDroppedAndA413IsSplit)
{
    session("s-big", 4);     // 11 spans
    m_receiver.script({{413, "", "{}"}});
    OtlpExporter exporter(*m_store, options(100));
    exporter.start();
    ASSERT_TRUE(eventually([&] { return exported("s-big"); }));
    const auto posts = m_receiver.posts();
    ASSERT_GE(posts.size(), 3u);
    EXPECT_EQ(posts[0].status, 413);
    EXPECT_EQ(posts[0].items, 0u) << "a refused post is not taken";
    size_t largest = 0;
    for (size_t i = 1; i < posts.size(); ++i) {
        if (posts[i].path == "/v1/traces")
            largest = std::max(largest, posts[i].items);
    }
    EXPECT_LE(largest, 6u) << "after a 413 the batch is halved";
    expectEverySpanOnce(11);

    exporter.stop();

    session("s-bad", 0);     // 3 spans, refused for good
    m_receiver.script({{400, "", R"({"message":"bad"})"}});
    OtlpExporter next(*m_store, options(100));
    next.start();
    ASSERT_TRUE(eventually([&] { return exported("s-bad"); }));
    next.stop();
    EXPECT_EQ(next.stats().dropped, 3);
    EXPECT_EQ(m_receiver.spanCounts().size(), 11u);
}

TEST_P(OtlpExporterTest, TheCursorRowIsACompareAndSetWithALease)
{
    session("s-1", 0);
    const int64_t now = 1'000'000;
    ASSERT_TRUE(runWrites(*m_store, claimStatements("a", {"s-1"}, now, now + 1000, false)));
    // b cannot take it while a's lease runs, and neither advance nor renew works for it.
    ASSERT_TRUE(runWrites(*m_store, claimStatements("b", {"s-1"}, now + 500, now + 1500, false)));
    EXPECT_EQ(std::get<2>(cursor("s-1")), "a");
    ASSERT_TRUE(runWrites(*m_store, {advanceStatement("b", {"s-1", 0, 0}, {"s-1", 3, 3}, false, now)}));
    EXPECT_EQ(std::get<0>(cursor("s-1")), 0);
    // a advances from what it read; a stale compare changes nothing.
    ASSERT_TRUE(runWrites(*m_store, {advanceStatement("a", {"s-1", 0, 0}, {"s-1", 3, 2}, false, now)}));
    EXPECT_EQ(cursor("s-1"), std::make_tuple(int64_t{3}, int64_t{2}, std::string("a")));
    ASSERT_TRUE(runWrites(*m_store, {advanceStatement("a", {"s-1", 0, 0}, {"s-1", 5, 5}, false, now)}));
    EXPECT_EQ(std::get<0>(cursor("s-1")), 3);
    // Once a's lease has run out b takes the row, cursors kept; a can no longer move it.
    ASSERT_TRUE(runWrites(*m_store, claimStatements("b", {"s-1"}, now + 2000, now + 3000, false)));
    EXPECT_EQ(cursor("s-1"), std::make_tuple(int64_t{3}, int64_t{2}, std::string("b")));
    ASSERT_TRUE(runWrites(*m_store, {advanceStatement("a", {"s-1", 3, 2}, {"s-1", 5, 5}, false, now)}));
    EXPECT_EQ(std::get<0>(cursor("s-1")), 3);
    auto owned = ownedRows(*m_store, "b");
    ASSERT_TRUE(owned);
    ASSERT_EQ(owned->count("s-1"), 1u);
    EXPECT_EQ(owned->at("s-1").lastSeq, lastSeq("s-1"));
    // A release gives it up.
    ASSERT_TRUE(runWrites(*m_store, {advanceStatement("b", {"s-1", 3, 2}, {"s-1", 7, 7}, true, now)}));
    EXPECT_EQ(cursor("s-1"), std::make_tuple(int64_t{7}, int64_t{7}, std::string()));
}

TEST_P(OtlpExporterTest, TwoExportersOnOneDatabaseSendEachSpanOnce)
{
    if (GetParam() != test::StoreBackend::Postgres)
        GTEST_SKIP() << "one broker per SQLite file: only PostgreSQL has several exporters on one store";
    std::string why;
    auto *server = test::sharedPostgres(&why);
    ASSERT_TRUE(server) << why;
    // The second broker's store: the same database as the first.
    auto rows = m_store->query({"SELECT current_database()", {}});
    ASSERT_TRUE(rows && !rows->empty());
    auto second = store::openPostgresEventStore(server->connectionString(std::get<std::string>((*rows)[0][0])));
    ASSERT_TRUE(second) << second.error().message;

    session("s-held", 1);
    m_receiver.hold();
    OtlpExporter a(*m_store, options());
    a.start();
    ASSERT_TRUE(m_receiver.waitHeld(kWait, 1));
    // a holds s-held's lease while its post is in flight: b finds nothing to send.
    OtlpExporter b(**second, options());
    b.start();
    ASSERT_TRUE(eventually([&] { return b.stats().passes >= 10; }));
    EXPECT_EQ(m_receiver.heldTotal(), 1) << "only a's post, still held";
    EXPECT_TRUE(m_receiver.posts().empty());
    m_receiver.release({200, "", "{}"});
    ASSERT_TRUE(eventually([&] { return exported("s-held"); }));

    // Both at work on sessions that keep coming: each span still arrives once.
    for (int i = 0; i < 12; ++i)
        session("s-" + std::to_string(i), 1 + i % 3);
    size_t expected = 5;
    for (int i = 0; i < 12; ++i)
        expected += 2 * static_cast<size_t>(1 + i % 3) + 3;
    ASSERT_TRUE(m_receiver.waitUntil(kWait, [&](FakeOtlpReceiver &r) { return r.distinctSpansLocked() == expected; }));
    ASSERT_TRUE(eventually([&] {
        for (int i = 0; i < 12; ++i) {
            if (!exported("s-" + std::to_string(i)))
                return false;
        }
        return true;
    }));
    a.stop();
    b.stop();
    expectEverySpanOnce(expected);
    EXPECT_EQ(a.stats().spansDelivered + b.stats().spansDelivered, static_cast<int64_t>(expected));
}

INSTANTIATE_TEST_SUITE_P(Backends, OtlpExporterTest, PADDOCK_STORE_BACKENDS);

TEST(OtlpHttp, RetryAfterIsSecondsOrAnHttpDate)
{
    EXPECT_EQ(retryAfterMs("120", 0), 120000);
    EXPECT_EQ(retryAfterMs("0", 0), 0);
    EXPECT_EQ(retryAfterMs("", 0), std::nullopt);
    EXPECT_EQ(retryAfterMs("soon", 0), std::nullopt);
    // Sun, 06 Nov 1994 08:49:37 GMT is 784111777 s after the epoch.
    EXPECT_EQ(retryAfterMs("Sun, 06 Nov 1994 08:49:37 GMT", 784111777000 - 30000), 30000);
    EXPECT_EQ(retryAfterMs("Sun, 06 Nov 1994 08:49:37 GMT", 784111777000 + 5000), 0) << "a date past is now";
    EXPECT_EQ(retryAfterMs("999999999999999999999", 0), 600000) << "capped at ten minutes";
}

TEST(OtlpHttp, AnswersAreTakenAsTheSpecificationSays)
{
    auto answered = [](long status) {
        PostResult result;
        result.answered = true;
        result.status = status;
        return verdictOf(result);
    };
    EXPECT_EQ(answered(200), Verdict::Delivered);
    EXPECT_EQ(answered(202), Verdict::Delivered);
    EXPECT_EQ(answered(400), Verdict::Drop);
    EXPECT_EQ(answered(413), Verdict::Split);
    for (long status : {408L, 429L, 500L, 502L, 503L, 504L, 401L, 403L, 404L})
        EXPECT_EQ(answered(status), Verdict::Retry) << status;
    EXPECT_EQ(verdictOf(PostResult{}), Verdict::Retry) << "no answer";
}

} // namespace
} // namespace paddock::otlp
