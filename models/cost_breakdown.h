#pragma once
// Spend over time per group (agent, tier or model) for the Cost view's stacked bars: the broker's
// GetCostSummary lines (key, bucket start, cost) laid onto a dense grid of buckets, groups ordered
// by their total (largest first) with the smallest folded into "other".
//
// Threads: a plain value-like class; owned and used by one thread (the GUI thread in the console).

#include "models/governance_types.h"

#include <QList>
#include <QString>

namespace paddock::console {

class CostBreakdown {
public:
    static constexpr int kDefaultMaxGroups = 8;   // the 8th and later are "other"

    // A bucket size for a time range that gives 12 to 48 bars: 5 min up to 2 h, 15 min up to 6 h,
    // 1 h up to 2 days, 6 h up to 8 days, then a day.
    static qint64 bucketFor(qint64 rangeMs);

    // lines: one per (key, bucket). fromMs/toMs bound the grid; a line outside it is dropped.
    void setLines(const QList<CostLineInfo> &lines, qint64 bucketMs, qint64 fromMs, qint64 toMs);
    void setMaxGroups(int groups) { m_maxGroups = groups < 1 ? 1 : groups; }
    void clear();

    int bucketCount() const { return int(m_bucketStarts.size()); }
    qint64 bucketMs() const { return m_bucketMs; }
    // Each bucket's start, Unix ms, ascending.
    const QList<qint64> &bucketStarts() const { return m_bucketStarts; }
    // Groups, largest total first; "other" (if any) last.
    const QStringList &groups() const { return m_groups; }
    // The group's cost per bucket (micros), aligned with bucketStarts().
    QList<qint64> groupSeries(int group) const { return m_series.value(group); }
    qint64 groupTotal(int group) const { return m_totals.value(group); }
    qint64 totalMicros() const { return m_total; }
    // The sum of every group in a bucket (micros).
    qint64 bucketTotal(int bucket) const;

private:
    QList<qint64> m_bucketStarts;
    QStringList m_groups;
    QList<QList<qint64>> m_series;
    QList<qint64> m_totals;
    qint64 m_bucketMs = 0;
    qint64 m_total = 0;
    int m_maxGroups = kDefaultMaxGroups;
};

} // namespace paddock::console
