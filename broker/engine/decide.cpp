#include "broker/engine/decide.h"

#include <nlohmann/json.hpp>

#include <map>
#include <set>

namespace paddock::engine {

namespace {

using nlohmann::json;

json parsePayload(const core::Event &event)
{
    auto payload = json::parse(event.payload, nullptr, /*allow_exceptions=*/false);
    return payload.is_object() ? payload : json::object();
}

llm::ToolCall toolCallFromJson(const json &j)
{
    llm::ToolCall call;
    call.id = j.value("call_id", j.value("id", std::string()));
    call.name = j.value("name", std::string());
    call.arguments = j.contains("arguments") ? j["arguments"] : json::object();
    return call;
}

} // namespace

Billing billingOf(std::span<const core::Event> events)
{
    Billing billing;
    for (const auto &event : events) {
        if (event.kind == core::kind::SandboxClaimed) {
            const json payload = parsePayload(event);
            billing.held = true;
            billing.tier = payload.value("tier", std::string());
            billing.pool = payload.value("pool", std::string());
            billing.sandboxId = payload.value("sandbox_id", std::string());
            billing.pricePerHour = payload.value("price_per_hour", 0.0);
            billing.billedUntilUnixMs = event.timeUnixMs;
        } else if (event.kind == core::kind::SandboxReleased || event.kind == core::kind::SandboxFailed
                   || event.kind == core::kind::SandboxLost) {
            billing.held = false;
            // A sandbox given back with a checkpoint taken then: storage is billed at its size.
            if (event.kind == core::kind::SandboxReleased) {
                const json payload = parsePayload(event);
                if (payload.contains("manifest") && payload.contains("size_bytes"))
                    billing.checkpointBytes = payload.value("size_bytes", billing.checkpointBytes);
            }
        } else if (event.kind == core::kind::Checkpoint) {
            const json payload = parsePayload(event);
            billing.checkpointBytes = payload.value("size_bytes", int64_t{0});
            billing.storageBilledUntilUnixMs = event.timeUnixMs;
        } else if (event.kind == core::kind::Cost) {
            const json payload = parsePayload(event);
            const std::string kind = payload.value("kind", std::string());
            if (kind == "sandbox")
                billing.billedUntilUnixMs = payload.value("until_unix_ms", billing.billedUntilUnixMs);
            else if (kind == "storage")
                billing.storageBilledUntilUnixMs = payload.value("until_unix_ms", billing.storageBilledUntilUnixMs);
        }
    }
    return billing;
}

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

Action decide(std::span<const core::Event> events)
{
    Action action;
    action.state = core::foldEvents(events);
    action.billing = billingOf(events);
    const core::SessionState &state = action.state;
    action.idempotencyKey = state.id + ":" + std::to_string(state.lastSeq + 1);

    if (events.empty() || events.front().kind != core::kind::SessionCreated)
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
        return action;
    }

    // A tier override since the claim: the move happens here, at a step boundary, before anything else.
    std::string heldTier;
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
        if (it->kind == core::kind::SandboxClaimed) {
            heldTier = parsePayload(*it).value("tier", std::string());
            break;
        }
    }
    if (!heldTier.empty() && heldTier != state.tier) {
        action.kind = ActionKind::MoveTier;
        action.tier = state.tier;
        return action;
    }

    // Tool calls without a result, in the order the model made them; count model errors since the
    // last response.
    std::vector<std::pair<llm::ToolCall, int64_t>> calls;   // with the seq of its tool.call
    std::set<std::string> resolved;
    std::map<std::string, json> reviewOfCall;     // tool call id -> approval.requested payload
    std::map<std::string, json> decisionOfReview; // review id -> approval.decided payload
    int modelErrorsInARow = 0;
    std::string lastModelError;
    for (const auto &event : events) {
        if (event.kind == core::kind::ToolCall) {
            calls.emplace_back(toolCallFromJson(parsePayload(event)), event.seq);
        } else if (event.kind == core::kind::ToolResult) {
            resolved.insert(parsePayload(event).value("call_id", std::string()));
        } else if (event.kind == core::kind::ModelResponse) {
            modelErrorsInARow = 0;
        } else if (event.kind == core::kind::ModelError) {
            ++modelErrorsInARow;
            lastModelError = parsePayload(event).value("error", std::string());
        } else if (event.kind == core::kind::ApprovalRequested) {
            json payload = parsePayload(event);
            const std::string callId = payload.value("tool_call_id", std::string());
            if (!callId.empty())
                reviewOfCall[callId] = std::move(payload);
        } else if (event.kind == core::kind::ApprovalDecided) {
            json payload = parsePayload(event);
            const std::string reviewId = payload.value("review_id", std::string());
            decisionOfReview[reviewId] = std::move(payload);
        }
    }
    for (const auto &[call, seq] : calls) {
        if (resolved.contains(call.id))
            continue;
        action.kind = call.name == llm::tool::Finish ? ActionKind::Finish : ActionKind::RunTool;
        action.call = call;
        // A call's key comes from its own tool.call, not from the log's end: events people add
        // meanwhile (a pause, an override) must not make a repeat of the call look like a new one.
        action.idempotencyKey = state.id + ":" + std::to_string(seq + 1);
        if (auto review = reviewOfCall.find(call.id); review != reviewOfCall.end()) {
            action.review = review->second;
            auto decided = decisionOfReview.find(review->second.value("review_id", std::string()));
            if (decided != decisionOfReview.end())
                action.decision = decided->second;
        }
        return action;
    }

    if (modelErrorsInARow >= kMaxConsecutiveModelErrors) {
        action.kind = ActionKind::FailSession;
        action.reason = "the model failed " + std::to_string(modelErrorsInARow)
            + " times in a row; last error: " + lastModelError;
        return action;
    }
    action.kind = ActionKind::CallModel;
    return action;
}

