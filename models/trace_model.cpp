#include "models/trace_model.h"

#include "models/console_format.h"
#include "trace/event_summary.h"
#include "trace/fold.h"

#include <QDateTime>

#include <algorithm>
#include <vector>

namespace paddock::console {
namespace {

// Rows whose summaries stay parsed; a screen shows a few dozen, so this only bounds memory.
constexpr qsizetype kMaxDerivedRows = 20'000;

} // namespace

EventCategory eventCategory(const QString &kind)
{
    if (kind == QLatin1String("egress.allowed"))
        return EventCategory::EgressAllowed;
    if (kind == QLatin1String("egress.refused"))
        return EventCategory::EgressRefused;
    if (kind.startsWith(QLatin1String("debug_shell.")))
        return EventCategory::DebugShell;
    if (kind.contains(QLatin1String("restore")))
        return EventCategory::Restore;
    if (kind.contains(QLatin1String("snapshot")))
        return EventCategory::Snapshot;
    if (kind == QLatin1String("sandbox.moved") || kind == QLatin1String("sandbox.lost") || kind == QLatin1String("session.moved")
        || kind == QLatin1String("tier.changed"))
        return EventCategory::Move;
    return EventCategory::Other;
}

TraceModel::TraceModel(QObject *parent) : QAbstractTableModel(parent)
{
    m_kinds.append(QString());
    m_kindCategories.append(EventCategory::Other);
    m_kindRoles.append(trace::FoldRole::Row);
    m_kindIds.insert(QString(), 0);
}

int TraceModel::rowCount(const QModelIndex &parent) const
{
    if (parent.isValid())
        return 0;
    return static_cast<int>(m_foldBookkeeping ? m_ownRows.size() : m_rows.size());
}

int TraceModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

quint16 TraceModel::internKind(const QString &kind)
{
    const auto found = m_kindIds.constFind(kind);
    if (found != m_kindIds.constEnd())
        return *found;
    // A broker sends a couple of dozen kinds; past 65,535 distinct ones the rest share "other".
    if (m_kinds.size() >= 0xffff)
        return 0;
    const auto id = static_cast<quint16>(m_kinds.size());
    m_kinds.append(kind);
    m_kindCategories.append(eventCategory(kind));
    m_kindRoles.append(trace::foldRole(kind.toStdString()));
    m_kindIds.insert(kind, id);
    return id;
}

TraceModel::Row TraceModel::toRow(const EventRecord &event)
{
    return Row{event.timeUnixMs, event.costMicros, event.payloadJson, internKind(event.kind)};
}

void TraceModel::setSession(const QString &id)
{
    clear();
    m_sessionId = id;
}

void TraceModel::clear()
{
    beginResetModel();
    m_rows.clear();
    m_ownRows.clear();
    m_derived.clear();
    m_folds.clear();
    m_firstSeq = 0;
    m_historyPending = false;
    endResetModel();
}

void TraceModel::setFoldBookkeeping(bool fold)
{
    if (fold == m_foldBookkeeping)
        return;
    // Every event stays; only which are rows changes, so a reset, not a re-fetch.
    beginResetModel();
    m_foldBookkeeping = fold;
    endResetModel();
    emit foldBookkeepingChanged(fold);
}

void TraceModel::setTailStart(qint64 seq)
{
    if (m_rows.empty())
        m_firstSeq = qMax<qint64>(1, seq);
}

void TraceModel::setMaxRows(int rows)
{
    m_maxRows = qMax(1, rows);
    if (static_cast<qsizetype>(m_rows.size()) > m_maxRows)
        trimFront(static_cast<int>(m_rows.size()) - m_maxRows);
}

void TraceModel::trimFront(int count)
{
    if (count <= 0)
        return;
    const qint64 newFirst = m_firstSeq + count;
    int rowsGone = count;
    if (m_foldBookkeeping) {
        rowsGone = 0;
        while (rowsGone < static_cast<int>(m_ownRows.size()) && m_ownRows[static_cast<size_t>(rowsGone)] < newFirst)
            ++rowsGone;
    }
    if (rowsGone > 0)
        beginRemoveRows({}, 0, rowsGone - 1);
    for (int i = 0; i < count; ++i) {
        m_derived.remove(m_firstSeq);
        m_folds.remove(m_firstSeq);
        m_rows.pop_front();
        if (!m_ownRows.empty() && m_ownRows.front() == m_firstSeq)
            m_ownRows.pop_front();
        ++m_firstSeq;
    }
    if (rowsGone > 0)
        endRemoveRows();
    // What folded into the first rows may have gone with the events before them (a streamed answer
    // folds into its call's end, a few rows down).
    refoldFirstRows(m_ownRows.empty() ? 0 : m_ownRows.front());
}

void TraceModel::refoldFirstRows(qint64 fromSeq)
{
    auto it = std::lower_bound(m_ownRows.begin(), m_ownRows.end(), fromSeq);
    for (size_t n = 0; it != m_ownRows.end() && n <= trace::kCallEndLookahead; ++it, ++n)
        refoldSeq(*it);
}

std::vector<TraceModel::Row> TraceModel::toRows(const QList<EventRecord> &events, qsizetype begin, qsizetype end,
                                                int &shown)
{
    std::vector<Row> rows;
    rows.reserve(static_cast<size_t>(end - begin));
    shown = 0;
    for (qsizetype i = begin; i < end; ++i) {
        rows.push_back(toRow(events.at(i)));
        shown += !m_foldBookkeeping || !folds(rows.back()) ? 1 : 0;
    }
    return rows;
}

void TraceModel::pushBack(const QList<EventRecord> &events, qsizetype begin, qsizetype end)
{
    // Rows first (interning their kinds), so the insert signals count exactly the rows shown.
    int newRows = 0;
    std::vector<Row> rows = toRows(events, begin, end, newRows);
    const qint64 lastRowBefore = m_ownRows.empty() ? 0 : m_ownRows.back();
    const int first = rowCount();
    if (newRows > 0)
        beginInsertRows({}, first, first + newRows - 1);
    if (m_rows.empty())
        m_firstSeq = events.at(begin).seq;
    std::vector<int> callEnds;
    for (Row &row : rows) {
        const bool own = !folds(row);
        if (roleOf(row) == trace::FoldRole::CallEnd)
            callEnds.push_back(static_cast<int>(m_rows.size()));
        m_rows.push_back(std::move(row));
        if (own)
            m_ownRows.push_back(lastSeq());
    }
    if (newRows > 0)
        endInsertRows();
    // The last row before may have gained (or, as their own row arrived, lost) what folds after it;
    // a model call's end takes its streamed answer from the rows that showed it meanwhile.
    if (lastRowBefore > 0)
        refoldSeq(lastRowBefore);
    for (const int at : callEnds)
        refoldCallOf(at);
}

void TraceModel::pushFront(const QList<EventRecord> &events, qsizetype begin, qsizetype end)
{
    int newRows = 0;
    std::vector<Row> rows = toRows(events, begin, end, newRows);
    const qint64 firstRowBefore = m_ownRows.empty() ? 0 : m_ownRows.front();
    if (newRows > 0)
        beginInsertRows({}, 0, newRows - 1);
    for (qsizetype i = end - 1; i >= begin; --i) {
        Row &row = rows[static_cast<size_t>(i - begin)];
        if (!folds(row))
            m_ownRows.push_front(events.at(i).seq);
        m_rows.push_front(std::move(row));
    }
    m_firstSeq = events.at(begin).seq;
    if (newRows > 0)
        endInsertRows();
    if (firstRowBefore > 0)
        refoldFirstRows(firstRowBefore);
    m_historyPending = false;
    emit historyPrepended(newRows);
}

void TraceModel::appendEvents(const QList<EventRecord> &events)
{
    if (events.isEmpty())
        return;
    qint64 expected = m_rows.empty() ? (m_firstSeq > 0 ? m_firstSeq : events.first().seq) : lastSeq() + 1;
    qsizetype begin = -1;
    qsizetype end = 0;   // accepted: events[begin, end)
    bool gap = false;
    for (qsizetype i = 0; i < events.size(); ++i) {
        const qint64 seq = events.at(i).seq;
        if (seq < expected)
            continue;   // a repeat (a re-follow overlapping what we have)
        if (seq > expected) {
            gap = true;
            break;
        }
        if (begin < 0)
            begin = i;
        end = i + 1;
        ++expected;
    }

    if (begin >= 0) {
        // Bounded window: only the newest maxRows of this batch can stay, and the oldest events
        // make room for them.
        if (end - begin > m_maxRows)
            begin = end - m_maxRows;
        const auto count = static_cast<int>(end - begin);
        const int overflow = static_cast<int>(m_rows.size()) + count - m_maxRows;
        if (overflow >= static_cast<int>(m_rows.size()) && !m_rows.empty()) {
            beginResetModel();
            m_rows.clear();
            m_ownRows.clear();
            m_derived.clear();
            m_folds.clear();
            m_firstSeq = events.at(begin).seq;
            for (qsizetype i = begin; i < end; ++i) {
                m_rows.push_back(toRow(events.at(i)));
                if (!folds(m_rows.back()))
                    m_ownRows.push_back(events.at(i).seq);
            }
            endResetModel();
        } else {
            if (overflow > 0)
                trimFront(overflow);
            pushBack(events, begin, end);
        }
        emit eventsAppended(count);
    }
    if (gap)
        emit gapDetected(expected);
}

void TraceModel::prependHistory(const QList<EventRecord> &events)
{
    // The in-flight flag clears only once the rows are in: a view (or QAbstractItemModelTester)
    // that calls fetchMore() from the insert signals must not ask again for the page being inserted.
    struct ClearPending {
        bool &pending;
        ~ClearPending() { pending = false; }
    } clearPending{m_historyPending};
    if (events.isEmpty() || m_firstSeq <= 1)
        return;
    // Keep the run that ends right before firstSeq with no hole, newest first, within the room left.
    qint64 expected = m_firstSeq - 1;
    qsizetype begin = events.size();
    for (qsizetype i = events.size() - 1; i >= 0 && expected >= 1; --i) {
        const qint64 seq = events.at(i).seq;
        if (seq > expected)
            continue;   // overlaps what we have
        if (seq < expected)
            break;
        begin = i;
        --expected;
    }
    const qsizetype room = m_maxRows - static_cast<qsizetype>(m_rows.size());
    qsizetype end = begin;
    while (end < events.size() && events.at(end).seq < m_firstSeq)
        ++end;
    if (end - begin > room)
        begin = end - room;
    if (end - begin <= 0)
        return;
    pushFront(events, begin, end);
}

bool TraceModel::canFetchMore(const QModelIndex &parent) const
{
    return !parent.isValid() && m_firstSeq > 1 && !m_historyPending
        && static_cast<qsizetype>(m_rows.size()) < m_maxRows;
}

void TraceModel::fetchMore(const QModelIndex &parent)
{
    if (!canFetchMore(parent))
        return;
    const qint64 room = m_maxRows - static_cast<qint64>(m_rows.size());
    const auto count = static_cast<int>(qMin<qint64>(qMin<qint64>(m_pageSize, m_firstSeq - 1), room));
    m_historyPending = true;
    emit historyNeeded(m_firstSeq - count, count);
}

int TraceModel::rowOfSeq(qint64 seq) const
{
    if (m_rows.empty() || seq < m_firstSeq || seq > lastSeq())
        return -1;
    if (!m_foldBookkeeping)
        return static_cast<int>(seq - m_firstSeq);
    const qint64 host = hostSeq(seq);
    const auto found = std::lower_bound(m_ownRows.begin(), m_ownRows.end(), host);
    return found != m_ownRows.end() && *found == host ? static_cast<int>(found - m_ownRows.begin()) : -1;
}

EventRecord TraceModel::eventAt(int row) const
{
    const Row &r = rowAt(row);
    return EventRecord{seqOfRow(row), r.timeMs, m_kinds.at(r.kind), r.payload, r.costMicros};
}

EventRecord TraceModel::eventOfSeq(qint64 seq) const
{
    if (m_rows.empty() || seq < m_firstSeq || seq > lastSeq())
        return {};
    const Row &r = m_rows[static_cast<size_t>(seq - m_firstSeq)];
    return EventRecord{seq, r.timeMs, m_kinds.at(r.kind), r.payload, r.costMicros};
}

TraceModel::Derived TraceModel::derive(const Row &row) const
{
    const trace::EventLine line = trace::describeEvent(
        m_kinds.at(row.kind).toStdString(), std::string_view(row.payload.constData(), static_cast<size_t>(row.payload.size())),
        row.costMicros);
    Derived d;
    d.summary = QString::fromStdString(line.summary);
    d.tokens = line.tokens;
    d.latencyMs = line.latencyMs;
    d.hasDetails = line.hasDetails;
    d.isError = line.isError;
    if (!line.postMortemSandbox.empty())
        d.postMortem = {QString::fromStdString(line.postMortemPool), QString::fromStdString(line.postMortemSandbox)};
    return d;
}

const TraceModel::Derived &TraceModel::derived(int row) const
{
    const qint64 seq = seqOfRow(row);
    auto found = m_derived.constFind(seq);
    if (found != m_derived.constEnd())
        return *found;
    if (m_derived.size() >= kMaxDerivedRows)
        m_derived.clear();   // cheap to rebuild: only what is on screen comes back
    return *m_derived.insert(seq, derive(rowAt(row)));
}

QString TraceModel::summaryOf(int row) const
{
    const QString &summary = derived(row).summary;
    if (!m_foldBookkeeping)
        return summary;
    const QString &note = foldOf(row).note;
    return note.isEmpty() ? summary : summary + QLatin1Char(' ') + note;
}

QVariant TraceModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount)
        return {};
    const int row = index.row();
    const Row &r = rowAt(row);
    const auto rowCost = [&] { return r.costMicros + (m_foldBookkeeping ? foldOf(row).costMicros : 0); };
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case Seq: return seqOfRow(row);
        case Time: return QDateTime::fromMSecsSinceEpoch(r.timeMs).toString(QStringLiteral("hh:mm:ss.zzz"));
        case Kind: return m_kinds.at(r.kind);
        case Summary: return summaryOf(row);
        case Tokens: {
            const qint64 tokens = derived(row).tokens;
            return tokens > 0 ? QVariant(tokens) : QVariant(QString());
        }
        case Latency: return formatLatency(derived(row).latencyMs);
        case Cost: {
            const qint64 cost = rowCost();
            return cost != 0 ? formatCost(cost) : QString();
        }
        default: return {};
        }
    case Qt::ToolTipRole: {
        const Derived &d = derived(row);
        if (!d.hasDetails)
            return summaryOf(row);
        const QString more = details(r);
        return more.size() > 2000 ? more.left(2000) + QStringLiteral("\n…") : more;
    }
    case Qt::TextAlignmentRole:
        if (index.column() == Seq || index.column() == Tokens || index.column() == Latency || index.column() == Cost)
            return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
        return {};
    case SeqRole: return seqOfRow(row);
    case TimeMsRole: return r.timeMs;
    case KindRole: return m_kinds.at(r.kind);
    case SummaryRole: return summaryOf(row);
    case DetailsRole: return details(r);
    case HasDetailsRole: return derived(row).hasDetails;
    case TokensRole: return derived(row).tokens;
    case LatencyMsRole: return derived(row).latencyMs;
    case CostMicrosRole: return r.costMicros;
    case PayloadRole: return r.payload;
    case EventRecordRole: return QVariant::fromValue(eventAt(row));
    case IsErrorRole: return derived(row).isError;
    case CategoryRole: return int(m_kindCategories.at(r.kind));
    case PostMortemRefRole: return derived(row).postMortem;
    case FoldedSeqsRole: return m_foldBookkeeping ? QVariant::fromValue(foldOf(row).seqs) : QVariant::fromValue(QList<qint64>());
    case FoldNoteRole: return m_foldBookkeeping ? foldOf(row).note : QString();
    case RowCostMicrosRole: return rowCost();
    default: return {};
    }
}

