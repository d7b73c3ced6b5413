#include "models/trace_model.h"

#include "models/console_format.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

namespace paddock::console {
namespace {

// Rows whose summaries stay parsed; a screen shows a few dozen, so this only bounds memory.
constexpr qsizetype kMaxDerivedRows = 20'000;
constexpr qsizetype kMaxSummaryChars = 240;

QString oneLine(QString text)
{
    text.replace(QLatin1Char('\n'), QLatin1Char(' '));
    text.replace(QLatin1Char('\r'), QLatin1Char(' '));
    if (text.size() > kMaxSummaryChars)
        text = text.left(kMaxSummaryChars - 1) + QStringLiteral("…");
    return text;
}

QString str(const QJsonObject &object, const char *key)
{
    return object.value(QLatin1String(key)).toString();
}

qint64 num(const QJsonObject &object, const char *key, qint64 fallback = 0)
{
    const QJsonValue value = object.value(QLatin1String(key));
    return value.isDouble() ? static_cast<qint64>(value.toDouble()) : fallback;
}

// Tool arguments arrive as an object, or as a JSON string of one (OpenAI's spelling).
QJsonObject arguments(const QJsonObject &object)
{
    const QJsonValue value = object.value(QLatin1String("arguments"));
    if (value.isObject())
        return value.toObject();
    if (value.isString())
        return QJsonDocument::fromJson(value.toString().toUtf8()).object();
    return {};
}

// The one argument that says what a call does: the command, else a path, else the first string.
QString mainArgument(const QJsonObject &args)
{
    for (const char *key : {"command", "path", "goal", "query", "tier"}) {
        const QString value = str(args, key);
        if (!value.isEmpty())
            return value;
    }
    for (auto it = args.begin(); it != args.end(); ++it) {
        if (it->isString())
            return it->toString();
    }
    return {};
}

QString compactJson(const QByteArray &payload)
{
    const QJsonDocument document = QJsonDocument::fromJson(payload);
    if (document.isNull())
        return QString::fromUtf8(payload);
    return QString::fromUtf8(document.toJson(QJsonDocument::Compact));
}

QString hostPort(const QJsonObject &p)
{
    QString host = str(p, "host");
    const qint64 port = num(p, "port");
    if (port > 0)
        host += QStringLiteral(":%1").arg(port);
    return host;
}

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
    m_kindIds.insert(QString(), 0);
}

int TraceModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
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
    m_derived.clear();
    m_firstSeq = 0;
    m_historyPending = false;
    endResetModel();
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
    beginRemoveRows({}, 0, count - 1);
    for (int i = 0; i < count; ++i) {
        m_derived.remove(m_firstSeq);
        m_rows.pop_front();
        ++m_firstSeq;
    }
    endRemoveRows();
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
        // Bounded window: only the newest maxRows of this batch can stay, and the oldest rows
        // make room for them.
        if (end - begin > m_maxRows)
            begin = end - m_maxRows;
        const auto count = static_cast<int>(end - begin);
        const int overflow = static_cast<int>(m_rows.size()) + count - m_maxRows;
        if (overflow >= static_cast<int>(m_rows.size()) && !m_rows.empty()) {
            beginResetModel();
            m_rows.clear();
            m_derived.clear();
            m_firstSeq = events.at(begin).seq;
            for (qsizetype i = begin; i < end; ++i)
                m_rows.push_back(toRow(events.at(i)));
            endResetModel();
        } else {
            if (overflow > 0)
                trimFront(overflow);
            if (m_rows.empty())
                m_firstSeq = events.at(begin).seq;
            const int first = static_cast<int>(m_rows.size());
            beginInsertRows({}, first, first + count - 1);
            for (qsizetype i = begin; i < end; ++i)
                m_rows.push_back(toRow(events.at(i)));
            endInsertRows();
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
    const auto count = static_cast<int>(end - begin);
    if (count <= 0)
        return;
    beginInsertRows({}, 0, count - 1);
    for (qsizetype i = end - 1; i >= begin; --i)
        m_rows.push_front(toRow(events.at(i)));
    m_firstSeq = events.at(begin).seq;
    endInsertRows();
    m_historyPending = false;
    emit historyPrepended(count);
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
    return static_cast<int>(seq - m_firstSeq);
}

EventRecord TraceModel::eventAt(int row) const
{
    const Row &r = m_rows.at(static_cast<size_t>(row));
    return EventRecord{m_firstSeq + row, r.timeMs, m_kinds.at(r.kind), r.payload, r.costMicros};
}

// One function per event kind, each filling in what the trace shows for a row of that kind: the
// summary line and, where the kind has them, tokens, latency, the error flag and whether there are
// details to show. forKind() looks a kind up by name first, then by category (snapshots, restores,
// moves and debug shells come in several spellings), and falls back to the payload as compact JSON.
struct TraceModel::KindDerivers {
    using Deriver = void (*)(const QString &kind, const QJsonObject &p, const QByteArray &payload, Derived &d);

