#include "models/session_group_model.h"

#include "models/console_format.h"
#include "models/session_table_model.h"

#include <QSet>

namespace paddock::console {
namespace {

// internalId of a group row; a session row carries its group + 1.
constexpr quintptr kGroupId = 0;

} // namespace

QList<SessionStatus> SessionGroupModel::groupOrder()
{
    return {SessionStatus::Running, SessionStatus::WaitingApproval, SessionStatus::Paused,
            SessionStatus::Queued,  SessionStatus::Failed,          SessionStatus::Succeeded,
            SessionStatus::Cancelled, SessionStatus::Unknown};
}

SessionGroupModel::SessionGroupModel(QObject *parent) : QAbstractItemModel(parent)
{
    for (SessionStatus status : groupOrder())
        m_groups.append({status, {}});
}

int SessionGroupModel::groupOf(int statusValue) const
{
    for (int g = 0; g < m_groups.size(); ++g) {
        if (static_cast<int>(m_groups.at(g).status) == statusValue)
            return g;
    }
    return static_cast<int>(m_groups.size()) - 1;   // Unknown
}

void SessionGroupModel::setSourceModel(QAbstractItemModel *source)
{
    beginResetModel();
    for (const auto &connection : std::as_const(m_connections))
        disconnect(connection);
    m_connections.clear();
    m_source = source;
    if (m_source) {
        auto structural = [this] { sync(); };
        m_connections << connect(m_source, &QAbstractItemModel::rowsInserted, this, structural)
                      << connect(m_source, &QAbstractItemModel::rowsRemoved, this, structural)
                      << connect(m_source, &QAbstractItemModel::rowsMoved, this, structural)
                      << connect(m_source, &QAbstractItemModel::layoutChanged, this, structural)
                      << connect(m_source, &QAbstractItemModel::dataChanged, this,
                                 &SessionGroupModel::onSourceDataChanged)
                      << connect(m_source, &QAbstractItemModel::modelAboutToBeReset, this,
                                 &SessionGroupModel::onSourceAboutToBeReset)
                      << connect(m_source, &QAbstractItemModel::modelReset, this, &SessionGroupModel::onSourceReset)
                      << connect(m_source, &QAbstractItemModel::columnsAboutToBeInserted, this,
                                 &SessionGroupModel::onSourceAboutToBeReset)
                      << connect(m_source, &QAbstractItemModel::columnsInserted, this, &SessionGroupModel::onSourceReset)
                      << connect(m_source, &QAbstractItemModel::columnsAboutToBeRemoved, this,
                                 &SessionGroupModel::onSourceAboutToBeReset)
                      << connect(m_source, &QAbstractItemModel::columnsRemoved, this, &SessionGroupModel::onSourceReset)
                      << connect(m_source, &QObject::destroyed, this, [this] {
                             beginResetModel();
                             m_source = nullptr;
                             rebuildAll();
                             endResetModel();
                         });
    }
    rebuildAll();
    endResetModel();
}

void SessionGroupModel::rebuildAll()
{
    for (Group &group : m_groups)
        group.ids.clear();
    m_sourceRowOf.clear();
    m_groupOf.clear();
    if (!m_source)
        return;
    const int rows = m_source->rowCount();
    for (int row = 0; row < rows; ++row) {
        const QModelIndex index = m_source->index(row, 0);
        const QString id = index.data(SessionTableModel::SessionIdRole).toString();
        if (id.isEmpty())
            continue;
        const int group = groupOf(index.data(SessionTableModel::StatusRole).toInt());
        m_groups[group].ids.append(id);
        m_sourceRowOf.insert(id, row);
        m_groupOf.insert(id, group);
    }
}

void SessionGroupModel::onSourceAboutToBeReset()
{
    if (m_resetting)
        return;
    m_resetting = true;
    beginResetModel();
}

void SessionGroupModel::onSourceReset()
{
    if (!m_resetting)
        beginResetModel();
    rebuildAll();
    m_resetting = false;
    endResetModel();
}

void SessionGroupModel::sync()
{
    if (!m_source || m_resetting)
        return;
    QList<QStringList> wanted(m_groups.size());
    QHash<QString, int> rowOf;
    QHash<QString, int> groupOfId;
    const int rows = m_source->rowCount();
    rowOf.reserve(rows);
    groupOfId.reserve(rows);
    for (int row = 0; row < rows; ++row) {
        const QModelIndex index = m_source->index(row, 0);
        const QString id = index.data(SessionTableModel::SessionIdRole).toString();
        if (id.isEmpty())
            continue;
        const int group = groupOf(index.data(SessionTableModel::StatusRole).toInt());
        wanted[group].append(id);
        rowOf.insert(id, row);
        groupOfId.insert(id, group);
    }
    // Our data() maps ids to the source's current rows; switch first, so rows that stay are right
    // while the signals below run.
    m_sourceRowOf = std::move(rowOf);
    m_groupOf = std::move(groupOfId);
    for (int g = 0; g < m_groups.size(); ++g)
        syncGroup(g, wanted.at(g));
}

// Turns the group's children into `wanted` with removals, at most one layout change, and insertions
// in contiguous runs, so views keep selection and expansion.
void SessionGroupModel::syncGroup(int g, const QStringList &wanted)
{
    QStringList &ids = m_groups[g].ids;
    if (ids == wanted)
        return;
    const QModelIndex parent = index(g, 0);
    const qsizetype before = ids.size();

    const QSet<QString> wantedSet(wanted.cbegin(), wanted.cend());
    for (qsizetype end = ids.size(); end > 0;) {
        if (wantedSet.contains(ids.at(end - 1))) {
            --end;
            continue;
        }
        qsizetype start = end - 1;
        while (start > 0 && !wantedSet.contains(ids.at(start - 1)))
            --start;
        beginRemoveRows(parent, static_cast<int>(start), static_cast<int>(end - 1));
        ids.remove(start, end - start);
        endRemoveRows();
        end = start;
    }

    const QSet<QString> kept(ids.cbegin(), ids.cend());
    QStringList keptInNewOrder;
    keptInNewOrder.reserve(ids.size());
    for (const QString &id : wanted) {
        if (kept.contains(id))
            keptInNewOrder.append(id);
    }
    if (keptInNewOrder != ids) {
        emit layoutAboutToBeChanged({QPersistentModelIndex(parent)}, QAbstractItemModel::VerticalSortHint);
        QHash<QString, int> newRow;
        for (int row = 0; row < keptInNewOrder.size(); ++row)
            newRow.insert(keptInNewOrder.at(row), row);
        const QModelIndexList persistent = persistentIndexList();
        QModelIndexList from;
        QModelIndexList to;
        for (const QModelIndex &index : persistent) {
            if (index.internalId() != static_cast<quintptr>(g) + 1)
                continue;
            from.append(index);
            to.append(createIndex(newRow.value(ids.at(index.row())), index.column(), index.internalId()));
        }
        ids = keptInNewOrder;
        changePersistentIndexList(from, to);
        emit layoutChanged({QPersistentModelIndex(parent)}, QAbstractItemModel::VerticalSortHint);
    }

    for (qsizetype i = 0; i < wanted.size();) {
        if (i < ids.size() && ids.at(i) == wanted.at(i)) {
            ++i;
            continue;
        }
        qsizetype end = i;
        while (end < wanted.size() && !kept.contains(wanted.at(end)))
            ++end;
        beginInsertRows(parent, static_cast<int>(i), static_cast<int>(end - 1));
        for (qsizetype k = i; k < end; ++k)
            ids.insert(k, wanted.at(k));
        endInsertRows();
        i = end;
    }

    if (ids.size() != before)
        emit dataChanged(parent, parent, {Qt::DisplayRole, GroupCountRole});
}

void SessionGroupModel::emitChildrenChanged(int group, int firstRow, int lastRow, const QList<int> &roles)
{
    const int columns = columnCount();
    if (columns <= 0 || firstRow > lastRow)
        return;
    const quintptr id = static_cast<quintptr>(group) + 1;
    emit dataChanged(createIndex(firstRow, 0, id), createIndex(lastRow, columns - 1, id), roles);
}

void SessionGroupModel::onSourceDataChanged(const QModelIndex &topLeft, const QModelIndex &bottomRight,
                                            const QList<int> &roles)
{
    if (!m_source || m_resetting || !topLeft.isValid() || topLeft.parent().isValid())
        return;
    // A status change moves a session between groups: regroup first.
    bool moved = false;
    for (int row = topLeft.row(); row <= bottomRight.row() && !moved; ++row) {
        const QModelIndex index = m_source->index(row, 0);
        const QString id = index.data(SessionTableModel::SessionIdRole).toString();
        const auto known = m_groupOf.constFind(id);
        moved = known == m_groupOf.constEnd()
            || *known != groupOf(index.data(SessionTableModel::StatusRole).toInt());
    }
    if (moved)
        sync();

    // One range per group: the smallest span covering its changed sessions.
    QList<int> first(m_groups.size(), INT_MAX);
    QList<int> last(m_groups.size(), -1);
    for (int row = topLeft.row(); row <= bottomRight.row(); ++row) {
        const QString id = m_source->index(row, 0).data(SessionTableModel::SessionIdRole).toString();
        const int group = m_groupOf.value(id, -1);
        if (group < 0)
            continue;
        const int childRow = static_cast<int>(m_groups.at(group).ids.indexOf(id));
        if (childRow < 0)
            continue;
        first[group] = std::min(first.at(group), childRow);
        last[group] = std::max(last.at(group), childRow);
    }
    for (int g = 0; g < m_groups.size(); ++g) {
        if (last.at(g) >= 0)
            emitChildrenChanged(g, first.at(g), last.at(g), roles);
    }
}

QModelIndex SessionGroupModel::index(int row, int column, const QModelIndex &parent) const
{
    if (row < 0 || column < 0 || column >= columnCount(parent))
        return {};
    if (!parent.isValid())
        return row < m_groups.size() ? createIndex(row, column, kGroupId) : QModelIndex();
    if (parent.internalId() != kGroupId || parent.column() != 0 || parent.row() >= m_groups.size())
        return {};
    if (row >= m_groups.at(parent.row()).ids.size())
        return {};
    return createIndex(row, column, static_cast<quintptr>(parent.row()) + 1);
}

QModelIndex SessionGroupModel::parent(const QModelIndex &child) const
{
    if (!child.isValid() || child.internalId() == kGroupId)
        return {};
    return createIndex(static_cast<int>(child.internalId() - 1), 0, kGroupId);
}

int SessionGroupModel::rowCount(const QModelIndex &parent) const
{
    if (!parent.isValid())
        return static_cast<int>(m_groups.size());
    if (parent.internalId() != kGroupId || parent.column() != 0)
        return 0;
    return static_cast<int>(m_groups.at(parent.row()).ids.size());
}

int SessionGroupModel::columnCount(const QModelIndex &) const
{
    return m_source ? std::max(1, m_source->columnCount()) : 1;
}

QModelIndex SessionGroupModel::mapToSource(const QModelIndex &index) const
{
    if (!m_source || !index.isValid() || index.model() != this || index.internalId() == kGroupId)
        return {};
    const Group &group = m_groups.at(static_cast<int>(index.internalId() - 1));
    const int row = m_sourceRowOf.value(group.ids.at(index.row()), -1);
    return row < 0 ? QModelIndex() : m_source->index(row, index.column());
}

QModelIndex SessionGroupModel::indexOfSession(const QString &id, int column) const
{
    const int group = m_groupOf.value(id, -1);
    if (group < 0)
        return {};
    const qsizetype row = m_groups.at(group).ids.indexOf(id);
    return row < 0 ? QModelIndex() : createIndex(static_cast<int>(row), column, static_cast<quintptr>(group) + 1);
}

QModelIndex SessionGroupModel::groupIndex(SessionStatus status) const
{
    return index(groupOf(static_cast<int>(status)), 0);
}

QVariant SessionGroupModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid())
        return {};
    if (index.internalId() == kGroupId) {
        const Group &group = m_groups.at(index.row());
        switch (role) {
        case Qt::DisplayRole:
            if (index.column() != 0)
                return {};
            return QStringLiteral("%1 (%2)").arg(statusLabel(group.status)).arg(group.ids.size());
        case IsGroupRole: return true;
        case SessionTableModel::StatusRole: return static_cast<int>(group.status);
        case GroupCountRole: return static_cast<int>(group.ids.size());
        case SessionTableModel::SortRole: return statusOrder(group.status);
        default: return {};
        }
    }
    if (role == IsGroupRole)
        return false;
    return mapToSource(index).data(role);
}

QVariant SessionGroupModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (m_source)
        return m_source->headerData(section, orientation, role);
    return QAbstractItemModel::headerData(section, orientation, role);
}

Qt::ItemFlags SessionGroupModel::flags(const QModelIndex &index) const
{
    if (!index.isValid())
        return Qt::NoItemFlags;
    if (index.internalId() == kGroupId)
        return Qt::ItemIsEnabled;
    return Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemNeverHasChildren;
}

} // namespace paddock::console
