#include "models/snapshot_files_model.h"

#include <QDateTime>
#include <QHash>

#include <algorithm>

namespace paddock::console {

QString formatBytes(qint64 bytes)
{
    if (bytes < 1024)
        return QStringLiteral("%1 B").arg(bytes);
    const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
    double value = double(bytes);
    int unit = -1;
    while (value >= 1024 && unit < 3) {
        value /= 1024;
        ++unit;
    }
    return QStringLiteral("%1 %2").arg(value, 0, 'f', value < 10 ? 1 : 0).arg(QLatin1String(units[unit]));
}

SnapshotFilesModel::SnapshotFilesModel(QObject *parent) : QAbstractItemModel(parent)
{
    m_nodes.emplace_back();
    m_nodes.front().entry.isDir = true;
}

const SnapshotFilesModel::Node *SnapshotFilesModel::nodeOf(const QModelIndex &index) const
{
    if (!index.isValid())
        return &m_nodes.front();
    const auto id = static_cast<size_t>(index.internalId());
    return id < m_nodes.size() ? &m_nodes[id] : nullptr;
}

QModelIndex SnapshotFilesModel::index(int row, int column, const QModelIndex &parent) const
{
    if (row < 0 || column < 0 || column >= ColumnCount || (parent.isValid() && parent.column() != 0))
        return {};
    const Node *node = nodeOf(parent);
    if (!node || row >= static_cast<int>(node->children.size()))
        return {};
    return createIndex(row, column, static_cast<quintptr>(node->children[static_cast<size_t>(row)]));
}

QModelIndex SnapshotFilesModel::parent(const QModelIndex &child) const
{
    const Node *node = child.isValid() ? nodeOf(child) : nullptr;
    if (!node || node->parent <= 0)
        return {};
    const Node &parentNode = m_nodes[static_cast<size_t>(node->parent)];
    return createIndex(parentNode.row, 0, static_cast<quintptr>(node->parent));
}

int SnapshotFilesModel::rowCount(const QModelIndex &parent) const
{
    if (parent.isValid() && parent.column() != 0)
        return 0;
    const Node *node = nodeOf(parent);
    return node ? static_cast<int>(node->children.size()) : 0;
}

int SnapshotFilesModel::columnCount(const QModelIndex &) const
{
    return ColumnCount;
}

Qt::ItemFlags SnapshotFilesModel::flags(const QModelIndex &index) const
{
    if (!index.isValid())
        return Qt::NoItemFlags;
    Qt::ItemFlags flags = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
    const Node *node = nodeOf(index);
    if (node && !node->entry.isDir)
        flags |= Qt::ItemNeverHasChildren;
    return flags;
}

QVariant SnapshotFilesModel::data(const QModelIndex &index, int role) const
{
    const Node *node = index.isValid() ? nodeOf(index) : nullptr;
    if (!node)
        return {};
    const SnapshotFile &e = node->entry;
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case Name:
            if (e.isSymlink)
                return node->name + QStringLiteral(" → ") + e.symlinkTarget;
            return e.isDir ? node->name + u'/' : node->name;
        case Size: return e.isDir ? QVariant() : QVariant(formatBytes(e.size));
        case Modified:
            return e.mtimeUnixMs > 0 ? QDateTime::fromMSecsSinceEpoch(e.mtimeUnixMs).toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"))
                                     : QString();
        default: return {};
        }
    case SortRole:
        switch (index.column()) {
        case Name: return node->name;
        case Size: return e.size;
        case Modified: return e.mtimeUnixMs;
        default: return {};
        }
    case Qt::TextAlignmentRole:
        if (index.column() == Size)
            return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
        return {};
    case Qt::ToolTipRole:
        return QStringLiteral("/workspace/%1%2").arg(e.path, e.isDir ? QStringLiteral("/") : QString());
    case PathRole: return e.path;
    case IsDirRole: return e.isDir;
    case SizeRole: return e.size;
    case EntryRole: return QVariant::fromValue(e);
    default: return {};
    }
}