    static Deriver forKind(const QString &kind)
    {
        static const QHash<QString, Deriver> byName = {
            {QStringLiteral("tool.call"), &toolCall},
            {QStringLiteral("tool.result"), &toolResult},
            {QStringLiteral("model.response"), &modelResponse},
            {QStringLiteral("model.error"), &modelError},
            {QStringLiteral("sandbox.claimed"), &sandboxClaimed},
            {QStringLiteral("sandbox.failed"), &sandboxFailed},
            {QStringLiteral("sandbox.released"), &sandboxReleased},
            {QStringLiteral("sandbox.lost"), &sandboxLost},
            {QStringLiteral("state.changed"), &stateChanged},
            {QStringLiteral("session.created"), &sessionCreated},
            {QStringLiteral("egress.allowed"), &egress},
            {QStringLiteral("egress.refused"), &egress},
            {QStringLiteral("checkpoint"), &checkpoint},
        };
        const auto found = byName.constFind(kind);
        if (found != byName.constEnd())
            return *found;
        switch (eventCategory(kind)) {
        case EventCategory::Snapshot:
        case EventCategory::Restore: return &snapshotOrRestore;
        case EventCategory::Move: return &move;
        case EventCategory::DebugShell: return &debugShell;
        default: return &other;
        }
    }

    static void toolCall(const QString &, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        const QString name = str(p, "name");
        const QString arg = mainArgument(arguments(p));
        d.summary = arg.isEmpty() ? name : name + QStringLiteral(": ") + arg;
    }

    static void toolResult(const QString &, const QJsonObject &p, const QByteArray &payload, Derived &d)
    {
        const QString name = str(p, "name");
        const QString error = str(p, "error");
        d.latencyMs = num(p, "duration_ms", -1);
        if (!error.isEmpty()) {
            d.summary = QStringLiteral("%1 error: %2").arg(name, error);
            d.isError = true;
        } else if (p.contains(QLatin1String("exit_code")) || p.contains(QLatin1String("command"))) {
            commandResult(p, d);
        } else if (name == QLatin1String("write_file")) {
            d.summary = QStringLiteral("wrote %1 bytes to %2").arg(num(p, "bytes")).arg(str(p, "path"));
        } else if (name == QLatin1String("read_file")) {
            const QString content = str(p, "content");
            d.summary = QStringLiteral("read %1 (%2 chars)").arg(str(p, "path")).arg(content.size());
            d.hasDetails = !content.isEmpty();
        } else if (p.value(QLatin1String("ok")).toBool()) {
            d.summary = name + QStringLiteral(" ok");
        } else {
            d.summary = name + QStringLiteral(": ") + compactJson(payload);
        }
    }

    // A tool.result of a command: how it ended, how long it took, the command line.
    static void commandResult(const QJsonObject &p, Derived &d)
    {
        QStringList parts;
        const qint64 exitCode = num(p, "exit_code");
        const qint64 signal = num(p, "signal");
        if (p.value(QLatin1String("timed_out")).toBool())
            parts << QStringLiteral("timed out");
        else if (signal > 0)
            parts << QStringLiteral("killed by signal %1").arg(signal);
        else
            parts << QStringLiteral("exit %1").arg(exitCode);
        d.isError = exitCode != 0 || signal > 0 || p.value(QLatin1String("timed_out")).toBool();
        if (d.latencyMs >= 0)
            parts << formatLatency(d.latencyMs);
        if (p.value(QLatin1String("replayed")).toBool())
            parts << QStringLiteral("replayed");
        parts << str(p, "command");
        d.summary = parts.join(QStringLiteral(" · "));
        d.hasDetails = !str(p, "stdout").isEmpty() || !str(p, "stderr").isEmpty();
    }

