#pragma once
// The step engine's brain: the next action of a session as a pure function of its log.
// Any worker that reads the same log derives the same action, which is what lets a step be repeated
// safely after a crash (together with idempotency keys derived from (session, seq)).

#include "broker/core/event.h"
#include "broker/core/session_state.h"
#include "broker/llm/model_adapter.h"

#include <optional>
#include <span>
#include <string>

namespace paddock::engine {

enum class ActionKind {
    None,            // nothing to do now (paused, waiting, or finished with nothing held)
    ClaimSandbox,    // claim a sandbox of `tier`
    CallModel,       // ask the model for the next turn
    RunTool,         // perform `call` in the sandbox
    Finish,          // `call` is finish: record its result and the final state
    FailSession,     // end the session as failed because of `reason`
    ReleaseSandbox,  // the session has ended; give its sandbox back
    MoveTier,        // the session holds a sandbox of another tier than it wants: snapshot, claim `tier`, restore
};

const char *actionName(ActionKind kind);

// What the session's sandbox and its latest snapshot have been billed for so far (cost events),
// derived from the log: the step engine bills the time since then at every step boundary.
struct Billing {
    bool held = false;              // a sandbox is claimed
    std::string tier;
    std::string pool;
    std::string sandboxId;
    double pricePerHour = 0;        // recorded with sandbox.claimed
    int64_t billedUntilUnixMs = 0;  // sandbox time is billed up to here
    int64_t checkpointBytes = 0;    // the latest checkpoint's size (0: none)
    int64_t storageBilledUntilUnixMs = 0;
};

Billing billingOf(std::span<const core::Event> events);

struct Action {
    ActionKind kind = ActionKind::None;
    core::SessionState state;   // the fold of the log the action was derived from
    std::string tier;           // ClaimSandbox, MoveTier (the tier wanted)
    llm::ToolCall call;       // RunTool, Finish
    std::string reason;         // FailSession
    Billing billing;            // every action: what the sandbox has been billed for
    // RunTool of a call that opened a review item: its approval.requested payload, and its
    // approval.decided payload once decided (null before).
    nlohmann::json review;
    nlohmann::json decision;
    // Every external call made for this action carries this key: "<session>:<seq>", where seq is
    // the seq its result will be appended at (RunTool and Finish: the seq right after the call's
    // own tool.call, whatever was appended since).
    std::string idempotencyKey;
    // RunTool: only a run the pool already recorded under idempotencyKey may answer; nothing new
    // is started (the idle releaser recovering a command of a paused session, step_engine.h).
    bool replayOnly = false;
};

// Consecutive model errors after which a session fails instead of retrying.
inline constexpr int kMaxConsecutiveModelErrors = 3;

Action decide(std::span<const core::Event> events);

// A command that may be running (or have run) in the session's sandbox without its result in the
// log: the first call without a result since the last claim, when it is a run_command. The action
// runs it with replayOnly, so only the pool's record of that run answers. nullopt when there is
// none (or the session holds no sandbox). For the idle releaser (step_engine.h): a paused session's
// command is recorded before its sandbox is given back.
std::optional<Action> openCommandOf(std::span<const core::Event> events);

// The model's view of the session: goal, playbook and every earlier turn with its tool results.
llm::ModelContext buildModelContext(std::span<const core::Event> events);

} // namespace paddock::engine
