#pragma once
// One session's log as a table: the live tail appended in batches, older history paged in at the
// top with canFetchMore()/fetchMore(), a bounded window of rows in seq order with no gap.
//
// Threads: GUI thread only. It does no I/O: fetchMore() asks for history with historyNeeded(),
// which the window forwards to ConsoleClient::fetchHistory(); the answer comes back through
// prependHistory().
//
// Memory: a row is 48 bytes plus its payload (the JSON as the broker sent it, never parsed up
// front); kinds are interned. Summaries, tokens and latencies are parsed from the payload on
// first use and cached for a bounded number of rows, so 1,000,000 events cost about
// 48 MB + their payloads.
//
// Known limits: when appends push the window past maxRows the oldest rows go, even if the user is
// looking at them; a history page that arrives after that no longer joins the window and is dropped.

#include "models/console_types.h"

#include <QAbstractTableModel>
#include <QHash>
#include <QStringList>

#include <deque>

namespace paddock::console {

// What an event is about, for icons and colours: egress attempts, workspace snapshots and restores,
// moves between pools (failover, tier changes) and operators' debug shells stand out in a trace.
enum class EventCategory { Other, EgressAllowed, EgressRefused, Snapshot, Restore, Move, DebugShell };
EventCategory eventCategory(const QString &kind);

class TraceModel : public QAbstractTableModel {
    Q_OBJECT

public:
    enum Column { Seq, Time, Kind, Summary, Tokens, Latency, Cost, ColumnCount };
    enum Role {
        SeqRole = Qt::UserRole + 1,   // qint64
        TimeMsRole,                   // qint64 Unix ms
        KindRole,                     // QString
        SummaryRole,                  // QString, one line
        DetailsRole,                  // QString, full text (tool output, model text, JSON)
        HasDetailsRole,               // bool
        TokensRole,                   // qint64, 0 when not a model response
        LatencyMsRole,                // qint64, -1 when not applicable
        CostMicrosRole,               // qint64
        PayloadRole,                  // QByteArray, the raw JSON
        EventRecordRole,              // QVariant of EventRecord
        IsErrorRole,                  // bool
        CategoryRole,                 // int of EventCategory
        PostMortemRefRole,            // QStringList {pool, sandbox_id} when the event names a post-mortem, else empty
    };
    Q_ENUM(Column)

    static constexpr int kDefaultMaxRows = 1'000'000;
    static constexpr int kDefaultHistoryPageSize = 5'000;

    explicit TraceModel(QObject *parent = nullptr);

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    QHash<int, QByteArray> roleNames() const override;
    bool canFetchMore(const QModelIndex &parent) const override;
    void fetchMore(const QModelIndex &parent) override;

    // Empties the model and names the session it shows.
    void setSession(const QString &id);
    QString sessionId() const { return m_sessionId; }
    void clear();
    // Where the live tail will start when the model is empty (the fromSeq given to followSession).
    void setTailStart(qint64 seq);

    void appendEvents(const QList<EventRecord> &events);
    void prependHistory(const QList<EventRecord> &events);

    void setMaxRows(int rows);
    int maxRows() const { return m_maxRows; }
    void setHistoryPageSize(int count) { m_pageSize = qMax(1, count); }
    int historyPageSize() const { return m_pageSize; }
    bool historyPending() const { return m_historyPending; }

    qint64 firstSeq() const { return m_firstSeq; }   // 0 when unknown
    qint64 lastSeq() const { return m_rows.empty() ? m_firstSeq - 1 : m_firstSeq + static_cast<qint64>(m_rows.size()) - 1; }
    int rowOfSeq(qint64 seq) const;
    EventRecord eventAt(int row) const;

    // A tool call and its result: the row of the tool.result with the same call_id as the
    // tool.call at callRow, searched in the next kResultSearchRows rows (results follow their call
    // within a step); -1 when none (yet).
    static constexpr int kResultSearchRows = 256;
    int resultRowOf(int callRow) const;
    // What the details pane shows for a row: a tool call in one line with its arguments, then its
    // result's details (or that there is none yet); any other row, its DetailsRole.
    QString detailsWithResult(int row) const;

signals:
    void historyNeeded(qint64 fromSeq, int count);
    void gapDetected(qint64 expectedSeq);
    void eventsAppended(int count);
    void historyPrepended(int count);

private:
    struct Row {
        qint64 timeMs = 0;
        qint64 costMicros = 0;
        QByteArray payload;
        quint16 kind = 0;
    };
    struct Derived {
        QString summary;
        qint64 tokens = 0;
        qint64 latencyMs = -1;
        bool hasDetails = false;
        bool isError = false;
        QStringList postMortem;   // {pool, sandbox_id}
    };

    quint16 internKind(const QString &kind);
    Row toRow(const EventRecord &event);
    // One function per event kind for derive(), in trace_model.cpp.
    struct KindDerivers;

    const Derived &derived(int row) const;
    Derived derive(const Row &row) const;
    QString details(const Row &row) const;
    void trimFront(int count);

    QString m_sessionId;
    std::deque<Row> m_rows;
    qint64 m_firstSeq = 0;
    QStringList m_kinds;
    QList<EventCategory> m_kindCategories;   // eventCategory() of m_kinds[i], for data()
    QHash<QString, quint16> m_kindIds;
    int m_maxRows = kDefaultMaxRows;
    int m_pageSize = kDefaultHistoryPageSize;
    bool m_historyPending = false;
    // Parsed per row on first use; keyed by seq so inserts at the top do not invalidate it.
    mutable QHash<qint64, Derived> m_derived;
};

} // namespace paddock::console
