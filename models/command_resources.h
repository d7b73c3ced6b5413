#pragma once
// What a sandbox's commands used, from their tool.result: `peak_memory_bytes`, `cpu_time_ms` and
// `peak_memory_scope`, which the pool reads from the sandbox's cgroup at each command's exit. The
// resource curve has one sample a second, so a shorter command may have no sample inside it: these
// figures stand in for it, in words, in the session's sandbox card and in the sandbox inspector.
// The curve still shows the samples there are.
//
// Known limits: a command's window is its result's time less its duration, on the broker's clock,
// against samples stamped on the pool host's; the card keeps the last kMaxCommands commands.
//
// Threads: plain values; the GUI thread owns the ones in the card and the inspector.

#include "models/console_types.h"
#include "models/resource_series.h"
#include "models/sandbox_types.h"

#include <QList>
#include <QString>

#include <optional>

namespace paddock::console {

struct CommandResources {
    QString command;
    qint64 endUnixMs = 0;         // when its tool.result was recorded
    double durationMs = 0;
    qint64 peakMemoryBytes = 0;   // 0: not reported (a sandbox without a cgroup)
    double cpuTimeMs = 0;         // 0: not reported
    // "command" (the peak is the command's own), "concurrent" (other commands of the sandbox ran
    // meanwhile: it covers them too), "sandbox" (the kernel kept the peak since the sandbox started).
    QString peakScope;
    QString postMortemPool;       // the post-mortem the result names (a failed command), if any
    QString postMortemSandbox;

    bool known() const { return peakMemoryBytes > 0 || cpuTimeMs > 0; }
    qint64 startUnixMs() const { return endUnixMs - static_cast<qint64>(durationMs); }
    // "peak 67.4 MiB, CPU 59 ms"; a peak that is not the command's own says whose it is.
    QString figuresText() const;
    // Whether series holds a sample taken while the command ran.
    bool hasSampleIn(const ResourceSeries &series) const;
    // The failed command a post-mortem describes (the same pool, sandbox and command line).
    bool isCommandOf(const PostMortemInfo &postMortem) const;

    // A run_command's tool.result with at least one figure; nullopt for anything else.
    static std::optional<CommandResources> fromEvent(const EventRecord &event);
};

// The sandbox card's fold: the current sandbox's commands that reported figures, oldest first (a
// claim of another sandbox starts afresh).
class SandboxCommandLog {
public:
    static constexpr int kMaxCommands = 1000;

    void clear();
    // Folds a sandbox.claimed and a run_command's tool.result with figures; false (nothing
    // changed) for anything else.
    bool apply(const EventRecord &event);
    const QList<CommandResources> &commands() const { return m_commands; }
    // The commands no sample of series fell inside, in words: one command's figures, or how many
    // and the largest peak and the CPU time of them all. Empty when there are none (the curve
    // shows every command).
    QString betweenSamplesText(const ResourceSeries &series) const;

private:
    QList<CommandResources> m_commands;
    QString m_sandboxId;
};

class TraceModel;

// The newest tool.result of trace that ran the command a post-mortem describes, with its figures;
// nullopt when the trace does not hold it (another session's, or paged out) or it has none.
std::optional<CommandResources> commandResourcesOf(const TraceModel &trace, const PostMortemInfo &postMortem);

// The inspector's line about a post-mortem's command, from its tool.result's figures (series: the
// post-mortem's samples). Empty when the result reported none.
QString postMortemCommandText(const CommandResources &command, const PostMortemInfo &postMortem,
                              const ResourceSeries &series);

} // namespace paddock::console
