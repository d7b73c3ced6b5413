#pragma once
// The review queue: one row per pending review item (kind, risk, requester, age, impact, cost,
// session, summary), kept current by polling ListReviewItems.
//
// Threads: GUI thread only (like every item model). Feed it with setItems(); no I/O.

#include "models/governance_types.h"

#include <QAbstractTableModel>
#include <QHash>
#include <QList>
#include <QSet>

#include <functional>

namespace paddock::console {

class ReviewQueueModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Column { Kind, Risk, Requester, Age, Impact, Cost, Session, Summary, ColumnCount };
    enum Role {
        SortRole = Qt::UserRole + 1,   // raw value of the column (risk by order, age by creation time)
        ItemIdRole,                    // QString
        ItemRole,                      // QVariant of ReviewItemInfo
        RiskOrderRole,                 // int: low 0, medium 1, high 2
    };
    Q_ENUM(Column)

    explicit ReviewQueueModel(QObject *parent = nullptr);

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // The whole pending list as the broker sent it. Rows of items that left are removed, the others
    // updated in place and new ones appended (so a selection survives a poll). Returns the items
    // never seen before by this model (for the "new items" notification); the first call after
    // clear() reports none, since nothing arrived while the console looked.
    QList<ReviewItemInfo> setItems(const QList<ReviewItemInfo> &items);
    // Drops ids from the table (after the console decided them) without waiting for the next poll.
    void removeItems(const QStringList &ids);
    void clear();

    int itemCount() const { return static_cast<int>(m_items.size()); }
    const ReviewItemInfo &itemAt(int row) const { return m_items.at(row); }
    int rowOf(const QString &id) const;
    qint64 totalCostMicros() const;

    // Tests replace the wall clock (Unix ms) ages are measured against.
    void setClock(std::function<qint64()> clock);
    // Emits dataChanged for the Age column; call from a timer while shown.
    void refreshAges();

private:
    QVariant display(const ReviewItemInfo &item, int column) const;
    QVariant sortValue(const ReviewItemInfo &item, int column) const;
    void reindex();

    QList<ReviewItemInfo> m_items;
    QHash<QString, int> m_rowOf;
    QSet<QString> m_seen;
    bool m_primed = false;
    std::function<qint64()> m_clock;
};

} // namespace paddock::console
