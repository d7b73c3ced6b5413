#pragma once
// "Group by status": a two-level tree over the session table (or its filter proxy) for a QTreeView.
// Top level: one row per status, always present and in a fixed order, so a tree view keeps its
// expansion state across updates. Children: the sessions of that status, in source order (so the
// proxy's sort and filter apply), with the source's columns and roles.
//
// Threads: GUI thread only.
//
// Known limits: regrouping after a structural change of the source (rows inserted, removed or
// re-sorted) is O(sessions); fine for thousands of sessions at a 50 ms batch interval.

#include "models/console_types.h"

#include <QAbstractItemModel>
#include <QHash>
#include <QPointer>
#include <QStringList>

namespace paddock::console {

class SessionGroupModel : public QAbstractItemModel {
    Q_OBJECT

public:
    enum Role {
        // StatusRole and the source's roles keep their values (SessionTableModel::Role); these
        // come after them.
        IsGroupRole = Qt::UserRole + 100,   // bool
        GroupCountRole,                     // int: sessions in the group (group rows)
    };

    explicit SessionGroupModel(QObject *parent = nullptr);

    // A SessionFilterProxy or a SessionTableModel (anything with SessionIdRole and StatusRole).
    void setSourceModel(QAbstractItemModel *source);
    QAbstractItemModel *sourceModel() const { return m_source; }

    QModelIndex index(int row, int column, const QModelIndex &parent = {}) const override;
    QModelIndex parent(const QModelIndex &child) const override;
    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex &index) const override;

    // The source index of a session row; invalid for a group row.
    QModelIndex mapToSource(const QModelIndex &index) const;
    QModelIndex indexOfSession(const QString &id, int column = 0) const;
    QModelIndex groupIndex(SessionStatus status) const;
    static QList<SessionStatus> groupOrder();

private:
    struct Group {
        SessionStatus status;
        QStringList ids;
    };

    void sync();
    void syncGroup(int group, const QStringList &wanted);
    void onSourceDataChanged(const QModelIndex &topLeft, const QModelIndex &bottomRight, const QList<int> &roles);
    void onSourceAboutToBeReset();
    void onSourceReset();
    void rebuildAll();
    int groupOf(int statusValue) const;
    void emitChildrenChanged(int group, int firstRow, int lastRow, const QList<int> &roles);

    QPointer<QAbstractItemModel> m_source;
    QList<Group> m_groups;
    QHash<QString, int> m_sourceRowOf;   // id -> source row, rebuilt on each structural change
    QHash<QString, int> m_groupOf;       // id -> group
    QList<QMetaObject::Connection> m_connections;
    bool m_resetting = false;
};

} // namespace paddock::console
