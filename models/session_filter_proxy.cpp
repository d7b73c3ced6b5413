#include "models/session_filter_proxy.h"

#include "models/session_table_model.h"

namespace paddock::console {

SessionFilterProxy::SessionFilterProxy(QObject *parent) : QSortFilterProxyModel(parent)
{
    setSortRole(SessionTableModel::SortRole);
    setDynamicSortFilter(true);
    setSortCaseSensitivity(Qt::CaseInsensitive);
}

void SessionFilterProxy::setSourceModel(QAbstractItemModel *source)
{
    // Looked up once: filtering reads SessionInfo straight from the table instead of through
    // QVariant for every row.
    m_table = qobject_cast<SessionTableModel *>(source);
    QSortFilterProxyModel::setSourceModel(source);
}

void SessionFilterProxy::setSearchText(const QString &text)
{
    if (text == m_searchText)
        return;
    m_searchText = text;
    m_words = text.toLower().split(QLatin1Char(' '), Qt::SkipEmptyParts);
    invalidateFilter();
}

void SessionFilterProxy::setStatusFilter(const QSet<SessionStatus> &statuses)
{
    if (statuses == m_statuses)
        return;
    m_statuses = statuses;
    invalidateFilter();
}

void SessionFilterProxy::clearFilters()
{
    if (m_words.isEmpty() && m_statuses.isEmpty())
        return;
    m_searchText.clear();
    m_words.clear();
    m_statuses.clear();
    invalidateFilter();
}

bool SessionFilterProxy::matches(const SessionInfo &session) const
{
    if (!m_statuses.isEmpty() && !m_statuses.contains(session.status))
        return false;
    for (const QString &word : m_words) {
        if (!session.id.contains(word, Qt::CaseInsensitive) && !session.goal.contains(word, Qt::CaseInsensitive)
            && !session.agent.contains(word, Qt::CaseInsensitive)
            && !session.playbook.contains(word, Qt::CaseInsensitive))
            return false;
    }
    return true;
}

bool SessionFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex &sourceParent) const
{
    if (m_words.isEmpty() && m_statuses.isEmpty())
        return true;
    if (m_table)
        return matches(m_table->sessionAt(sourceRow));
    const QModelIndex index = sourceModel()->index(sourceRow, 0, sourceParent);
    return matches(index.data(SessionTableModel::SessionInfoRole).value<SessionInfo>());
}

} // namespace paddock::console
