#pragma once
// The outcome of an environment decision, filled in when the session gives its tier back (session
// end, tier move, idle give-back), from the sandbox's resource samples and how its commands ended.
// Pure; thread-agnostic.
//
// Known limits: the pool samples once a second, so a peak shorter than that may be missed (an OOM
// kill is still seen: the pool names it); a claim shorter than a second has no samples, and its
// outcome is "ok" with no figures.

#include "broker/policy/environment.h"

#include <cstdint>
#include <string>
#include <vector>

namespace paddock::policy {

struct UsageSample {
    int64_t timeUnixMs = 0;
    double cpuCores = 0;
    int64_t memoryBytes = 0;
    // The cgroup's CFS counters since the sandbox started (cpu.stat nr_periods, nr_throttled; 0:
    // not known): the last sample of a claim has the whole claim's.
    int64_t cpuPeriods = 0;
    int64_t cpuThrottledPeriods = 0;
};

struct OutcomeInput {
    std::vector<UsageSample> samples;
    bool oomKilled = false;       // a command of the claim was OOM-killed (the pool said oom_killed)
    bool timedOut = false;        // a command of the claim ran past its time limit
    std::string tier;             // the tier held
    double cpuLimit = 0;          // its limits
    int64_t memoryLimitBytes = 0;
    std::vector<TierInfo> tiers;  // the catalogue, for the fitting tier
};

struct Outcome {
    std::string outcome;          // ok, oom, timeout, over_allocated, under_allocated
    int64_t peakMemoryBytes = 0;
    int64_t memoryLimitBytes = 0;
    double meanCpuFraction = 0;   // of the tier's cpu
    double throttledFraction = 0;  // throttled periods over the periods its tasks ran, over the claim
    int64_t cpuPeriods = 0;        // how many periods that is
    double peakCpuCores = 0;
    std::string fittingTier;      // set for oom and over/under allocation
    int samples = 0;
};

// Thresholds (docs/governance.md).
inline constexpr double kOverAllocatedMemoryFraction = 0.25;
inline constexpr double kOverAllocatedCpuFraction = 0.10;
inline constexpr double kUnderAllocatedThrottledFraction = 0.5;
// Fewer periods than this (a second of running at the pool's 10 ms period) are no verdict: the
// start of a short command alone may use a period's quota (a runsc exec does at half a core).
inline constexpr int64_t kUnderAllocatedMinPeriods = 100;

// oom > timeout > under_allocated (throttled in more than half of the CFS periods it ran, over at
// least kUnderAllocatedMinPeriods) > over_allocated (peak memory
// under 25% of the limit and mean CPU under 10%) > ok.
Outcome classifyOutcome(const OutcomeInput &input);

// The smallest tier (orderedTiers) with memory above peakMemoryBytes and cpu at least peakCpu; ""
// when none fits.
std::string fittingTier(const std::vector<TierInfo> &tiers, int64_t peakMemoryBytes, double peakCpu);

// The env.outcome payload (docs/events.md).
nlohmann::json outcomeJson(const std::string &decisionId, const Outcome &outcome);

} // namespace paddock::policy