    static void modelResponse(const QString &, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        const QJsonObject usage = p.value(QLatin1String("usage")).toObject();
        const qint64 in = num(usage, "input_tokens");
        const qint64 out = num(usage, "output_tokens");
        d.tokens = in + out;
        d.latencyMs = num(p, "latency_ms", -1);
        const auto calls = p.value(QLatin1String("tool_calls")).toArray().size();
        QStringList parts;
        parts << QStringLiteral("%1 in / %2 out tokens").arg(in).arg(out);
        if (d.latencyMs >= 0)
            parts << formatLatency(d.latencyMs);
        if (calls > 0)
            parts << (calls == 1 ? QStringLiteral("1 tool call") : QStringLiteral("%1 tool calls").arg(calls));
        const QString text = str(p, "text");
        if (!text.isEmpty())
            parts << text;
        d.summary = parts.join(QStringLiteral(" · "));
        d.hasDetails = !text.isEmpty() || calls > 0;
    }

    static void modelError(const QString &, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        d.summary = QStringLiteral("model error: ") + str(p, "error");
        d.isError = true;
    }

    static void sandboxClaimed(const QString &, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        d.latencyMs = num(p, "claim_ms", -1);
        QStringList parts;
        parts << QStringLiteral("pool ") + str(p, "pool") << str(p, "tier");
        parts << (p.value(QLatin1String("warm")).toBool() ? QStringLiteral("warm") : QStringLiteral("cold"));
        if (p.value(QLatin1String("claim_ms")).isDouble())
            parts << QStringLiteral("claim %1 ms").arg(p.value(QLatin1String("claim_ms")).toDouble());
        const QString sandbox = str(p, "sandbox_id");
        if (!sandbox.isEmpty())
            parts << sandbox;
        d.summary = parts.join(QStringLiteral(" · "));
    }

    static void sandboxFailed(const QString &, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        d.summary = QStringLiteral("sandbox %1 failed: %2").arg(str(p, "sandbox_id"), str(p, "reason"));
        const QString error = str(p, "error");
        if (!error.isEmpty())
            d.summary += QStringLiteral(" (") + error + QLatin1Char(')');
        d.isError = true;
    }

    static void sandboxReleased(const QString &, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        d.summary = QStringLiteral("released %1").arg(str(p, "sandbox_id"));
        const QString note = str(p, "note");
        if (!note.isEmpty())
            d.summary += QStringLiteral(" (") + note + QLatin1Char(')');
    }

    static void sandboxLost(const QString &, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        QStringList parts;
        parts << QStringLiteral("lost pool %1").arg(str(p, "pool").isEmpty() ? str(p, "old_pool") : str(p, "pool"));
        const QString sandbox = str(p, "sandbox_id");
        if (!sandbox.isEmpty())
            parts << sandbox;
        const QString call = p.value(QLatin1String("interrupted_call")).isString() ? str(p, "interrupted_call") : QString();
        if (!call.isEmpty())
            parts << QStringLiteral("interrupted ") + call;
        const QString reason = str(p, "error").isEmpty() ? str(p, "reason") : str(p, "error");
        if (!reason.isEmpty())
            parts << reason;
        d.summary = parts.join(QStringLiteral(" · "));
        d.isError = true;
    }

    static void stateChanged(const QString &, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        const QString status = str(p, "status");
        const QString reason = str(p, "reason");
        d.summary = reason.isEmpty() ? status : status + QStringLiteral(": ") + reason;
        d.isError = status == QLatin1String("failed");
    }

    static void sessionCreated(const QString &, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        QString summary = str(p, "goal");
        const QString playbook = str(p, "playbook");
        if (!playbook.isEmpty())
            summary += QStringLiteral(" · playbook ") + playbook;
        const QString tier = str(p, "tier");
        if (!tier.isEmpty())
            summary += QStringLiteral(" · tier ") + tier;
        d.summary = summary;
    }

