#pragma once
// Recent failures: the post-mortems the pools kept (ListPostMortems), newest first, for the list
// that opens the sandbox inspector.
//
// Threads: GUI thread only. Feed it with setPostMortems() from ConsoleClient::postMortemsListed.
//
// Known limits: a refresh replaces the list (a reset when the set changed; dataChanged when the
// same post-mortems came back), so selection survives only an unchanged list.

#include "models/sandbox_types.h"

#include <QAbstractTableModel>

namespace paddock::console {

// "Out of memory", "Timed out", ... for a pool's reason ("oom_killed", "timeout", ...).
QString postMortemReasonLabel(const QString &reason);
// "exit 2", "signal 9 (SIGKILL)", "no exit" for a post-mortem.
QString postMortemExitText(const PostMortemInfo &postMortem);

class PostMortemListModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Column { Time, Reason, Session, Tier, Pool, Exit, Detail, ColumnCount };
    enum Role {
        SortRole = Qt::UserRole + 1,   // raw value
        PostMortemRole,                // QVariant of PostMortemInfo
        PoolRole,                      // QString
        SandboxIdRole,                 // QString
        SessionIdRole,                 // QString
        ReasonRole,                    // QString as the pool spells it
    };
    Q_ENUM(Column)

    explicit PostMortemListModel(QObject *parent = nullptr);

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // Sorted newest first here, whatever order they come in.
    void setPostMortems(const QList<PostMortemInfo> &postMortems);
    const PostMortemInfo &postMortemAt(int row) const { return m_items.at(row); }
    int rowOf(const QString &pool, const QString &sandboxId) const;
    // The newest post-mortem of a session; -1 when it has none.
    int newestRowOfSession(const QString &sessionId) const;
    void clear();

private:
    QList<PostMortemInfo> m_items;
};

} // namespace paddock::console
