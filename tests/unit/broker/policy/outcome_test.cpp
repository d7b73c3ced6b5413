// The outcome classifier on sample series, one test per branch.

#include "broker/policy/outcome.h"

#include <gtest/gtest.h>

namespace paddock::policy {
namespace {

constexpr int64_t kMiB = 1024 * 1024;
const std::vector<TierInfo> kTiers{{"lite", 0.5, 512 * kMiB, 0.02},
                                   {"standard", 2, 4096 * kMiB, 0.12},
                                   {"small-cpu", 0.25, 1024 * kMiB, 0.03}};

OutcomeInput on(const std::string &tier, std::vector<UsageSample> samples)
{
    OutcomeInput input;
    input.tier = tier;
    input.tiers = kTiers;
    for (const auto &t : kTiers) {
        if (t.name == tier) {
            input.cpuLimit = t.cpu;
            input.memoryLimitBytes = t.memoryBytes;
        }
    }
    input.samples = std::move(samples);
    return input;
}

std::vector<UsageSample> flat(int n, double cpu, int64_t memory)
{
    std::vector<UsageSample> out;
    for (int i = 0; i < n; ++i)
        out.push_back({1000LL * i, cpu, memory, 0, 0});
    return out;
}

// n samples a second apart whose cpu.stat counters grow by the given periods each second.
std::vector<UsageSample> counted(int n, double cpu, int64_t memory, int64_t periodsPerSample, int64_t throttledPerSample)
{
    std::vector<UsageSample> out;
    for (int i = 1; i <= n; ++i)
        out.push_back({1000LL * i, cpu, memory, periodsPerSample * i, throttledPerSample * i});
    return out;
}

TEST(Outcome, OomWinsAndNeedsABiggerTier)
{
    auto input = on("lite", flat(3, 0.4, 500 * kMiB));
    input.oomKilled = true;
    input.timedOut = true;
    const auto out = classifyOutcome(input);
    EXPECT_EQ(out.outcome, "oom");
    EXPECT_EQ(out.fittingTier, "small-cpu") << "the smallest tier with more memory than the limit";
    EXPECT_EQ(out.peakMemoryBytes, 500 * kMiB);
}

TEST(Outcome, Timeout)
{
    auto input = on("lite", flat(3, 0.45, 400 * kMiB));
    input.timedOut = true;
    EXPECT_EQ(classifyOutcome(input).outcome, "timeout");
}

TEST(Outcome, ThrottledInMoreThanHalfOfItsPeriodsIsUnderAllocated)
{
    // 100 periods a second (10 ms), 90 of them throttled: the last sample's counters are the claim's.
    const auto out = classifyOutcome(on("small-cpu", counted(4, 0.25, 300 * kMiB, 100, 90)));
    EXPECT_EQ(out.outcome, "under_allocated");
    EXPECT_NEAR(out.throttledFraction, 0.9, 1e-9);
    EXPECT_EQ(out.cpuPeriods, 400);
    EXPECT_EQ(out.fittingTier, "lite") << "cheapest tier with 1.5x the cpu";
    EXPECT_EQ(outcomeJson("d-1", out)["cpu_periods"], 400);
    // Over the whole claim, not per sample: a busy first second and idle ones after it are one
    // period's worth of throttling among many.
    auto burst = counted(4, 0.25, 300 * kMiB, 100, 90);
    for (auto &sample : burst)
        sample.cpuThrottledPeriods = 90;
    burst.back().cpuPeriods = 400;
    EXPECT_NEAR(classifyOutcome(on("small-cpu", burst)).throttledFraction, 90.0 / 400, 1e-9);
    EXPECT_EQ(classifyOutcome(on("small-cpu", burst)).outcome, "ok");
    // At most half the periods is fine.
    EXPECT_EQ(classifyOutcome(on("small-cpu", counted(4, 0.25, 300 * kMiB, 100, 50))).outcome, "ok");
}

TEST(Outcome, AFewThrottledPeriodsAreNoVerdict)
{
    // Short commands whose start uses a period's quota: throttled in 9 of 12 periods.
    auto out = classifyOutcome(on("small-cpu", counted(3, 0.05, 300 * kMiB, 4, 3)));
    EXPECT_NEAR(out.throttledFraction, 0.75, 1e-9);
    EXPECT_NE(out.outcome, "under_allocated");
    // Unknown counters (no cpu controller): no throttling figure, no verdict.
    out = classifyOutcome(on("small-cpu", flat(4, 0.25, 300 * kMiB)));
    EXPECT_EQ(out.throttledFraction, 0);
    EXPECT_EQ(out.cpuPeriods, 0);
    EXPECT_EQ(out.outcome, "ok");
}

TEST(Outcome, IdleOnABigTierIsOverAllocated)
{
    const auto out = classifyOutcome(on("standard", flat(5, 0.05, 100 * kMiB)));
    EXPECT_EQ(out.outcome, "over_allocated");
    EXPECT_NEAR(out.meanCpuFraction, 0.025, 1e-9);
    EXPECT_EQ(out.fittingTier, "lite");
    // Either figure above its threshold makes it fit.
    EXPECT_EQ(classifyOutcome(on("standard", flat(5, 0.05, 1100 * kMiB))).outcome, "ok") << "memory >= 25%";
    EXPECT_EQ(classifyOutcome(on("standard", flat(5, 0.3, 100 * kMiB))).outcome, "ok") << "cpu >= 10%";
    // Idle on the smallest tier that fits: over-allocated, but no smaller tier to name.
    const auto smallest = classifyOutcome(on("lite", flat(5, 0.01, 20 * kMiB)));
    EXPECT_EQ(smallest.outcome, "over_allocated");
    EXPECT_EQ(smallest.fittingTier, "") << "lite is what it had";
}

TEST(Outcome, NoSamplesIsOkWithoutFigures)
{
    const auto out = classifyOutcome(on("standard", {}));
    EXPECT_EQ(out.outcome, "ok");
    EXPECT_EQ(out.samples, 0);
    const auto j = outcomeJson("d-1", out);
    EXPECT_EQ(j["decision_id"], "d-1");
    EXPECT_EQ(j["outcome"], "ok");
    EXPECT_EQ(j["memory_limit_bytes"], 4096 * kMiB);
}

TEST(Outcome, FittingTierNeedsMemoryAndCpu)
{
    EXPECT_EQ(fittingTier(kTiers, 100 * kMiB, 0.3), "lite");
    EXPECT_EQ(fittingTier(kTiers, 600 * kMiB, 0.2), "small-cpu") << "lite is cheaper but has too little memory";
    EXPECT_EQ(fittingTier(kTiers, 100 * kMiB, 0.6), "standard") << "the cheaper ones have too little cpu";
    EXPECT_EQ(fittingTier(kTiers, 600 * kMiB, 1.5), "standard");
    EXPECT_EQ(fittingTier(kTiers, 8192 * kMiB, 0), "");
}

} // namespace
} // namespace paddock::policy
