// TraceModel's details: the full text behind a row (a command's output, a model's words, a file's
// content, the JSON of anything else), a tool call with its result, and the payloads of the events
// folded into a row.
//
// Threads: GUI thread only, like the rest of TraceModel.

#include "models/trace_model.h"

#include "models/console_format.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

namespace paddock::console {
namespace {

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

} // namespace

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

int TraceModel::resultRowOf(int callRow) const
{
    if (callRow < 0 || callRow >= rowCount() || m_kinds.value(rowAt(callRow).kind) != u"tool.call")
        return -1;
    const QString callId = QJsonDocument::fromJson(rowAt(callRow).payload).object().value(u"call_id").toString();
    const int last = qMin(rowCount(), callRow + kResultSearchRows);
    for (int r = callRow + 1; r < last; ++r) {
        const Row &candidate = rowAt(r);
        if (m_kinds.value(candidate.kind) == u"tool.result" &&
            QJsonDocument::fromJson(candidate.payload).object().value(u"call_id").toString() == callId)
            return r;
    }
    return -1;
}

QString TraceModel::detailsWithResult(int row) const
{
    // A model's answer streaming into this row comes first: it is what grows, and what a person
    // opened the row to watch.
    QString streaming;
    const QString folded = foldedDetails(row, &streaming);
    if (!streaming.isEmpty())
        streaming += tr("\n\n── this row: %1 (seq %2) ──\n").arg(m_kinds.at(rowAt(row).kind)).arg(seqOfRow(row));
    return streaming + ownDetails(row, folded);
}

QString TraceModel::ownDetails(int row, const QString &folded) const
{
    const QModelIndex index = this->index(row, 0);
    if (index.data(KindRole).toString() != u"tool.call")
        return index.data(DetailsRole).toString() + folded;
    const QJsonObject payload = QJsonDocument::fromJson(index.data(PayloadRole).toByteArray()).object();
    const QString text = tr("%1 (call %2, seq %3)\narguments: %4")
                             .arg(index.data(SummaryRole).toString(), payload.value(u"call_id").toString(),
                                  QString::number(index.data(SeqRole).toLongLong()),
                                  QString::fromUtf8(QJsonDocument(payload.value(u"arguments").toObject()).toJson(QJsonDocument::Compact)));
    const int resultRow = resultRowOf(row);
    if (resultRow < 0)
        return text + tr("\n\n── no result yet ──") + folded;   // a running command's output so far
    const QModelIndex result = this->index(resultRow, 0);
    return text + QStringLiteral("\n\n── result (seq %1) ──\n").arg(result.data(SeqRole).toLongLong()) + result.data(DetailsRole).toString()
         + folded;
}

QString TraceModel::foldedDetails(int row, QString *streaming) const
{
    if (!m_foldBookkeeping)
        return {};
    QString text;
    StreamedAnswer answer;
    for (const qint64 seq : foldOf(row).seqs) {
        const Row &folded = m_rows.at(static_cast<size_t>(seq - m_firstSeq));
        const QJsonDocument document = QJsonDocument::fromJson(folded.payload);
        if (m_kinds.at(folded.kind) == u"tool.output") {
            // The output itself, as printed (the details pane shows text, never runs it).
            const QJsonObject chunk = document.object();
            text += tr("\n\n── %1 as it ran (seq %2) ──\n").arg(chunk.value(u"stream").toString(), QString::number(seq));
            text += chunk.value(u"text").toString();
            continue;
        }
        if (m_kinds.at(folded.kind) == u"model.delta") {
            answer.add(seq, document.object());
            continue;
        }
        text += tr("\n\n── folded into this row: %1 (seq %2) ──\n").arg(m_kinds.at(folded.kind)).arg(seq);
        text += document.isNull() ? QString::fromUtf8(folded.payload) : QString::fromUtf8(document.toJson(QJsonDocument::Indented));
    }
    if (answer.deltas == 0)
        return text;
    // Once the model.response is there it holds the whole answer: the row says only how it came.
    if (m_kinds.at(rowAt(row).kind) == u"model.response")
        return text + tr("\n\n── streamed in %n model.delta event(s), seq %1 to %2 ──", nullptr, answer.deltas)
                          .arg(answer.firstSeq).arg(answer.lastSeq);
    *streaming = tr("── the model's answer so far (streaming, attempt %1, seq %2 to %3) ──\n")
                     .arg(answer.attempt).arg(answer.firstSeq).arg(answer.lastSeq)
               + answer.render();
    return text;
}

void TraceModel::StreamedAnswer::add(qint64 seq, const QJsonObject &delta)
{
    const qint64 number = num(delta, "attempt", 1);
    const qint64 callStart = num(delta, "after_seq");
    // A retried stream starts again (docs/events.md: keep the highest attempt), and so does a call
    // the broker ran again after a crash cut the first one off (a later after_seq).
    if (number != attempt || callStart != afterSeq) {
        attempt = number;
        afterSeq = callStart;
        text.clear();
        calls.clear();
    }
    firstSeq = deltas == 0 ? seq : firstSeq;
    lastSeq = seq;
    ++deltas;
    text += str(delta, "text");
    for (const QJsonValue &value : delta.value(u"tool_calls").toArray()) {
        const QJsonObject call = value.toObject();
        const int index = static_cast<int>(num(call, "index"));
        auto found = std::find_if(calls.begin(), calls.end(), [&](const Call &c) { return c.index == index; });
        if (found == calls.end())
            found = calls.insert(calls.end(), Call{index, {}, {}});
        if (call.contains(u"name"))
            found->name = str(call, "name");
        found->arguments += str(call, "arguments");
    }
}

QString TraceModel::StreamedAnswer::render() const
{
    QString out = text;
    for (const Call &call : calls) {
        if (!out.isEmpty() && !out.endsWith(QLatin1Char('\n')))
            out += QLatin1Char('\n');
        out += QStringLiteral("→ %1(%2").arg(call.name, call.arguments);
    }
    return out;
}

} // namespace paddock::console
