#pragma once
// One session's log as a table: the live tail appended in batches, older history paged in at the
// top with canFetchMore()/fetchMore(), a bounded window of rows in seq order with no gap.
//
// Threads: GUI thread only. It does no I/O: fetchMore() asks for history with historyNeeded(),
// which the window forwards to ConsoleClient::fetchHistory(); the answer comes back through
// prependHistory().
//
// Rows in words: every kind's summary comes from paddock_trace (trace/event_summary.h), the same
// words paddockctl prints. By default the bookkeeping a step appends (cost and checkpoint events)
// folds into its step's row (trace/fold.h): the row's summary ends with what was folded ("+ cost
// $0.0008, checkpoint 3 changed") and its Cost column with the step's cost. setFoldBookkeeping
// (false) shows every event as a row of its own. Either way the window holds every event; only
// which of them are rows changes, so the toggle is a model reset and nothing is fetched again.
//
// Memory: an event is 48 bytes plus its payload (the JSON as the broker sent it, never parsed up
// front), and a row of its own 8 more; kinds are interned. Summaries, tokens and latencies are
// parsed from the payload on first use and cached for a bounded number of rows, so 1,000,000
// events cost about 56 MB + their payloads.
//
// Known limits: when appends push the window past maxRows the oldest events go, even if the user is
// looking at them; a history page that arrives after that no longer joins the window and is dropped.
// Folded, an event that folds with no row of its own anywhere in the window (a window of nothing
// but cost events) is shown by no row until one arrives.

#include "models/console_types.h"
#include "trace/fold.h"

#include <QAbstractTableModel>
#include <QHash>
#include <QJsonObject>
#include <QList>
#include <QStringList>

#include <deque>

namespace paddock::console {

// What an event is about, for icons and colours: egress attempts, workspace snapshots and restores,
// moves between pools (failover, tier changes) and operators' debug shells stand out in a trace.
enum class EventCategory { Other, EgressAllowed, EgressRefused, Snapshot, Restore, Move, DebugShell };
EventCategory eventCategory(const QString &kind);

class TraceModel : public QAbstractTableModel {
    Q_OBJECT
    Q_PROPERTY(bool foldBookkeeping READ foldBookkeeping WRITE setFoldBookkeeping NOTIFY foldBookkeepingChanged)

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
        FoldedSeqsRole,               // QList<qint64>: the events folded into this row, in seq order (empty unfolded)
        FoldNoteRole,                 // QString: what was folded, "+ cost $0.0008, checkpoint 3 changed"; empty for none
        RowCostMicrosRole,            // qint64: the row's cost, its event's and its folded events' (the Cost column)
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

    // Cost and checkpoint events fold into their step's row (the default); false: every event is a row.
    bool foldBookkeeping() const { return m_foldBookkeeping; }
    // maxRows bounds the events in the window, folded or not.
    void setMaxRows(int rows);
    int maxRows() const { return m_maxRows; }
    void setHistoryPageSize(int count) { m_pageSize = qMax(1, count); }
    int historyPageSize() const { return m_pageSize; }
    bool historyPending() const { return m_historyPending; }

    // The window's events, whether rows or folded.
    qint64 firstSeq() const { return m_firstSeq; }   // 0 when unknown
    qint64 lastSeq() const { return m_rows.empty() ? m_firstSeq - 1 : m_firstSeq + static_cast<qint64>(m_rows.size()) - 1; }
    qint64 eventCount() const { return static_cast<qint64>(m_rows.size()); }
    // The row showing the event seq (folded: the row it folded into); -1 when no row shows it.
    int rowOfSeq(qint64 seq) const;
    qint64 seqOfRow(int row) const { return m_firstSeq + eventIndex(row); }
    EventRecord eventAt(int row) const;
    // Any event of the window, a row of its own or folded (SpanModel reads them all in seq order);
    // seq 0 outside the window.
    EventRecord eventOfSeq(qint64 seq) const;

    // A tool call and its result: the row of the tool.result with the same call_id as the
    // tool.call at callRow, searched in the next kResultSearchRows rows (results follow their call
    // within a step); -1 when none (yet).
    static constexpr int kResultSearchRows = 256;
    int resultRowOf(int callRow) const;
    // What the details pane shows for a row: a tool call in one line with its arguments, then its
    // result's details (or that there is none yet); any other row, its DetailsRole; then what
    // folded into it. A model's answer still streaming into the row comes before all of that.
    QString detailsWithResult(int row) const;

public slots:
    void setFoldBookkeeping(bool fold);

signals:
    void historyNeeded(qint64 fromSeq, int count);
    void gapDetected(qint64 expectedSeq);
    void eventsAppended(int count);      // events; rows may be fewer when folded
    void historyPrepended(int count);    // rows inserted at the top (the view keeps its place by this many)
    void foldBookkeepingChanged(bool fold);

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
    // What folded into a row (trace_model_fold.cpp).
    struct Fold {
        QString note;
        qint64 costMicros = 0;
        QList<qint64> seqs;
    };

