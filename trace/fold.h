#pragma once
// Folding: the bookkeeping a step appends (its cost events, its workspace checkpoint) is shown in
// the row of the event it belongs to, not as rows of its own, so a trace reads as the calls a
// person cares about: "exit 0 in 68 ms: make + cost $0.0008, checkpoint 3 changed".
//
// Which row: the step's. The broker appends a step's events together (one append, one time):
// a model response with its model cost after it, a command's result with its checkpoint after it,
// and the sandbox time and storage billed since the last bill first in the append (broker/engine/
// step_engine_billing.cpp). So a folded event goes to the row of its own time: the row before it
// when that one has its time, else the row after it when that one has it, else the row before.
// Only the rows next to it matter, so the answer is O(1) per event and a window of the log (the
// console's, paged in from the top) folds the same as the whole log, except at its edges: before
// its first row an event goes to the row after it, and after its last row (the live tail, whose
// step's row may not have arrived yet) to the row before it.
//
// A model's streamed answer (model.delta) is the exception: it belongs to the end of its model call
// (the model.response, or the model.error of a call that failed), which the broker appends with
// the rest of its step after the last delta, sometimes behind a row or two (the first step's
// state.changed and sandbox.claimed, claimed while the model answered). Until the end is there,
// the answer folds by time like the rest: into the row above, which grows while it streams.
//
// Known limit: two appends in the same millisecond look like one; a bill at the head of the second
// then folds into the last row of the first. It still shows, one row up.
//
// Threads: pure functions; call from anywhere.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::trace {

// cost, checkpoint, tool.output (a running command's output, into its call's row) and model.delta
// (a model's answer as it streams): what folds into its step's row when the trace folds.
bool foldsIntoStep(std::string_view kind);

// How an event's kind takes part in folding.
enum class FoldRole : uint8_t {
    Row,       // a row of its own
    Folds,     // cost, checkpoint, tool.output: into the row of its time
    Delta,     // model.delta: into its model call's end once there, else as Folds
    CallEnd,   // model.response, model.error: a row of its own that ends a model call
};
FoldRole foldRole(std::string_view kind);

// Events other than deltas looked past, after a model.delta, for its call's end: what a step
// appends before its response is a handful.
inline constexpr size_t kCallEndLookahead = 16;

// Finds each model.delta's call end walking the events backward, one step per event: before the
// walk, start() with what follows the walked range (the first call end and the other events before
// it, if the caller knows them); then, for each event from the last to the first, endAfter() is
// the call end after it and pass() steps over it.
class CallEndScan {
public:
    void start(std::optional<size_t> end, size_t others)
    {
        m_end = end;
        m_others = others;
    }
    std::optional<size_t> endAfter() const { return m_others <= kCallEndLookahead ? m_end : std::nullopt; }
    void pass(size_t index, FoldRole role)
    {
        if (role == FoldRole::CallEnd) {
            m_end = index;
            m_others = 0;
        } else if (role != FoldRole::Delta) {
            ++m_others;
        }
    }

private:
    std::optional<size_t> m_end;
    size_t m_others = 0;
};

enum class FoldSide { Previous, Next };

// Where an event that folds goes, given the times of the nearest rows before and after it
// (nullopt: there is none, or it has not arrived yet). With neither, the caller keeps it as a row.
FoldSide foldSide(std::optional<int64_t> previousRowTimeMs, int64_t timeMs, std::optional<int64_t> nextRowTimeMs);

struct FoldEvent {
    std::string_view kind;
    int64_t timeMs = 0;
};

// For each event of a sequence in seq order, the index of the event whose row shows it: its own
// index for a row of its own (every kind that does not fold, and a folding one with no row on
// either side).
std::vector<size_t> assignRows(std::span<const FoldEvent> events);

// An event folded into a row, for the row's note.
struct FoldedEvent {
    std::string_view kind;
    const nlohmann::json *payload = nullptr;   // may be null: the note then leaves out its figures
    int64_t costMicros = 0;
};

// What a row says of the events folded into it, in their order: "+ cost $0.0008, checkpoint 3
// changed"; several cost events add up to one "cost", and output chunks to one "output 1.2 KiB:
// <its last line>". Empty when there are none.
std::string foldNote(std::span<const FoldedEvent> folded);

} // namespace paddock::trace
