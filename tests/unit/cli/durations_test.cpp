// The CLI's durations: --ttl and --since of tokens and audit (seconds, a bare number allowed) and
// cost's --since and --bucket (milliseconds, a unit required, else a date), one parser underneath.

#include "cli/auth_commands.h"
#include "cli/cost_commands.h"

#include <gtest/gtest.h>

namespace paddock::cli {
namespace {

TEST(Durations, SecondsTakeEveryUnitAndABareNumber)
{
    EXPECT_EQ(parseDurationSeconds("90").value(), 90);
    EXPECT_EQ(parseDurationSeconds("90s").value(), 90);
    EXPECT_EQ(parseDurationSeconds("15m").value(), 900);
    EXPECT_EQ(parseDurationSeconds("12h").value(), 43200);
    EXPECT_EQ(parseDurationSeconds("30d").value(), 30 * 86400);
    EXPECT_EQ(parseDurationSeconds("2w").value(), 14 * 86400);
    for (const char *bad : {"", "0", "-5m", "5y", "m", "1.5h", "99999999999999999999d"}) {
        auto r = parseDurationSeconds(bad);
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().message.find("e.g. 90s, 15m"), std::string::npos) << r.error().message;
    }
}

TEST(Durations, CostsDurationsNeedAUnitSoADateIsNotMistakenForOne)
{
    EXPECT_EQ(parseDurationMs("15m").value(), 900'000);
    EXPECT_EQ(parseDurationMs("2w").value(), 14 * 86'400'000LL);
    EXPECT_FALSE(parseDurationMs("90"));
    EXPECT_FALSE(parseDurationMs("0h"));
    const int64_t now = 1'800'000'000'000;
    EXPECT_EQ(parseSince("7d", now).value(), now - 7 * 86'400'000LL);
    EXPECT_EQ(parseSince("2026-12-01", now).value(), 1'796'083'200'000);
    EXPECT_FALSE(parseSince("yesterday", now));
}

} // namespace
} // namespace paddock::cli