std::optional<Action> openCommandOf(std::span<const core::Event> events)
{
    Action action;
    action.state = core::foldEvents(events);
    if (action.state.sandboxId.empty())
        return std::nullopt;
    std::vector<std::pair<llm::ToolCall, int64_t>> calls;   // since the last claim, with their seqs
    std::set<std::string> resolved;
    for (const auto &event : events) {
        if (event.kind == core::kind::SandboxClaimed)
            calls.clear();
        else if (event.kind == core::kind::ToolCall)
            calls.emplace_back(toolCallFromJson(parsePayload(event)), event.seq);
        else if (event.kind == core::kind::ToolResult)
            resolved.insert(parsePayload(event).value("call_id", std::string()));
    }
    for (const auto &[call, seq] : calls) {
        if (resolved.contains(call.id))
            continue;
        if (call.name != llm::tool::RunCommand)
            return std::nullopt;
        action.kind = ActionKind::RunTool;
        action.call = call;
        action.idempotencyKey = action.state.id + ":" + std::to_string(seq + 1);
        action.replayOnly = true;
        action.billing = billingOf(events);
        return action;
    }
    return std::nullopt;
}

llm::ModelContext buildModelContext(std::span<const core::Event> events)
{
    llm::ModelContext context;
    std::map<std::string, std::pair<size_t, size_t>> callIndex;   // call id -> (exchange, position)
    for (const auto &event : events) {
        if (event.kind == core::kind::SessionCreated) {
            const json payload = parsePayload(event);
            context.sessionId = event.sessionId;
            context.goal = payload.value("goal", std::string());
            context.playbookToml = payload.value("playbook_toml", std::string());
        } else if (event.kind == core::kind::ModelResponse) {
            const json payload = parsePayload(event);
            llm::Exchange exchange;
            exchange.turn.text = payload.value("text", std::string());
            exchange.turn.model = payload.value("model", std::string());
            if (auto usage = payload.find("usage"); usage != payload.end() && usage->is_object()) {
                exchange.turn.usage.inputTokens = usage->value("input_tokens", int64_t{0});
                exchange.turn.usage.outputTokens = usage->value("output_tokens", int64_t{0});
                exchange.turn.usage.cachedTokens = usage->value("cached_tokens", int64_t{0});
            }
            if (auto toolCalls = payload.find("tool_calls"); toolCalls != payload.end() && toolCalls->is_array()) {
                for (const auto &call : *toolCalls) {
                    callIndex[call.value("id", std::string())] = {context.history.size(),
                                                                  exchange.turn.toolCalls.size()};
                    exchange.turn.toolCalls.push_back(toolCallFromJson(call));
                }
            }
            exchange.results.assign(exchange.turn.toolCalls.size(), json());
            context.history.push_back(std::move(exchange));
        } else if (event.kind == core::kind::ToolResult) {
            json payload = parsePayload(event);
            auto it = callIndex.find(payload.value("call_id", std::string()));
            if (it != callIndex.end())
                context.history[it->second.first].results[it->second.second] = std::move(payload);
        }
    }
    const int64_t nextSeq = events.empty() ? 1 : events.back().seq + 1;
    context.idempotencyKey = context.sessionId + ":" + std::to_string(nextSeq);
    return context;
}

} // namespace paddock::engine
