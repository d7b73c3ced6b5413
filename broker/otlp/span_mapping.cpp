#include "broker/otlp/span_mapping.h"

#include "checkpoint/sha256.h"

#include <algorithm>

namespace paddock::otlp {

namespace {

using nlohmann::json;

std::string text(const json &payload, const char *key)
{
    const auto it = payload.find(key);
    return it != payload.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t integer(const json &payload, const char *key, int64_t otherwise = 0)
{
    const auto it = payload.find(key);
    if (it == payload.end() || !it->is_number())
        return otherwise;
    return it->is_number_float() ? static_cast<int64_t>(it->get<double>()) : it->get<int64_t>();
}

bool flag(const json &payload, const char *key)
{
    const auto it = payload.find(key);
    return it != payload.end() && it->is_boolean() && it->get<bool>();
}

bool has(const json &payload, const char *key)
{
    return payload.find(key) != payload.end();
}

json parse(const std::string &payload)
{
    json parsed = json::parse(payload, nullptr, false);
    return parsed.is_object() ? parsed : json::object();
}

// Hex of the first `digits` of a SHA-256, made non-zero: an all-zero id is invalid in OTLP.
std::string idFrom(const std::string &material, size_t digits)
{
    std::string hex = checkpoint::sha256Hex(material).substr(0, digits);
    if (hex.find_first_not_of('0') == std::string::npos)
        hex.back() = '1';
    return hex;
}

double dollars(int64_t micros)
{
    return static_cast<double>(micros) / 1e6;
}

bool terminal(const core::SessionState &state)
{
    return core::isTerminal(state.status);
}

} // namespace

std::string traceIdFor(std::string_view sessionId)
{
    return idFrom("paddock.trace\n" + std::string(sessionId), 32);
}

std::string spanIdFor(std::string_view sessionId, std::string_view what, int64_t seq)
{
    return idFrom("paddock.span\n" + std::string(sessionId) + "\n" + std::string(what) + "\n" + std::to_string(seq), 16);
}

std::string providerFor(std::string_view sessionModel)
{
    const std::string_view base = sessionModel.substr(0, sessionModel.find(':'));
    if (base == "openai" || base == "anthropic")
        return std::string(base);
    if (base == "scripted")
        return "paddock.scripted";
    return base.empty() ? std::string("_OTHER") : std::string(base);
}

SessionSpanMapper::SessionSpanMapper(std::string sessionId)
    : m_sessionId(std::move(sessionId))
    , m_traceId(traceIdFor(m_sessionId))
    , m_rootId(spanIdFor(m_sessionId, "session", 0))
{
}

ExportSpan SessionSpanMapper::child(std::string_view what, int64_t openSeq) const
{
    ExportSpan span;
    span.sessionId = m_sessionId;
    span.traceId = m_traceId;
    span.spanId = spanIdFor(m_sessionId, what, openSeq);
    span.parentSpanId = m_rootId;
    span.attributes.push_back(textAttribute("gen_ai.conversation.id", m_sessionId));
    return span;
}

void SessionSpanMapper::addSessionPlace(ExportSpan &span) const
{
    if (!m_state.tier.empty())
        span.attributes.push_back(textAttribute("paddock.tier", m_state.tier));
    if (!m_state.pool.empty())
        span.attributes.push_back(textAttribute("paddock.pool", m_state.pool));
    if (!m_state.sandboxId.empty())
        span.attributes.push_back(textAttribute("paddock.sandbox.id", m_state.sandboxId));
}

void SessionSpanMapper::apply(const core::Event &event, Completed &out)
{
    const bool wasTerminal = terminal(m_state);
    core::applyEvent(m_state, event);
    const bool relevant = event.kind == core::kind::SessionCreated || event.kind.starts_with("model.")
        || event.kind == core::kind::ToolCall || event.kind == core::kind::ToolResult || event.kind == core::kind::Cost;
    const json payload = relevant ? parse(event.payload) : json::object();

    if (m_held) {
        // The event after a model response completes its span: its cost when that is what it is.
        HeldModel held = std::move(*m_held);
        m_held.reset();
        held.span.emitSeq = event.seq;
        held.call.emitSeq = event.seq;
        if (event.kind == core::kind::Cost && text(payload, "kind") == "model")
            held.span.attributes.push_back(doubleAttribute("paddock.cost_usd", dollars(event.costMicros)));
        out.spans.push_back(std::move(held.span));
        out.calls.push_back(std::move(held.call));
    }

    if (event.kind == core::kind::SessionCreated) {
        m_provider = providerFor(m_state.model);
    } else if (event.kind == core::kind::ModelRequest) {
        m_modelRequestMs = event.timeUnixMs;
    } else if (event.kind == core::kind::ModelResponse) {
        onModelResponse(event, payload);
    } else if (event.kind == core::kind::ModelError) {
        onModelError(event, payload, out);
    } else if (event.kind == core::kind::ToolCall) {
        const std::string callId = text(payload, "call_id");
        if (!callId.empty())
            m_tools[callId] = OpenTool{event.seq, event.timeUnixMs, text(payload, "name")};
    } else if (event.kind == core::kind::ToolResult) {
        onToolResult(event, payload, out);
    }

    if (!wasTerminal && terminal(m_state) && !m_rootDone)
        finishSession(event, out);
}

void SessionSpanMapper::onModelResponse(const core::Event &event, const json &payload)
{
    const std::string model = text(payload, "model").empty() ? m_state.model : text(payload, "model");
    const int64_t latencyMs = std::max<int64_t>(integer(payload, "latency_ms"), 0);
    int64_t startMs = m_modelRequestMs >= 0 ? m_modelRequestMs : event.timeUnixMs - latencyMs;
    startMs = std::clamp(startMs, std::min(m_state.createdUnixMs, event.timeUnixMs), event.timeUnixMs);
    m_modelRequestMs = -1;

    const json usage = payload.contains("usage") && payload["usage"].is_object() ? payload["usage"] : json::object();
    const int64_t input = integer(usage, "input_tokens");
    const int64_t output = integer(usage, "output_tokens");
    const int64_t cached = integer(usage, "cached_tokens");
    m_inputTokens += input;
    m_outputTokens += output;
    m_cachedTokens += cached;
    ++m_modelCalls;

    HeldModel held{child("chat", event.seq), {}};
    ExportSpan &span = held.span;
    span.name = "chat " + model;
    span.kind = SpanKind::Client;
    span.startUnixMs = startMs;
    span.endUnixMs = event.timeUnixMs;
    span.attributes.push_back(textAttribute("gen_ai.operation.name", "chat"));
    span.attributes.push_back(textAttribute("gen_ai.provider.name", m_provider));
    span.attributes.push_back(textAttribute("gen_ai.request.model", model));
    span.attributes.push_back(textAttribute("gen_ai.response.model", model));
    span.attributes.push_back(intAttribute("gen_ai.usage.input_tokens", input));
    span.attributes.push_back(intAttribute("gen_ai.usage.output_tokens", output));
    span.attributes.push_back(intAttribute("gen_ai.usage.cache_read.input_tokens", cached));
    if (const int64_t written = integer(usage, "cache_write_tokens"); written > 0)
        span.attributes.push_back(intAttribute("gen_ai.usage.cache_creation.input_tokens", written));
    const auto calls = payload.find("tool_calls");
    const bool callsTools = calls != payload.end() && calls->is_array() && !calls->empty();
    std::string finish = text(payload, "stop_reason");
    if (finish.empty())
        finish = callsTools ? "tool_calls" : "stop";
    span.attributes.push_back(textsAttribute("gen_ai.response.finish_reasons", {finish}));
    span.attributes.push_back(textAttribute("paddock.model", m_state.model));
    span.attributes.push_back(intAttribute("paddock.event.seq", event.seq));
    if (has(payload, "attempts"))
        span.attributes.push_back(intAttribute("paddock.model.attempts", integer(payload, "attempts")));
    addSessionPlace(span);

    ModelCall &call = held.call;
    call.sessionId = m_sessionId;
    call.provider = m_provider;
    call.requestModel = model;
    call.startUnixMs = span.startUnixMs;
    call.endUnixMs = span.endUnixMs;
    call.hasUsage = true;
    call.inputTokens = input;
    call.outputTokens = output;
    m_held = std::move(held);
}

void SessionSpanMapper::onModelError(const core::Event &event, const json &payload, Completed &out)
{
    ExportSpan span = child("chat", event.seq);
    const int64_t startMs = m_modelRequestMs >= 0 ? m_modelRequestMs : event.timeUnixMs;
    m_modelRequestMs = -1;
    std::string code = text(payload, "code");
    std::transform(code.begin(), code.end(), code.begin(), [](unsigned char c) { return std::tolower(c); });
    const std::string errorType = code.empty() ? std::string("_OTHER") : code;
    span.name = "chat " + m_state.model;
    span.kind = SpanKind::Client;
    span.startUnixMs = std::min(startMs, event.timeUnixMs);
    span.endUnixMs = event.timeUnixMs;
    span.error = true;
    span.statusMessage = text(payload, "error");
    span.emitSeq = event.seq;
    span.attributes.push_back(textAttribute("gen_ai.operation.name", "chat"));
    span.attributes.push_back(textAttribute("gen_ai.provider.name", m_provider));
    span.attributes.push_back(textAttribute("gen_ai.request.model", m_state.model));
    span.attributes.push_back(textAttribute("error.type", errorType));
    span.attributes.push_back(textAttribute("paddock.model", m_state.model));
    span.attributes.push_back(intAttribute("paddock.event.seq", event.seq));
    addSessionPlace(span);
    ++m_modelCalls;

    ModelCall call;
    call.sessionId = m_sessionId;
    call.emitSeq = event.seq;
    call.provider = m_provider;
    call.requestModel = m_state.model;
    call.errorType = errorType;
    call.startUnixMs = span.startUnixMs;
    call.endUnixMs = span.endUnixMs;
    out.spans.push_back(std::move(span));
    out.calls.push_back(std::move(call));
}

void SessionSpanMapper::onToolResult(const core::Event &event, const json &payload, Completed &out)
{
    const std::string callId = text(payload, "call_id");
    const auto open = m_tools.find(callId);
    OpenTool tool;
    if (open != m_tools.end()) {
        tool = open->second;
        m_tools.erase(open);
    } else if (m_rootDone) {
        return;   // its call ended with the session (interrupted) and was exported then
    } else {
        // A result without its call in the log (never written so today): its own span, from its duration.
        tool = OpenTool{event.seq, event.timeUnixMs - std::max<int64_t>(integer(payload, "duration_ms"), 0),
                        text(payload, "name")};
    }
    const std::string name = tool.name.empty() ? text(payload, "name") : tool.name;
    ExportSpan span = child("execute_tool", tool.callSeq);
    span.name = "execute_tool " + name;
    span.kind = SpanKind::Internal;
    // Calls of one response run one after the other: one starts when the one before it ended.
    span.startUnixMs = std::min(std::max(tool.callTimeMs, m_lastToolEndMs), event.timeUnixMs);
    span.endUnixMs = event.timeUnixMs;
    span.emitSeq = event.seq;
    m_lastToolEndMs = event.timeUnixMs;
    span.attributes.push_back(textAttribute("gen_ai.operation.name", "execute_tool"));
    span.attributes.push_back(textAttribute("gen_ai.tool.name", name));
    span.attributes.push_back(textAttribute("gen_ai.tool.call.id", callId));
    span.attributes.push_back(textAttribute("gen_ai.tool.type", "function"));
    span.attributes.push_back(intAttribute("paddock.event.seq", event.seq));
    if (has(payload, "exit_code"))
        span.attributes.push_back(intAttribute("paddock.tool.exit_code", integer(payload, "exit_code")));
    if (has(payload, "duration_ms"))
        span.attributes.push_back(intAttribute("paddock.tool.duration_ms", integer(payload, "duration_ms")));
    addSessionPlace(span);

    // A failure, most telling first: the pool's named reason, a timeout, the tool's error, an exit.
    std::string errorType;
    std::string message;
    if (const std::string reason = text(payload, "reason"); !reason.empty()) {
        errorType = reason;
        message = text(payload, "error").empty() ? reason : text(payload, "error");
    } else if (flag(payload, "timed_out")) {
        errorType = "timeout";
        message = "the command timed out";
    } else if (const std::string error = text(payload, "error"); !error.empty()) {
        errorType = "tool_error";
        message = error;
    } else if (integer(payload, "signal") != 0) {
        errorType = "signal";
        message = "killed by signal " + std::to_string(integer(payload, "signal"));
    } else if (integer(payload, "exit_code") != 0) {
        errorType = "nonzero_exit";
        message = "exit " + std::to_string(integer(payload, "exit_code"));
    }
    if (!errorType.empty()) {
        span.error = true;
        span.statusMessage = message;
        span.attributes.push_back(textAttribute("error.type", errorType));
    }
    ++m_toolCalls;
    out.spans.push_back(std::move(span));
}

void SessionSpanMapper::finishSession(const core::Event &event, Completed &out)
{
    m_rootDone = true;
    // Calls still open end with the session.
    std::vector<std::pair<std::string, OpenTool>> open(m_tools.begin(), m_tools.end());
    std::sort(open.begin(), open.end(), [](const auto &a, const auto &b) { return a.second.callSeq < b.second.callSeq; });
    for (const auto &[callId, tool] : open) {
        ExportSpan span = child("execute_tool", tool.callSeq);
        span.name = "execute_tool " + tool.name;
        span.startUnixMs = std::min(std::max(tool.callTimeMs, m_lastToolEndMs), event.timeUnixMs);
        span.endUnixMs = event.timeUnixMs;
        span.emitSeq = event.seq;
        span.error = true;
        span.statusMessage = "the session ended (" + std::string(core::statusName(m_state.status))
            + ") before the call's result was recorded";
        span.attributes.push_back(textAttribute("gen_ai.operation.name", "execute_tool"));
        span.attributes.push_back(textAttribute("gen_ai.tool.name", tool.name));
        span.attributes.push_back(textAttribute("gen_ai.tool.call.id", callId));
        span.attributes.push_back(textAttribute("gen_ai.tool.type", "function"));
        span.attributes.push_back(textAttribute("error.type", "interrupted"));
        span.attributes.push_back(intAttribute("paddock.event.seq", event.seq));
        addSessionPlace(span);
        out.spans.push_back(std::move(span));
    }
    m_tools.clear();

    ExportSpan root;
    root.sessionId = m_sessionId;
    root.traceId = m_traceId;
    root.spanId = m_rootId;
    root.name = "invoke_agent " + m_state.agent;
    root.kind = SpanKind::Internal;
    root.startUnixMs = m_state.createdUnixMs;
    root.endUnixMs = std::max(event.timeUnixMs, m_state.createdUnixMs);
    root.emitSeq = event.seq;
    const std::string status = core::statusName(m_state.status);
    root.attributes = {
        textAttribute("gen_ai.operation.name", "invoke_agent"),
        textAttribute("gen_ai.provider.name", m_provider),
        textAttribute("gen_ai.request.model", m_state.model),
        textAttribute("gen_ai.agent.name", m_state.agent),
        textAttribute("gen_ai.conversation.id", m_sessionId),
        intAttribute("gen_ai.usage.input_tokens", m_inputTokens),
        intAttribute("gen_ai.usage.output_tokens", m_outputTokens),
        intAttribute("gen_ai.usage.cache_read.input_tokens", m_cachedTokens),
        textAttribute("paddock.session.status", status),
        doubleAttribute("paddock.cost_usd", dollars(m_state.costMicros)),
        doubleAttribute("paddock.cost.model_usd", dollars(m_state.modelCostMicros)),
        doubleAttribute("paddock.cost.sandbox_usd", dollars(m_state.sandboxCostMicros)),
        intAttribute("paddock.model_calls", m_modelCalls),
        intAttribute("paddock.tool_calls", m_toolCalls),
        intAttribute("paddock.event.seq", event.seq),
    };
    if (!m_state.playbook.empty())
        root.attributes.push_back(textAttribute("paddock.playbook", m_state.playbook));
    if (!m_state.tierChooser.empty())
        root.attributes.push_back(textAttribute("paddock.tier.chooser", m_state.tierChooser));
    addSessionPlace(root);
    if (m_state.status == core::SessionStatus::Failed) {
        root.error = true;
        root.statusMessage = m_state.statusReason;
        root.attributes.push_back(textAttribute("error.type", "session_failed"));
    }
    out.spans.push_back(std::move(root));
}

} // namespace paddock::otlp