    // egress.allowed and egress.refused.
    static void egress(const QString &kind, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        const bool allowed = kind == QLatin1String("egress.allowed");
        QStringList parts;
        parts << (allowed ? QStringLiteral("allowed ") : QStringLiteral("refused ")) + hostPort(p);
        const QString address = str(p, "address").isEmpty() ? str(p, "resolved") : str(p, "address");
        if (!address.isEmpty())
            parts << address;
        const QString reason = str(p, "reason");
        if (!reason.isEmpty())
            parts << reason;
        const QString detail = str(p, "detail").isEmpty() ? str(p, "error") : str(p, "detail");
        if (!detail.isEmpty())
            parts << detail;
        const qint64 sent = num(p, "bytes_sent", num(p, "bytes_out"));
        const qint64 received = num(p, "bytes_received", num(p, "bytes_in", num(p, "bytes")));
        if (allowed && (sent > 0 || received > 0))
            parts << QStringLiteral("%1 B out / %2 B in").arg(sent).arg(received);
        d.summary = parts.join(QStringLiteral(" · "));
    }

    // The workspace a checkpoint or a restore names: "checkpoint 3f2a9c0d1e2f" (its manifest id,
    // shortened), or "snapshot <ref>" of an older pool snapshot; empty for none.
    static QString workspaceRef(const QJsonObject &p)
    {
        const QString manifest = str(p, "manifest");
        if (!manifest.isEmpty())
            return QStringLiteral("checkpoint ") + manifest.left(12);
        const QString ref = str(p, "snapshot_ref").isEmpty() ? str(p, "snapshot") : str(p, "snapshot_ref");
        return ref.isEmpty() ? QString() : QStringLiteral("snapshot ") + ref;
    }

    // A checkpoint after a step (docs/checkpoints.md): what changed, what it cost.
    static void checkpoint(const QString &, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        QStringList parts{workspaceRef(p)};
        parts << QStringLiteral("%1 changed, %2 removed").arg(num(p, "changed")).arg(num(p, "removed"));
        parts << QStringLiteral("%1 B sent").arg(num(p, "sent_bytes"));
        if (!str(p, "store").isEmpty())
            parts << (str(p, "store") == u"s3" ? QStringLiteral("in S3") : QStringLiteral("in the broker's store"));
        d.latencyMs = num(p, "duration_ms", -1);
        d.summary = parts.join(QStringLiteral(" · "));
    }

    // Every kind of EventCategory::Snapshot or EventCategory::Restore.
    static void snapshotOrRestore(const QString &kind, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        const bool restore = eventCategory(kind) == EventCategory::Restore;
        const QString ref = workspaceRef(p);
        QStringList parts;
        parts << (restore ? QStringLiteral("restored ") : QString()) + (ref.isEmpty() ? QStringLiteral("no workspace") : ref);
        const QString sandbox = str(p, "sandbox_id");
        if (!sandbox.isEmpty())
            parts << (restore ? QStringLiteral("into ") : QStringLiteral("of ")) + sandbox;
        if (p.value(QLatin1String("file_count")).isDouble())
            parts << QStringLiteral("%1 files").arg(num(p, "file_count"));
        if (p.value(QLatin1String("restored_files")).isDouble())
            parts << QStringLiteral("%1 files").arg(num(p, "restored_files"));
        if (p.value(QLatin1String("size_bytes")).isDouble())
            parts << QStringLiteral("%1 bytes").arg(num(p, "size_bytes"));
        d.latencyMs = num(p, "restore_ms", num(p, "duration_ms", -1));
        const QString error = str(p, "error");
        if (!error.isEmpty()) {
            parts << QStringLiteral("error: ") + error;
            d.isError = true;
        }
        d.summary = parts.join(QStringLiteral(" · "));
    }

    // Every kind of EventCategory::Move but sandbox.lost, which has its own.
    static void move(const QString &kind, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        const QString from = str(p, "from_pool").isEmpty() ? str(p, "old_pool") : str(p, "from_pool");
        const QString to = str(p, "to_pool").isEmpty() ? str(p, "new_pool") : str(p, "to_pool");
        QStringList parts;
        if (!from.isEmpty() || !to.isEmpty())
            parts << QStringLiteral("pool %1 → %2").arg(from.isEmpty() ? QStringLiteral("?") : from,
                                                         to.isEmpty() ? QStringLiteral("?") : to);
        const QString fromTier = str(p, "from_tier");
        const QString toTier = str(p, "to_tier").isEmpty() ? str(p, "tier") : str(p, "to_tier");
        if (!fromTier.isEmpty() && !toTier.isEmpty() && fromTier != toTier)
            parts << QStringLiteral("tier %1 → %2").arg(fromTier, toTier);
        const QString ref = workspaceRef(p);
        parts << (ref.isEmpty() ? QStringLiteral("no checkpoint: empty workspace") : QStringLiteral("from ") + ref);
        if (p.value(QLatin1String("restore_ms")).isDouble())
            d.latencyMs = num(p, "restore_ms");
        const QString reason = str(p, "reason").isEmpty() ? str(p, "error") : str(p, "reason");
        if (!reason.isEmpty())
            parts << reason;
        d.summary = parts.join(QStringLiteral(" · "));
        d.isError = kind == QLatin1String("sandbox.lost");
    }

