#include "models/command_resources.h"

#include "models/console_format.h"
#include "models/snapshot_files_model.h"   // formatBytes
#include "models/trace_model.h"

#include <QCoreApplication>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>

namespace paddock::console {
namespace {

QString tr(const char *text, int n = -1) { return QCoreApplication::translate("CommandResources", text, nullptr, n); }

constexpr int kCommandChars = 60;   // a command named in a line of text

QString shortCommand(const QString &command)
{
    const QString line = command.section(u'\n', 0, 0);
    return line.size() > kCommandChars || line.size() < command.size() ? line.left(kCommandChars) + u'…' : line;
}

// CPU time as people read it: "850 µs", "59 ms", "1.2 s".
QString cpuText(double ms)
{
    if (ms < 1)
        return QStringLiteral("%1 µs").arg(qRound(ms * 1000));
    return formatLatency(qRound64(ms));
}

// Whose peak it is when it is not the command's own; empty when it is.
QString scopeNote(const QString &scope)
{
    if (scope == u"concurrent")
        return tr("with the commands that ran beside it");
    if (scope == u"sandbox")
        return tr("the sandbox's since it started: this kernel cannot reset it per command");
    return {};
}

} // namespace

QString CommandResources::figuresText() const
{
    QStringList parts;
    if (peakMemoryBytes > 0) {
        const QString note = scopeNote(peakScope);
        parts << tr("peak %1").arg(formatBytes(peakMemoryBytes)) + (note.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(note));
    }
    if (cpuTimeMs > 0)
        parts << tr("CPU %1").arg(cpuText(cpuTimeMs));
    return parts.join(QStringLiteral(", "));
}

bool CommandResources::hasSampleIn(const ResourceSeries &series) const
{
    return series.hasSampleBetween(startUnixMs(), endUnixMs);
}

bool CommandResources::isCommandOf(const PostMortemInfo &postMortem) const
{
    if (postMortemPool != postMortem.pool || postMortemSandbox != postMortem.sandboxId)
        return false;
    // The broker runs a command as /bin/sh -c COMMAND.
    return postMortem.argv.isEmpty() || postMortem.argv.last() == command;
}

std::optional<CommandResources> CommandResources::fromEvent(const EventRecord &event)
{
    if (event.kind != u"tool.result")
        return std::nullopt;
    const QJsonObject payload = QJsonDocument::fromJson(event.payloadJson).object();
    if (!payload.contains(u"command"))
        return std::nullopt;   // not a run_command
    CommandResources c;
    c.peakMemoryBytes = static_cast<qint64>(payload.value(u"peak_memory_bytes").toDouble(0));
    c.cpuTimeMs = payload.value(u"cpu_time_ms").toDouble(0);
    if (!c.known())
        return std::nullopt;
    c.command = payload.value(u"command").toString();
    c.endUnixMs = event.timeUnixMs;
    c.durationMs = payload.value(u"duration_ms").toDouble(0);
    c.peakScope = payload.value(u"peak_memory_scope").toString();
    const QJsonObject postMortem = payload.value(u"post_mortem").toObject();
    c.postMortemPool = postMortem.value(u"pool").toString();
    c.postMortemSandbox = postMortem.value(u"sandbox_id").toString();
    return c;
}

void SandboxCommandLog::clear()
{
    m_commands.clear();
    m_sandboxId.clear();
}

bool SandboxCommandLog::apply(const EventRecord &event)
{
    if (event.kind == u"sandbox.claimed") {
        const QString id = QJsonDocument::fromJson(event.payloadJson).object().value(u"sandbox_id").toString();
        if (id == m_sandboxId)
            return false;
        m_sandboxId = id;
        m_commands.clear();   // the curve starts again with the new sandbox
        return true;
    }
    auto command = CommandResources::fromEvent(event);
    if (!command)
        return false;
    m_commands.append(std::move(*command));
    if (m_commands.size() > kMaxCommands)
        m_commands.remove(0, m_commands.size() - kMaxCommands);
    return true;
}

QString SandboxCommandLog::betweenSamplesText(const ResourceSeries &series) const
{
    QList<const CommandResources *> between;
    for (const CommandResources &c : m_commands)
        if (!c.hasSampleIn(series))
            between << &c;
    if (between.isEmpty())
        return {};
    if (between.size() == 1) {
        const CommandResources &c = *between.first();
        return tr("%1 ran between samples: %2").arg(shortCommand(c.command), c.figuresText());
    }
    const CommandResources *largest = *std::max_element(between.begin(), between.end(), [](auto *a, auto *b) {
        return a->peakMemoryBytes < b->peakMemoryBytes;
    });
    double cpuMs = 0;
    for (const CommandResources *c : std::as_const(between))
        cpuMs += c->cpuTimeMs;
    QStringList parts;
    if (largest->peakMemoryBytes > 0) {
        const QString note = scopeNote(largest->peakScope);
        parts << tr("the largest peak %1 (%2)")
                     .arg(formatBytes(largest->peakMemoryBytes),
                          shortCommand(largest->command) + (note.isEmpty() ? QString() : QStringLiteral("; ") + note));
    }
    if (cpuMs > 0)
        parts << tr("CPU %1 in all").arg(cpuText(cpuMs));
    return tr("%n commands ran between samples: ", int(between.size())) + parts.join(QStringLiteral(", "));
}

std::optional<CommandResources> commandResourcesOf(const TraceModel &trace, const PostMortemInfo &postMortem)
{
    const QStringList ref = {postMortem.pool, postMortem.sandboxId};
    for (int row = trace.rowCount() - 1; row >= 0; --row) {
        const QModelIndex index = trace.index(row, 0);
        if (index.data(TraceModel::PostMortemRefRole).toStringList() != ref)
            continue;
        const auto command = CommandResources::fromEvent(index.data(TraceModel::EventRecordRole).value<EventRecord>());
        if (command && command->isCommandOf(postMortem))
            return command;
    }
    return std::nullopt;
}

QString postMortemCommandText(const CommandResources &command, const PostMortemInfo &postMortem, const ResourceSeries &series)
{
    if (!command.known())
        return {};
    // The post-mortem's times are the pool's, like its samples'.
    const qint64 end = postMortem.timeUnixMs > 0 ? postMortem.timeUnixMs : command.endUnixMs;
    const double durationMs = postMortem.durationMs > 0 ? postMortem.durationMs : command.durationMs;
    // The sample taken at the failure is stamped with its time: one before it fell inside.
    const bool sampled = series.hasSampleBetween(end - static_cast<qint64>(durationMs), end - 1);
    return (sampled ? tr("The command, from its result: %1") : tr("No sample fell inside the command; from its result: %1"))
        .arg(command.figuresText());
}

} // namespace paddock::console
