#include "broker/engine/decide.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace paddock::engine {

namespace {

using nlohmann::json;

json parsePayload(const std::string &text)
{
    auto payload = json::parse(text, nullptr, /*allow_exceptions=*/false);
    return payload.is_object() ? payload : json::object();
}

// Field readers that take a field of the wrong type for an absent one: a payload the fold cannot
// read is skipped, never thrown out of apply() half-way through an event.
std::string stringField(const json &j, const char *key, const std::string &fallback = {})
{
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

template <typename T>
T numberField(const json &j, const char *key, T fallback)
{
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<T>() : fallback;
}

llm::ToolCall toolCallFromJson(const json &j)
{
    llm::ToolCall call;
    call.id = stringField(j, "call_id", stringField(j, "id"));
    call.name = stringField(j, "name");
    call.arguments = j.contains("arguments") ? j["arguments"] : json::object();
    return call;
}

std::string idempotencyKey(const std::string &sessionId, int64_t seq)
{
    return sessionId + ":" + std::to_string(seq);
}

} // namespace

const char *actionName(ActionKind kind)
{
    switch (kind) {
    case ActionKind::None: return "none";
    case ActionKind::ClaimSandbox: return "claim_sandbox";
    case ActionKind::CallModel: return "call_model";
    case ActionKind::RunTool: return "run_tool";
    case ActionKind::Finish: return "finish";
    case ActionKind::FailSession: return "fail_session";
    case ActionKind::ReleaseSandbox: return "release_sandbox";
    case ActionKind::MoveTier: return "move_tier";
    }
    return "unknown";
}

// --- OpenCalls ------------------------------------------------------------------------------------

void SessionFold::OpenCalls::add(llm::ToolCall call, int64_t seq)
{
    // A second tool.call of an open id stays behind the first: one result resolves both, and the
    // first is the one the session runs.
    auto [it, added] = m_orderOf.try_emplace(call.id, m_nextOrder);
    if (!added)
        return;
    m_byOrder.emplace(m_nextOrder++, Entry{std::move(call), seq});
}

void SessionFold::OpenCalls::resolve(const std::string &callId)
{
    auto it = m_orderOf.find(callId);
    if (it == m_orderOf.end())
        return;
    m_byOrder.erase(it->second);
    m_orderOf.erase(it);
}

void SessionFold::OpenCalls::clear()
{
    m_byOrder.clear();
    m_orderOf.clear();
}

// --- The fold, one function per event kind ----------------------------------------------------------

struct SessionFold::Handlers {
    using Fn = void (*)(SessionFold &, const core::Event &, json &);

    static void sessionCreated(SessionFold &f, const core::Event &event, json &payload)
    {
        f.m_context.sessionId = event.sessionId;
        f.m_context.goal = stringField(payload, "goal");
        f.m_context.playbookToml = stringField(payload, "playbook_toml");
    }

    static void sandboxClaimed(SessionFold &f, const core::Event &event, json &payload)
    {
        Billing &billing = f.m_billing;
        billing.held = true;
        billing.tier = stringField(payload, "tier");
        billing.pool = stringField(payload, "pool");
        billing.sandboxId = stringField(payload, "sandbox_id");
        billing.pricePerHour = numberField(payload, "price_per_hour", 0.0);
        billing.billedUntilUnixMs = event.timeUnixMs;
        f.m_heldTier = billing.tier;
        // A call from before the claim never ran in this sandbox: openCommand() looks only after it.
        f.m_openCallsSinceClaim.clear();
        f.m_outputRecorded.clear();   // ... and runs here from its start
    }

    static void sandboxReleased(SessionFold &f, const core::Event &, json &payload)
    {
        f.m_billing.held = false;
        // A sandbox given back with a checkpoint taken then: storage is billed at its size.
        if (payload.contains("manifest") && payload.contains("size_bytes"))
            f.m_billing.checkpointBytes = numberField(payload, "size_bytes", f.m_billing.checkpointBytes);
    }

    static void sandboxGone(SessionFold &f, const core::Event &, json &) { f.m_billing.held = false; }

    static void checkpoint(SessionFold &f, const core::Event &event, json &payload)
    {
        f.m_billing.checkpointBytes = numberField(payload, "size_bytes", int64_t{0});
        f.m_billing.storageBilledUntilUnixMs = event.timeUnixMs;
    }

    static void cost(SessionFold &f, const core::Event &, json &payload)
    {
        const std::string kind = stringField(payload, "kind");
        if (kind == "sandbox")
            f.m_billing.billedUntilUnixMs = numberField(payload, "until_unix_ms", f.m_billing.billedUntilUnixMs);
        else if (kind == "storage")
            f.m_billing.storageBilledUntilUnixMs = numberField(payload, "until_unix_ms", f.m_billing.storageBilledUntilUnixMs);
    }

