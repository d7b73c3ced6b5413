#pragma once
// The fleet: one row per session, kept current by the broker's session watch.
//
// Threads: GUI thread only (like every item model). Feed it with applyChanges() from the client's
// sessionsChanged() handler; it never blocks and never does I/O.
//
// Known limits: sessions are never removed (the broker never deletes one); clear() empties the table
// when the console switches brokers.

#include "models/console_types.h"

#include <QAbstractTableModel>
#include <QHash>
#include <QList>

#include <functional>

namespace paddock::console {

class SessionTableModel : public QAbstractTableModel {
    Q_OBJECT
    Q_PROPERTY(bool stale READ isStale WRITE setStale NOTIFY staleChanged)

public:
    enum Column { Status, Id, Agent, Goal, Tier, Pool, Steps, Cost, Duration, LastEvent, ColumnCount };
    enum Role {
        SortRole = Qt::UserRole + 1,   // raw value of the column, for sorting
        SessionIdRole,                 // QString
        StatusRole,                    // int of SessionStatus
        SessionInfoRole,               // QVariant of SessionInfo
        StaleRole,                     // bool
        TierChooserRole,               // QString: who chose the tier (default, agent, platform, human)
    };
    Q_ENUM(Column)

    explicit SessionTableModel(QObject *parent = nullptr);

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    QHash<int, QByteArray> roleNames() const override;

    // Upserts by id. A change older (by lastSeq) than the row is ignored. New sessions are
    // inserted at the end with one beginInsertRows per call; updates emit dataChanged over
    // contiguous row ranges.
    void applyChanges(const QList<SessionInfo> &changes);
    void clear();

    int sessionCount() const { return static_cast<int>(m_sessions.size()); }
    const SessionInfo &sessionAt(int row) const { return m_sessions.at(row); }
    int rowOf(const QString &id) const { return m_rowOf.value(id, -1); }

    bool isStale() const { return m_stale; }
    void setStale(bool stale);

    // Tests replace the wall clock (Unix ms) that running sessions' durations are measured against.
    void setClock(std::function<qint64()> clock);
    // Durations of unfinished sessions on the wall clock: emits dataChanged for their Duration cells.
    // Call from a 1 s timer while the table is shown.
    void refreshDurations();

signals:
    void staleChanged(bool stale);

private:
    qint64 durationMs(const SessionInfo &session) const;
    QVariant display(const SessionInfo &session, int column) const;
    QVariant sortValue(const SessionInfo &session, int column) const;
    QString toolTip(const SessionInfo &session) const;
    void emitRowRanges(QList<int> rows, int firstColumn, int lastColumn, const QList<int> &roles);

    QList<SessionInfo> m_sessions;
    QHash<QString, int> m_rowOf;
    bool m_stale = false;
    std::function<qint64()> m_clock;
};

} // namespace paddock::console
