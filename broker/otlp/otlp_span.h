#pragma once
// What the OTLP exporter sends, as plain values before they become OTLP JSON (otlp_json.h): spans
// with typed attributes, and the figures of each model call that the GenAI metrics count. Made by
// SessionSpanMapper (span_mapping.h) from a session's log.
//
// Threads: plain values; copy freely.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace paddock::otlp {

// An attribute's value, as OTLP's AnyValue: string, int, double, bool, or an array of strings.
using AttributeValue = std::variant<std::string, int64_t, double, bool, std::vector<std::string>>;

struct Attribute {
    std::string key;
    AttributeValue value;
};

// Builders that say which AnyValue a value becomes (a string literal must not become a bool).
inline Attribute textAttribute(std::string key, std::string value) { return {std::move(key), std::move(value)}; }
inline Attribute intAttribute(std::string key, int64_t value) { return {std::move(key), value}; }
inline Attribute doubleAttribute(std::string key, double value) { return {std::move(key), value}; }
inline Attribute boolAttribute(std::string key, bool value) { return {std::move(key), value}; }
inline Attribute textsAttribute(std::string key, std::vector<std::string> values) { return {std::move(key), std::move(values)}; }

// OTLP's Span.SpanKind values.
enum class SpanKind : int { Internal = 1, Server = 2, Client = 3 };

struct ExportSpan {
    std::string sessionId;
    std::string traceId;        // 32 lowercase hex digits, from the session id
    std::string spanId;         // 16 lowercase hex digits, from the session id and the seq that opened it
    std::string parentSpanId;   // empty for the session's root span
    std::string name;           // "invoke_agent builder", "chat gpt-4o", "execute_tool run_command"
    SpanKind kind = SpanKind::Internal;
    int64_t startUnixMs = 0;
    int64_t endUnixMs = 0;
    std::vector<Attribute> attributes;
    bool error = false;
    std::string statusMessage;  // with error: what failed
    // The event that completes the span: it is exported once the session's log has reached it, and
    // the cursor passes it only once the receiver has acknowledged the span.
    int64_t emitSeq = 0;
};

// One model call, for gen_ai.client.token.usage and gen_ai.client.operation.duration.
struct ModelCall {
    std::string sessionId;
    int64_t emitSeq = 0;        // as its span's
    std::string provider;       // gen_ai.provider.name
    std::string requestModel;   // gen_ai.request.model
    std::string errorType;      // empty: it answered
    int64_t startUnixMs = 0;
    int64_t endUnixMs = 0;
    bool hasUsage = false;
    int64_t inputTokens = 0;
    int64_t outputTokens = 0;
};

} // namespace paddock::otlp
