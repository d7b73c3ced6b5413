#pragma once
// Model adapters: given a session's goal and its history of tool calls and results, produce the next
// turn (text and tool calls). Adapters hold no per-session state: everything they need is in the
// ModelContext the step engine rebuilds from the log, so any worker can take any step.
//
// Threads: next() blocks (network) and may be called from several step workers at once; adapters
// must be thread-safe. nextAsync() returns at once and calls `done` later, exactly once: the step
// engine uses it so that a session waiting on its model holds no thread (adapters that talk to the
// network override it with an event loop; the default calls next() before returning).

#include "common/result.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace paddock::llm {

// The tools the engine offers to models. Arguments, as JSON objects:
//   run_command {"command": "<shell line>", "timeout_ms"?: int}
//   write_file  {"path": "...", "content": "..."}
//   read_file   {"path": "..."}
//   finish      {"status": "succeeded"|"failed", "summary": "..."}
//   propose_change {"kind"?: "bulk_change"|"egress_exception"|"secret_access", "targets": ["..."],
//                   "change": "<unified diff, or a JSON array of {key, value} records>",
//                   "change_format"?: "diff"|"records"|"text", "justification": "..."}
//               (docs/playbooks.md; beyond policy it waits for a review, docs/governance.md)
namespace tool {
inline constexpr const char *RunCommand = "run_command";
inline constexpr const char *WriteFile = "write_file";
inline constexpr const char *ReadFile = "read_file";
inline constexpr const char *Finish = "finish";
inline constexpr const char *ProposeChange = "propose_change";
inline constexpr const char *ReadRecords = "read_records";                // the agent's durable records
inline constexpr const char *RequestEnvironment = "request_environment";  // ask for another tier
} // namespace tool

struct ToolCall {
    std::string id;                 // unique within the session
    std::string name;
    nlohmann::json arguments;       // an object
};

struct Usage {
    int64_t inputTokens = 0;
    int64_t outputTokens = 0;
    int64_t cachedTokens = 0;
};

struct ModelTurn {
    std::string text;               // the model's prose, if any
    std::vector<ToolCall> toolCalls;
    Usage usage;
    std::string model;              // the model that answered (e.g. "gpt-4o-mini", "scripted")
    double latencyMs = 0;
    int attempts = 1;               // requests made, retries included
};

// One earlier turn and the results of its tool calls, in the same order as turn.toolCalls.
// A result is the tool.result payload as recorded: for run_command
// {"exit_code", "stdout", "stderr", "duration_ms", "timed_out"}, for read_file {"content"}, and
// {"error": "..."} when the tool failed.
struct Exchange {
    ModelTurn turn;
    std::vector<nlohmann::json> results;
};

struct ModelContext {
    std::string sessionId;
    std::string goal;
    std::string playbookToml;       // the scripted model's playbook (resolved at submit time)
    std::vector<Exchange> history;
    std::string idempotencyKey;     // derived from (session, seq) of the response to be recorded
};

class ModelAdapter {
public:
    virtual ~ModelAdapter() = default;
    virtual std::string name() const = 0;
    // Errors: Unavailable after retries are exhausted (network, 429, 5xx), InvalidArgument for a
    // malformed response (the message quotes what was wrong), FailedPrecondition for missing
    // configuration (an API key variable that is not set).
    virtual Result<ModelTurn> next(const ModelContext &context) = 0;

    // Called exactly once with what next() would have returned, on a thread of the adapter's (or,
    // by default, on the caller's before nextAsync returns). `done` must not block: it hands the
    // result on to whoever records it.
    using TurnDone = std::function<void(Result<ModelTurn>)>;
    virtual void nextAsync(ModelContext context, TurnDone done) { done(next(context)); }

    // Ends every request in progress with Cancelled (the broker is stopping); their `done` still
    // runs. Nothing is recorded for a cancelled request: the next broker asks again with the same
    // idempotency key.
    virtual void cancelInFlight() {}
};

} // namespace paddock::llm
