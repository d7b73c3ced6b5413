#include "models/pools_model.h"

#include "models/console_format.h"
#include "models/snapshot_files_model.h"

#include <QDateTime>
#include <QLocale>

#include <limits>

namespace paddock::console {
namespace {

constexpr quintptr kPoolId = 0;   // internalId of a pool row; a tier row carries its pool + 1

struct Totals {
    int warm = 0;
    int claimed = 0;
    int max = 0;
    qint64 coldFallbacks = 0;
    double idleCost = 0;
    double refill = 0;
};

Totals totals(const PoolInfo &pool)
{
    Totals t;
    for (const TierInfo &tier : pool.tiers) {
        t.warm += tier.warm;
        t.claimed += tier.claimed;
        t.max += tier.max;
        t.coldFallbacks += tier.coldFallbacks;
        t.idleCost += idleCostPerHour(tier);
        t.refill += tier.refillPerSecond;
    }
    return t;
}

QString dollarsPerHour(double dollars)
{
    return QStringLiteral("$%1/h").arg(dollars, 0, 'f', dollars < 10 ? 3 : 2);
}

QString perSecond(double rate)
{
    return QStringLiteral("%1/s").arg(rate, 0, 'f', rate < 10 ? 1 : 0);
}

QString latencyText(const TierInfo &tier)
{
    bool overflow50 = false;
    bool overflow99 = false;
    const qint64 p50 = latencyPercentileUs(tier, 0.5, &overflow50);
    const qint64 p99 = latencyPercentileUs(tier, 0.99, &overflow99);
    if (p50 < 0)
        return QStringLiteral("no claims");
    auto one = [](qint64 us, bool overflow) { return (overflow ? QStringLiteral(">") : QStringLiteral("≤")) + formatLatencyUs(us); };
    return QStringLiteral("p50 %1 · p99 %2").arg(one(p50, overflow50), one(p99, overflow99));
}

QString percent(double ratio)
{
    return QString::number(qRound(ratio * 100.0)) + QLatin1Char('%');
}

} // namespace

qint64 latencyPercentileUs(const TierInfo &tier, double q, bool *overflow)
{
    if (overflow)
        *overflow = false;
    qint64 total = 0;
    for (qint64 count : tier.latencyCounts)
        total += count;
    if (total <= 0 || tier.latencyBucketsUs.isEmpty())
        return -1;
    const double wanted = q * double(total);
    qint64 cumulative = 0;
    const qsizetype n = qMin(tier.latencyCounts.size(), tier.latencyBucketsUs.size());
    for (qsizetype i = 0; i < n; ++i) {
        cumulative += tier.latencyCounts.at(i);
        if (double(cumulative) >= wanted && tier.latencyCounts.at(i) > 0) {
            const qint64 bound = tier.latencyBucketsUs.at(i);
            // The last bucket is open ("more than the one before").
            if (i == tier.latencyBucketsUs.size() - 1 && i > 0 && bound >= std::numeric_limits<qint64>::max() / 2) {
                if (overflow)
                    *overflow = true;
                return tier.latencyBucketsUs.at(i - 1);
            }
            return bound;
        }
    }
    return tier.latencyBucketsUs.at(n - 1);
}

QString formatLatencyUs(qint64 us)
{
    if (us < 1000)
        return QStringLiteral("%1 µs").arg(us);
    if (us < 1'000'000) {
        const double ms = us / 1000.0;
        return QStringLiteral("%1 ms").arg(ms, 0, 'f', ms < 10 ? 1 : 0);
    }
    return QStringLiteral("%1 s").arg(us / 1e6, 0, 'f', 1);
}

QString latencyBucketLabel(const TierInfo &tier, int bucket)
{
    if (bucket < 0 || bucket >= tier.latencyBucketsUs.size())
        return {};
    const qint64 bound = tier.latencyBucketsUs.at(bucket);
    if (bucket == tier.latencyBucketsUs.size() - 1 && bucket > 0 && bound >= std::numeric_limits<qint64>::max() / 2)
        return QStringLiteral("> ") + formatLatencyUs(tier.latencyBucketsUs.at(bucket - 1));
    return QStringLiteral("≤ ") + formatLatencyUs(bound);
}

double idleCostPerHour(const TierInfo &tier)
{
    return tier.warm * tier.pricePerHourUsd;
}

PoolsModel::PoolsModel(QObject *parent) : QAbstractItemModel(parent) {}

QModelIndex PoolsModel::index(int row, int column, const QModelIndex &parent) const
{
    if (row < 0 || column < 0 || column >= ColumnCount)
        return {};
    if (!parent.isValid())
        return row < m_pools.size() ? createIndex(row, column, kPoolId) : QModelIndex();
    if (parent.internalId() != kPoolId || parent.column() != 0 || parent.row() >= m_pools.size())
        return {};
    if (row >= m_pools.at(parent.row()).tiers.size())
        return {};
    return createIndex(row, column, static_cast<quintptr>(parent.row()) + 1);
}

QModelIndex PoolsModel::parent(const QModelIndex &child) const
{
    if (!child.isValid() || child.internalId() == kPoolId)
        return {};
    return createIndex(static_cast<int>(child.internalId() - 1), 0, kPoolId);
}

int PoolsModel::rowCount(const QModelIndex &parent) const
{
    if (!parent.isValid())
        return static_cast<int>(m_pools.size());
    if (parent.internalId() != kPoolId || parent.column() != 0)
        return 0;
    return static_cast<int>(m_pools.at(parent.row()).tiers.size());
}

int PoolsModel::columnCount(const QModelIndex &) const
{
    return ColumnCount;
}

Qt::ItemFlags PoolsModel::flags(const QModelIndex &index) const
{
    if (!index.isValid())
        return Qt::NoItemFlags;
    Qt::ItemFlags flags = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
    if (index.internalId() != kPoolId)
        flags |= Qt::ItemNeverHasChildren;
    return flags;
}

QString PoolsModel::healthText(const PoolInfo &pool)
{
    QString text = pool.healthy ? QStringLiteral("healthy") : pool.lost ? QStringLiteral("lost") : QStringLiteral("unreachable");
    if (pool.sessionsMovedAway > 0)
        text += QStringLiteral(" · %1 session(s) moved away").arg(pool.sessionsMovedAway);
    if (!pool.healthy && !pool.error.isEmpty())
        text += QStringLiteral(": ") + pool.error;
    return text;
}

QVariant PoolsModel::poolData(const PoolInfo &pool, int column, int role) const
{
    const Totals t = totals(pool);
    switch (role) {
    case Qt::DisplayRole:
        switch (column) {
        case Name: return pool.name;
        case Health:
            return healthText(pool);
        case Runtime: return {};
        case Warm: return t.warm;
        case Claimed: return t.claimed;
        case Max: return t.max;
        case HitRate: return {};
        case ClaimLatency: return {};
        case RefillRate: return perSecond(t.refill);
        case ColdFallbacks: return t.coldFallbacks;
        case IdleCost: return dollarsPerHour(t.idleCost);
        case Endpoint: return pool.local ? pool.endpoint + QStringLiteral(" (local)") : pool.endpoint;
        default: return {};
        }
    case SortRole:
        switch (column) {
        case Name: return pool.name;
        case Health: return pool.healthy ? 1 : 0;
        case Warm: return t.warm;
        case Claimed: return t.claimed;
        case Max: return t.max;
        case RefillRate: return t.refill;
        case ColdFallbacks: return t.coldFallbacks;
        case IdleCost: return t.idleCost;
        case Endpoint: return pool.endpoint;
        default: return {};
        }
    case IdleCostRole: return t.idleCost;
    case Qt::ToolTipRole: {
        QString tip = QStringLiteral("Pool %1 at %2").arg(pool.name, pool.endpoint);
        if (pool.local)
            tip += QStringLiteral("\nRuns on the broker's own machine: local execution (development mode).");
        if (!pool.healthy)
            tip += QStringLiteral("\nUnreachable: %1\nSessions cannot get sandboxes from this pool until it answers again.")
                       .arg(pool.error.isEmpty() ? QStringLiteral("no answer") : pool.error);
        if (pool.sessionsMovedAway > 0)
            tip += QStringLiteral("\n%1 session(s) left it for other pools, their workspaces restored from "
                                  "checkpoints: %2")
                       .arg(pool.sessionsMovedAway)
                       .arg(pool.movedSessionIds.join(QStringLiteral(", ")));
        if (m_stale)
            tip += QStringLiteral("\nNot connected to the broker: this may be out of date.");
        return tip;
    }
    case IsPoolRole: return true;
    case HealthyRole: return pool.healthy;
    case PoolNameRole: return pool.name;
    case PoolInfoRole: return QVariant::fromValue(pool);
    case LocalRole: return pool.local;
    case StaleRole: return m_stale;
    default: return {};
    }
}

QString PoolsModel::isolationSummary(const TierInfo &tier)
{
    if (tier.isolationIdentity.isEmpty())
        return QStringLiteral("not reported");
    QStringList parts;
    if (tier.isolationIdentity.startsWith(u"own host ids"))
        parts << QStringLiteral("own ids");
    else if (tier.isolationIdentity.startsWith(u"the pool's user"))
        parts << QStringLiteral("pool's user");
    else
        parts << QStringLiteral("HOST ROOT");
    parts << (tier.isolationSeccomp.startsWith(u"on") ? QStringLiteral("seccomp") : QStringLiteral("NO seccomp"));
    parts << (tier.isolationEtc.startsWith(u"minimal") ? QStringLiteral("minimal /etc") : tier.isolationEtc + QStringLiteral(" /etc"));
    return parts.join(QStringLiteral(", "));
}

QVariant PoolsModel::tierData(const PoolInfo &pool, const TierInfo &tier, int column, int role) const
{
    switch (role) {
    case Qt::DisplayRole:
        switch (column) {
        case Name: return tier.name;
        case Runtime: return tier.runtime;
        case Warm: return tier.warm;
        case Claimed: return tier.claimed;
        case Max: return tier.max;
        case HitRate: return percent(tier.hitRate);
        case ClaimLatency: return latencyText(tier);
        case RefillRate: return perSecond(tier.refillPerSecond);
        case ColdFallbacks: return tier.coldFallbacks;
        case IdleCost: return dollarsPerHour(idleCostPerHour(tier));
        case Isolation: return isolationSummary(tier);
        default: return {};
        }
    case SortRole:
        switch (column) {
        case Name: return tier.name;
        case Runtime: return tier.runtime;
        case Warm: return tier.warm;
        case Claimed: return tier.claimed;
        case Max: return tier.max;
        case HitRate: return tier.hitRate;
        case ClaimLatency: return latencyPercentileUs(tier, 0.5);
        case RefillRate: return tier.refillPerSecond;
        case ColdFallbacks: return tier.coldFallbacks;
        case IdleCost: return idleCostPerHour(tier);
        case Isolation: return isolationSummary(tier);
        default: return {};
        }
    case Qt::ToolTipRole:
        if (column == Isolation)
            return tier.isolationIdentity.isEmpty()
                       ? QStringLiteral("The pool does not report what this tier promises (an older paddock-pool).")
                       : QStringLiteral("What tier %1 promises about its host (docs/security.md):\nIdentity: %2\nSeccomp: %3\n/etc: %4")
                             .arg(tier.name, tier.isolationIdentity, tier.isolationSeccomp, tier.isolationEtc);
        return QStringLiteral("Tier %1 (%2) in pool %3: %4 warm, %5 claimed of %6; %7 of claims found a warm "
                              "sandbox; %8 cold starts; refills %9 sandboxes a second.\nIdle warm capacity costs "
                              "%10 (%11 warm x $%12 an hour).")
            .arg(tier.name, tier.runtime, pool.name)
            .arg(tier.warm)
            .arg(tier.claimed)
            .arg(tier.max)
            .arg(percent(tier.hitRate))
            .arg(tier.coldFallbacks)
            .arg(tier.refillPerSecond, 0, 'f', 1)
            .arg(dollarsPerHour(idleCostPerHour(tier)))
            .arg(tier.warm)
            .arg(tier.pricePerHourUsd, 0, 'f', 3);
    case TierInfoRole: return QVariant::fromValue(tier);
    case IdleCostRole: return idleCostPerHour(tier);
    case IsPoolRole: return false;
    case HealthyRole: return pool.healthy;
    case PoolNameRole: return pool.name;
    case TierNameRole: return tier.name;
    case LocalRole: return pool.local;
    case StaleRole: return m_stale;
    default: return {};
    }
}

QVariant PoolsModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid())
        return {};
    if (role == Qt::TextAlignmentRole) {
        const int c = index.column();
        if (c == Warm || c == Claimed || c == HitRate || c == RefillRate || c == ColdFallbacks || c == IdleCost)
            return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
        return {};
    }
    if (index.internalId() == kPoolId)
        return poolData(m_pools.at(index.row()), index.column(), role);
    const PoolInfo &pool = m_pools.at(static_cast<int>(index.internalId() - 1));
    return tierData(pool, pool.tiers.at(index.row()), index.column(), role);
}