QVariant TraceModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (section) {
    case Seq: return QStringLiteral("Seq");
    case Time: return QStringLiteral("Time");
    case Kind: return QStringLiteral("Kind");
    case Summary: return QStringLiteral("Summary");
    case Tokens: return QStringLiteral("Tokens");
    case Latency: return QStringLiteral("Latency");
    case Cost: return QStringLiteral("Cost");
    default: return {};
    }
}

QHash<int, QByteArray> TraceModel::roleNames() const
{
    auto names = QAbstractTableModel::roleNames();
    names.insert(SeqRole, "seq");
    names.insert(TimeMsRole, "timeMs");
    names.insert(KindRole, "kind");
    names.insert(SummaryRole, "summary");
    names.insert(DetailsRole, "details");
    names.insert(HasDetailsRole, "hasDetails");
    names.insert(TokensRole, "tokens");
    names.insert(LatencyMsRole, "latencyMs");
    names.insert(CostMicrosRole, "costMicros");
    names.insert(PayloadRole, "payload");
    names.insert(EventRecordRole, "event");
    names.insert(IsErrorRole, "isError");
    names.insert(FoldedSeqsRole, "foldedSeqs");
    names.insert(FoldNoteRole, "foldNote");
    names.insert(RowCostMicrosRole, "rowCostMicros");
    return names;
}

} // namespace paddock::console
