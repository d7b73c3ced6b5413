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
#include <optional>
#include <string>
#include <vector>

namespace paddock::llm {

// The names of the tools the engine carries out. Their arguments, descriptions and schemas are
// defined once, in tool_catalogue.h; what each tool does is in docs/playbooks.md ("Steps").
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

// Token counts of one response. inputTokens counts every input token, the cached ones and the ones
// written to the cache included (as OpenAI's prompt_tokens does; an Anthropic response's three
// input counts are added up); they are priced apart (broker/cost/prices.h).
struct Usage {
    int64_t inputTokens = 0;
    int64_t outputTokens = 0;
    int64_t cachedTokens = 0;       // read from the provider's prompt cache
    int64_t cacheWriteTokens = 0;   // written to the provider's prompt cache (Anthropic bills them apart)
};

struct ModelTurn {
    std::string text;               // the model's prose, if any
    std::vector<ToolCall> toolCalls;
    Usage usage;
    std::string model;              // the model that answered (e.g. "gpt-4o-mini", "scripted")
    double latencyMs = 0;
    int attempts = 1;               // requests made, retries included
    std::string stopReason;         // why the model stopped, in the provider's words ("end_turn", "tool_calls"); may be empty
};

// A piece of a turn as the model streams it (server-sent events): text appended to the turn's
// text, and/or a fragment of one tool call's arguments (JSON text; joined, a call's fragments are
// its arguments). attempt is the request's HTTP attempt: a retried stream starts again from
// nothing, and what an earlier attempt sent is void.
struct ModelDelta {
    int attempt = 1;
    std::string text;
    int toolIndex = -1;             // >= 0: the tool call (in the turn's order) `arguments` belongs to
    std::string toolId;             // on a tool call's first fragment, when the API says it then
    std::string toolName;
    std::string arguments;
};

// Receives a streamed turn's deltas in order, on the adapter's thread; must not block.
using DeltaSink = std::function<void(const ModelDelta &)>;

// One earlier turn and the results of its tool calls, in the same order as turn.toolCalls.
// A result is the tool.result payload as recorded: for run_command
// {"exit_code", "stdout", "stderr", "duration_ms", "timed_out"}, for read_file {"content"}, and
// {"error": "..."} when the tool failed.
struct Exchange {
    ModelTurn turn;
    std::vector<nlohmann::json> results;
};

// The sandbox tiers a session may run on, as the system prompt tells the model: so that a model
// can choose a tier (request_environment) for a reason, knowing what each costs and where a human
// has to agree. Filled by the step engine from the agent, the pools' tiers and the tier policy
// (docs/governance.md, "Who chooses the tier").
struct TierChoice {
    std::string name;
    double cpu = 0;
    int64_t memoryBytes = 0;
    double pricePerHourUsd = 0;
    bool allowed = true;            // among the agent's allowed tiers
    bool needsReview = false;       // above the bound: a request waits for a tier_escalation review
};

struct EnvironmentBrief {
    std::string currentTier;
    std::string selectionMode;      // the agent's: "agent" and "hybrid" let request_environment choose
    bool mayRequest = false;        // request_environment can be granted (selection mode agent or hybrid)
    // The highest tier granted without review; empty: no bound but the allowed tiers.
    std::string bound;
    std::vector<TierChoice> tiers;  // smallest first (by price, then memory, then cpu)
};

struct ModelContext {
    std::string sessionId;
    std::string goal;
    std::string playbookToml;       // the scripted model's playbook (resolved at submit time)
    std::vector<Exchange> history;
    std::string idempotencyKey;     // derived from (session, seq) of the response to be recorded
    std::optional<EnvironmentBrief> environment = std::nullopt;   // nullopt: the broker knows no tiers to offer
    DeltaSink onDelta = nullptr;    // the turn's deltas while it streams; null: nobody watches
};

class ModelAdapter {
public:
    virtual ~ModelAdapter() = default;
    virtual std::string name() const = 0;
    // Whether next() reads ModelContext::environment: the engine fills it only for those that do
    // (it costs a read of the agent and the pools' tiers per turn).
    virtual bool readsEnvironment() const { return true; }
    // Errors: Unavailable after retries are exhausted (network, 429, 5xx), InvalidArgument for a
    // malformed response (the message quotes what was wrong), FailedPrecondition for what asking
    // again cannot mend (missing configuration such as an API key that is not set, a model that
    // refuses to go on); the step engine fails the session at once on those.
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
