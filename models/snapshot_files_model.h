#pragma once
// The files of a workspace snapshot as a tree (directories first, then by name), from the flat
// list ListSnapshotFiles gives: parents the archive left out are made up as directories.
//
// Threads: GUI thread only. Feed it with setFiles() from ConsoleClient::snapshotFilesListed.
//
// Known limits: the whole listing is held (a snapshot of a workspace lists thousands of entries,
// not millions); a new listing resets the model.

#include "models/sandbox_types.h"

#include <QAbstractItemModel>
#include <vector>

namespace paddock::console {

class SnapshotFilesModel : public QAbstractItemModel {
    Q_OBJECT

public:
    enum Column { Name, Size, Modified, ColumnCount };
    enum Role {
        SortRole = Qt::UserRole + 1,   // raw value
        PathRole,                      // QString, relative to /workspace
        IsDirRole,                     // bool
        SizeRole,                      // qint64 bytes (files)
        EntryRole,                     // QVariant of SnapshotFile
    };
    Q_ENUM(Column)

    explicit SnapshotFilesModel(QObject *parent = nullptr);

    QModelIndex index(int row, int column, const QModelIndex &parent = {}) const override;
    QModelIndex parent(const QModelIndex &child) const override;
    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex &index) const override;

    // The snapshot the files belong to (pool and ref), kept with them.
    void setFiles(const QString &pool, const QString &snapshotRef, const QList<SnapshotFile> &files);
    void clear();
    QString pool() const { return m_pool; }
    QString snapshotRef() const { return m_ref; }
    int fileCount() const { return m_fileCount; }
    qint64 totalBytes() const { return m_totalBytes; }
    QModelIndex indexOfPath(const QString &path) const;

private:
    struct Node {
        QString name;
        SnapshotFile entry;
        int parent = -1;
        int row = 0;
        std::vector<int> children;
    };
    int childNamed(int parent, const QString &name) const;
    int addNode(int parent, const QString &name, const SnapshotFile &entry);
    void sortChildren(int node);
    const Node *nodeOf(const QModelIndex &index) const;

    QString m_pool;
    QString m_ref;
    std::vector<Node> m_nodes;   // [0] is the invisible root
    int m_fileCount = 0;
    qint64 m_totalBytes = 0;
};

// "1.2 KiB", "3.4 MiB", "512 B".
QString formatBytes(qint64 bytes);

} // namespace paddock::console
