#pragma once
// One session's spans and marks for the timeline: the events of a TraceModel's window applied, in
// seq order, to trace::SpanBuilder (the same spans `paddockctl trace` prints), kept in lanes on one
// time axis: the model's calls, tool calls, the sandbox (claims, restores, moves, debug shells),
// waits (for a sandbox, the checkpoint store, a review, a budget, a resume) and marks (egress
// attempts, failures, tier overrides, budget warnings).
//
// It follows the TraceModel it is given, so it sees exactly the events the table shows: the live
// tail as it is appended, history paged in at the top, a window that jumps or is cleared. Spans
// are built in seq order only, so history paged in above what was built means building again
// from the window's first event; that happens beside the spans shown (which stay live) and
// replaces them once it has caught up.
//
// Cost: applying an event parses its payload when its kind makes spans (about 7 us for a tool
// result), so building is done in slices of at most kSliceMs on the GUI thread, continued from a
// zero timer: a 1,000,000-event window never stalls the GUI, and its spans appear as they are
// built. Memory: 40 bytes a span (labels are not kept: label() formats the span's events on
// demand, cached for what is on screen); the builder keeps only the open spans.
//
// Times are Unix ms. An open span (running) ends at nowMs(): the newest event's time or the
// clock, whichever is later, so a command that runs for minutes grows while no event arrives.
//
// Threads: GUI thread only.
//
// Known limits: a span that began before the window's first event is not shown (its end, when it
// is a tool result or a model response, still is: its duration gives the start). spanAtSeq()
// looks back kSpanSearch spans for one that covers the seq, so a row deep inside a very long span
// (a debug shell open across thousands of steps) may find none.

#include <QHash>
#include <QObject>
#include <QPointer>
#include <QString>

#include <array>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

class QTimer;

namespace paddock::trace {
class SpanBuilder;
}

namespace paddock::console {

class TraceModel;

class SpanModel : public QObject {
    Q_OBJECT

public:
    // trace::SpanKind's values, without the JSON headers that come with it (checked in the .cpp).
    enum class Kind : quint8 {
        ModelCall, ToolCall, SandboxClaim, SandboxRestore, SandboxMove, SandboxWait, CheckpointWait, ApprovalWait,
        BudgetWait, Paused, DebugShell, DebugCommand, EgressAllowed, EgressRefused, SandboxFailure, ModelError,
        TierOverride, Budget, Count
    };
    enum class Lane : quint8 { Model, Tools, Sandbox, Waits, Marks, Count };

    struct Span {
        qint64 startMs = 0;
        qint64 endMs = -1;      // -1 while open
        qint64 startSeq = 0;    // the event that opened it
        qint64 endSeq = 0;      // the event that ended it; 0 while open
        Kind kind = Kind::ModelCall;
        Lane lane = Lane::Model;
        bool mark = false;      // a moment, drawn as a tick
        bool error = false;
        bool queued = false;    // a tool call waiting for the one before it
        bool interrupted = false;
        bool open() const { return endMs < 0; }
    };

    static constexpr int kSliceMs = 8;
    static constexpr int kSpanSearch = 4096;

    explicit SpanModel(QObject *parent = nullptr);
    ~SpanModel() override;

    // Follows trace from now on (nullptr: none); builds from what it already holds.
    void setTraceModel(TraceModel *trace);
    TraceModel *traceModel() const;
    // What an open span's end is when no event is newer: the wall clock by default. Tests and
    // screenshots of recorded sessions give their own.
    void setClock(std::function<qint64()> clock);

    int count() const { return static_cast<int>(m_current.spans.size()); }
    const Span &span(int id) const { return m_current.spans[static_cast<size_t>(id)]; }
    // Where an open span ends now; end(id) is either that or its own end.
    qint64 nowMs() const;
    qint64 endOf(const Span &span) const { return span.open() ? nowMs() : span.endMs; }
    // The seqs whose rows the span covers: from its first event to its last (open: the newest).
    qint64 lastSeqOf(const Span &span) const { return span.open() ? m_current.fedTo : span.endSeq; }
    int openCount() const { return m_current.open; }
    bool sessionEnded() const { return m_current.ended; }
    // The time axis: from the earliest start to the latest end (nowMs() while anything is open);
    // both 0 when there is no span.
    qint64 firstMs() const;
    qint64 lastMs() const;

    // What a block of spans looks like in one lane, from far away: its earliest start, latest end,
    // the kind of its first span there and whether any of them failed.
    struct LaneExtent {
        qint64 startMs = std::numeric_limits<qint64>::max();
        qint64 endMs = std::numeric_limits<qint64>::min();
        Kind kind = Kind::Count;   // Count: no span of the block in this lane
        bool error = false;
    };
    using LaneExtents = std::array<LaneExtent, size_t(Lane::Count)>;