    // Every debug_shell.* kind: the command and its exit for debug_shell.exec, else what happened
    // to which shell.
    static void debugShell(const QString &kind, const QJsonObject &p, const QByteArray &, Derived &d)
    {
        const QString who = str(p, "by").isEmpty() ? str(p, "user") : str(p, "by");
        if (kind == QLatin1String("debug_shell.exec")) {
            QString command = str(p, "command");
            if (command.isEmpty()) {
                QStringList argv;
                for (const QJsonValue &arg : p.value(QLatin1String("argv")).toArray())
                    argv << arg.toString();
                command = argv.size() == 3 && argv.at(0) == u"/bin/sh" && argv.at(1) == u"-c" ? argv.at(2) : argv.join(u' ');
            }
            d.summary = QStringLiteral("$ %1 · exit %2").arg(command).arg(num(p, "exit_code"));
            d.latencyMs = num(p, "duration_ms", -1);
        } else {
            d.summary = kind.mid(12) + QStringLiteral(" ") + str(p, "shell_id");
            const QString tier = str(p, "tier");
            if (!tier.isEmpty())
                d.summary += QStringLiteral(" · tier ") + tier;
        }
        if (!who.isEmpty())
            d.summary += QStringLiteral(" · by ") + who;
    }

    // A kind the console has no words for: its payload.
    static void other(const QString &, const QJsonObject &, const QByteArray &payload, Derived &d)
    {
        d.summary = compactJson(payload);
    }
};

TraceModel::Derived TraceModel::derive(const Row &row) const
{
    Derived d;
    const QString &kind = m_kinds.at(row.kind);
    const QJsonObject p = QJsonDocument::fromJson(row.payload).object();
    KindDerivers::forKind(kind)(kind, p, row.payload, d);
    const QJsonObject postMortem = p.value(QLatin1String("post_mortem")).toObject();
    if (!postMortem.isEmpty()) {
        d.postMortem = {str(postMortem, "pool"), str(postMortem, "sandbox_id")};
        d.summary += QStringLiteral(" · post-mortem kept");
    }
    d.summary = oneLine(d.summary);
    return d;
}

const TraceModel::Derived &TraceModel::derived(int row) const
{
    const qint64 seq = m_firstSeq + row;
    auto found = m_derived.constFind(seq);
    if (found != m_derived.constEnd())
        return *found;
    if (m_derived.size() >= kMaxDerivedRows)
        m_derived.clear();   // cheap to rebuild: only what is on screen comes back
    return *m_derived.insert(seq, derive(m_rows.at(static_cast<size_t>(row))));
}

QString TraceModel::details(const Row &row) const
{
    const QString &kind = m_kinds.at(row.kind);
    const QJsonObject p = QJsonDocument::fromJson(row.payload).object();
    if (kind == QLatin1String("tool.result") && p.contains(QLatin1String("command"))) {
        QString text = QStringLiteral("$ ") + str(p, "command") + QLatin1Char('\n');
        text += QStringLiteral("exit %1").arg(num(p, "exit_code"));
        if (num(p, "signal") > 0)
            text += QStringLiteral(", signal %1").arg(num(p, "signal"));
        if (p.value(QLatin1String("timed_out")).toBool())
            text += QStringLiteral(", timed out");
        if (p.value(QLatin1String("duration_ms")).isDouble())
            text += QStringLiteral(" · ") + formatLatency(num(p, "duration_ms"));
        text += QLatin1Char('\n');
        for (const char *stream : {"stdout", "stderr"}) {
            const QString out = str(p, stream);
            if (out.isEmpty())
                continue;
            text += QStringLiteral("--- %1").arg(QLatin1String(stream));
            if (p.value(QLatin1String(stream) + QStringLiteral("_clipped")).toBool())
                text += QStringLiteral(" (clipped: first 8 KiB and last 56 KiB kept)");
            text += QStringLiteral(" ---\n") + out;
            if (!out.endsWith(QLatin1Char('\n')))
                text += QLatin1Char('\n');
        }
        return text;
    }
    if (kind == QLatin1String("tool.result") && p.contains(QLatin1String("content")))
        return str(p, "path") + QStringLiteral(":\n") + str(p, "content");
    if (kind == QLatin1String("model.response")) {
        QString text = str(p, "text");
        const QJsonArray calls = p.value(QLatin1String("tool_calls")).toArray();
        for (const QJsonValue &call : calls) {
            const QJsonObject object = call.toObject();
            if (!text.isEmpty())
                text += QLatin1Char('\n');
            text += QStringLiteral("→ %1(%2)").arg(
                str(object, "name"),
                QString::fromUtf8(QJsonDocument(arguments(object)).toJson(QJsonDocument::Compact)));
        }
        return text;
    }
    const QJsonDocument document = QJsonDocument::fromJson(row.payload);
    return document.isNull() ? QString::fromUtf8(row.payload) : QString::fromUtf8(document.toJson(QJsonDocument::Indented));
}

QVariant TraceModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= static_cast<int>(m_rows.size()) || index.column() >= ColumnCount)
        return {};
    const int row = index.row();
    const Row &r = m_rows.at(static_cast<size_t>(row));
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case Seq: return m_firstSeq + row;
        case Time: return QDateTime::fromMSecsSinceEpoch(r.timeMs).toString(QStringLiteral("hh:mm:ss.zzz"));
        case Kind: return m_kinds.at(r.kind);
        case Summary: return derived(row).summary;
        case Tokens: {
            const qint64 tokens = derived(row).tokens;
            return tokens > 0 ? QVariant(tokens) : QVariant(QString());
        }
        case Latency: return formatLatency(derived(row).latencyMs);
        case Cost: return r.costMicros != 0 ? formatCost(r.costMicros) : QString();
        default: return {};
        }
    case Qt::ToolTipRole: {
        const Derived &d = derived(row);
        if (!d.hasDetails)
            return d.summary;
        const QString more = details(r);
        return more.size() > 2000 ? more.left(2000) + QStringLiteral("\n…") : more;
    }
    case Qt::TextAlignmentRole:
        if (index.column() == Seq || index.column() == Tokens || index.column() == Latency || index.column() == Cost)
            return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
        return {};
    case SeqRole: return m_firstSeq + row;
    case TimeMsRole: return r.timeMs;
    case KindRole: return m_kinds.at(r.kind);
    case SummaryRole: return derived(row).summary;
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
    return names;
}

