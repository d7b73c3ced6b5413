#pragma once
// A sandbox's resource samples (one a second) as plot series: memory in MiB against the tier's
// limit, CPU in cores, x in seconds since the first sample. For the inspector's curve up to the
// failure and the session card's live plots.
//
// Threads: any single thread (plain class, no QObject); the console uses it on the GUI thread.

#include "models/sandbox_types.h"

#include <QVector>

namespace paddock::console {

class ResourceSeries {
public:
    static constexpr int kDefaultMaxPoints = 3600;   // an hour of one-a-second samples

    // Replaces the series (a post-mortem's samples, oldest first; unsorted input is sorted).
    void setSamples(const QList<ResourcePoint> &samples);
    // Live samples: those not newer than the last one held are ignored (repeats of a re-watch).
    // Returns how many were added.
    int append(const QList<ResourcePoint> &samples);
    void setLimits(qint64 memoryLimitBytes, double cpuLimit);
    void setMaxPoints(int points);
    void clear();

    int size() const { return static_cast<int>(m_keys.size()); }
    bool isEmpty() const { return m_keys.isEmpty(); }
    const QVector<double> &keys() const { return m_keys; }          // seconds since originUnixMs()
    const QVector<double> &memoryMiB() const { return m_memoryMiB; }
    const QVector<double> &cpuCores() const { return m_cpu; }
    qint64 originUnixMs() const { return m_originMs; }
    qint64 lastUnixMs() const { return m_lastMs; }
    double peakMemoryMiB() const;
    double peakCpuCores() const;
    double memoryLimitMiB() const { return m_memoryLimitBytes / (1024.0 * 1024.0); }
    double cpuLimit() const { return m_cpuLimit; }
    // The peak came within 5% of the memory limit (what an OOM kill looks like on the curve).
    bool reachedMemoryLimit() const;
    int throttledSamples() const { return m_throttled; }
    // A sample held was taken in [fromUnixMs, toUnixMs] (a command's run: none when it was
    // shorter than the sampling period).
    bool hasSampleBetween(qint64 fromUnixMs, qint64 toUnixMs) const;

    bool isDirty() const { return m_dirty; }
    void clearDirty() { m_dirty = false; }

private:
    void add(const ResourcePoint &point);
    void trim();

    QVector<double> m_keys;
    QVector<double> m_memoryMiB;
    QVector<double> m_cpu;
    qint64 m_originMs = 0;
    qint64 m_lastMs = 0;
    qint64 m_memoryLimitBytes = 0;
    double m_cpuLimit = 0;
    int m_maxPoints = kDefaultMaxPoints;
    int m_throttled = 0;
    bool m_dirty = false;
};

} // namespace paddock::console
