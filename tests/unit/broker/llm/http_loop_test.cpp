// The HTTP loop on its own, against the fake chat server: what the openai adapter's tests do not
// reach (cancelling a request that waits for its retry, ending requests when the loop goes, chaining
// from a callback, the response limit, Retry-After-Ms). Backoff waits go through hooks.

#include "broker/llm/http_loop.h"
#include "tests/unit/broker/llm/chat_test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>

namespace paddock::llm {
namespace {

using test::FakeChatServer;
using test::Inbox;
using End = HttpResult::End;

HttpRequest post(const FakeChatServer &server)
{
    HttpRequest request;
    request.url = server.chatUrl();
    request.headers = {"Content-Type: application/json"};
    request.body = "{}";
    request.timeoutMs = 10000;
    request.maxRetries = 2;
    request.initialBackoffMs = 8;
    return request;
}

TEST(HttpLoopTest, CancelAllEndsARequestWaitingToRetry)
{
    FakeChatServer server;
    server.respond({{503, "overloaded", {}}});
    std::promise<void> waiting;
    HttpLoop loop([&waiting](std::chrono::milliseconds) {
        waiting.set_value();
        return std::chrono::hours(1);
    });
    Inbox<HttpResult> results;
    loop.submit(post(server), results.doneFor(0));
    ASSERT_EQ(waiting.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);

    loop.cancelAll();
    ASSERT_TRUE(results.waitFor(1));
    EXPECT_EQ(results.first(0).end, End::Cancelled);
    EXPECT_EQ(results.first(0).attempts, 1);
    EXPECT_EQ(server.requests().size(), 1u);
    EXPECT_EQ(results.deliveries(0), 1u);
}

TEST(HttpLoopTest, DestroyingTheLoopEndsOpenRequestsWithCancelled)
{
    FakeChatServer server;
    server.holdUntilOpen(1000);
    constexpr int kRequests = 3;
    Inbox<HttpResult> results;
    {
        HttpLoop loop;
        for (int i = 0; i < kRequests; ++i)
            loop.submit(post(server), results.doneFor(i));
        ASSERT_TRUE(server.waitUntilHeld(kRequests));
    }
    for (int i = 0; i < kRequests; ++i) {
        EXPECT_EQ(results.deliveries(i), 1u) << i;
        EXPECT_EQ(results.first(i).end, End::Cancelled) << i;
    }
}

TEST(HttpLoopTest, ACallbackMaySubmitTheNextRequest)
{
    FakeChatServer server;
    server.respond({{200, R"({"ok": true})", {}}});
    HttpLoop loop;
    Inbox<HttpResult> results;
    std::function<void(int)> chain = [&](int i) {
        loop.submit(post(server), [&, i](HttpResult result) {
            EXPECT_TRUE(loop.onLoopThread());
            if (i < 2)
                chain(i + 1);
            results.doneFor(i)(std::move(result));
        });
    };
    chain(0);
    ASSERT_TRUE(results.waitFor(3));
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(results.first(i).end, End::Answered) << i;
        EXPECT_EQ(results.first(i).status, 200) << i;
        EXPECT_EQ(results.first(i).body, R"({"ok": true})") << i;
    }
    EXPECT_FALSE(loop.onLoopThread());
}

TEST(HttpLoopTest, RetryAfterMsWinsOverRetryAfter)
{
    FakeChatServer server;
    server.respond({{429, "slow down", {{"Retry-After", "2"}, {"Retry-After-Ms", "150"}}}, {200, "{}", {}}});
    std::mutex mutex;
    std::vector<std::chrono::milliseconds> waits;
    HttpLoop loop([&](std::chrono::milliseconds wait) {
        std::lock_guard lock(mutex);
        waits.push_back(wait);
        return std::chrono::milliseconds(0);
    });
    Inbox<HttpResult> results;
    loop.submit(post(server), results.doneFor(0));
    ASSERT_TRUE(results.waitFor(1));
    EXPECT_EQ(results.first(0).status, 200);
    EXPECT_EQ(results.first(0).attempts, 2);
    std::lock_guard lock(mutex);
    EXPECT_EQ(waits, (std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(150)}));
}

TEST(HttpLoopTest, GivingUpSaysSo)
{
    FakeChatServer server;
    server.respond({{502, "bad gateway", {}}});
    HttpLoop loop([](std::chrono::milliseconds) { return std::chrono::milliseconds(0); });
    Inbox<HttpResult> results;
    loop.submit(post(server), results.doneFor(0));
    ASSERT_TRUE(results.waitFor(1));
    const HttpResult result = results.first(0);
    EXPECT_EQ(result.end, End::Answered);
    EXPECT_EQ(result.status, 502);
    EXPECT_EQ(result.body, "bad gateway");
    EXPECT_EQ(result.attempts, 3);
    EXPECT_TRUE(result.gaveUp);
}

TEST(HttpLoopTest, AResponseOverTheLimitIsTooLargeAndNotRetried)
{
    FakeChatServer server;
    server.respond({{200, std::string(100, 'x'), {}}});
    HttpLoop loop;
    HttpRequest request = post(server);
    request.maxResponseBytes = 10;
    Inbox<HttpResult> results;
    loop.submit(request, results.doneFor(0));
    ASSERT_TRUE(results.waitFor(1));
    EXPECT_EQ(results.first(0).end, End::TooLarge);
    EXPECT_EQ(results.first(0).attempts, 1);
}

TEST(HttpLoopTest, AnUnsupportedProtocolCannotBeSent)
{
    HttpLoop loop;
    HttpRequest request;
    request.url = "gopherish://127.0.0.1/v1/chat/completions";
    request.maxRetries = 3;
    Inbox<HttpResult> results;
    loop.submit(request, results.doneFor(0));
    ASSERT_TRUE(results.waitFor(1));
    EXPECT_EQ(results.first(0).end, End::CannotSend);
    EXPECT_THAT(results.first(0).error, ::testing::HasSubstr("gopherish"));
    EXPECT_EQ(results.first(0).attempts, 1);
    EXPECT_FALSE(results.first(0).gaveUp);
}

} // namespace
} // namespace paddock::llm
