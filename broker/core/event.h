#pragma once
// Value types of the session log. Thread-agnostic plain data; copy freely.

#include <cstdint>
#include <string>
#include <vector>

namespace paddock::core {

// Event kinds. docs/events.md describes each payload.
namespace kind {
inline constexpr const char *SessionCreated = "session.created";
inline constexpr const char *StateChanged = "state.changed";
inline constexpr const char *SandboxClaimed = "sandbox.claimed";
inline constexpr const char *SandboxReleased = "sandbox.released";
inline constexpr const char *SandboxFailed = "sandbox.failed";
inline constexpr const char *SandboxLost = "sandbox.lost";        // its pool was lost; the sandbox with it
inline constexpr const char *SandboxMoved = "sandbox.moved";      // claimed on another pool after a loss
inline constexpr const char *SandboxWaiting = "sandbox.waiting";  // no pool can take the claim now
inline constexpr const char *CheckpointWaiting = "checkpoint.waiting";  // the checkpoint store does not answer
inline constexpr const char *SandboxRestored = "sandbox.restored"; // a new sandbox got the workspace given back idle
inline constexpr const char *TierOverride = "tier.override";       // a human moved the session to another tier
inline constexpr const char *ModelRequest = "model.request";
inline constexpr const char *ModelResponse = "model.response";
inline constexpr const char *ModelError = "model.error";
inline constexpr const char *ToolCall = "tool.call";
inline constexpr const char *ToolResult = "tool.result";
inline constexpr const char *ToolOutput = "tool.output";   // a running command's output, as printed
inline constexpr const char *ModelDelta = "model.delta";   // a model's answer as it streams
inline constexpr const char *Cost = "cost";
inline constexpr const char *Checkpoint = "checkpoint";
inline constexpr const char *EgressAllowed = "egress.allowed";
inline constexpr const char *EgressRefused = "egress.refused";
// Cost, budgets and the review queue (docs/governance.md).
inline constexpr const char *BudgetWarning = "budget.warning";      // 80% of a budget spent (once per budget)
inline constexpr const char *BudgetExceeded = "budget.exceeded";    // 100%: a budget_extension review opens
inline constexpr const char *ApprovalRequested = "approval.requested";
inline constexpr const char *ApprovalFetched = "approval.fetched";  // a principal fetched a review item's full change
inline constexpr const char *ApprovalDecided = "approval.decided";
inline constexpr const char *EnvDecision = "env.decision";         // a tier was chosen (docs/governance.md)
inline constexpr const char *EnvOutcome = "env.outcome";           // how that choice turned out, at its release
} // namespace kind

// An event as stored: seq is dense per session, starting at 1.
struct Event {
    std::string sessionId;
    int64_t seq = 0;
    int64_t timeUnixMs = 0;
    std::string kind;
    std::string payload;     // a JSON object
    int64_t costMicros = 0;  // millionths of a US dollar
};

// An event to append; the store assigns seq and time.
struct NewEvent {
    std::string kind;
    std::string payload = "{}";
    int64_t costMicros = 0;
};

} // namespace paddock::core
