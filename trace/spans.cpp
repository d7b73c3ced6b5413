#include "trace/spans.h"

#include "trace/event_summary.h"
#include "trace/summary_text.h"

#include <algorithm>
#include <array>

namespace paddock::trace {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 18> kKindNames{
    "model",      "tool",       "claim",  "restore", "move",   "wait-sandbox", "wait-store", "wait-review", "wait-budget",
    "paused",     "shell",      "shell$", "egress",  "egress!", "sandbox!",    "model!",     "tier",        "budget",
};

// Fields a span never shows, dropped while parsing: a command's output, a file's content, a
// review's change, a submitted playbook. Parsing still reads them, but nothing is kept.
bool bulky(std::string_view key)
{
    return key == "stdout" || key == "stderr" || key == "content" || key == "change" || key == "playbook_toml"
        || key == "records";
}

// Keys (call_id, review_id, shell_id) are compared as shown: safe, and cut far past any real one.
constexpr size_t kKeyChars = 200;

const json &objectOr(const json &payload)
{
    static const json empty = json::object();
    return payload.is_object() ? payload : empty;
}

} // namespace

std::string_view spanKindName(SpanKind kind) { return kKindNames.at(static_cast<size_t>(kind)); }

bool SpanBuilder::matters(std::string_view kind)
{
    return kind.starts_with("model.") || kind == "tool.call" || kind == "tool.result" || kind.starts_with("sandbox.")
        || kind == "checkpoint.waiting" || kind == "checkpoint" || kind == "state.changed"
        || kind == "approval.requested" || kind == "approval.decided" || kind.starts_with("egress.")
        || kind.starts_with("debug_shell.") || kind.starts_with("budget.") || kind == "tier.override";
}

std::vector<size_t> SpanBuilder::dropClosed()
{
    // Only open spans are referenced by the slots and maps (a span leaves them as it ends), so they
    // are all there is to re-index.
    std::vector<size_t> kept;
    std::vector<size_t> renumbered(m_spans.size(), kNone);
    for (size_t i = 0; i < m_spans.size(); ++i) {
        if (!m_spans[i].open())
            continue;
        renumbered[i] = kept.size();
        if (kept.size() != i)
            m_spans[kept.size()] = std::move(m_spans[i]);
        kept.push_back(i);
    }
    m_spans.resize(kept.size());
    m_changed.clear();
    const auto remap = [&](size_t index) { return index == kNone || index >= renumbered.size() ? kNone : renumbered[index]; };
    for (size_t *slot : {&m_model, &m_runningTool, &m_sandboxWait, &m_checkpointWait, &m_paused})
        *slot = remap(*slot);
    std::erase_if(m_queuedTools, [&](size_t &index) { return (index = remap(index)) == kNone; });
    for (auto *map : {&m_tools, &m_reviews, &m_shells}) {
        for (auto entry = map->begin(); entry != map->end();) {
            entry->second = remap(entry->second);
            entry = entry->second == kNone ? map->erase(entry) : std::next(entry);
        }
    }
    return kept;
}

void SpanBuilder::apply(int64_t seq, int64_t timeMs, std::string_view kind, std::string_view payloadJson)
{
    if (!matters(kind)) {
        apply(seq, timeMs, kind, json::object());
        return;
    }
    const json::parser_callback_t dropBulky = [](int depth, json::parse_event_t event, json &parsed) {
        return !(depth == 1 && event == json::parse_event_t::key && parsed.is_string() && bulky(parsed.get_ref<const std::string &>()));
    };
    apply(seq, timeMs, kind, json::parse(payloadJson, dropBulky, false));
}

void SpanBuilder::apply(int64_t seq, int64_t timeMs, std::string_view kind, const json &payloadIn)
{
    m_changed.clear();
    if (m_originMs == 0)
        m_originMs = timeMs;
    m_lastTimeMs = std::max(m_lastTimeMs, timeMs);
    const json &payload = objectOr(payloadIn);

    if (kind.starts_with("model."))
        onModel(seq, timeMs, kind, payload);
    else if (kind == "tool.call")
        onToolCall(seq, timeMs, payload);
    else if (kind == "tool.result")
        onToolResult(seq, timeMs, payload);
    else if (kind.starts_with("sandbox.") || kind == "checkpoint.waiting" || kind == "checkpoint")
        onSandbox(seq, timeMs, kind, payload);
    else if (kind == "state.changed")
        onState(seq, timeMs, payload);
    else if (kind.starts_with("approval.") || kind.starts_with("budget.") || kind == "tier.override")
        onReview(seq, timeMs, kind, payload);
    else if (kind.starts_with("egress.")) {
        // The attempt's own time when the pool reported it; the event comes with the command's result.
        const int64_t at = text::num(payload, "time_unix_ms", timeMs);
        mark(kind == "egress.allowed" ? SpanKind::EgressAllowed : SpanKind::EgressRefused, seq, at, summarize(kind, payload));
    } else if (kind.starts_with("debug_shell."))
        onDebugShell(seq, timeMs, kind, payload);
}

