#pragma once
// A session's log as OTLP spans with the OpenTelemetry GenAI semantic conventions
// (docs/observability.md lists every attribute):
//
//   invoke_agent AGENT         the session (root): session.created to the state.changed that ends it
//     chat MODEL               each model call: model.response (or model.error), started latency_ms
//                              before it (or at its model.request, when one is recorded)
//     execute_tool TOOL        each tool call: tool.call to the tool.result with its call_id; the
//                              calls of one response run one after the other
//
// Deterministic from the log: the same events give the same spans, ids included (the trace id
// from the session id, a span id from the session id and the seq of the event that opened it), so a
// re-export after a crash sends spans a receiver that dedups by id has already seen, unchanged.
//
// Each span carries emitSeq, the event that completes it: a tool call's tool.result, the session's
// ending state.changed, and for a model call the event after its model.response (its cost, which
// the engine appends with it, so the span carries the call's price). A span is exported once the
// log reaches its emitSeq; the export cursor (export_cursor.h) records how far that has been
// acknowledged, and replaying the log from seq 1 with SessionSpanMapper gives back exactly the spans
// past it.
//
// Known limits: a tool call still open when the session ends is closed with it (error.type
// "interrupted"); a tool.result recorded after that is not exported again. The root span is
// exported at the first end; events after it (a sandbox released, a debug shell) add no span.
//
// Threads: one thread at a time (the exporter's); no locks.

#include "broker/core/event.h"
#include "broker/core/session_state.h"
#include "broker/otlp/otlp_span.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::otlp {

// 32 lowercase hex digits: the first 16 bytes of SHA-256 over the session id (never all zero).
std::string traceIdFor(std::string_view sessionId);
// 16 lowercase hex digits: the first 8 bytes of SHA-256 over the session id, what the span is
// ("session", "chat", "execute_tool") and the seq of the event that opened it (never all zero).
std::string spanIdFor(std::string_view sessionId, std::string_view what, int64_t seq);

// gen_ai.provider.name for a session's model as submitted: "openai", "openai:local" -> "openai";
// "anthropic..." -> "anthropic"; "scripted" -> "paddock.scripted" (a playbook, no provider).
std::string providerFor(std::string_view sessionModel);

// What applying one event completed.
struct Completed {
    std::vector<ExportSpan> spans;
    std::vector<ModelCall> calls;
};

class SessionSpanMapper {
public:
    explicit SessionSpanMapper(std::string sessionId);

    // The next event of the session's log, in seq order from seq 1. Appends to out whatever it
    // completes, in emitSeq order.
    void apply(const core::Event &event, Completed &out);

    const std::string &sessionId() const { return m_sessionId; }
    int64_t lastSeq() const { return m_state.lastSeq; }
    // Whether the root span has been made (the session ended).
    bool ended() const { return m_rootDone; }
    const core::SessionState &state() const { return m_state; }

private:
    struct OpenTool {
        int64_t callSeq = 0;
        int64_t callTimeMs = 0;
        std::string name;
    };
    struct HeldModel {
        ExportSpan span;
        ModelCall call;
    };

    void onModelResponse(const core::Event &event, const nlohmann::json &payload);
    void onModelError(const core::Event &event, const nlohmann::json &payload, Completed &out);
    void onToolResult(const core::Event &event, const nlohmann::json &payload, Completed &out);
    void finishSession(const core::Event &event, Completed &out);

    ExportSpan child(std::string_view what, int64_t openSeq) const;
    void addSessionPlace(ExportSpan &span) const;   // tier, pool, sandbox at the time

    const std::string m_sessionId;
    const std::string m_traceId;
    const std::string m_rootId;
    core::SessionState m_state;
    std::string m_provider;
    int64_t m_modelRequestMs = -1;          // a model.request since the last response
    std::optional<HeldModel> m_held;        // a response waiting for the event after it (its cost)
    std::map<std::string, OpenTool> m_tools;   // call_id -> its open call
    int64_t m_lastToolEndMs = 0;
    int64_t m_inputTokens = 0, m_outputTokens = 0, m_cachedTokens = 0;
    int64_t m_modelCalls = 0, m_toolCalls = 0;
    bool m_rootDone = false;
};

} // namespace paddock::otlp
