#include "models/console_format.h"

#include <gtest/gtest.h>

namespace paddock::console {
namespace {

TEST(ConsoleFormatTest, CostsDurationsAndStatuses)
{
    EXPECT_EQ(formatCost(12'300), QStringLiteral("$0.0123"));
    EXPECT_EQ(formatCost(0), QStringLiteral("$0.0000"));
    EXPECT_EQ(formatCost(12'345'678), QStringLiteral("$12.35"));
    EXPECT_EQ(formatDuration(850), QStringLiteral("850 ms"));
    EXPECT_EQ(formatDuration(42'000), QStringLiteral("42s"));
    EXPECT_EQ(formatDuration(65'000), QStringLiteral("1m 05s"));
    EXPECT_EQ(formatDuration(2 * 3600'000 + 3 * 60'000), QStringLiteral("2h 03m"));
    EXPECT_EQ(formatDuration(-1), QStringLiteral("-"));
    EXPECT_EQ(formatLatency(1200), QStringLiteral("1.2 s"));
    EXPECT_EQ(statusName(SessionStatus::WaitingApproval), QStringLiteral("waiting_approval"));
    EXPECT_EQ(statusLabel(SessionStatus::WaitingApproval), QStringLiteral("Waiting approval"));
    EXPECT_TRUE(isTerminal(SessionStatus::Cancelled));
    EXPECT_FALSE(isTerminal(SessionStatus::Paused));
}

} // namespace
} // namespace paddock::console
