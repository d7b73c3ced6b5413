#pragma once
// Search, status filter and sort over a SessionTableModel.
//
// Threads: GUI thread only.

#include "models/console_types.h"

#include <QSet>
#include <QSortFilterProxyModel>
#include <QStringList>

namespace paddock::console {

class SessionTableModel;

class SessionFilterProxy : public QSortFilterProxyModel {
    Q_OBJECT

public:
    explicit SessionFilterProxy(QObject *parent = nullptr);

    void setSourceModel(QAbstractItemModel *source) override;

    QString searchText() const { return m_searchText; }
    QSet<SessionStatus> statusFilter() const { return m_statuses; }

public slots:
    // Case-insensitive; every whitespace-separated word must occur in the id, goal, agent or
    // playbook.
    void setSearchText(const QString &text);
    // Only these statuses; an empty set shows every status.
    void setStatusFilter(const QSet<paddock::console::SessionStatus> &statuses);
    void clearFilters();

protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex &sourceParent) const override;

private:
    bool matches(const SessionInfo &session) const;

    SessionTableModel *m_table = nullptr;   // the source, when it is a SessionTableModel (fast path)
    QString m_searchText;
    QStringList m_words;                    // the compiled pattern: lower-cased words
    QSet<SessionStatus> m_statuses;
};

} // namespace paddock::console
