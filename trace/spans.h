#pragma once
// A session's events as spans and marks on one time axis, the way a tracing UI shows a request:
// model calls, tool calls, sandbox claims, restores and moves, waits (for a sandbox, the
// checkpoint store, an approval, a budget extension, a resume), debug shells; egress attempts,
// failures and tier overrides as marks. The console's span timeline and `paddockctl trace` draw
// these.
//
// Incremental: apply() takes the events one by one in seq order and costs O(1) each (a span
// waiting for its end is found by its key in a hash map), so the console can feed it a
// 1,000,000-event session and then the live tail. A span whose end has not arrived is open
// (endMs -1): it is running, and grows with the clock.
//
// Where the log has no start event, the start comes from the duration the end reports: a model
// response's latency_ms (the broker records no model.request today), a claim's claim_ms, a
// restore's restore_ms, a debug command's duration_ms. Tool calls of one model response run one
// after the other: a call starts when the one before it ends (until then it is queued).
//
// When the session ends, every open span ends with it, marked interrupted.
//
// Threads: one thread at a time (the caller's); no locks.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace paddock::trace {

enum class SpanKind {
    ModelCall,
    ToolCall,
    SandboxClaim,
    SandboxRestore,
    SandboxMove,
    SandboxWait,       // no pool could take the claim yet
    CheckpointWait,    // the checkpoint store did not answer
    ApprovalWait,      // a review item other than a budget extension
    BudgetWait,        // a budget_extension review
    Paused,
    DebugShell,        // an operator's shell, open to closed
    DebugCommand,      // one command in it
    // Marks: moments, not spans.
    EgressAllowed,
    EgressRefused,
    SandboxFailure,    // sandbox.failed, sandbox.lost
    ModelError,        // a model.error with no call open
    TierOverride,
    Budget,            // budget.warning, budget.exceeded
};

// "model", "tool", "claim", ...: the word `paddockctl trace` prints.
std::string_view spanKindName(SpanKind kind);

struct Span {
    SpanKind kind = SpanKind::ModelCall;
    int64_t startMs = 0;        // Unix ms
    int64_t endMs = -1;         // -1 while open
    int64_t startSeq = 0;       // the event that opened it (for a derived start: the event it came from)
    int64_t endSeq = 0;         // the event that ended it; 0 while open
    int step = 0;               // the model call it follows: 1 for the first one and what it led to
    bool mark = false;          // a moment: endMs == startMs
    bool error = false;         // it failed
    bool queued = false;        // a tool call waiting for the call before it to end
    bool interrupted = false;   // the session ended before its end arrived
    std::string key;            // what pairs its start and end: call_id, review_id, shell_id
    std::string label;          // one line: what it is (the start event's summary)
    std::string outcome;        // one line: how it ended (the end event's summary); empty while open

    bool open() const { return endMs < 0; }
    int64_t durationMs(int64_t nowMs) const { return (open() ? nowMs : endMs) - startMs; }
};

class SpanBuilder {
public:
    // payload: the event's JSON object (any other value counts as {}).
    void apply(int64_t seq, int64_t timeMs, std::string_view kind, const nlohmann::json &payload);
    // The same from the payload's text, parsed only for the kinds that make or end spans, without
    // the bulky fields (output, file contents): what the console and paddockctl call.
    void apply(int64_t seq, int64_t timeMs, std::string_view kind, std::string_view payloadJson);

    const std::vector<Span> &spans() const { return m_spans; }
    // Indexes of the spans the last apply() added or changed (ended, started a queued call).
    std::span<const size_t> changed() const { return m_changed; }
    // The first event's time: the axis's zero. 0 before any.
    int64_t originMs() const { return m_originMs; }
    int64_t lastTimeMs() const { return m_lastTimeMs; }
    int currentStep() const { return m_step; }
    bool sessionEnded() const { return m_ended; }
    // Whether the kind can make, end or change a span (the rest apply() skips without parsing).
    static bool matters(std::string_view kind);

    // Lets go of every span that has ended, keeping the open ones in order (their indexes change;
    // changed() is empty after it). For a caller that copies what it draws after each apply(): the
    // console's SpanModel keeps 40 bytes a span instead of the labels of a 1,000,000-event session.
    // Returns, for each span kept, its index before.
    std::vector<size_t> dropClosed();

private:
    static constexpr size_t kNone = static_cast<size_t>(-1);

    size_t open(SpanKind kind, int64_t seq, int64_t startMs, std::string label, std::string key = {});
    size_t closed(SpanKind kind, int64_t seq, int64_t startMs, int64_t endMs, std::string label);
    size_t mark(SpanKind kind, int64_t seq, int64_t timeMs, std::string label, bool error = false);
    void close(size_t index, int64_t seq, int64_t timeMs, std::string outcome, bool error = false);
    void closeSlot(size_t &slot, int64_t seq, int64_t timeMs, std::string outcome);
    void closeEverything(int64_t seq, int64_t timeMs, const std::string &outcome);

    void onModel(int64_t seq, int64_t timeMs, std::string_view kind, const nlohmann::json &payload);
    void onToolCall(int64_t seq, int64_t timeMs, const nlohmann::json &payload);
    void onToolResult(int64_t seq, int64_t timeMs, nlohmann::json payload);
    void onSandbox(int64_t seq, int64_t timeMs, std::string_view kind, const nlohmann::json &payload);
    void onState(int64_t seq, int64_t timeMs, const nlohmann::json &payload);
    void onReview(int64_t seq, int64_t timeMs, std::string_view kind, const nlohmann::json &payload);
    void onDebugShell(int64_t seq, int64_t timeMs, std::string_view kind, const nlohmann::json &payload);

    std::vector<Span> m_spans;
    std::vector<size_t> m_changed;
    int64_t m_originMs = 0;
    int64_t m_lastTimeMs = 0;
    int m_step = 0;
    bool m_ended = false;

    size_t m_model = kNone;            // the model call in flight (after a model.request)
    size_t m_runningTool = kNone;
    std::deque<size_t> m_queuedTools;  // calls of the same response waiting their turn
    std::unordered_map<std::string, size_t> m_tools;     // call_id -> its open span
    std::unordered_map<std::string, size_t> m_reviews;   // review_id -> its open wait
    std::unordered_map<std::string, size_t> m_shells;    // shell_id -> its open debug shell
    size_t m_sandboxWait = kNone;
    size_t m_checkpointWait = kNone;
    size_t m_paused = kNone;
};

} // namespace paddock::trace
