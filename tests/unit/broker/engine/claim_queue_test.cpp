// The line for sandboxes: arrival order within an agent, agents in turn, room for several at the
// front, and sessions that stop asking leave it.

#include "broker/engine/claim_queue.h"

#include <gtest/gtest.h>

#include <string>

namespace paddock::engine {
namespace {

TEST(ClaimQueue, OneAgentsThousandSessionsDoNotStarveAnothersOne)
{
    ClaimQueue line;
    for (int i = 0; i < 1000; ++i)
        line.ask("lite", "a-" + std::to_string(i), "bulk", 0, 1000);
    // The bulk agent has just been served; the other agent's one session arrives last.
    line.claimed("lite", "a-0", "bulk", 1000);
    const ClaimQueue::Place place = line.ask("lite", "b-0", "solo", 1, 1000);
    EXPECT_EQ(place.ahead, 0) << "the agent served longest ago (never) goes first";
    EXPECT_TRUE(place.mayClaim);
    EXPECT_EQ(place.waiting, 1000);
    // Once solo is served, bulk is next again.
    line.claimed("lite", "b-0", "solo", 1000);
    EXPECT_EQ(line.ask("lite", "a-1", "bulk", 1, 1000).ahead, 0);
}

TEST(ClaimQueue, WithinAnAgentSessionsGoInTheOrderTheyJoined)
{
    ClaimQueue line;
    for (int i = 0; i < 5; ++i)
        line.ask("lite", "s-" + std::to_string(i), "agent", 0, 1000);
    for (int i = 4; i >= 0; --i)
        EXPECT_EQ(line.ask("lite", "s-" + std::to_string(i), "agent", 0, 1000).ahead, i) << "asking again keeps the place";
    EXPECT_FALSE(line.ask("lite", "s-3", "agent", 2, 1000).mayClaim) << "two free sandboxes: s-0 and s-1 claim";
    EXPECT_TRUE(line.ask("lite", "s-1", "agent", 2, 1000).mayClaim);
}

TEST(ClaimQueue, AgentsAlternateAtTheFront)
{
    ClaimQueue line;
    for (int i = 0; i < 3; ++i) {
        line.ask("lite", "x-" + std::to_string(i), "x", 0, 1000);
        line.ask("lite", "y-" + std::to_string(i), "y", 0, 1000);
    }
    // x arrived first: x-0, y-0, x-1, y-1, x-2, y-2.
    EXPECT_EQ(line.ask("lite", "y-0", "y", 0, 1000).ahead, 1);
    EXPECT_EQ(line.ask("lite", "x-1", "x", 0, 1000).ahead, 2);
    line.claimed("lite", "x-0", "x", 1000);
    // x was just served: y-0 first, then x-1.
    EXPECT_EQ(line.ask("lite", "y-0", "y", 0, 1000).ahead, 0);
    EXPECT_EQ(line.ask("lite", "x-1", "x", 0, 1000).ahead, 1);
}

TEST(ClaimQueue, TheFrontMayAlwaysTryAndTiersHaveLinesOfTheirOwn)
{
    ClaimQueue line;
    line.ask("lite", "s-1", "a", 0, 1000);
    EXPECT_TRUE(line.ask("lite", "s-1", "a", 0, 1000).mayClaim) << "counts may lag a release: the pool decides";
    EXPECT_EQ(line.ask("heavy", "s-2", "a", 0, 1000).ahead, 0);
    EXPECT_EQ(line.waiting("lite", 1000), 1);
    EXPECT_EQ(line.waiting("heavy", 1000), 1);
}

TEST(ClaimQueue, SessionsThatStopAskingOrEndLeaveTheLine)
{
    ClaimQueue line(5000);
    line.ask("lite", "gone", "a", 0, 1000);
    line.ask("lite", "ended", "a", 0, 1000);
    line.ask("lite", "here", "a", 0, 4000);
    line.leave("ended");
    EXPECT_EQ(line.ask("lite", "here", "a", 0, 7000).ahead, 0) << "'gone' has not asked for 6 s (limit 5 s)";
    EXPECT_EQ(line.waiting("lite", 7000), 1);
    line.claimed("lite", "here", "a", 7000);
    EXPECT_EQ(line.waiting("lite", 7000), 0);
}

} // namespace
} // namespace paddock::engine
