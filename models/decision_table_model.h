#pragma once
// Environment decisions: one row per tier choice (time, session, agent, requested, chosen, chooser,
// rule, reason, outcome, the tier that would have fitted), newest first as ListDecisions sends them.
// Rows whose outcome says the tier was too big or too small carry AllocationRole for highlighting.
//
// Threads: GUI thread only. Feed it with setDecisions(); no I/O.

#include "models/governance_types.h"

#include <QAbstractTableModel>
#include <QList>

namespace paddock::console {

class DecisionTableModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Column { Time, Session, Agent, Requested, Chosen, Chooser, Rule, Reason, Outcome, Fitting, ColumnCount };
    enum Role {
        SortRole = Qt::UserRole + 1,
        DecisionRole,      // QVariant of DecisionInfo
        SessionIdRole,     // QString
        AllocationRole,    // int: 0 fitted or unknown, 1 over-allocated, -1 under-allocated (or oom)
    };
    Q_ENUM(Column)

    explicit DecisionTableModel(QObject *parent = nullptr);

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // Replaces the rows (a list is one page of at most a few hundred decisions): same ids in the
    // same order only emit dataChanged, so a selection survives a refresh.
    void setDecisions(const QList<DecisionInfo> &decisions);
    int decisionCount() const { return static_cast<int>(m_decisions.size()); }
    const DecisionInfo &decisionAt(int row) const { return m_decisions.at(row); }

    // 1 over-allocated, -1 under-allocated (oom counts: the tier was too small), 0 otherwise.
    static int allocation(const DecisionInfo &decision);
    // "over-allocated: peak 40 MiB of 4 GiB, CPU 3%; lite would have fitted".
    static QString outcomeText(const DecisionInfo &decision);

private:
    QVariant display(const DecisionInfo &decision, int column) const;

    QList<DecisionInfo> m_decisions;
};

} // namespace paddock::console