size_t SpanBuilder::open(SpanKind kind, int64_t seq, int64_t startMs, std::string label, std::string key)
{
    Span span;
    span.kind = kind;
    span.startMs = startMs;
    span.startSeq = seq;
    span.step = m_step;
    span.key = std::move(key);
    span.label = std::move(label);
    m_spans.push_back(std::move(span));
    m_changed.push_back(m_spans.size() - 1);
    return m_spans.size() - 1;
}

size_t SpanBuilder::closed(SpanKind kind, int64_t seq, int64_t startMs, int64_t endMs, std::string label)
{
    const size_t index = open(kind, seq, std::min(startMs, endMs), std::move(label));
    m_spans[index].endMs = endMs;
    m_spans[index].endSeq = seq;
    return index;
}

size_t SpanBuilder::mark(SpanKind kind, int64_t seq, int64_t timeMs, std::string label, bool error)
{
    const size_t index = closed(kind, seq, timeMs, timeMs, std::move(label));
    m_spans[index].mark = true;
    m_spans[index].error = error;
    return index;
}

void SpanBuilder::close(size_t index, int64_t seq, int64_t timeMs, std::string outcome, bool error)
{
    Span &span = m_spans[index];
    span.endMs = std::max(timeMs, span.startMs);
    span.endSeq = seq;
    span.outcome = std::move(outcome);
    span.error = span.error || error;
    span.queued = false;
    if (m_changed.empty() || m_changed.back() != index)
        m_changed.push_back(index);
}

void SpanBuilder::closeSlot(size_t &slot, int64_t seq, int64_t timeMs, std::string outcome)
{
    if (slot == kNone)
        return;
    close(slot, seq, timeMs, std::move(outcome));
    slot = kNone;
}

void SpanBuilder::closeEverything(int64_t seq, int64_t timeMs, const std::string &outcome)
{
    // Bounded by what is open at once (a few calls, waits and shells), not by the log.
    auto interrupt = [&](size_t index) {
        close(index, seq, timeMs, outcome);
        m_spans[index].interrupted = true;
    };
    for (size_t *slot : {&m_model, &m_runningTool, &m_sandboxWait, &m_checkpointWait, &m_paused}) {
        if (*slot != kNone && m_spans[*slot].open())
            interrupt(*slot);
        *slot = kNone;
    }
    for (auto *map : {&m_tools, &m_reviews, &m_shells}) {
        for (const auto &[key, index] : *map) {
            if (m_spans[index].open())
                interrupt(index);
        }
        map->clear();
    }
    m_queuedTools.clear();
}

void SpanBuilder::onModel(int64_t seq, int64_t timeMs, std::string_view kind, const json &payload)
{
    if (kind == "model.request") {
        if (m_model == kNone) {
            ++m_step;
            m_model = open(SpanKind::ModelCall, seq, timeMs, summarize(kind, payload));
        }
        return;
    }
    const EventLine line = describeEvent(kind, payload);
    const bool failed = kind == "model.error";
    if (m_model != kNone) {
        m_spans[m_model].label = line.summary;
        close(m_model, seq, timeMs, failed ? line.summary : std::string(), failed);
        m_model = kNone;
        return;
    }
    if (failed) {
        mark(SpanKind::ModelError, seq, timeMs, line.summary, true);
        return;
    }
    ++m_step;
    closed(SpanKind::ModelCall, seq, timeMs - std::max<int64_t>(line.latencyMs, 0), timeMs, line.summary);
}

void SpanBuilder::onToolCall(int64_t seq, int64_t timeMs, const json &payload)
{
    const std::string callId = text::str(payload, "call_id", kKeyChars);
    const size_t index = open(SpanKind::ToolCall, seq, timeMs, summarize("tool.call", payload), callId);
    if (!callId.empty())
        m_tools[callId] = index;
    if (m_runningTool == kNone) {
        m_runningTool = index;
    } else {
        m_spans[index].queued = true;
        m_queuedTools.push_back(index);
    }
}

void SpanBuilder::onToolResult(int64_t seq, int64_t timeMs, json payload)
{
    // The outcome without the command line, which the call's label already shows.
    payload.erase("command");
    const EventLine line = describeEvent("tool.result", payload);
    const std::string callId = text::str(payload, "call_id", kKeyChars);
    const auto found = callId.empty() ? m_tools.end() : m_tools.find(callId);
    if (found == m_tools.end()) {
        // A result whose call is not in what was applied (a window that starts after it).
        const size_t index = closed(SpanKind::ToolCall, seq, timeMs - std::max<int64_t>(line.latencyMs, 0), timeMs,
                                    text::str(payload, "name"));
        m_spans[index].outcome = line.summary;
        m_spans[index].error = line.isError;
        m_spans[index].key = callId;
        return;
    }
    const size_t index = found->second;
    m_tools.erase(found);
    close(index, seq, timeMs, line.summary, line.isError);
    if (m_runningTool == index) {
        m_runningTool = kNone;
        if (!m_queuedTools.empty()) {
            m_runningTool = m_queuedTools.front();
            m_queuedTools.pop_front();
            Span &next = m_spans[m_runningTool];
            next.queued = false;
            next.startMs = std::max(next.startMs, timeMs);
            m_changed.push_back(m_runningTool);
        }
    } else if (const auto queued = std::ranges::find(m_queuedTools, index); queued != m_queuedTools.end()) {
        m_queuedTools.erase(queued);   // ended before its turn: out of order, but ended
    }
}

