#include "models/session_table_model.h"

#include "models/console_format.h"

#include <QDateTime>

#include <algorithm>

namespace paddock::console {

SessionTableModel::SessionTableModel(QObject *parent)
    : QAbstractTableModel(parent), m_clock([] { return QDateTime::currentMSecsSinceEpoch(); })
{
}

int SessionTableModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_sessions.size());
}

int SessionTableModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

qint64 SessionTableModel::durationMs(const SessionInfo &session) const
{
    if (session.createdUnixMs <= 0)
        return -1;
    const qint64 end = isTerminal(session.status) ? session.updatedUnixMs : m_clock();
    return std::max<qint64>(0, end - session.createdUnixMs);
}

QVariant SessionTableModel::display(const SessionInfo &session, int column) const
{
    switch (column) {
    case Status: return statusLabel(session.status);
    case Id: return session.id;
    case Agent: return session.agent;
    case Goal: {
        // One line in the table; the tooltip has it whole.
        const qsizetype newline = session.goal.indexOf(QLatin1Char('\n'));
        return newline < 0 ? session.goal : session.goal.left(newline) + QStringLiteral(" …");
    }
    case Tier: return session.tier;
    case Pool: return session.pool;
    case Steps: return QString::number(session.steps);
    case Cost: return formatCost(session.costMicros);
    case Duration: return formatDuration(durationMs(session));
    case LastEvent: return session.lastEventKind;
    default: return {};
    }
}

QVariant SessionTableModel::sortValue(const SessionInfo &session, int column) const
{
    switch (column) {
    case Status: return statusOrder(session.status);
    case Id: return session.id;
    case Agent: return session.agent;
    case Goal: return session.goal;
    case Tier: return session.tier;
    case Pool: return session.pool;
    case Steps: return session.steps;
    case Cost: return session.costMicros;
    case Duration: return durationMs(session);
    case LastEvent: return session.updatedUnixMs;
    default: return {};
    }
}

QString SessionTableModel::toolTip(const SessionInfo &session) const
{
    QStringList lines;
    QString status = statusLabel(session.status);
    if (!session.statusReason.isEmpty())
        status += QStringLiteral(": ") + session.statusReason;
    lines << status;
    lines << QStringLiteral("Session %1 · agent %2").arg(session.id, session.agent);
    if (!session.goal.isEmpty())
        lines << QStringLiteral("Goal: ") + session.goal;
    QString model = QStringLiteral("Model: ") + session.model;
    if (!session.playbook.isEmpty())
        model += QStringLiteral(" (playbook %1)").arg(session.playbook);
    lines << model;
    if (!session.sandboxId.isEmpty())
        lines << QStringLiteral("Sandbox %1 in pool %2, tier %3").arg(session.sandboxId, session.pool, session.tier);
    if (!session.tierChooser.isEmpty())
        lines << QStringLiteral("Tier chosen by %1").arg(session.tierChooser);
    if (session.modelCostMicros > 0 || session.sandboxCostMicros > 0)
        lines << QStringLiteral("Cost: model %1, sandbox %2")
                     .arg(formatCost(session.modelCostMicros), formatCost(session.sandboxCostMicros));
    if (!session.tags.isEmpty())
        lines << QStringLiteral("Tags: ") + session.tags.join(QStringLiteral(", "));
    lines << QStringLiteral("Last event: %1 (seq %2)").arg(session.lastEventKind).arg(session.lastSeq);
    if (m_stale)
        lines << QStringLiteral("Not connected to the broker: this may be out of date.");
    return lines.join(QLatin1Char('\n'));
}

QVariant SessionTableModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= m_sessions.size() || index.column() >= ColumnCount)
        return {};
    const SessionInfo &session = m_sessions.at(index.row());
    switch (role) {
    case Qt::DisplayRole: return display(session, index.column());
    case Qt::ToolTipRole: return toolTip(session);
    case Qt::TextAlignmentRole:
        if (index.column() == Steps || index.column() == Cost || index.column() == Duration)
            return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
        return {};
    case SortRole: return sortValue(session, index.column());
    case SessionIdRole: return session.id;
    case StatusRole: return static_cast<int>(session.status);
    case SessionInfoRole: return QVariant::fromValue(session);
    case StaleRole: return m_stale;
    case TierChooserRole: return session.tierChooser;
    default: return {};
    }
}