QVariant PoolsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractItemModel::headerData(section, orientation, role);
    switch (section) {
    case Name: return QStringLiteral("Pool / tier");
    case Health: return QStringLiteral("Health");
    case Runtime: return QStringLiteral("Runtime");
    case Warm: return QStringLiteral("Warm");
    case Claimed: return QStringLiteral("Claimed");
    case Max: return QStringLiteral("Max");
    case HitRate: return QStringLiteral("Warm hit rate");
    case ClaimLatency: return QStringLiteral("Claim latency");
    case RefillRate: return QStringLiteral("Refill");
    case ColdFallbacks: return QStringLiteral("Cold starts");
    case IdleCost: return QStringLiteral("Idle warm cost");
    case Isolation: return QStringLiteral("Isolation");
    case Endpoint: return QStringLiteral("Endpoint");
    default: return {};
    }
}

bool PoolsModel::sameShape(const QList<PoolInfo> &a, const QList<PoolInfo> &b)
{
    if (a.size() != b.size())
        return false;
    for (qsizetype i = 0; i < a.size(); ++i) {
        if (a.at(i).name != b.at(i).name || a.at(i).tiers.size() != b.at(i).tiers.size())
            return false;
        for (qsizetype t = 0; t < a.at(i).tiers.size(); ++t) {
            if (a.at(i).tiers.at(t).name != b.at(i).tiers.at(t).name)
                return false;
        }
    }
    return true;
}

