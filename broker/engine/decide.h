#pragma once
// The step engine's brain: the next action of a session as a pure function of its log.
// Any worker that reads the same log derives the same action, which is what lets a step be repeated
// safely after a crash (together with idempotency keys derived from (session, seq)).
//
// The function is a fold (SessionFold): the engine keeps one per live session and applies only the
// events appended since its last step, so a step costs the same at 100 events and at 100,000. The
// span functions below are that fold applied to every event, so there is one implementation.
//
// Threads: the span functions are pure and may be called from any thread. A SessionFold is plain
// data with no locks: one thread at a time applies to it (the step worker holding the session's
// lease); its const members may be called from several threads while nobody applies.

#include "broker/core/event.h"
#include "broker/core/session_state.h"
#include "broker/llm/model_adapter.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

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
    // RunTool of a run_command: bytes of its stdout and stderr already recorded as tool.output by
    // an earlier attempt on the same sandbox (a broker that stopped or crashed mid-command); the
    // repeat records only what comes after them (the pool replays a run's output from its start).
    std::array<int64_t, 2> outputRecorded{};
    // ClaimSandbox: once a sandbox is held the next action is a model call (no call is waiting
    // for its result), so the model is asked while the claim is made, and both are recorded
    // together: the sandbox is ready by the time the model asks for a command.
    bool withModelCall = false;
    // The lease the step runs under (store::Lease::token), 0 for none: every append of the step
    // carries it, so a broker that paused past its lease cannot write after the session's next
    // holder (the store refuses it, store::AppendRequest::leaseToken).
    uint64_t leaseToken = 0;
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

// A session's log folded incrementally: apply each new event once, in seq order, and ask for the
// next action at any point. Payloads are parsed in apply() only (core::applyEvent parses the kinds
// it reads itself, so those are parsed twice there); decide() is O(1) in the log's length (a copy
// of the state and a few map look-ups), modelContext() copies the conversation kept so far.
//
// Memory: the fold keeps the model's conversation (every model.response with its tool results) and
// the ids of the calls that have a result; everything else is O(unresolved calls + reviews).
class SessionFold {
public:
    SessionFold() = default;

    // Applies the event after the last one: seq must be lastSeq() + 1. An event at or below lastSeq()
    // is ignored (a tail read twice on a race: already folded). A gap (seq > lastSeq() + 1) is a
    // programming error the caller must avoid: the fold would silently miss events, so it aborts
    // the process with a message naming both seqs (the log survives; the next broker refolds it).
    void apply(const core::Event &event);
    void apply(std::span<const core::Event> events);

    int64_t lastSeq() const { return m_state.lastSeq; }   // 0 before any event
    const core::SessionState &state() const { return m_state; }
    const Billing &billing() const { return m_billing; }
    size_t eventCount() const { return m_eventCount; }

    Action decide() const;                      // decide(every applied event)
    llm::ModelContext modelContext() const;     // buildModelContext(every applied event)
    std::optional<Action> openCommand() const;  // openCommandOf(every applied event)

private:
    // Tool calls without a result yet, in the order their tool.call events came. A call id appears
    // once (its first tool.call): a result resolves every tool.call of its id at once.
    class OpenCalls {
    public:
        struct Entry {
            llm::ToolCall call;
            int64_t seq = 0;   // of its tool.call
        };
        void add(llm::ToolCall call, int64_t seq);
        void resolve(const std::string &callId);
        void clear();
        const Entry *first() const { return m_byOrder.empty() ? nullptr : &m_byOrder.begin()->second; }

    private:
        uint64_t m_nextOrder = 0;                              // arrival order, whatever the seqs
        std::map<uint64_t, Entry> m_byOrder;
        std::unordered_map<std::string, uint64_t> m_orderOf;  // call id -> key in m_byOrder
    };

    // The span functions fold every event they are given, as given (no seq checks); decide(span) and
    // friends have no use for the conversation and skip keeping it.
    explicit SessionFold(bool keepHistory) : m_keepHistory(keepHistory) {}
    static SessionFold of(std::span<const core::Event> events, bool keepHistory);
    friend Action decide(std::span<const core::Event> events);
    friend std::optional<Action> openCommandOf(std::span<const core::Event> events);
    friend Billing billingOf(std::span<const core::Event> events);
    friend llm::ModelContext buildModelContext(std::span<const core::Event> events);

    void fold(const core::Event &event);
    struct Handlers;   // decide.cpp: one function per event kind the fold reads beyond core::applyEvent

    bool m_keepHistory = true;
    size_t m_eventCount = 0;
    bool m_startsWithCreated = false;   // the first event applied was session.created
    core::SessionState m_state;
    Billing m_billing;
    std::string m_heldTier;             // the tier of the last sandbox.claimed ("" before any)

    // A call id stays resolved once a result names it, also for a later tool.call reusing the id
    // (as the fold over the whole log always read it), so the ids are kept.
    std::unordered_set<std::string> m_resolved;
    OpenCalls m_openCalls;              // every unresolved call
    OpenCalls m_openCallsSinceClaim;    // the unresolved calls made since the last sandbox.claimed
    std::unordered_map<std::string, nlohmann::json> m_reviewOfCall;      // unresolved call id -> approval.requested
    std::unordered_map<std::string, nlohmann::json> m_decisionOfReview;  // review id -> approval.decided
    // Unresolved run_command call id -> bytes of stdout and stderr recorded as tool.output since
    // the last claim (a new sandbox runs the command from its start).
    std::unordered_map<std::string, std::array<int64_t, 2>> m_outputRecorded;
    int m_modelErrorsInARow = 0;        // model.error events since the last model.response
    std::string m_lastModelError;

    llm::ModelContext m_context;        // all but idempotencyKey, which depends on lastSeq()
    std::unordered_map<std::string, std::pair<size_t, size_t>> m_callIndex;   // call id -> (exchange, position)
};

} // namespace paddock::engine