    quint16 internKind(const QString &kind);
    Row toRow(const EventRecord &event);
    // The rows of events[begin, end); `shown`: how many of them are rows of their own now.
    std::vector<Row> toRows(const QList<EventRecord> &events, qsizetype begin, qsizetype end, int &shown);
    trace::FoldRole roleOf(const Row &row) const { return m_kindRoles.at(row.kind); }
    trace::FoldRole roleAt(int eventIdx) const { return roleOf(m_rows.at(static_cast<size_t>(eventIdx))); }
    bool folds(const Row &row) const
    {
        return roleOf(row) == trace::FoldRole::Folds || roleOf(row) == trace::FoldRole::Delta;
    }
    // Index in m_rows of the event a row shows.
    int eventIndex(int row) const
    {
        return m_foldBookkeeping ? static_cast<int>(m_ownRows[static_cast<size_t>(row)] - m_firstSeq) : row;
    }
    const Row &rowAt(int row) const { return m_rows.at(static_cast<size_t>(eventIndex(row))); }
    // Appends (or prepends) the events [begin, end) of a batch with the rows' insert signals.
    void pushBack(const QList<EventRecord> &events, qsizetype begin, qsizetype end);
    void pushFront(const QList<EventRecord> &events, qsizetype begin, qsizetype end);

    const Derived &derived(int row) const;
    Derived derive(const Row &row) const;
    QString details(const Row &row) const;
    QString summaryOf(int row) const;
    void trimFront(int count);

    // Folding (trace_model_fold.cpp).
    const Fold &foldOf(int row) const;
    Fold computeFold(int eventIdx) const;
    // A scan primed with what follows eventIdx (inclusive): the first model call end there, if
    // any within trace::kCallEndLookahead other events (trace/fold.h).
    trace::CallEndScan callEndScanFrom(int eventIdx) const;
    // A model call end just arrived at eventIdx: refolds the rows its deltas were shown in.
    void refoldCallOf(int eventIdx);
    // The own rows from fromSeq on, as far as a streamed answer may fold down: refolded (history
    // came or went before them).
    void refoldFirstRows(qint64 fromSeq);
    qint64 hostSeq(qint64 seq) const;   // the own event whose row shows seq; 0 for none
    // A row at an edge of the window whose folded events may have changed: forget them and say so.
    void refoldSeq(qint64 seq);
    // The details of the events folded into a row; a model's answer still streaming into it goes
    // to *streaming instead (empty when there is none).
    QString foldedDetails(int row, QString *streaming) const;
    // A row's own details (a tool call's with its result), then `folded`.
    QString ownDetails(int row, const QString &folded) const;
    // A model's answer as its model.delta events stream it (trace_model_details.cpp).
    struct StreamedAnswer {
        struct Call {
            int index = 0;
            QString name;
            QString arguments;   // JSON text so far
        };
        qint64 attempt = 0;
        qint64 afterSeq = -1;   // the call's (model.delta after_seq)
        qint64 firstSeq = 0;
        qint64 lastSeq = 0;
        int deltas = 0;
        QString text;
        QList<Call> calls;
        void add(qint64 seq, const QJsonObject &delta);
        QString render() const;   // the text, then "→ name(arguments so far" for each call
    };

    QString m_sessionId;
    std::deque<Row> m_rows;
    qint64 m_firstSeq = 0;
    QStringList m_kinds;
    QList<EventCategory> m_kindCategories;   // eventCategory() of m_kinds[i], for data()
    QList<trace::FoldRole> m_kindRoles;      // trace::foldRole() of m_kinds[i]
    QHash<QString, quint16> m_kindIds;
    int m_maxRows = kDefaultMaxRows;
    int m_pageSize = kDefaultHistoryPageSize;
    bool m_historyPending = false;
    bool m_foldBookkeeping = true;
    // The seqs of the events that are rows of their own, whichever way the model shows them.
    std::deque<qint64> m_ownRows;
    // Parsed per row on first use; keyed by seq so inserts at the top do not invalidate it.
    mutable QHash<qint64, Derived> m_derived;
    mutable QHash<qint64, Fold> m_folds;
};

} // namespace paddock::console
