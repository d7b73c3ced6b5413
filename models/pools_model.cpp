#include "models/pools_model.h"

namespace paddock::console {
namespace {

constexpr quintptr kPoolId = 0;   // internalId of a pool row; a tier row carries its pool + 1

struct Totals {
    int warm = 0;
    int claimed = 0;
    int max = 0;
    qint64 coldFallbacks = 0;
};

Totals totals(const PoolInfo &pool)
{
    Totals t;
    for (const TierInfo &tier : pool.tiers) {
        t.warm += tier.warm;
        t.claimed += tier.claimed;
        t.max += tier.max;
        t.coldFallbacks += tier.coldFallbacks;
    }
    return t;
}

QString percent(double ratio)
{
    return QString::number(qRound(ratio * 100.0)) + QLatin1Char('%');
}

} // namespace

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

QVariant PoolsModel::poolData(const PoolInfo &pool, int column, int role) const
{
    const Totals t = totals(pool);
    switch (role) {
    case Qt::DisplayRole:
        switch (column) {
        case Name: return pool.name;
        case Health:
            if (pool.healthy)
                return QStringLiteral("healthy");
            return pool.error.isEmpty() ? QStringLiteral("unreachable") : QStringLiteral("unreachable: ") + pool.error;
        case Runtime: return {};
        case Warm: return t.warm;
        case Claimed: return t.claimed;
        case Max: return t.max;
        case HitRate: return {};
        case ColdFallbacks: return t.coldFallbacks;
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
        case ColdFallbacks: return t.coldFallbacks;
        case Endpoint: return pool.endpoint;
        default: return {};
        }
    case Qt::ToolTipRole: {
        QString tip = QStringLiteral("Pool %1 at %2").arg(pool.name, pool.endpoint);
        if (pool.local)
            tip += QStringLiteral("\nRuns on the broker's own machine: local execution (development mode).");
        if (!pool.healthy)
            tip += QStringLiteral("\nUnreachable: %1\nSessions cannot get sandboxes from this pool until it answers again.")
                       .arg(pool.error.isEmpty() ? QStringLiteral("no answer") : pool.error);
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
        case ColdFallbacks: return tier.coldFallbacks;
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
        case ColdFallbacks: return tier.coldFallbacks;
        default: return {};
        }
    case Qt::ToolTipRole:
        return QStringLiteral("Tier %1 (%2) in pool %3: %4 warm, %5 claimed of %6; %7 of claims found a warm "
                              "sandbox; %8 cold starts")
            .arg(tier.name, tier.runtime, pool.name)
            .arg(tier.warm)
            .arg(tier.claimed)
            .arg(tier.max)
            .arg(percent(tier.hitRate))
            .arg(tier.coldFallbacks);
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
        if (c == Warm || c == Claimed || c == Max || c == HitRate || c == ColdFallbacks)
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
    case ColdFallbacks: return QStringLiteral("Cold starts");
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

void PoolsModel::setPools(const QList<PoolInfo> &pools, bool localExecution)
{
    m_localExecution = localExecution;
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

} // namespace paddock::console
