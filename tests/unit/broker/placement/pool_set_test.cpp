// PoolSet: placement across many pools (health, tier, capacity, warm, load), the errors when no
// pool can take a claim, health over time, and the verdict that a pool is lost.

#include "broker/placement/pool_set.h"
#include "tests/support/fake_pool_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace paddock::placement {
namespace {

using test::FakePoolClient;

class PoolSetTest : public ::testing::Test {
protected:
    FakePoolClient *addPool(const std::string &name)
    {
        auto pool = std::make_unique<FakePoolClient>(name);
        FakePoolClient *raw = pool.get();
        m_set.add(std::move(pool), false);
        return raw;
    }

    std::string chosen(const std::string &tier)
    {
        auto pool = m_set.choose(tier);
        return pool ? (*pool)->name() : "error: " + pool.error().message;
    }

    PoolSet m_set;
};

TEST_F(PoolSetTest, PrefersAWarmSandboxThenTheLeastLoadedPool)
{
    FakePoolClient *a = addPool("a");
    FakePoolClient *b = addPool("b");
    FakePoolClient *c = addPool("c");
    a->setTier("lite", 0, 1, 10);   // no warm sandbox, 10% loaded
    b->setTier("lite", 2, 8, 10);   // warm, 80% loaded
    c->setTier("lite", 1, 5, 10);   // warm, 50% loaded
    EXPECT_EQ(chosen("lite"), "c") << "warm first, then the least loaded among the warm ones";
}

TEST_F(PoolSetTest, WithoutWarmSandboxesTheLeastLoadedWinsAndClaimsPlacedHereCount)
{
    FakePoolClient *a = addPool("a");
    FakePoolClient *b = addPool("b");
    a->setTier("lite", 0, 2, 4);
    b->setTier("lite", 0, 1, 4);
    ASSERT_EQ(chosen("lite"), "b");
    // Two claims placed on b since its last Status make it 3/4, busier than a's 2/4.
    m_set.noteClaimed("b");
    m_set.noteClaimed("b");
    EXPECT_EQ(chosen("lite"), "a");
}

TEST_F(PoolSetTest, SkipsPoolsThatAreDownOrDoNotOfferTheTier)
{
    FakePoolClient *a = addPool("a");
    FakePoolClient *b = addPool("b");
    FakePoolClient *c = addPool("c");
    a->setDown(true);
    a->setTier("heavy", 5, 0, 10);
    b->setTier("lite", 5, 0, 10);
    c->setTier("heavy", 1, 3, 10);
    EXPECT_EQ(chosen("heavy"), "c");
}

TEST_F(PoolSetTest, EveryPoolFullIsResourceExhaustedNamingEachPool)
{
    FakePoolClient *a = addPool("a");
    FakePoolClient *b = addPool("b");
    a->setTier("lite", 0, 4, 4);
    b->setTier("lite", 0, 2, 2);
    auto pool = m_set.choose("lite");
    ASSERT_FALSE(pool);
    EXPECT_EQ(pool.error().code, ErrorCode::ResourceExhausted);
    EXPECT_NE(pool.error().message.find("a (tier 'lite' full: 4 of 4 claimed)"), std::string::npos) << pool.error().message;
    EXPECT_NE(pool.error().message.find("b (tier 'lite' full: 2 of 2 claimed)"), std::string::npos) << pool.error().message;
    EXPECT_NE(pool.error().message.find("waits"), std::string::npos) << pool.error().message;
}

TEST_F(PoolSetTest, UnknownTierIsNotFoundAndUnreachablePoolsAreUnavailable)
{
    FakePoolClient *a = addPool("a");
    FakePoolClient *b = addPool("b");
    a->setTier("lite", 1, 0, 4);
    b->setTier("lite", 1, 0, 4);
    auto unknown = m_set.choose("gold");
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ErrorCode::NotFound);
    EXPECT_NE(unknown.error().message.find("no pool offers tier 'gold'"), std::string::npos) << unknown.error().message;