QVariant SessionTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Status: return QStringLiteral("Status");
    case Id: return QStringLiteral("Session");
    case Agent: return QStringLiteral("Agent");
    case Goal: return QStringLiteral("Goal");
    case Tier: return QStringLiteral("Tier");
    case Pool: return QStringLiteral("Pool");
    case Steps: return QStringLiteral("Steps");
    case Cost: return QStringLiteral("Cost");
    case Duration: return QStringLiteral("Duration");
    case LastEvent: return QStringLiteral("Last event");
    default: return {};
    }
}

QHash<int, QByteArray> SessionTableModel::roleNames() const
{
    auto names = QAbstractTableModel::roleNames();
    names.insert(SortRole, "sort");
    names.insert(SessionIdRole, "sessionId");
    names.insert(StatusRole, "status");
    names.insert(SessionInfoRole, "sessionInfo");
    names.insert(StaleRole, "stale");
    names.insert(TierChooserRole, "tierChooser");
    return names;
}

void SessionTableModel::emitRowRanges(QList<int> rows, int firstColumn, int lastColumn, const QList<int> &roles)
{
    if (rows.isEmpty())
        return;
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    // Many scattered ranges cost a sort/filter proxy one pass each; one spanning range costs it one
    // pass in all, so a large batch of scattered updates is announced as a single range.
    constexpr int kMaxRanges = 8;
    int ranges = 1;
    for (qsizetype i = 1; i < rows.size(); ++i)
        ranges += rows.at(i) != rows.at(i - 1) + 1 ? 1 : 0;
    if (ranges > kMaxRanges) {
        emit dataChanged(index(rows.front(), firstColumn), index(rows.back(), lastColumn), roles);
        return;
    }
    int start = rows.front();
    int previous = start;
    for (qsizetype i = 1; i <= rows.size(); ++i) {
        if (i < rows.size() && rows.at(i) == previous + 1) {
            previous = rows.at(i);
            continue;
        }
        emit dataChanged(index(start, firstColumn), index(previous, lastColumn), roles);
        if (i < rows.size())
            start = previous = rows.at(i);
    }
}

void SessionTableModel::applyChanges(const QList<SessionInfo> &changes)
{
    QList<int> updated;
    QList<SessionInfo> added;
    QHash<QString, qsizetype> addedAt;   // a new id seen twice in one batch becomes one row
    for (const SessionInfo &change : changes) {
        if (change.id.isEmpty())
            continue;
        const int row = m_rowOf.value(change.id, -1);
        if (row >= 0) {
            SessionInfo &current = m_sessions[row];
            if (change.lastSeq < current.lastSeq)
                continue;   // the watch may deliver an older state after a reconnect
            current = change;
            updated.append(row);
            continue;
        }
        const auto seen = addedAt.constFind(change.id);
        if (seen != addedAt.constEnd()) {
            if (change.lastSeq >= added.at(*seen).lastSeq)
                added[*seen] = change;
            continue;
        }
        addedAt.insert(change.id, added.size());
        added.append(change);
    }

    emitRowRanges(updated, 0, ColumnCount - 1, {});

    if (!added.isEmpty()) {
        const int first = static_cast<int>(m_sessions.size());
        beginInsertRows({}, first, first + static_cast<int>(added.size()) - 1);
        m_sessions.reserve(m_sessions.size() + added.size());
        for (SessionInfo &session : added) {
            m_rowOf.insert(session.id, static_cast<int>(m_sessions.size()));
            m_sessions.append(std::move(session));
        }
        endInsertRows();
    }
}

void SessionTableModel::clear()
{
    if (m_sessions.isEmpty())
        return;
    beginResetModel();
    m_sessions.clear();
    m_rowOf.clear();
    endResetModel();
}

void SessionTableModel::setStale(bool stale)
{
    if (m_stale == stale)
        return;
    m_stale = stale;
    if (!m_sessions.isEmpty())
        emit dataChanged(index(0, 0), index(static_cast<int>(m_sessions.size()) - 1, ColumnCount - 1),
                         {StaleRole, Qt::ToolTipRole});
    emit staleChanged(stale);
}

void SessionTableModel::setClock(std::function<qint64()> clock)
{
    m_clock = std::move(clock);
}

void SessionTableModel::refreshDurations()
{
    QList<int> live;
    for (int row = 0; row < m_sessions.size(); ++row) {
        if (!isTerminal(m_sessions.at(row).status))
            live.append(row);
    }
    emitRowRanges(live, Duration, Duration, {Qt::DisplayRole, SortRole});
}

} // namespace paddock::console