    static void toolCall(SessionFold &f, const core::Event &event, json &payload)
    {
        llm::ToolCall call = toolCallFromJson(payload);
        if (f.m_resolved.contains(call.id))
            return;
        f.m_openCalls.add(call, event.seq);
        f.m_openCallsSinceClaim.add(std::move(call), event.seq);
    }

    static void toolResult(SessionFold &f, const core::Event &, json &payload)
    {
        const std::string callId = stringField(payload, "call_id");
        f.m_openCalls.resolve(callId);
        f.m_openCallsSinceClaim.resolve(callId);
        f.m_reviewOfCall.erase(callId);   // only an open call's review is ever looked at
        f.m_outputRecorded.erase(callId);
        if (f.m_keepHistory) {
            if (auto it = f.m_callIndex.find(callId); it != f.m_callIndex.end())
                f.m_context.history[it->second.first].results[it->second.second] = std::move(payload);
        }
        f.m_resolved.insert(callId);
    }

    // How far an earlier attempt recorded the command's output (offset + bytes: raw bytes of the
    // stream, before redaction), for a repeat to go on from there.
    static void toolOutput(SessionFold &f, const core::Event &, json &payload)
    {
        const std::string callId = stringField(payload, "call_id");
        if (f.m_resolved.contains(callId))
            return;
        const int stream = stringField(payload, "stream") == "stderr" ? 1 : 0;
        int64_t &recorded = f.m_outputRecorded[callId][stream];
        recorded = std::max(recorded, numberField(payload, "offset", int64_t{0}) + numberField(payload, "bytes", int64_t{0}));
    }

    static void modelResponse(SessionFold &f, const core::Event &, json &payload)
    {
        f.m_modelErrorsInARow = 0;
        if (!f.m_keepHistory)
            return;
        llm::Exchange exchange;
        exchange.turn.text = stringField(payload, "text");
        exchange.turn.model = stringField(payload, "model");
        if (auto usage = payload.find("usage"); usage != payload.end() && usage->is_object()) {
            exchange.turn.usage.inputTokens = numberField(*usage, "input_tokens", int64_t{0});
            exchange.turn.usage.outputTokens = numberField(*usage, "output_tokens", int64_t{0});
            exchange.turn.usage.cachedTokens = numberField(*usage, "cached_tokens", int64_t{0});
        }
        if (auto toolCalls = payload.find("tool_calls"); toolCalls != payload.end() && toolCalls->is_array()) {
            for (const auto &call : *toolCalls) {
                f.m_callIndex[stringField(call, "id")] = {f.m_context.history.size(), exchange.turn.toolCalls.size()};
                exchange.turn.toolCalls.push_back(toolCallFromJson(call));
            }
        }
        exchange.results.assign(exchange.turn.toolCalls.size(), json());
        f.m_context.history.push_back(std::move(exchange));
    }

    static void modelError(SessionFold &f, const core::Event &, json &payload)
    {
        ++f.m_modelErrorsInARow;
        f.m_lastModelError = stringField(payload, "error");
    }

    static void approvalRequested(SessionFold &f, const core::Event &, json &payload)
    {
        const std::string callId = stringField(payload, "tool_call_id");
        if (!callId.empty() && !f.m_resolved.contains(callId))
            f.m_reviewOfCall[callId] = std::move(payload);
    }

    static void approvalDecided(SessionFold &f, const core::Event &, json &payload)
    {
        const std::string reviewId = stringField(payload, "review_id");
        f.m_decisionOfReview[reviewId] = std::move(payload);
    }