QList<PoolHealthPoint> PoolsModel::healthHistory(const QString &pool) const
{
    for (const PoolInfo &p : m_pools) {
        if (p.name == pool && !p.history.isEmpty())
            return p.history;
    }
    return m_history.value(pool);
}

void PoolsModel::setPools(const QList<PoolInfo> &pools, bool localExecution, qint64 nowUnixMs)
{
    m_localExecution = localExecution;
    const qint64 now = nowUnixMs > 0 ? nowUnixMs : QDateTime::currentMSecsSinceEpoch();
    for (const PoolInfo &pool : pools) {
        const Totals t = totals(pool);
        QList<PoolHealthPoint> &history = m_history[pool.name];
        history.append({now, pool.healthy, t.warm, t.claimed});
        if (history.size() > kMaxHistoryPoints)
            history.remove(0, history.size() - kMaxHistoryPoints);
    }
    if (!sameShape(m_pools, pools)) {
        beginResetModel();
        m_pools = pools;
        endResetModel();
        return;
    }
    m_pools = pools;
    if (m_pools.isEmpty())
        return;
    emit dataChanged(index(0, 0), index(static_cast<int>(m_pools.size()) - 1, ColumnCount - 1));
    for (int p = 0; p < m_pools.size(); ++p) {
        const int tiers = static_cast<int>(m_pools.at(p).tiers.size());
        if (tiers > 0) {
            const QModelIndex parent = index(p, 0);
            emit dataChanged(index(0, 0, parent), index(tiers - 1, ColumnCount - 1, parent));
        }
    }
}

