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

// Whether an event that folds belongs to the next row whatever the times: a streamed answer's
// model.delta events belong to their model.response once it is there.
bool belongsToNextRow(std::string_view kind, std::string_view nextRowKind);

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