    // Calls fn(id, span) for every span that overlaps [fromMs, toMs], in id order (the order the
    // spans began in the log), skipping blocks of kBlock spans that lie wholly outside. A block that
    // lasts at most coarseMs with nothing open in it is given whole instead, as coarse(extents): a
    // painter zoomed out over a million spans draws a thousand blocks.
    template <typename Fn, typename Coarse>
    void forEachIn(qint64 fromMs, qint64 toMs, qint64 coarseMs, Fn &&fn, Coarse &&coarse) const;
    template <typename Fn>
    void forEachIn(qint64 fromMs, qint64 toMs, Fn &&fn) const
    {
        forEachIn(fromMs, toMs, -1, std::forward<Fn>(fn), [](const LaneExtents &) {});
    }
    // The span a row's event belongs to: the one it opened, else the one it ended, else the
    // shortest that covers it; -1 for none.
    int spanAtSeq(qint64 seq) const;

    // One line for a tooltip or a bar: what the span is ("run_command: make") and how it ended.
    QString label(int id) const;
    QString outcome(int id) const;
    static QString kindName(Kind kind);   // "model", "tool", "claim", ... as paddockctl trace says
    static QString kindTitle(Kind kind);  // "Tool call", "Waiting for a review", ...
    static Lane laneOf(Kind kind);
    static QString laneName(Lane lane);

    // Work left: events not yet applied, or a rebuild under way.
    bool isBuilding() const;
    // Applies everything now, without slices (tests, benchmarks).
    void finishBuilding();

signals:
    // Spans were added or changed (ids stay valid).
    void spansChanged();
    // The spans were replaced (cleared, or rebuilt with history): every id is new.
    void spansReset();

private:
    static constexpr int kBlock = 1024;
    struct Block {
        qint64 minStart = std::numeric_limits<qint64>::max();
        qint64 maxEnd = std::numeric_limits<qint64>::min();   // max() while a span in it is open
        bool stale = false;                                   // maxEnd may be too high: recompute
        LaneExtents lanes;
        void add(const Span &span);
    };
    // Spans built from the window's events [from, fedTo], and the builder that continues them.
    struct Build {
        std::unique_ptr<trace::SpanBuilder> builder;
        std::vector<Span> spans;
        std::vector<int> liveIds;   // the builder's open spans' ids, in the builder's order
        mutable std::vector<Block> blocks;
        qint64 from = 0;
        qint64 fedTo = 0;
        qint64 minStart = std::numeric_limits<qint64>::max();
        qint64 maxEnd = 0;
        qint64 lastEventMs = 0;
        int open = 0;
        bool ended = false;
    };

    void sync();
    void clear();
    void startBuild(Build &build, qint64 from);
    // Applies events to build until it reaches the window's last or the deadline; true when done.
    bool feed(Build &build, qint64 deadlineNs);
    // Feeds the builds for at most budgetNs (-1: until done); a zero timer continues what is left.
    void advance(qint64 budgetNs);
    void store(Build &build, int id, const Span &span);
    const Block &blockAt(size_t index) const;
    // An event's one-line summary, cached under key (labels and outcomes share the cache).
    QString summaryOf(qint64 seq, qint64 key) const;

    QPointer<TraceModel> m_trace;
    QString m_sessionId;
    Build m_current;
    Build m_next;   // a rebuild from further back, while m_current stays live; no builder when none
    QTimer *m_pump = nullptr;
    std::function<qint64()> m_clock;
    mutable QHash<qint64, QString> m_labels;   // keyed by seq * 2 (+1 for an outcome)
};

template <typename Fn, typename Coarse>
void SpanModel::forEachIn(qint64 fromMs, qint64 toMs, qint64 coarseMs, Fn &&fn, Coarse &&coarse) const
{
    const auto &spans = m_current.spans;
    const qint64 now = nowMs();
    for (size_t block = 0; block * kBlock < spans.size(); ++block) {
        const Block &b = blockAt(block);
        if (b.minStart > toMs || b.maxEnd < fromMs)
            continue;
        if (coarseMs >= 0 && b.maxEnd != std::numeric_limits<qint64>::max() && b.maxEnd - b.minStart <= coarseMs) {
            coarse(b.lanes);
            continue;
        }
        const size_t end = std::min(spans.size(), (block + 1) * kBlock);
        for (size_t id = block * kBlock; id < end; ++id) {
            const Span &s = spans[id];
            if (s.startMs <= toMs && (s.open() ? now : s.endMs) >= fromMs)
                fn(static_cast<int>(id), s);
        }
    }
}

} // namespace paddock::console
