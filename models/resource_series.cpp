#include "models/resource_series.h"

#include <algorithm>

namespace paddock::console {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}

void ResourceSeries::clear()
{
    m_keys.clear();
    m_memoryMiB.clear();
    m_cpu.clear();
    m_originMs = 0;
    m_lastMs = 0;
    m_throttled = 0;
    m_dirty = true;
}

void ResourceSeries::setSamples(const QList<ResourcePoint> &samples)
{
    clear();
    QList<ResourcePoint> sorted = samples;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const ResourcePoint &a, const ResourcePoint &b) { return a.timeUnixMs < b.timeUnixMs; });
    for (const ResourcePoint &point : std::as_const(sorted))
        add(point);
    trim();
}

int ResourceSeries::append(const QList<ResourcePoint> &samples)
{
    int added = 0;
    for (const ResourcePoint &point : samples) {
        if (!m_keys.isEmpty() && point.timeUnixMs <= m_lastMs)
            continue;
        add(point);
        ++added;
    }
    if (added > 0)
        trim();
    return added;
}

void ResourceSeries::add(const ResourcePoint &point)
{
    if (m_keys.isEmpty())
        m_originMs = point.timeUnixMs;
    m_keys.append((point.timeUnixMs - m_originMs) / 1000.0);
    m_memoryMiB.append(point.memoryBytes / kMiB);
    m_cpu.append(point.cpuCores);
    m_lastMs = point.timeUnixMs;
    m_throttled += point.cpuThrottled ? 1 : 0;
    m_dirty = true;
}

void ResourceSeries::trim()
{
    const qsizetype excess = m_keys.size() - m_maxPoints;
    if (excess <= 0)
        return;
    // The origin stays: x keeps meaning "seconds since the first sample seen".
    m_keys.remove(0, excess);
    m_memoryMiB.remove(0, excess);
    m_cpu.remove(0, excess);
}

void ResourceSeries::setLimits(qint64 memoryLimitBytes, double cpuLimit)
{
    m_memoryLimitBytes = memoryLimitBytes;
    m_cpuLimit = cpuLimit;
    m_dirty = true;
}

void ResourceSeries::setMaxPoints(int points)
{
    m_maxPoints = std::max(1, points);
    trim();
}

double ResourceSeries::peakMemoryMiB() const
{
    return m_memoryMiB.isEmpty() ? 0 : *std::max_element(m_memoryMiB.begin(), m_memoryMiB.end());
}

double ResourceSeries::peakCpuCores() const
{
    return m_cpu.isEmpty() ? 0 : *std::max_element(m_cpu.begin(), m_cpu.end());
}

bool ResourceSeries::hasSampleBetween(qint64 fromUnixMs, qint64 toUnixMs) const
{
    if (m_keys.isEmpty() || toUnixMs < fromUnixMs)
        return false;
    // Keys are whole milliseconds over 1000: compared in milliseconds, rounded back.
    const auto first = std::lower_bound(m_keys.begin(), m_keys.end(), fromUnixMs, [this](double key, qint64 ms) {
        return m_originMs + qRound64(key * 1000.0) < ms;
    });
    return first != m_keys.end() && m_originMs + qRound64(*first * 1000.0) <= toUnixMs;
}

bool ResourceSeries::reachedMemoryLimit() const
{
    return m_memoryLimitBytes > 0 && peakMemoryMiB() >= 0.95 * memoryLimitMiB();
}

} // namespace paddock::console
