#include "models/decision_table_model.h"

#include "models/snapshot_files_model.h"

#include <QDateTime>

namespace paddock::console {

DecisionTableModel::DecisionTableModel(QObject *parent) : QAbstractTableModel(parent) {}

int DecisionTableModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_decisions.size());
}

int DecisionTableModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

int DecisionTableModel::allocation(const DecisionInfo &decision)
{
    if (decision.outcome == u"over_allocated")
        return 1;
    if (decision.outcome == u"under_allocated" || decision.outcome == u"oom")
        return -1;
    return 0;
}

QString DecisionTableModel::outcomeText(const DecisionInfo &d)
{
    if (d.outcome.isEmpty())
        return QStringLiteral("pending: the tier is still held");
    QString text = d.outcome;
    text.replace(u'_', u'-');
    QStringList figures;
    if (d.memoryLimitBytes > 0)
        figures << QStringLiteral("peak %1 of %2").arg(formatBytes(d.peakMemoryBytes), formatBytes(d.memoryLimitBytes));
    if (d.meanCpuFraction > 0 || d.memoryLimitBytes > 0)
        figures << QStringLiteral("CPU %1%").arg(qRound(d.meanCpuFraction * 100));
    if (d.throttledFraction > 0)
        figures << QStringLiteral("throttled %1% of the time").arg(qRound(d.throttledFraction * 100));
    if (!figures.isEmpty())
        text += QStringLiteral(": ") + figures.join(QStringLiteral(", "));
    if (!d.fittingTier.isEmpty())
        text += QStringLiteral("; %1 would have fitted").arg(d.fittingTier);
    return text;
}

QVariant DecisionTableModel::display(const DecisionInfo &d, int column) const
{
    switch (column) {
    case Time: return d.timeUnixMs > 0 ? QDateTime::fromMSecsSinceEpoch(d.timeUnixMs).toString(QStringLiteral("yyyy-MM-dd hh:mm:ss")) : QString();
    case Session: return d.sessionId;
    case Agent: return d.agent;
    case Requested: return d.requestedTier.isEmpty() ? QStringLiteral("—") : d.requestedTier;
    case Chosen: return d.chosenTier;
    case Chooser: return d.who.isEmpty() ? d.chooser : QStringLiteral("%1 (%2)").arg(d.chooser, d.who);
    case Rule: return d.rule;
    case Reason: return d.reason;
    case Outcome: {
        if (d.outcome.isEmpty())
            return QStringLiteral("pending");
        QString text = d.outcome;
        return text.replace(u'_', u'-');
    }
    case Fitting: return d.fittingTier;
    default: return {};
    }
}

QVariant DecisionTableModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= m_decisions.size())
        return {};
    const DecisionInfo &d = m_decisions.at(index.row());
    switch (role) {
    case Qt::DisplayRole: return display(d, index.column());
    case Qt::ToolTipRole: {
        QStringList lines{QStringLiteral("%1 chose %2 for session %3 (%4)").arg(d.chooser, d.chosenTier, d.sessionId, d.trigger)};
        if (!d.reason.isEmpty())
            lines << QStringLiteral("Reason: ") + d.reason;
        if (!d.rule.isEmpty())
            lines << QStringLiteral("Rule: ") + d.rule;
        lines << QStringLiteral("Outcome: ") + outcomeText(d);
        for (const TierAlternativeInfo &a : d.alternatives) {
            lines << QStringLiteral("  %1: ~$%2%3")
                         .arg(a.tier)
                         .arg(double(a.estimatedCostMicros) / 1e6, 0, 'f', 4)
                         .arg(a.note.isEmpty() ? QString() : QStringLiteral(" (") + a.note + u')');
        }
        return lines.join(u'\n');
    }
    case SortRole: return index.column() == Time ? QVariant(d.timeUnixMs) : display(d, index.column());
    case DecisionRole: return QVariant::fromValue(d);
    case SessionIdRole: return d.sessionId;
    case AllocationRole: return allocation(d);
    default: return {};
    }
}

QVariant DecisionTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case Time: return QStringLiteral("Time");
    case Session: return QStringLiteral("Session");
    case Agent: return QStringLiteral("Agent");
    case Requested: return QStringLiteral("Requested");
    case Chosen: return QStringLiteral("Chosen");
    case Chooser: return QStringLiteral("Chooser");
    case Rule: return QStringLiteral("Rule");
    case Reason: return QStringLiteral("Reason");
    case Outcome: return QStringLiteral("Outcome");
    case Fitting: return QStringLiteral("Would have fitted");
    default: return {};
    }
}

void DecisionTableModel::setDecisions(const QList<DecisionInfo> &decisions)
{
    bool sameIds = decisions.size() == m_decisions.size();
    for (qsizetype i = 0; sameIds && i < decisions.size(); ++i)
        sameIds = decisions.at(i).id == m_decisions.at(i).id;
    if (sameIds) {
        m_decisions = decisions;
        if (!m_decisions.isEmpty())
            emit dataChanged(index(0, 0), index(int(m_decisions.size()) - 1, ColumnCount - 1));
        return;
    }
    beginResetModel();
    m_decisions = decisions;
    endResetModel();
}

} // namespace paddock::console