QVariant SnapshotFilesModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractItemModel::headerData(section, orientation, role);
    switch (section) {
    case Name: return QStringLiteral("Name");
    case Size: return QStringLiteral("Size");
    case Modified: return QStringLiteral("Modified");
    default: return {};
    }
}

int SnapshotFilesModel::childNamed(int parent, const QString &name) const
{
    for (int child : m_nodes[static_cast<size_t>(parent)].children) {
        if (m_nodes[static_cast<size_t>(child)].name == name)
            return child;
    }
    return -1;
}

int SnapshotFilesModel::addNode(int parent, const QString &name, const SnapshotFile &entry)
{
    Node node;
    node.name = name;
    node.entry = entry;
    node.parent = parent;
    m_nodes.push_back(std::move(node));
    const int id = static_cast<int>(m_nodes.size()) - 1;
    m_nodes[static_cast<size_t>(parent)].children.push_back(id);
    return id;
}

void SnapshotFilesModel::sortChildren(int node)
{
    auto &children = m_nodes[static_cast<size_t>(node)].children;
    std::sort(children.begin(), children.end(), [this](int a, int b) {
        const Node &x = m_nodes[static_cast<size_t>(a)];
        const Node &y = m_nodes[static_cast<size_t>(b)];
        if (x.entry.isDir != y.entry.isDir)
            return x.entry.isDir;
        return x.name.compare(y.name, Qt::CaseInsensitive) < 0;
    });
    for (size_t i = 0; i < children.size(); ++i) {
        m_nodes[static_cast<size_t>(children[i])].row = static_cast<int>(i);
        sortChildren(children[i]);
    }
}

void SnapshotFilesModel::setFiles(const QString &pool, const QString &snapshotRef, const QList<SnapshotFile> &files)
{
    beginResetModel();
    m_pool = pool;
    m_ref = snapshotRef;
    m_nodes.resize(1);
    m_nodes.front().children.clear();
    m_fileCount = 0;
    m_totalBytes = 0;
    // A child lookup per path component is linear in the siblings; an index by path keeps a big
    // flat directory from being quadratic.
    QHash<QString, int> byPath;
    byPath.insert(QString(), 0);
    for (const SnapshotFile &file : files) {
        QString path = file.path;
        while (path.startsWith(u'/') || path.startsWith(QLatin1String("./")))
            path.remove(0, path.startsWith(u'/') ? 1 : 2);
        while (path.endsWith(u'/'))
            path.chop(1);
        if (path.isEmpty() || path == u".")
            continue;
        const QStringList parts = path.split(u'/', Qt::SkipEmptyParts);
        int parent = 0;
        QString sofar;
        for (qsizetype i = 0; i < parts.size(); ++i) {
            sofar = sofar.isEmpty() ? parts.at(i) : sofar + u'/' + parts.at(i);
            const bool last = i == parts.size() - 1;
            auto found = byPath.constFind(sofar);
            int node = found == byPath.constEnd() ? -1 : *found;
            if (node < 0) {
                SnapshotFile entry;
                entry.path = sofar;
                entry.isDir = true;
                if (last) {
                    entry = file;
                    entry.path = sofar;
                }
                node = addNode(parent, parts.at(i), entry);
                byPath.insert(sofar, node);
            } else if (last) {
                m_nodes[static_cast<size_t>(node)].entry = file;
                m_nodes[static_cast<size_t>(node)].entry.path = sofar;
            }
            parent = node;
        }
        if (!file.isDir) {
            ++m_fileCount;
            m_totalBytes += file.size;
        }
    }
    sortChildren(0);
    endResetModel();
}

void SnapshotFilesModel::clear()
{
    setFiles({}, {}, {});
}

QModelIndex SnapshotFilesModel::indexOfPath(const QString &path) const
{
    int node = 0;
    for (const QString &part : path.split(u'/', Qt::SkipEmptyParts)) {
        node = childNamed(node, part);
        if (node < 0)
            return {};
    }
    if (node == 0)
        return {};
    return createIndex(m_nodes[static_cast<size_t>(node)].row, 0, static_cast<quintptr>(node));
}

} // namespace paddock::console