    static Fn of(const std::string &kind)
    {
        struct Entry {
            const char *kind;
            Fn fn;
        };
        static constexpr Entry kTable[] = {
            {core::kind::ToolCall, toolCall},
            {core::kind::ToolResult, toolResult},
            {core::kind::ToolOutput, toolOutput},
            {core::kind::ModelResponse, modelResponse},
            {core::kind::Cost, cost},
            {core::kind::ModelError, modelError},
            {core::kind::SessionCreated, sessionCreated},
            {core::kind::SandboxClaimed, sandboxClaimed},
            {core::kind::SandboxReleased, sandboxReleased},
            {core::kind::SandboxFailed, sandboxGone},
            {core::kind::SandboxLost, sandboxGone},
            {core::kind::Checkpoint, checkpoint},
            {core::kind::ApprovalRequested, approvalRequested},
            {core::kind::ApprovalDecided, approvalDecided},
        };
        for (const auto &entry : kTable) {
            if (kind == entry.kind)
                return entry.fn;
        }
        return nullptr;
    }
};

void SessionFold::fold(const core::Event &event)
{
    if (m_eventCount == 0)
        m_startsWithCreated = event.kind == core::kind::SessionCreated;
    ++m_eventCount;
    core::applyEvent(m_state, event);
    if (Handlers::Fn handler = Handlers::of(event.kind)) {
        json payload = parsePayload(event.payload);
        handler(*this, event, payload);
    }
}

void SessionFold::apply(const core::Event &event)
{
    if (event.seq <= lastSeq())
        return;
    if (event.seq != lastSeq() + 1) {
        std::fprintf(stderr,
                     "paddock: SessionFold of session %s: event seq %lld applied after seq %lld; a fold takes "
                     "the events after lastSeq() without a gap (a bug in the caller)\n",
                     event.sessionId.c_str(), static_cast<long long>(event.seq), static_cast<long long>(lastSeq()));
        std::abort();
    }
    fold(event);
}

void SessionFold::apply(std::span<const core::Event> events)
{
    for (const auto &event : events)
        apply(event);
}

SessionFold SessionFold::of(std::span<const core::Event> events, bool keepHistory)
{
    SessionFold fold(keepHistory);
    for (const auto &event : events)
        fold.fold(event);
    return fold;
}

// --- Questions to the fold --------------------------------------------------------------------------

Action SessionFold::decide() const
{
    Action action;
    action.state = m_state;
    action.billing = m_billing;
    const core::SessionState &state = m_state;
    action.idempotencyKey = idempotencyKey(state.id, state.lastSeq + 1);

    if (!m_startsWithCreated)
        return action;

    if (core::isTerminal(state.status)) {
        if (!state.sandboxId.empty())
            action.kind = ActionKind::ReleaseSandbox;
        return action;
    }
    if (!state.needsWork())
        return action;

    if (state.sandboxId.empty()) {
        action.kind = ActionKind::ClaimSandbox;
        action.tier = state.tier;
        action.withModelCall = !m_openCalls.first() && m_modelErrorsInARow < kMaxConsecutiveModelErrors;
        return action;
    }

    // A tier override since the claim: the move happens here, at a step boundary, before anything else.
    if (!m_heldTier.empty() && m_heldTier != state.tier) {
        action.kind = ActionKind::MoveTier;
        action.tier = state.tier;
        return action;
    }

    // The first call without a result, in the order the model made them.
    if (const OpenCalls::Entry *open = m_openCalls.first()) {
        action.kind = open->call.name == llm::tool::Finish ? ActionKind::Finish : ActionKind::RunTool;
        action.call = open->call;
        // A call's key comes from its own tool.call, not from the log's end: events people add
        // meanwhile (a pause, an override) must not make a repeat of the call look like a new one.
        action.idempotencyKey = idempotencyKey(state.id, open->seq + 1);
        if (auto recorded = m_outputRecorded.find(open->call.id); recorded != m_outputRecorded.end())
            action.outputRecorded = recorded->second;
        if (auto review = m_reviewOfCall.find(open->call.id); review != m_reviewOfCall.end()) {
            action.review = review->second;
            auto decided = m_decisionOfReview.find(stringField(review->second, "review_id"));
            if (decided != m_decisionOfReview.end())
                action.decision = decided->second;
        }
        return action;
    }

    if (m_modelErrorsInARow >= kMaxConsecutiveModelErrors) {
        action.kind = ActionKind::FailSession;
        action.reason = "the model failed " + std::to_string(m_modelErrorsInARow)
            + " times in a row; last error: " + m_lastModelError;
        return action;
    }
    action.kind = ActionKind::CallModel;
    return action;
}

std::optional<Action> SessionFold::openCommand() const
{
    if (m_state.sandboxId.empty())
        return std::nullopt;
    const OpenCalls::Entry *open = m_openCallsSinceClaim.first();
    if (!open || open->call.name != llm::tool::RunCommand)
        return std::nullopt;
    Action action;
    action.kind = ActionKind::RunTool;
    action.state = m_state;
    action.call = open->call;
    action.idempotencyKey = idempotencyKey(m_state.id, open->seq + 1);
    action.replayOnly = true;
    action.billing = m_billing;
    if (auto recorded = m_outputRecorded.find(open->call.id); recorded != m_outputRecorded.end())
        action.outputRecorded = recorded->second;
    return action;
}

llm::ModelContext SessionFold::modelContext() const
{
    llm::ModelContext context = m_context;
    context.idempotencyKey = idempotencyKey(context.sessionId, lastSeq() + 1);
    return context;
}

// --- The whole log at once ----------------------------------------------------------------------------

Billing billingOf(std::span<const core::Event> events)
{
    return SessionFold::of(events, /*keepHistory=*/false).m_billing;
}

Action decide(std::span<const core::Event> events)
{
    return SessionFold::of(events, /*keepHistory=*/false).decide();
}

std::optional<Action> openCommandOf(std::span<const core::Event> events)
{
    return SessionFold::of(events, /*keepHistory=*/false).openCommand();
}

llm::ModelContext buildModelContext(std::span<const core::Event> events)
{
    SessionFold fold = SessionFold::of(events, /*keepHistory=*/true);
    llm::ModelContext context = std::move(fold.m_context);   // the fold is gone after this: no copy
    context.idempotencyKey = idempotencyKey(context.sessionId, fold.lastSeq() + 1);
    return context;
}

} // namespace paddock::engine
