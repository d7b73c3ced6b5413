#pragma once
// Execution capacity: each pool the broker knows, with its tiers as children (for a QTreeView).
//
// Threads: GUI thread only. Feed it with setPools() from ConsoleClient::poolsChanged.
//
// Health over time: each setPools() adds a point per pool (healthy, warm, claimed) to a bounded
// history, unless the broker sent its own history for that pool (PoolInfo::history), which wins.
//
// The checkpoint store's figures (setStorage(), from ConsoleClient::storageChanged) ride along: they
// are not rows; storageCardText() puts them in words for the view's card.
//
// Known limits: when the set of pools or tiers changes the model resets (rare: a pool joining or
// leaving); otherwise an update is a dataChanged, so expansion and selection survive. The
// console's own history only covers the polls it made (every 5 s while the page is shown).

#include "models/console_types.h"

#include <QAbstractItemModel>
#include <QHash>

namespace paddock::console {

// The claim latency under which a fraction q (0..1) of the tier's claims finished: the upper bound
// of the histogram bucket where the cumulative count reaches q. -1 when there were no claims; the
// last (open) bucket answers with the bound before it, as "more than".
qint64 latencyPercentileUs(const TierInfo &tier, double q, bool *overflow = nullptr);
// "250 µs", "1.0 ms", "25 ms", "1.0 s".
QString formatLatencyUs(qint64 us);
// "≤ 250 µs", ..., "> 1.0 s" for bucket i of the tier's histogram.
QString latencyBucketLabel(const TierInfo &tier, int bucket);
// What the warm sandboxes cost while idle: warm x price per hour, in dollars per hour.
double idleCostPerHour(const TierInfo &tier);

// The Pools view's checkpoint store card, in words.
struct StorageCardText {
    QString where;     // "the broker's checkpoint directory /var/lib/paddock/checkpoints"
    QString figures;   // "1.2 GiB stored · 5.8 GiB of workspaces · dedup 4.8x · collection would free 310 MiB"
    QString detail;    // "3,401 chunks and 212 manifests · ended sessions kept 168 h · last collection ..."
    QString warning;   // why a collection would not free all it should; empty when nothing is wrong
};
// lastCollection times are local unless utc.
StorageCardText storageCardText(const CheckpointStorage &storage, bool utc = false);

class PoolsModel : public QAbstractItemModel {
    Q_OBJECT
    Q_PROPERTY(bool stale READ isStale WRITE setStale NOTIFY staleChanged)

public:
    enum Column {
        Name, Health, Runtime, Warm, Claimed, Max, HitRate, ClaimLatency, RefillRate, ColdFallbacks, IdleCost,
        Isolation, Endpoint, ColumnCount
    };
    enum Role {
        SortRole = Qt::UserRole + 1,   // raw value
        IsPoolRole,                    // bool
        HealthyRole,                   // bool (a tier row gives its pool's)
        PoolNameRole,                  // QString
        TierNameRole,                  // QString (tier rows)
        PoolInfoRole,                  // QVariant of PoolInfo (pool rows)
        LocalRole,                     // bool: the pool runs on the broker's host
        StaleRole,                     // bool
        TierInfoRole,                  // QVariant of TierInfo (tier rows)
        IdleCostRole,                  // double dollars per hour (pool rows: summed)
    };
    static constexpr int kMaxHistoryPoints = 720;   // an hour of 5 s polls
    Q_ENUM(Column)

    // What a tier promises about its host, in a few words for its Isolation cell ("own ids, seccomp,
    // minimal /etc"); the tooltip has the pool's full sentences.
    static QString isolationSummary(const TierInfo &tier);
    // The Health cell: "healthy", "unreachable: ...", or "lost · 12 session(s) moved away: ..."
    // once the broker gave up on it and its sessions went to other pools.
    static QString healthText(const PoolInfo &pool);

    explicit PoolsModel(QObject *parent = nullptr);

    QModelIndex index(int row, int column, const QModelIndex &parent = {}) const override;
    QModelIndex parent(const QModelIndex &child) const override;
    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex &index) const override;

    // nowUnixMs: when these figures were taken (0: now), for the health history.
    void setPools(const QList<PoolInfo> &pools, bool localExecution, qint64 nowUnixMs = 0);
    // Oldest first; the broker's when it sent one, else the console's own polls.
    QList<PoolHealthPoint> healthHistory(const QString &pool) const;
    const QList<PoolInfo> &pools() const { return m_pools; }
    int poolCount() const { return static_cast<int>(m_pools.size()); }
    bool localExecution() const { return m_localExecution; }

    bool isStale() const { return m_stale; }
    void setStale(bool stale);

    // The figures replace the ones before and clear the error; an error keeps the last figures
    // (the view says they were not refreshed).
    void setStorage(const CheckpointStorage &storage);
    void setStorageError(const QString &error);
    bool hasStorage() const { return m_hasStorage; }
    const CheckpointStorage &storage() const { return m_storage; }
    QString storageError() const { return m_storageError; }

signals:
    void staleChanged(bool stale);
    void storageChanged();

private:
    QVariant poolData(const PoolInfo &pool, int column, int role) const;
    QVariant tierData(const PoolInfo &pool, const TierInfo &tier, int column, int role) const;
    static bool sameShape(const QList<PoolInfo> &a, const QList<PoolInfo> &b);

    QList<PoolInfo> m_pools;
    QHash<QString, QList<PoolHealthPoint>> m_history;
    bool m_localExecution = false;
    bool m_stale = false;
    CheckpointStorage m_storage;
    bool m_hasStorage = false;
    QString m_storageError;
};

} // namespace paddock::console
