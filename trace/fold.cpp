#include "trace/fold.h"

#include "trace/safe_text.h"
#include "trace/summary_text.h"

namespace paddock::trace {

FoldRole foldRole(std::string_view kind)
{
    if (kind == "cost" || kind == "checkpoint" || kind == "tool.output")
        return FoldRole::Folds;
    if (kind == "model.delta")
        return FoldRole::Delta;
    if (kind == "model.response" || kind == "model.error")
        return FoldRole::CallEnd;
    return FoldRole::Row;
}

bool foldsIntoStep(std::string_view kind)
{
    const FoldRole role = foldRole(kind);
    return role == FoldRole::Folds || role == FoldRole::Delta;
}

FoldSide foldSide(std::optional<int64_t> previousRowTimeMs, int64_t timeMs, std::optional<int64_t> nextRowTimeMs)
{
    if (!previousRowTimeMs)
        return FoldSide::Next;
    if (*previousRowTimeMs == timeMs || !nextRowTimeMs || *nextRowTimeMs != timeMs)
        return FoldSide::Previous;
    return FoldSide::Next;
}

std::vector<size_t> assignRows(std::span<const FoldEvent> events)
{
    constexpr size_t kNone = static_cast<size_t>(-1);
    const size_t n = events.size();
    // The nearest row before and after each event: two passes, O(n).
    std::vector<size_t> before(n, kNone), after(n, kNone);
    for (size_t i = 0, last = kNone; i < n; ++i) {
        before[i] = last;
        if (!foldsIntoStep(events[i].kind))
            last = i;
    }
    for (size_t i = n, next = kNone; i-- > 0;) {
        after[i] = next;
        if (!foldsIntoStep(events[i].kind))
            next = i;
    }
    // A streamed answer's call end, once it is there: one backward pass.
    std::vector<size_t> callEnd(n, kNone);
    CallEndScan scan;
    for (size_t i = n; i-- > 0;) {
        const FoldRole role = foldRole(events[i].kind);
        if (role == FoldRole::Delta)
            callEnd[i] = scan.endAfter().value_or(kNone);
        scan.pass(i, role);
    }
    std::vector<size_t> rows(n);
    for (size_t i = 0; i < n; ++i) {
        if (callEnd[i] != kNone) {
            rows[i] = callEnd[i];
            continue;
        }
        if (!foldsIntoStep(events[i].kind) || (before[i] == kNone && after[i] == kNone)) {
            rows[i] = i;
            continue;
        }
        const auto timeOf = [&](size_t at) { return at == kNone ? std::nullopt : std::optional(events[at].timeMs); };
        rows[i] = foldSide(timeOf(before[i]), events[i].timeMs, timeOf(after[i])) == FoldSide::Previous ? before[i] : after[i];
    }
    return rows;
}

std::string foldNote(std::span<const FoldedEvent> folded)
{
    std::vector<std::string> parts;
    size_t costPart = static_cast<size_t>(-1);
    int64_t costMicros = 0;
    // A running command's output: how much so far, and its last line (the one a person watches).
    size_t outputPart = static_cast<size_t>(-1);
    int64_t outputBytes = 0;
    bool outputCut = false;
    std::string lastLine;
    // A streamed model answer: its text so far (the latest attempt's) and its last line.
    size_t answerPart = static_cast<size_t>(-1);
    int64_t answerCall = -1;   // after_seq: a call re-run after a broker's crash starts again too
    int64_t answerAttempt = 0;
    std::string answer;
    for (const auto &event : folded) {
        if (event.kind == "model.delta") {
            if (answerPart == static_cast<size_t>(-1)) {
                answerPart = parts.size();
                parts.emplace_back();
            }
            if (!event.payload)
                continue;
            const int64_t call = text::num(*event.payload, "after_seq");
            if (const int64_t attempt = text::num(*event.payload, "attempt", 1); attempt != answerAttempt || call != answerCall) {
                answerAttempt = attempt;   // a retried stream starts again
                answerCall = call;
                answer.clear();
            }
            if (event.payload->contains("text") && (*event.payload)["text"].is_string())
                answer += (*event.payload)["text"].get<std::string>();
            continue;
        }
        if (event.kind == "tool.output") {
            if (outputPart == static_cast<size_t>(-1)) {
                outputPart = parts.size();
                parts.emplace_back();
            }
            if (!event.payload)
                continue;
            const std::string text = event.payload->contains("text") && (*event.payload)["text"].is_string()
                ? (*event.payload)["text"].get<std::string>() : std::string();
            outputBytes += static_cast<int64_t>(text.size());
            outputCut = outputCut || text::flag(*event.payload, "cut");
            std::string_view rest(text);
            while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r'))
                rest.remove_suffix(1);
            if (!rest.empty())
                lastLine = std::string(rest.substr(rest.rfind('\n') == std::string_view::npos ? 0 : rest.rfind('\n') + 1));
        } else if (event.kind == "cost") {
            if (costPart == static_cast<size_t>(-1)) {
                costPart = parts.size();
                parts.emplace_back();
            }
            costMicros += event.costMicros;
        } else if (event.kind == "checkpoint") {
            std::string note = "checkpoint";
            if (event.payload) {
                note += " " + std::to_string(text::num(*event.payload, "changed")) + " changed";
                if (const int64_t removed = text::num(*event.payload, "removed"); removed > 0)
                    note += ", " + std::to_string(removed) + " removed";
            }
            parts.push_back(std::move(note));
        } else {
            parts.emplace_back(event.kind);
        }
    }
    if (parts.empty())
        return {};
    if (costPart != static_cast<size_t>(-1))
        parts[costPart] = "cost " + text::dollars(costMicros);
    if (answerPart != static_cast<size_t>(-1)) {
        std::string_view rest(answer);
        while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r'))
            rest.remove_suffix(1);
        const size_t newline = rest.rfind('\n');
        std::string note = "model text " + text::bytes(static_cast<int64_t>(answer.size()));
        if (!rest.empty())
            note += ": " + safeLine(std::string(rest.substr(newline == std::string_view::npos ? 0 : newline + 1)), 80);
        parts[answerPart] = std::move(note);
    }
    if (outputPart != static_cast<size_t>(-1)) {
        std::string note = "output " + text::bytes(outputBytes) + (outputCut ? " (cut)" : "");
        if (!lastLine.empty())
            note += ": " + safeLine(lastLine, 80);
        parts[outputPart] = std::move(note);
    }
    return "+ " + text::join(parts);
}

} // namespace paddock::trace