    a->setDown(true);
    b->setDown(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(PoolSet::kStatusMaxAgeMs + 50));   // past the cache
    auto none = m_set.choose("lite");
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().code, ErrorCode::Unavailable);
    EXPECT_NE(none.error().message.find("a (pool 'a' is unreachable"), std::string::npos) << none.error().message;
}

TEST_F(PoolSetTest, HealthChecksKeepAHistoryOfEachPool)
{
    PoolSetOptions options;
    options.healthIntervalMs = 10;
    options.historySize = 50;
    m_set.setOptions(options);
    FakePoolClient *a = addPool("a");
    a->setTier("lite", 2, 1, 4);
    m_set.startHealthChecks();
    auto waitFor = [&](auto predicate) {
        for (int i = 0; i < 500 && !predicate(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return predicate();
    };
    ASSERT_TRUE(waitFor([&] { return m_set.health(0).history.size() >= 3; }));
    EXPECT_TRUE(m_set.health(0).healthy);
    EXPECT_EQ(m_set.health(0).unhealthySinceUnixMs, 0);

    a->setDown(true);
    ASSERT_TRUE(waitFor([&] { return !m_set.health(0).healthy; }));
    PoolHealth down = m_set.health(0);
    EXPECT_NE(down.lastError.find("unreachable"), std::string::npos);
    EXPECT_GT(down.unhealthySinceUnixMs, 0);

    a->setDown(false);
    ASSERT_TRUE(waitFor([&] { return m_set.health(0).healthy; }));
    ASSERT_TRUE(waitFor([&] { return m_set.health(0).history.size() >= options.historySize; }));
    m_set.stopHealthChecks();

    const PoolHealth health = m_set.health(0);
    EXPECT_EQ(health.history.size(), options.historySize) << "the history is bounded";
    bool sawHealthy = false;
    bool sawUnhealthy = false;
    for (size_t i = 0; i < health.history.size(); ++i) {
        const auto &sample = health.history[i];
        if (i > 0) {
            EXPECT_GE(sample.timeUnixMs, health.history[i - 1].timeUnixMs) << "oldest first";
        }
        if (sample.healthy) {
            sawHealthy = true;
            EXPECT_EQ(sample.warm, 2);
            EXPECT_EQ(sample.claimed, 1);
            EXPECT_EQ(sample.max, 4);
        } else {
            sawUnhealthy = true;
            EXPECT_FALSE(sample.error.empty());
        }
    }
    EXPECT_TRUE(sawHealthy);
    EXPECT_EQ(health.history.back().healthy, true);
    (void)sawUnhealthy;   // the unhealthy stretch may have scrolled out of a 50-sample window
}

TEST_F(PoolSetTest, APoolIsLostOnlyAfterStayingUnhealthyForTheWindow)
{
    PoolSetOptions options;
    options.lostAfterMs = 200;
    m_set.setOptions(options);
    FakePoolClient *a = addPool("a");
    a->setTier("lite", 1, 0, 4);
    ASSERT_TRUE(m_set.choose("lite"));
    EXPECT_FALSE(m_set.isLost("a"));

    m_set.reportUnavailable("a", "exec: connection refused");
    EXPECT_FALSE(m_set.health(0).healthy) << "a failed call marks the pool unhealthy at once";
    EXPECT_FALSE(m_set.isLost("a")) << "but it is not lost before the window has passed";
    std::this_thread::sleep_for(std::chrono::milliseconds(options.lostAfterMs + 50));
    EXPECT_TRUE(m_set.isLost("a"));

    // It answers again: healthy, not lost.
    std::this_thread::sleep_for(std::chrono::milliseconds(PoolSet::kStatusMaxAgeMs));
    ASSERT_TRUE(m_set.choose("lite"));
    EXPECT_TRUE(m_set.health(0).healthy);
    EXPECT_FALSE(m_set.isLost("a"));
    EXPECT_TRUE(m_set.isLost("nobody")) << "a pool this broker does not know is as good as lost";
}

} // namespace
} // namespace paddock::placement