void PoolsModel::setStale(bool stale)
{
    if (m_stale == stale)
        return;
    m_stale = stale;
    if (!m_pools.isEmpty()) {
        emit dataChanged(index(0, 0), index(static_cast<int>(m_pools.size()) - 1, ColumnCount - 1),
                         {StaleRole, Qt::ToolTipRole});
    }
    emit staleChanged(stale);
}

void PoolsModel::setStorage(const CheckpointStorage &storage)
{
    m_storage = storage;
    m_hasStorage = true;
    m_storageError.clear();
    emit storageChanged();
}

void PoolsModel::setStorageError(const QString &error)
{
    m_storageError = error;
    emit storageChanged();
}

StorageCardText storageCardText(const CheckpointStorage &s, bool utc)
{
    QLocale locale = QLocale::c();   // "3,401" wherever the console runs, like paddockctl
    locale.setNumberOptions(QLocale::DefaultNumberOptions);
    auto count = [&](qint64 n, const QString &noun) {
        QString text = locale.toString(n) + QLatin1Char(' ') + noun;
        return n == 1 ? text : text + QLatin1Char('s');
    };
    StorageCardText text;
    text.where = s.where;
    QStringList figures{QStringLiteral("%1 stored").arg(formatBytes(s.bytesStored)),
                        QStringLiteral("%1 of workspaces").arg(formatBytes(s.logicalBytes))};
    if (s.dedupRatio > 0)
        figures << QStringLiteral("dedup %1x").arg(s.dedupRatio, 0, 'f', 1);
    figures << QStringLiteral("collection would free %1").arg(formatBytes(s.freeableBytes));
    text.figures = figures.join(QStringLiteral(" · "));
    QStringList detail{
        QStringLiteral("%1 and %2").arg(count(s.chunks, QStringLiteral("chunk")), count(s.manifests, QStringLiteral("manifest"))),
        QStringLiteral("%1 and %2 to collect").arg(count(s.freeableChunks, QStringLiteral("chunk")),
                                                   count(s.freeableManifests, QStringLiteral("manifest"))),
        s.retentionHours == 0 ? QStringLiteral("ended sessions kept forever")
                              : QStringLiteral("ended sessions kept %1 h").arg(s.retentionHours)};
    if (s.lastCollectionUnixMs > 0) {
        const QDateTime local = QDateTime::fromMSecsSinceEpoch(s.lastCollectionUnixMs);
        const QDateTime at = utc ? local.toUTC() : local;
        detail << QStringLiteral("last collection %1 freed %2")
                      .arg(at.toString(QStringLiteral("yyyy-MM-dd HH:mm")), formatBytes(s.lastFreedBytes));
    }
    text.detail = detail.join(QStringLiteral(" · "));
    text.warning = s.problem;
    return text;
}

} // namespace paddock::console
