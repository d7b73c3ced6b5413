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

std::vector<UsageSample> flat(int n, double cpu, int64_t memory, double throttled = -1)
{
    std::vector<UsageSample> out;
    for (int i = 0; i < n; ++i)
        out.push_back({1000LL * i, cpu, memory, throttled});
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

TEST(Outcome, ThrottledMoreThanHalfTheTimeIsUnderAllocated)
{
    auto samples = flat(4, 0.25, 300 * kMiB, 0.9);
    samples[0].throttledFraction = 0.1;   // mean 0.7
    const auto out = classifyOutcome(on("small-cpu", samples));
    EXPECT_EQ(out.outcome, "under_allocated");
    EXPECT_NEAR(out.throttledFraction, 0.7, 1e-9);
    EXPECT_EQ(out.fittingTier, "lite") << "cheapest tier with 1.5x the cpu";
    // At most half the time is fine.
    EXPECT_EQ(classifyOutcome(on("small-cpu", flat(4, 0.25, 300 * kMiB, 0.5))).outcome, "ok");
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
