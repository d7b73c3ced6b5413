#include "broker/policy/outcome.h"

#include <algorithm>

namespace paddock::policy {

std::string fittingTier(const std::vector<TierInfo> &tiers, int64_t peakMemoryBytes, double peakCpu)
{
    for (const auto &tier : orderedTiers(tiers)) {
        if (tier.memoryBytes > peakMemoryBytes && (tier.cpu <= 0 || tier.cpu + 1e-9 >= peakCpu))
            return tier.name;
    }
    return {};
}

Outcome classifyOutcome(const OutcomeInput &input)
{
    Outcome out;
    out.memoryLimitBytes = input.memoryLimitBytes;
    out.samples = static_cast<int>(input.samples.size());
    double cpuSum = 0;
    int throttledKnown = 0;
    double throttledSum = 0;
    for (const auto &sample : input.samples) {
        out.peakMemoryBytes = std::max(out.peakMemoryBytes, sample.memoryBytes);
        out.peakCpuCores = std::max(out.peakCpuCores, sample.cpuCores);
        cpuSum += sample.cpuCores;
        if (sample.throttledFraction >= 0) {
            throttledSum += sample.throttledFraction;
            ++throttledKnown;
        }
    }
    if (!input.samples.empty() && input.cpuLimit > 0)
        out.meanCpuFraction = cpuSum / static_cast<double>(input.samples.size()) / input.cpuLimit;
    if (throttledKnown > 0)
        out.throttledFraction = throttledSum / throttledKnown;

    if (input.oomKilled) {
        out.outcome = "oom";
        // It needed more than the whole limit.
        out.fittingTier = fittingTier(input.tiers, std::max(out.peakMemoryBytes, input.memoryLimitBytes), 0);
        return out;
    }
    if (input.timedOut) {
        out.outcome = "timeout";
        return out;
    }
    if (throttledKnown > 0 && out.throttledFraction > kUnderAllocatedThrottledFraction) {
        out.outcome = "under_allocated";
        // Throttled: it wanted more cpu than it had.
        out.fittingTier = fittingTier(input.tiers, out.peakMemoryBytes, input.cpuLimit * 1.5);
        return out;
    }
    if (!input.samples.empty() && input.memoryLimitBytes > 0
        && static_cast<double>(out.peakMemoryBytes) < kOverAllocatedMemoryFraction * static_cast<double>(input.memoryLimitBytes)
        && out.meanCpuFraction < kOverAllocatedCpuFraction) {
        out.outcome = "over_allocated";
        out.fittingTier = fittingTier(input.tiers, out.peakMemoryBytes, out.peakCpuCores);
        // Already the smallest tier that fits: nothing smaller to name.
        if (out.fittingTier == input.tier)
            out.fittingTier.clear();
        return out;
    }
    out.outcome = "ok";
    return out;
}

nlohmann::json outcomeJson(const std::string &decisionId, const Outcome &outcome)
{
    return {{"decision_id", decisionId},
            {"outcome", outcome.outcome},
            {"peak_memory_bytes", outcome.peakMemoryBytes},
            {"memory_limit_bytes", outcome.memoryLimitBytes},
            {"mean_cpu_fraction", outcome.meanCpuFraction},
            {"throttled_fraction", outcome.throttledFraction},
            {"peak_cpu_cores", outcome.peakCpuCores},
            {"fitting_tier", outcome.fittingTier},
            {"samples", outcome.samples}};
}

} // namespace paddock::policy