void SpanBuilder::onSandbox(int64_t seq, int64_t timeMs, std::string_view kind, const json &payload)
{
    const EventLine line = describeEvent(kind, payload);
    // Whatever gives the session a sandbox or a checkpoint ends a wait for one.
    if (kind == "sandbox.claimed" || kind == "sandbox.restored" || kind == "sandbox.moved")
        closeSlot(m_sandboxWait, seq, timeMs, line.summary);
    if (kind != "sandbox.waiting" && kind != "checkpoint.waiting" && kind != "sandbox.failed" && kind != "sandbox.lost")
        closeSlot(m_checkpointWait, seq, timeMs, line.summary);

    const auto derived = [&](SpanKind spanKind, std::string_view key) {
        if (text::has(payload, key))
            closed(spanKind, seq, timeMs - text::num(payload, key), timeMs, line.summary);
        else
            mark(spanKind, seq, timeMs, line.summary);
    };
    if (kind == "sandbox.claimed")
        derived(SpanKind::SandboxClaim, "claim_ms");
    else if (kind == "sandbox.restored")
        derived(SpanKind::SandboxRestore, "restore_ms");
    else if (kind == "sandbox.moved")
        derived(SpanKind::SandboxMove, "restore_ms");
    else if (kind == "sandbox.waiting" && m_sandboxWait == kNone)
        m_sandboxWait = open(SpanKind::SandboxWait, seq, timeMs, line.summary);
    else if (kind == "checkpoint.waiting" && m_checkpointWait == kNone)
        m_checkpointWait = open(SpanKind::CheckpointWait, seq, timeMs, line.summary);
    else if (kind == "sandbox.failed" || kind == "sandbox.lost")
        mark(SpanKind::SandboxFailure, seq, timeMs, line.summary, true);
}

void SpanBuilder::onState(int64_t seq, int64_t timeMs, const json &payload)
{
    const std::string status = text::str(payload, "status");
    if (status == "paused") {
        if (m_paused == kNone)
            m_paused = open(SpanKind::Paused, seq, timeMs, summarize("state.changed", payload));
    } else if (status == "succeeded" || status == "failed" || status == "cancelled") {
        m_ended = true;
        closeEverything(seq, timeMs, "session " + summarize("state.changed", payload));
    } else {
        closeSlot(m_paused, seq, timeMs, summarize("state.changed", payload));
    }
}

void SpanBuilder::onReview(int64_t seq, int64_t timeMs, std::string_view kind, const json &payload)
{
    const std::string summary = summarize(kind, payload);
    if (kind == "approval.requested") {
        const SpanKind waitKind = text::str(payload, "kind") == "budget_extension" ? SpanKind::BudgetWait : SpanKind::ApprovalWait;
        const std::string reviewId = text::str(payload, "review_id", kKeyChars);
        const size_t index = open(waitKind, seq, timeMs, summary, reviewId);
        if (!reviewId.empty())
            m_reviews[reviewId] = index;
    } else if (kind == "approval.decided") {
        if (const auto found = m_reviews.find(text::str(payload, "review_id", kKeyChars)); found != m_reviews.end()) {
            close(found->second, seq, timeMs, summary);
            m_reviews.erase(found);
        }
    } else if (kind == "tier.override") {
        mark(SpanKind::TierOverride, seq, timeMs, summary);
    } else if (kind.starts_with("budget.")) {
        mark(SpanKind::Budget, seq, timeMs, summary, kind == "budget.exceeded");
    }
}

void SpanBuilder::onDebugShell(int64_t seq, int64_t timeMs, std::string_view kind, const json &payload)
{
    const EventLine line = describeEvent(kind, payload);
    const std::string shellId = text::str(payload, "shell_id", kKeyChars);
    if (kind == "debug_shell.opened") {
        m_shells[shellId] = open(SpanKind::DebugShell, seq, timeMs, line.summary, shellId);
    } else if (kind == "debug_shell.closed") {
        if (const auto found = m_shells.find(shellId); found != m_shells.end()) {
            close(found->second, seq, timeMs, line.summary);
            m_shells.erase(found);
        }
    } else if (kind == "debug_shell.exec") {
        const size_t index = closed(SpanKind::DebugCommand, seq, timeMs - std::max<int64_t>(line.latencyMs, 0), timeMs, line.summary);
        m_spans[index].error = line.isError;
    }
}

} // namespace paddock::trace
