#include "models/post_mortem_model.h"

#include <QDateTime>

#include <algorithm>

namespace paddock::console {

QString postMortemReasonLabel(const QString &reason)
{
    if (reason == u"oom_killed")
        return QStringLiteral("Out of memory");
    if (reason == u"timeout")
        return QStringLiteral("Timed out");
    if (reason == u"nonzero_exit")
        return QStringLiteral("Non-zero exit");
    if (reason == u"crashed")
        return QStringLiteral("Sandbox init died");
    if (reason == u"pool_lost")
        return QStringLiteral("Pool lost");
    if (reason == u"disk_full")
        return QStringLiteral("Workspace full");
    if (reason == u"seccomp_killed")
        return QStringLiteral("Killed by seccomp");
    return reason.isEmpty() ? QStringLiteral("Unknown") : reason;
}

QString postMortemExitText(const PostMortemInfo &pm)
{
    if (pm.signal > 0) {
        const char *name = pm.signal == 9 ? "SIGKILL" : pm.signal == 15 ? "SIGTERM" : pm.signal == 11 ? "SIGSEGV"
                         : pm.signal == 6 ? "SIGABRT" : pm.signal == 31 ? "SIGSYS" : nullptr;
        return name ? QStringLiteral("signal %1 (%2)").arg(pm.signal).arg(QLatin1String(name))
                    : QStringLiteral("signal %1").arg(pm.signal);
    }
    if (pm.reason == u"crashed" || pm.reason == u"pool_lost")
        return QStringLiteral("no exit");
    return QStringLiteral("exit %1").arg(pm.exitCode);
}

PostMortemListModel::PostMortemListModel(QObject *parent) : QAbstractTableModel(parent) {}

int PostMortemListModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_items.size());
}

int PostMortemListModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant PostMortemListModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= m_items.size())
        return {};
    const PostMortemInfo &pm = m_items.at(index.row());
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case Time: return QDateTime::fromMSecsSinceEpoch(pm.timeUnixMs).toString(QStringLiteral("MM-dd HH:mm:ss"));
        case Reason: return postMortemReasonLabel(pm.reason);
        case Session: return pm.sessionId.isEmpty() ? QStringLiteral("–") : pm.sessionId;
        case Tier: return pm.tier;
        case Pool: return pm.pool;
        case Exit: return postMortemExitText(pm);
        case Detail: return pm.detail.isEmpty() ? pm.argv.join(u' ') : pm.detail;
        default: return {};
        }
    case SortRole:
        switch (index.column()) {
        case Time: return pm.timeUnixMs;
        case Reason: return pm.reason;
        case Session: return pm.sessionId;
        case Tier: return pm.tier;
        case Pool: return pm.pool;
        case Exit: return pm.signal > 0 ? -pm.signal : pm.exitCode;
        case Detail: return pm.detail;
        default: return {};
        }
    case Qt::ToolTipRole:
        return QStringLiteral("%1 in sandbox %2 (pool %3, tier %4)\n%5%6")
            .arg(postMortemReasonLabel(pm.reason), pm.sandboxId, pm.pool, pm.tier,
                 pm.argv.isEmpty() ? QString() : QStringLiteral("command: ") + pm.argv.join(u' ') + u'\n',
                 pm.snapshotRef.isEmpty() ? QStringLiteral("no workspace snapshot")
                                          : QStringLiteral("snapshot ") + pm.snapshotRef);
    case PostMortemRole: return QVariant::fromValue(pm);
    case PoolRole: return pm.pool;
    case SandboxIdRole: return pm.sandboxId;
    case SessionIdRole: return pm.sessionId;
    case ReasonRole: return pm.reason;
    default: return {};
    }
}

QVariant PostMortemListModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Time: return QStringLiteral("When");
    case Reason: return QStringLiteral("Reason");
    case Session: return QStringLiteral("Session");
    case Tier: return QStringLiteral("Tier");
    case Pool: return QStringLiteral("Pool");
    case Exit: return QStringLiteral("Exit");
    case Detail: return QStringLiteral("What happened");
    default: return {};
    }
}

void PostMortemListModel::setPostMortems(const QList<PostMortemInfo> &postMortems)
{
    QList<PostMortemInfo> sorted = postMortems;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const PostMortemInfo &a, const PostMortemInfo &b) { return a.timeUnixMs > b.timeUnixMs; });
    bool same = sorted.size() == m_items.size();
    for (qsizetype i = 0; same && i < sorted.size(); ++i)
        same = sorted.at(i).pool == m_items.at(i).pool && sorted.at(i).sandboxId == m_items.at(i).sandboxId
            && sorted.at(i).timeUnixMs == m_items.at(i).timeUnixMs;
    if (!same) {
        beginResetModel();
        m_items = std::move(sorted);
        endResetModel();
        return;
    }
    m_items = std::move(sorted);
    if (!m_items.isEmpty())
        emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
}

int PostMortemListModel::rowOf(const QString &pool, const QString &sandboxId) const
{
    for (qsizetype i = 0; i < m_items.size(); ++i) {
        if (m_items.at(i).pool == pool && m_items.at(i).sandboxId == sandboxId)
            return static_cast<int>(i);
    }
    return -1;
}

int PostMortemListModel::newestRowOfSession(const QString &sessionId) const
{
    for (qsizetype i = 0; i < m_items.size(); ++i) {
        if (m_items.at(i).sessionId == sessionId)
            return static_cast<int>(i);   // newest first
    }
    return -1;
}

void PostMortemListModel::clear()
{
    if (m_items.isEmpty())
        return;
    beginResetModel();
    m_items.clear();
    endResetModel();
}

} // namespace paddock::console