int TraceModel::resultRowOf(int callRow) const
{
    if (callRow < 0 || callRow >= rowCount() || m_kinds.value(m_rows[static_cast<size_t>(callRow)].kind) != u"tool.call")
        return -1;
    const QString callId =
        QJsonDocument::fromJson(m_rows[static_cast<size_t>(callRow)].payload).object().value(u"call_id").toString();
    const int last = qMin(rowCount(), callRow + kResultSearchRows);
    for (int r = callRow + 1; r < last; ++r) {
        const Row &candidate = m_rows[static_cast<size_t>(r)];
        if (m_kinds.value(candidate.kind) == u"tool.result" &&
            QJsonDocument::fromJson(candidate.payload).object().value(u"call_id").toString() == callId)
            return r;
    }
    return -1;
}

QString TraceModel::detailsWithResult(int row) const
{
    const QModelIndex index = this->index(row, 0);
    if (index.data(KindRole).toString() != u"tool.call")
        return index.data(DetailsRole).toString();
    const QJsonObject payload = QJsonDocument::fromJson(index.data(PayloadRole).toByteArray()).object();
    const QString text = tr("%1 (call %2, seq %3)\narguments: %4")
                             .arg(index.data(SummaryRole).toString(), payload.value(u"call_id").toString(),
                                  QString::number(index.data(SeqRole).toLongLong()),
                                  QString::fromUtf8(QJsonDocument(payload.value(u"arguments").toObject()).toJson(QJsonDocument::Compact)));
    const int resultRow = resultRowOf(row);
    if (resultRow < 0)
        return text + tr("\n\n── no result yet ──");
    const QModelIndex result = this->index(resultRow, 0);
    return text + QStringLiteral("\n\n── result (seq %1) ──\n").arg(result.data(SeqRole).toLongLong()) + result.data(DetailsRole).toString();
}

} // namespace paddock::console
