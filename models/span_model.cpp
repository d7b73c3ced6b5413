#include "models/span_model.h"

#include "models/trace_model.h"
#include "trace/event_summary.h"
#include "trace/spans.h"

#include <QDateTime>
#include <QElapsedTimer>
#include <QTimer>

#include <algorithm>

namespace paddock::console {
namespace {

using trace::SpanKind;
static_assert(int(SpanModel::Kind::ModelCall) == int(SpanKind::ModelCall));
static_assert(int(SpanModel::Kind::DebugCommand) == int(SpanKind::DebugCommand));
static_assert(int(SpanModel::Kind::EgressAllowed) == int(SpanKind::EgressAllowed));
static_assert(int(SpanModel::Kind::Budget) == int(SpanKind::Budget));
static_assert(int(SpanModel::Kind::Count) == int(SpanKind::Budget) + 1);

// While a build runs unsliced (finishBuilding), what ended is let go this often, so the builder
// never holds the labels of more than this many events' spans.
constexpr int kDropEvery = 4096;
// Labels formatted for tooltips and bars; a screen shows a few dozen.
constexpr qsizetype kMaxLabels = 2048;

SpanModel::Span toSpan(const trace::Span &s)
{
    SpanModel::Span out;
    out.startMs = s.startMs;
    out.endMs = s.endMs;
    out.startSeq = s.startSeq;
    out.endSeq = s.endSeq;
    out.kind = static_cast<SpanModel::Kind>(s.kind);
    out.lane = SpanModel::laneOf(out.kind);
    out.mark = s.mark;
    out.error = s.error;
    out.queued = s.queued;
    out.interrupted = s.interrupted;
    return out;
}

} // namespace

SpanModel::SpanModel(QObject *parent)
    : QObject(parent)
    , m_clock([] { return QDateTime::currentMSecsSinceEpoch(); })
{
    m_pump = new QTimer(this);
    m_pump->setSingleShot(true);
    m_pump->setInterval(0);
    connect(m_pump, &QTimer::timeout, this, [this] { advance(qint64(kSliceMs) * 1'000'000); });
}

SpanModel::~SpanModel() = default;

void SpanModel::setTraceModel(TraceModel *trace)
{
    if (m_trace)
        disconnect(m_trace, nullptr, this, nullptr);
    m_trace = trace;
    clear();
    m_sessionId.clear();
    if (!trace)
        return;
    // Every change to the window comes with one of these; sync() compares what it built with what
    // the window holds now.
    connect(trace, &TraceModel::eventsAppended, this, &SpanModel::sync);
    connect(trace, &TraceModel::historyPrepended, this, &SpanModel::sync);
    connect(trace, &QAbstractItemModel::modelReset, this, &SpanModel::sync);
    sync();
}

TraceModel *SpanModel::traceModel() const { return m_trace; }

void SpanModel::setClock(std::function<qint64()> clock) { m_clock = std::move(clock); }

qint64 SpanModel::nowMs() const { return std::max(m_current.lastEventMs, m_clock ? m_clock() : 0); }

qint64 SpanModel::firstMs() const { return m_current.spans.empty() ? 0 : m_current.minStart; }

qint64 SpanModel::lastMs() const
{
    if (m_current.spans.empty())
        return 0;
    return std::max({m_current.maxEnd, m_current.lastEventMs, m_current.open > 0 ? nowMs() : 0});
}

bool SpanModel::isBuilding() const
{
    if (!m_trace || m_trace->eventCount() == 0)
        return false;
    return m_next.builder || !m_current.builder || m_current.fedTo < m_trace->lastSeq();
}

void SpanModel::finishBuilding()
{
    m_pump->stop();
    advance(-1);
}

void SpanModel::clear()
{
    const bool had = !m_current.spans.empty();
    m_pump->stop();
    m_current = Build{};
    m_next = Build{};
    m_labels.clear();
    if (had)
        emit spansReset();
}

void SpanModel::startBuild(Build &build, qint64 from)
{
    build = Build{};
    build.builder = std::make_unique<trace::SpanBuilder>();
    build.from = from;
    build.fedTo = from - 1;
}

void SpanModel::sync()
{
    const bool empty = !m_trace || m_trace->eventCount() == 0;
    if (empty || m_trace->sessionId() != m_sessionId) {
        clear();
        m_sessionId = m_trace ? m_trace->sessionId() : QString();
        if (empty)
            return;
    }
    const qint64 first = m_trace->firstSeq();
    if (!m_current.builder) {
        startBuild(m_current, first);
    } else if (first > m_current.fedTo + 1) {
        // The window moved past what was built (a reset to a newer tail): nothing joins up.
        clear();
        startBuild(m_current, first);
    } else if (first < m_current.from || first - m_current.from > m_trace->maxRows() / 4) {
        // History above what was built, or many spans whose events the window let go: build again
        // from the window's first event beside the spans shown.
        if (!m_next.builder || m_next.from != first)
            startBuild(m_next, first);
    }
    advance(qint64(kSliceMs) * 1'000'000);
}

void SpanModel::advance(qint64 budgetNs)
{
    if (!m_trace)
        return;
    QElapsedTimer timer;
    timer.start();
    const auto left = [&] { return budgetNs < 0 ? -1 : std::max<qint64>(0, budgetNs - timer.nsecsElapsed()); };
    const int before = count();
    const qint64 fedBefore = m_current.fedTo;
    const bool currentDone = feed(m_current, left());
    bool changed = m_current.fedTo != fedBefore || count() != before;
    bool nextDone = !m_next.builder;
    if (m_next.builder && currentDone && left() != 0) {
        nextDone = feed(m_next, left());
        if (nextDone) {
            m_current = std::move(m_next);
            m_next = Build{};
            m_labels.clear();
            emit spansReset();
            changed = false;
        }
    }
    if (changed)
        emit spansChanged();
    if (!currentDone || !nextDone)
        m_pump->start();
}

bool SpanModel::feed(Build &build, qint64 budgetNs)
{
    if (!build.builder)
        return true;
    if (build.fedTo + 1 < m_trace->firstSeq()) {
        // The window let go of events this build had not reached: start again from its first.
        const bool wasCurrent = &build == &m_current;
        startBuild(build, m_trace->firstSeq());
        if (wasCurrent) {
            m_labels.clear();
            emit spansReset();
        }
    }
    QElapsedTimer timer;
    timer.start();
    const qint64 last = m_trace->lastSeq();
    trace::SpanBuilder &builder = *build.builder;
    int applied = 0;
    while (build.fedTo < last) {
        const EventRecord event = m_trace->eventOfSeq(build.fedTo + 1);
        const QByteArray kind = event.kind.toUtf8();
        builder.apply(event.seq, event.timeUnixMs, std::string_view(kind.constData(), size_t(kind.size())),
                      std::string_view(event.payloadJson.constData(), size_t(event.payloadJson.size())));
        build.fedTo = event.seq;
        build.lastEventMs = std::max(build.lastEventMs, event.timeUnixMs);
        for (const size_t index : builder.changed()) {
            // A new span is always the builder's last, and listed as changed.
            while (build.liveIds.size() <= index) {
                build.liveIds.push_back(static_cast<int>(build.spans.size()));
                build.spans.emplace_back();
            }
            store(build, build.liveIds[index], toSpan(builder.spans()[index]));
        }
        ++applied;
        if (applied % kDropEvery == 0) {
            std::vector<int> live;
            for (const size_t index : builder.dropClosed())
                live.push_back(build.liveIds[index]);
            build.liveIds = std::move(live);
        }
        if (budgetNs >= 0 && applied % 64 == 0 && timer.nsecsElapsed() > budgetNs)
            break;
    }
    std::vector<int> live;
    for (const size_t index : builder.dropClosed())
        live.push_back(build.liveIds[index]);
    build.liveIds = std::move(live);
    build.open = static_cast<int>(build.liveIds.size());
    build.ended = builder.sessionEnded();
    return build.fedTo >= last;
}

void SpanModel::Block::add(const Span &span)
{
    minStart = std::min(minStart, span.startMs);
    maxEnd = span.open() ? std::numeric_limits<qint64>::max() : std::max(maxEnd, span.endMs);
    LaneExtent &lane = lanes[size_t(span.lane)];
    lane.startMs = std::min(lane.startMs, span.startMs);
    lane.endMs = std::max(lane.endMs, span.open() ? span.startMs : span.endMs);
    if (lane.kind == Kind::Count)
        lane.kind = span.kind;
    lane.error = lane.error || span.error;
}

void SpanModel::store(Build &build, int id, const Span &span)
{
    const Span &before = build.spans[static_cast<size_t>(id)];
    const bool wasOpen = before.startSeq != 0 && before.open();   // startSeq 0: a new one
    build.spans[static_cast<size_t>(id)] = span;
    const auto blockIndex = static_cast<size_t>(id / kBlock);
    if (build.blocks.size() <= blockIndex)
        build.blocks.resize(blockIndex + 1);
    Block &block = build.blocks[blockIndex];
    // A span that ended (or a queued call that started) may leave the block's figures too wide:
    // recomputed when next asked. Otherwise they only grow.
    if (wasOpen && !block.stale && block.maxEnd == std::numeric_limits<qint64>::max())
        block.stale = true;
    else if (!block.stale)
        block.add(span);
    build.minStart = std::min(build.minStart, span.startMs);
    if (!span.open())
        build.maxEnd = std::max(build.maxEnd, span.endMs);
}

const SpanModel::Block &SpanModel::blockAt(size_t index) const
{
    Block &block = m_current.blocks[index];
    if (block.stale) {
        block = Block{};
        const size_t end = std::min(m_current.spans.size(), (index + 1) * kBlock);
        for (size_t id = index * kBlock; id < end; ++id)
            block.add(m_current.spans[id]);
    }
    return block;
}

int SpanModel::spanAtSeq(qint64 seq) const
{
    const auto &spans = m_current.spans;
    // Spans are kept in the order of the events that made them, so by startSeq.
    auto it = std::upper_bound(spans.begin(), spans.end(), seq,
                               [](qint64 s, const Span &span) { return s < span.startSeq; });
    int best = -1;
    int bestRank = 3;
    qint64 bestLength = 0;
    for (int searched = 0; it != spans.begin() && searched < kSpanSearch; ++searched) {
        --it;
        const Span &s = *it;
        const qint64 last = lastSeqOf(s);
        int rank = 3;
        if (s.startSeq == seq)
            rank = 0;
        else if (!s.open() && s.endSeq == seq)
            rank = 1;
        else if (s.startSeq <= seq && seq <= last)
            rank = 2;
        if (rank == 3)
            continue;
        const qint64 length = last - s.startSeq;
        if (rank < bestRank || (rank == bestRank && rank == 2 && length < bestLength)) {
            best = static_cast<int>(it - spans.begin());
            bestRank = rank;
            bestLength = length;
        }
        if (bestRank == 0)
            break;
    }
    return best;
}

QString SpanModel::summaryOf(qint64 seq, qint64 key) const
{
    if (const auto found = m_labels.constFind(key); found != m_labels.constEnd())
        return *found;
    const EventRecord event = m_trace ? m_trace->eventOfSeq(seq) : EventRecord{};
    if (event.seq == 0)
        return {};   // the window let it go; not cached, it will not come back
    const QByteArray kind = event.kind.toUtf8();
    const QString text = QString::fromStdString(
        trace::summarize(std::string_view(kind.constData(), size_t(kind.size())),
                         std::string_view(event.payloadJson.constData(), size_t(event.payloadJson.size()))));
    if (m_labels.size() >= kMaxLabels)
        m_labels.clear();
    m_labels.insert(key, text);
    return text;
}

QString SpanModel::label(int id) const
{
    if (id < 0 || id >= count())
        return {};
    const QString text = summaryOf(span(id).startSeq, span(id).startSeq * 2);
    return text.isEmpty() ? kindTitle(span(id).kind) : text;
}

QString SpanModel::outcome(int id) const
{
    if (id < 0 || id >= count())
        return {};
    const Span &s = span(id);
    return s.open() || s.endSeq == s.startSeq ? QString() : summaryOf(s.endSeq, s.endSeq * 2 + 1);
}

QString SpanModel::kindName(Kind kind)
{
    return QString::fromLatin1(trace::spanKindName(static_cast<SpanKind>(kind)));
}

QString SpanModel::kindTitle(Kind kind)
{
    switch (kind) {
    case Kind::ModelCall: return tr("Model call");
    case Kind::ToolCall: return tr("Tool call");
    case Kind::SandboxClaim: return tr("Sandbox claim");
    case Kind::SandboxRestore: return tr("Workspace restore");
    case Kind::SandboxMove: return tr("Move to another sandbox");
    case Kind::SandboxWait: return tr("Waiting for a sandbox");
    case Kind::CheckpointWait: return tr("Waiting for the checkpoint store");
    case Kind::ApprovalWait: return tr("Waiting for a review");
    case Kind::BudgetWait: return tr("Waiting for a budget extension");
    case Kind::Paused: return tr("Paused");
    case Kind::DebugShell: return tr("Debug shell");
    case Kind::DebugCommand: return tr("Debug shell command");
    case Kind::EgressAllowed: return tr("Egress allowed");
    case Kind::EgressRefused: return tr("Egress refused");
    case Kind::SandboxFailure: return tr("Sandbox failure");
    case Kind::ModelError: return tr("Model error");
    case Kind::TierOverride: return tr("Tier override");
    case Kind::Budget: return tr("Budget");
    case Kind::Count: break;
    }
    return {};
}

SpanModel::Lane SpanModel::laneOf(Kind kind)
{
    switch (kind) {
    case Kind::ModelCall: return Lane::Model;
    case Kind::ToolCall: return Lane::Tools;
    case Kind::SandboxClaim:
    case Kind::SandboxRestore:
    case Kind::SandboxMove:
    case Kind::DebugShell:      // an operator's, in the sandbox: beside its claims, not the agent's tools
    case Kind::DebugCommand: return Lane::Sandbox;
    case Kind::SandboxWait:
    case Kind::CheckpointWait:
    case Kind::ApprovalWait:
    case Kind::BudgetWait:
    case Kind::Paused: return Lane::Waits;
    default: return Lane::Marks;
    }
}

QString SpanModel::laneName(Lane lane)
{
    switch (lane) {
    case Lane::Model: return tr("Model");
    case Lane::Tools: return tr("Tools");
    case Lane::Sandbox: return tr("Sandbox");
    case Lane::Waits: return tr("Waits");
    case Lane::Marks: return tr("Marks");
    case Lane::Count: break;
    }
    return {};
}

} // namespace paddock::console
