#include "model_test_support.h"

#include "models/cost_series.h"

#include <gtest/gtest.h>

namespace paddock::console {
namespace {

using test::event;

TEST(CostSeriesTest, AccumulatesCostOverTime)
{
    CostSeries series;
    series.addEvents({event(1), event(2, QStringLiteral("model.response"), "{}", 1000), event(3),
                      event(4, QStringLiteral("cost"), "{}", 500)});
    ASSERT_EQ(series.size(), 3);
    EXPECT_TRUE(series.isDirty());
    EXPECT_DOUBLE_EQ(series.values().at(0), 0.0);
    EXPECT_DOUBLE_EQ(series.values().at(1), 0.001);
    EXPECT_DOUBLE_EQ(series.values().at(2), 0.0015);
    EXPECT_DOUBLE_EQ(series.keys().at(1), (1'700'000'000'000.0 + 20) / 1000.0);
    EXPECT_EQ(series.totalMicros(), 1500);
    series.clearDirty();
    series.addEvents({event(4, QStringLiteral("cost"), "{}", 500)});
    EXPECT_FALSE(series.isDirty()) << "a repeated event counts once";
    EXPECT_EQ(series.points().size(), 3);
}

TEST(CostSeriesTest, BaselineAndRollingWindow)
{
    CostSeries series;
    series.setBaseline(2'000'000);
    series.setMaxPoints(100);
    for (int seq = 1; seq <= 1000; ++seq)
        series.addEvent(event(seq, QStringLiteral("cost"), "{}", 1));
    series.addEvents({});
    EXPECT_EQ(series.size(), 100);
    EXPECT_EQ(series.totalMicros(), 2'001'000);
    EXPECT_DOUBLE_EQ(series.values().last(), 2.001);
    EXPECT_DOUBLE_EQ(series.keys().first(), (1'700'000'000'000.0 + 9010) / 1000.0);
    series.clear();
    EXPECT_EQ(series.size(), 0);
}

} // namespace
} // namespace paddock::console
