#include "models/cost_breakdown.h"

#include <QHash>

#include <algorithm>

namespace paddock::console {

namespace {
constexpr qint64 kMinute = 60'000;
constexpr qint64 kHour = 60 * kMinute;
constexpr qint64 kDay = 24 * kHour;
} // namespace

qint64 CostBreakdown::bucketFor(qint64 rangeMs)
{
    if (rangeMs <= 2 * kHour)
        return 5 * kMinute;
    if (rangeMs <= 6 * kHour)
        return 15 * kMinute;
    if (rangeMs <= 2 * kDay)
        return kHour;
    if (rangeMs <= 8 * kDay)
        return 6 * kHour;
    return kDay;
}

void CostBreakdown::clear()
{
    m_bucketStarts.clear();
    m_groups.clear();
    m_series.clear();
    m_totals.clear();
    m_total = 0;
}

void CostBreakdown::setLines(const QList<CostLineInfo> &lines, qint64 bucketMs, qint64 fromMs, qint64 toMs)
{
    clear();
    m_bucketMs = bucketMs;
    if (bucketMs <= 0 || toMs <= fromMs)
        return;
    // Buckets aligned to multiples of bucketMs (as the broker aligns them), covering [from, to).
    const qint64 first = fromMs - (fromMs % bucketMs);
    for (qint64 start = first; start < toMs; start += bucketMs)
        m_bucketStarts.append(start);

    QHash<QString, qint64> totals;
    for (const CostLineInfo &line : lines) {
        if (line.bucketStartUnixMs < first || line.bucketStartUnixMs >= toMs)
            continue;
        totals[line.key] += line.costMicros;
    }
    QList<QPair<qint64, QString>> order;
    for (auto it = totals.cbegin(); it != totals.cend(); ++it)
        order.append({-it.value(), it.key()});
    std::sort(order.begin(), order.end());

    QHash<QString, int> groupOf;
    const bool fold = order.size() > m_maxGroups;
    const int named = fold ? m_maxGroups - 1 : int(order.size());
    for (int i = 0; i < order.size(); ++i) {
        const QString &key = order.at(i).second;
        const int group = i < named ? i : named;
        if (i < named)
            m_groups << (key.isEmpty() ? QStringLiteral("(none)") : key);
        groupOf.insert(key, group);
    }
    if (fold)
        m_groups << QStringLiteral("other");

    m_series = QList<QList<qint64>>(m_groups.size(), QList<qint64>(m_bucketStarts.size(), 0));
    m_totals = QList<qint64>(m_groups.size(), 0);
    for (const CostLineInfo &line : lines) {
        if (line.bucketStartUnixMs < first || line.bucketStartUnixMs >= toMs)
            continue;
        const int group = groupOf.value(line.key);
        const int bucket = int((line.bucketStartUnixMs - first) / bucketMs);
        m_series[group][bucket] += line.costMicros;
        m_totals[group] += line.costMicros;
        m_total += line.costMicros;
    }
}

qint64 CostBreakdown::bucketTotal(int bucket) const
{
    qint64 sum = 0;
    for (const QList<qint64> &series : m_series)
        sum += series.value(bucket);
    return sum;
}

} // namespace paddock::console
