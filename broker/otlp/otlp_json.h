#pragma once
// OTLP/HTTP's JSON encoding (the protobuf JSON mapping OTLP specifies) of what the exporter sends:
// an ExportTraceServiceRequest (resourceSpans -> scopeSpans -> spans) and an
// ExportMetricsServiceRequest (resourceMetrics -> scopeMetrics -> metrics) with the GenAI client
// histograms. Ids are lowercase hex (traceId 32 digits, spanId 16), 64-bit integers and times in
// nanoseconds are decimal strings, enums (span kind, status code, temporality) are integers, every
// attribute a key with a typed AnyValue.
//
// Threads: pure functions.

#include "broker/otlp/otlp_span.h"

#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <vector>

namespace paddock::otlp {

// Who sends: the resource's attributes (service.name, host.name, ...) and the instrumentation scope.
struct Producer {
    std::vector<Attribute> resource;
    std::string scopeName = "paddock.broker";
    std::string scopeVersion;
};

// The GenAI semantic conventions' bucket boundaries (gen_ai.client.token.usage in tokens,
// gen_ai.client.operation.duration in seconds).
const std::vector<double> &tokenUsageBuckets();
const std::vector<double> &operationDurationBuckets();

nlohmann::json anyValue(const AttributeValue &value);
nlohmann::json attributesJson(const std::vector<Attribute> &attributes);

// The body of POST {endpoint}/v1/traces.
std::string encodeTraces(const Producer &producer, std::span<const ExportSpan> spans);

// The body of POST {endpoint}/v1/metrics: gen_ai.client.token.usage (one point per provider,
// model and gen_ai.token.type) and gen_ai.client.operation.duration (per provider, model and
// error.type) over the calls given, as delta histograms whose interval is from the first call's
// start to the last call's end (times from the log, so a re-export sends the same points).
std::string encodeMetrics(const Producer &producer, std::span<const ModelCall> calls);

} // namespace paddock::otlp
