#include "broker/otlp/otlp_json.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace paddock::otlp {

namespace {

using nlohmann::json;

// OTLP's enums as the JSON mapping writes them: numbers.
constexpr int kStatusError = 2;
constexpr int kTemporalityDelta = 1;

std::string nanos(int64_t unixMs)
{
    return std::to_string(unixMs) + "000000";
}

json scopeJson(const Producer &producer)
{
    json scope{{"name", producer.scopeName}};
    if (!producer.scopeVersion.empty())
        scope["version"] = producer.scopeVersion;
    return scope;
}

json spanJson(const ExportSpan &span)
{
    json out{{"traceId", span.traceId},
             {"spanId", span.spanId},
             {"name", span.name},
             {"kind", static_cast<int>(span.kind)},
             {"startTimeUnixNano", nanos(span.startUnixMs)},
             {"endTimeUnixNano", nanos(std::max(span.endUnixMs, span.startUnixMs))},
             {"attributes", attributesJson(span.attributes)}};
    if (!span.parentSpanId.empty())
        out["parentSpanId"] = span.parentSpanId;
    if (span.error)
        out["status"] = json{{"code", kStatusError}, {"message", span.statusMessage}};
    else
        out["status"] = json::object();   // STATUS_CODE_UNSET
    return out;
}

// One histogram series being summed: its attributes, interval and figures.
struct Series {
    std::vector<Attribute> attributes;
    int64_t startMs = std::numeric_limits<int64_t>::max();
    int64_t endMs = 0;
    int64_t count = 0;
    double sum = 0;
    double min = std::numeric_limits<double>::max();
    double max = std::numeric_limits<double>::lowest();
    std::vector<int64_t> buckets;

    void add(double value, const std::vector<double> &bounds, int64_t fromMs, int64_t toMs)
    {
        if (buckets.empty())
            buckets.assign(bounds.size() + 1, 0);
        // Bucket i holds bounds[i-1] < value <= bounds[i]; the last one what is above every bound.
        const auto at = std::lower_bound(bounds.begin(), bounds.end(), value);
        ++buckets[static_cast<size_t>(at - bounds.begin())];
        ++count;
        sum += value;
        min = std::min(min, value);
        max = std::max(max, value);
        startMs = std::min(startMs, fromMs);
        endMs = std::max(endMs, toMs);
    }

    json point(const std::vector<double> &bounds) const
    {
        json counts = json::array();
        for (int64_t n : buckets)
            counts.push_back(std::to_string(n));
        return json{{"attributes", attributesJson(attributes)},
                    {"startTimeUnixNano", nanos(startMs)},
                    {"timeUnixNano", nanos(std::max(endMs, startMs))},
                    {"count", std::to_string(count)},
                    {"sum", sum},
                    {"bucketCounts", counts},
                    {"explicitBounds", bounds},
                    {"min", min},
                    {"max", max}};
    }
};

json histogram(const char *name, const char *unit, const char *description, const std::vector<double> &bounds,
               const std::map<std::tuple<std::string, std::string, std::string>, Series> &series)
{
    json points = json::array();
    for (const auto &[key, one] : series)
        points.push_back(one.point(bounds));
    return json{{"name", name},
                {"unit", unit},
                {"description", description},
                {"histogram", {{"aggregationTemporality", kTemporalityDelta}, {"dataPoints", points}}}};
}

} // namespace

const std::vector<double> &tokenUsageBuckets()
{
    static const std::vector<double> bounds{1,      4,       16,      64,       256,      1024,     4096,
                                            16384,  65536,   262144,  1048576,  4194304,  16777216, 67108864};
    return bounds;
}

const std::vector<double> &operationDurationBuckets()
{
    static const std::vector<double> bounds{0.01, 0.02, 0.04, 0.08, 0.16,  0.32,  0.64,
                                            1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92};
    return bounds;
}

json anyValue(const AttributeValue &value)
{
    struct Visit {
        json operator()(const std::string &v) const { return {{"stringValue", v}}; }
        json operator()(int64_t v) const { return {{"intValue", std::to_string(v)}}; }
        json operator()(double v) const { return {{"doubleValue", v}}; }
        json operator()(bool v) const { return {{"boolValue", v}}; }
        json operator()(const std::vector<std::string> &v) const
        {
            json values = json::array();
            for (const auto &one : v)
                values.push_back({{"stringValue", one}});
            return {{"arrayValue", {{"values", values}}}};
        }
    };
    return std::visit(Visit{}, value);
}

json attributesJson(const std::vector<Attribute> &attributes)
{
    json out = json::array();
    for (const auto &attribute : attributes)
        out.push_back({{"key", attribute.key}, {"value", anyValue(attribute.value)}});
    return out;
}

std::string encodeTraces(const Producer &producer, std::span<const ExportSpan> spans)
{
    json list = json::array();
    for (const auto &span : spans)
        list.push_back(spanJson(span));
    const json body{{"resourceSpans",
                     {{{"resource", {{"attributes", attributesJson(producer.resource)}}},
                       {"scopeSpans", {{{"scope", scopeJson(producer)}, {"spans", list}}}}}}}};
    return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string encodeMetrics(const Producer &producer, std::span<const ModelCall> calls)
{
    using Key = std::tuple<std::string, std::string, std::string>;   // provider, model, token type or error type
    std::map<Key, Series> tokens;
    std::map<Key, Series> durations;
    auto base = [](const ModelCall &call) {
        return std::vector<Attribute>{textAttribute("gen_ai.operation.name", "chat"),
                                      textAttribute("gen_ai.provider.name", call.provider),
                                      textAttribute("gen_ai.request.model", call.requestModel)};
    };
    for (const auto &call : calls) {
        if (call.hasUsage) {
            for (const char *type : {"input", "output"}) {
                Series &series = tokens[{call.provider, call.requestModel, type}];
                if (series.attributes.empty()) {
                    series.attributes = base(call);
                    series.attributes.push_back(textAttribute("gen_ai.token.type", type));
                }
                const int64_t n = std::string_view(type) == "input" ? call.inputTokens : call.outputTokens;
                series.add(static_cast<double>(n), tokenUsageBuckets(), call.startUnixMs, call.endUnixMs);
            }
        }
        Series &series = durations[{call.provider, call.requestModel, call.errorType}];
        if (series.attributes.empty()) {
            series.attributes = base(call);
            if (!call.errorType.empty())
                series.attributes.push_back(textAttribute("error.type", call.errorType));
        }
        const double seconds = static_cast<double>(std::max<int64_t>(call.endUnixMs - call.startUnixMs, 0)) / 1000.0;
        series.add(seconds, operationDurationBuckets(), call.startUnixMs, call.endUnixMs);
    }
    json metrics = json::array();
    if (!tokens.empty())
        metrics.push_back(histogram("gen_ai.client.token.usage", "{token}", "Number of input and output tokens used",
                                    tokenUsageBuckets(), tokens));
    if (!durations.empty())
        metrics.push_back(histogram("gen_ai.client.operation.duration", "s", "GenAI operation duration",
                                    operationDurationBuckets(), durations));
    const json body{{"resourceMetrics",
                     {{{"resource", {{"attributes", attributesJson(producer.resource)}}},
                       {"scopeMetrics", {{{"scope", scopeJson(producer)}, {"metrics", metrics}}}}}}}};
    return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace paddock::otlp
