#pragma once
// Execution capacity: each pool the broker knows, with its tiers as children (for a QTreeView).
//
// Threads: GUI thread only. Feed it with setPools() from ConsoleClient::poolsChanged.
//
// Known limits: when the set of pools or tiers changes the model resets (rare: a pool joining or
// leaving); otherwise an update is a dataChanged, so expansion and selection survive.

#include "models/console_types.h"

#include <QAbstractItemModel>

namespace paddock::console {

class PoolsModel : public QAbstractItemModel {
    Q_OBJECT
    Q_PROPERTY(bool stale READ isStale WRITE setStale NOTIFY staleChanged)

public:
    enum Column { Name, Health, Runtime, Warm, Claimed, Max, HitRate, ColdFallbacks, Endpoint, ColumnCount };
    enum Role {
        SortRole = Qt::UserRole + 1,   // raw value
        IsPoolRole,                    // bool
        HealthyRole,                   // bool (a tier row gives its pool's)
        PoolNameRole,                  // QString
        TierNameRole,                  // QString (tier rows)
        PoolInfoRole,                  // QVariant of PoolInfo (pool rows)
        LocalRole,                     // bool: the pool runs on the broker's host
        StaleRole,                     // bool
    };
    Q_ENUM(Column)

    explicit PoolsModel(QObject *parent = nullptr);

    QModelIndex index(int row, int column, const QModelIndex &parent = {}) const override;
    QModelIndex parent(const QModelIndex &child) const override;
    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex &index) const override;

    void setPools(const QList<PoolInfo> &pools, bool localExecution);
    const QList<PoolInfo> &pools() const { return m_pools; }
    int poolCount() const { return static_cast<int>(m_pools.size()); }
    bool localExecution() const { return m_localExecution; }

    bool isStale() const { return m_stale; }
    void setStale(bool stale);

signals:
    void staleChanged(bool stale);

private:
    QVariant poolData(const PoolInfo &pool, int column, int role) const;
    QVariant tierData(const PoolInfo &pool, const TierInfo &tier, int column, int role) const;
    static bool sameShape(const QList<PoolInfo> &a, const QList<PoolInfo> &b);

    QList<PoolInfo> m_pools;
    bool m_localExecution = false;
    bool m_stale = false;
};

} // namespace paddock::console
