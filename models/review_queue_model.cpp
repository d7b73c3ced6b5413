#include "models/review_queue_model.h"

#include "models/console_format.h"
#include "models/review_change.h"

#include <QDateTime>

#include <algorithm>

namespace paddock::console {

ReviewQueueModel::ReviewQueueModel(QObject *parent)
    : QAbstractTableModel(parent), m_clock([] { return QDateTime::currentMSecsSinceEpoch(); })
{
}

int ReviewQueueModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_items.size());
}

int ReviewQueueModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant ReviewQueueModel::display(const ReviewItemInfo &item, int column) const
{
    switch (column) {
    case Kind: return reviewKindLabel(item.kind);
    case Risk: return item.risk;
    case Requester: return item.requester;
    case Age: return item.createdUnixMs > 0 ? formatDuration(std::max<qint64>(0, m_clock() - item.createdUnixMs)) : QString();
    case Impact: return item.impact;
    case Cost: return item.costMicros > 0 ? formatCost(item.costMicros) : QString();
    case Session: return item.sessionId;
    case Summary: return item.summary;
    default: return {};
    }
}

QVariant ReviewQueueModel::sortValue(const ReviewItemInfo &item, int column) const
{
    switch (column) {
    case Risk: return riskOrder(item.risk);
    // Older first when ascending: the age grows as creation time falls.
    case Age: return -item.createdUnixMs;
    case Cost: return item.costMicros;
    case Impact: return item.targetCount > 0 ? QVariant(item.targetCount) : QVariant(item.impact);
    default: return display(item, column);
    }
}

QVariant ReviewQueueModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= m_items.size())
        return {};
    const ReviewItemInfo &item = m_items.at(index.row());
    switch (role) {
    case Qt::DisplayRole: return display(item, index.column());
    case Qt::ToolTipRole: {
        QStringList lines{item.summary, QStringLiteral("%1 · %2 risk · requested by %3")
                                             .arg(reviewKindLabel(item.kind), item.risk, item.requester)};
        if (!item.policyVerdict.isEmpty())
            lines << QStringLiteral("Policy: ") + item.policyVerdict;
        if (item.expiresUnixMs > 0)
            lines << QStringLiteral("Expires in %1").arg(formatDuration(item.expiresUnixMs - m_clock()));
        return lines.join(u'\n');
    }
    case Qt::TextAlignmentRole:
        return index.column() == Cost ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant();
    case SortRole: return sortValue(item, index.column());
    case ItemIdRole: return item.id;
    case ItemRole: return QVariant::fromValue(item);
    case RiskOrderRole: return riskOrder(item.risk);
    default: return {};
    }
}

QVariant ReviewQueueModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case Kind: return QStringLiteral("Kind");
    case Risk: return QStringLiteral("Risk");
    case Requester: return QStringLiteral("Requester");
    case Age: return QStringLiteral("Age");
    case Impact: return QStringLiteral("Impact");
    case Cost: return QStringLiteral("Cost");
    case Session: return QStringLiteral("Session");
    case Summary: return QStringLiteral("Summary");
    default: return {};
    }
}

void ReviewQueueModel::reindex()
{
    m_rowOf.clear();
    for (int row = 0; row < m_items.size(); ++row)
        m_rowOf.insert(m_items.at(row).id, row);
}

int ReviewQueueModel::rowOf(const QString &id) const
{
    return m_rowOf.value(id, -1);
}

QList<ReviewItemInfo> ReviewQueueModel::setItems(const QList<ReviewItemInfo> &items)
{
    QHash<QString, const ReviewItemInfo *> incoming;
    for (const ReviewItemInfo &item : items)
        incoming.insert(item.id, &item);

    // Remove rows that left, bottom up so row numbers stay right.
    for (int row = int(m_items.size()) - 1; row >= 0; --row) {
        if (incoming.contains(m_items.at(row).id))
            continue;
        beginRemoveRows({}, row, row);
        m_items.removeAt(row);
        endRemoveRows();
    }
    reindex();

    // Update the rest in place.
    for (int row = 0; row < m_items.size(); ++row) {
        const ReviewItemInfo &next = *incoming.value(m_items.at(row).id);
        // The listed item has no change; keep one a GetReviewItem brought in.
        const QString change = m_items.at(row).change;
        m_items[row] = next;
        if (m_items[row].change.isEmpty() && next.changeHash == m_items[row].changeHash)
            m_items[row].change = change;
    }
    if (!m_items.isEmpty())
        emit dataChanged(index(0, 0), index(int(m_items.size()) - 1, ColumnCount - 1));

    QList<ReviewItemInfo> added;
    for (const ReviewItemInfo &item : items) {
        if (!m_rowOf.contains(item.id) && !std::any_of(added.cbegin(), added.cend(), [&](const auto &a) { return a.id == item.id; }))
            added.append(item);
    }
    if (!added.isEmpty()) {
        const int first = int(m_items.size());
        beginInsertRows({}, first, first + int(added.size()) - 1);
        m_items.append(added);
        reindex();
        endInsertRows();
    }

    QList<ReviewItemInfo> fresh;
    for (const ReviewItemInfo &item : std::as_const(added)) {
        if (!m_seen.contains(item.id) && m_primed)
            fresh.append(item);
        m_seen.insert(item.id);
    }
    m_primed = true;
    return fresh;
}

void ReviewQueueModel::removeItems(const QStringList &ids)
{
    for (int row = int(m_items.size()) - 1; row >= 0; --row) {
        if (!ids.contains(m_items.at(row).id))
            continue;
        beginRemoveRows({}, row, row);
        m_items.removeAt(row);
        endRemoveRows();
    }
    reindex();
}

void ReviewQueueModel::clear()
{
    beginResetModel();
    m_items.clear();
    m_rowOf.clear();
    m_seen.clear();
    m_primed = false;
    endResetModel();
}

qint64 ReviewQueueModel::totalCostMicros() const
{
    qint64 total = 0;
    for (const ReviewItemInfo &item : m_items)
        total += item.costMicros;
    return total;
}

void ReviewQueueModel::setClock(std::function<qint64()> clock)
{
    m_clock = std::move(clock);
    refreshAges();
}

void ReviewQueueModel::refreshAges()
{
    if (!m_items.isEmpty())
        emit dataChanged(index(0, Age), index(int(m_items.size()) - 1, Age), {Qt::DisplayRole, SortRole});
}

} // namespace paddock::console
