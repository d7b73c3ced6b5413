#pragma once
// A fake OTLP/HTTP receiver (JSON encoding) on 127.0.0.1, built on cpp-httplib: POST /v1/traces and
// /v1/metrics, every payload checked against the OTLP JSON mapping before it is taken (a payload that
// breaks it is answered 400 and its problems kept for the test to print), and what it took recorded:
// each span by id, each metric data point, each post's headers.
//
// The checks (checkTracesJson, checkMetricsJson, also usable without HTTP): the resourceSpans ->
// scopeSpans -> spans nesting; traceId 32 and spanId/parentSpanId 16 lowercase hex digits, not all
// zero; startTimeUnixNano/endTimeUnixNano (and a point's times) decimal strings, end not before
// start; kind and status code integers in range; every attribute a non-empty key with a typed
// AnyValue holding exactly one of stringValue, intValue (a decimal string), doubleValue, boolValue,
// arrayValue; no field outside the mapping's names; histograms with count and bucketCounts as
// decimal strings, one more bucket than bounds, counts adding up. Parent links are checked across
// posts (a session's root span ends last): parentProblems().
//
// A test makes it misbehave: answers scripted in order (503 with Retry-After, 429, 500...), a delay
// before every answer, or posts held until the test lets them go (to kill the broker with a post in
// flight). A post answered other than 2xx is not taken: its spans are not recorded.
//
// Threads: the test's thread configures it and reads what it recorded; httplib's workers answer.

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace paddock::test {

namespace otlp_check {

using nlohmann::json;

inline bool isHex(const std::string &text, size_t digits)
{
    return text.size() == digits
        && std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); })
        && text.find_first_not_of('0') != std::string::npos;
}

inline bool isDecimal(const json &value, bool negativeAllowed = false)
{
    if (!value.is_string())
        return false;
    std::string text = value.get<std::string>();
    if (negativeAllowed && !text.empty() && text.front() == '-')
        text.erase(0, 1);
    return !text.empty() && text.size() <= 20 && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

inline unsigned long long decimal(const json &value)
{
    return std::stoull(value.get<std::string>());
}

inline void onlyKeys(const json &object, std::initializer_list<const char *> keys, const std::string &where,
                     std::vector<std::string> &problems)
{
    for (const auto &[key, v] : object.items()) {
        if (std::none_of(keys.begin(), keys.end(), [&](const char *k) { return key == k; }))
            problems.push_back(where + ": unknown field '" + key + "'");
    }
}

inline void checkAnyValue(const json &value, const std::string &where, std::vector<std::string> &problems)
{
    if (!value.is_object() || value.size() != 1) {
        problems.push_back(where + ": an AnyValue must be an object with exactly one typed field: " + value.dump());
        return;
    }
    const auto &[type, v] = *value.items().begin();
    if (type == "stringValue" && v.is_string())
        return;
    if (type == "boolValue" && v.is_boolean())
        return;
    if (type == "doubleValue" && v.is_number())
        return;
    if (type == "intValue" && isDecimal(v, true))
        return;
    if (type == "arrayValue" && v.is_object() && v.contains("values") && v["values"].is_array()) {
        for (size_t i = 0; i < v["values"].size(); ++i)
            checkAnyValue(v["values"][i], where + "[" + std::to_string(i) + "]", problems);
        return;
    }
    problems.push_back(where + ": '" + type + "' is not a typed AnyValue field with a value of its type: " + value.dump());
}

inline void checkAttributes(const json &parent, const std::string &where, std::vector<std::string> &problems)
{
    if (!parent.contains("attributes"))
        return;
    const json &attributes = parent["attributes"];
    if (!attributes.is_array()) {
        problems.push_back(where + ": attributes must be an array of {key, value}");
        return;
    }
    std::set<std::string> keys;
    for (const auto &attribute : attributes) {
        if (!attribute.is_object() || !attribute.contains("key") || !attribute["key"].is_string()
            || attribute["key"].get<std::string>().empty() || !attribute.contains("value")) {
            problems.push_back(where + ": an attribute without a key or a value: " + attribute.dump());
            continue;
        }
        const std::string key = attribute["key"];
        if (!keys.insert(key).second)
            problems.push_back(where + ": attribute '" + key + "' given twice");
        onlyKeys(attribute, {"key", "value"}, where + "." + key, problems);
        checkAnyValue(attribute["value"], where + "." + key, problems);
    }
}

inline void checkResource(const json &resource, const std::string &where, std::vector<std::string> &problems)
{
    if (!resource.is_object()) {
        problems.push_back(where + ".resource must be an object");
        return;
    }
    onlyKeys(resource, {"attributes", "droppedAttributesCount"}, where + ".resource", problems);
    checkAttributes(resource, where + ".resource", problems);
}

inline void checkScope(const json &holder, const std::string &where, std::vector<std::string> &problems)
{
    if (!holder.contains("scope"))
        return;
    const json &scope = holder["scope"];
    if (!scope.is_object() || (scope.contains("name") && !scope["name"].is_string())
        || (scope.contains("version") && !scope["version"].is_string()))
        problems.push_back(where + ".scope must be an object with a string name and version");
    else
        onlyKeys(scope, {"name", "version", "attributes", "droppedAttributesCount"}, where + ".scope", problems);
}

inline void checkSpan(const json &span, const std::string &where, std::vector<std::string> &problems)
{
    if (!span.is_object()) {
        problems.push_back(where + " is not an object");
        return;
    }
    onlyKeys(span, {"traceId", "spanId", "traceState", "parentSpanId", "flags", "name", "kind", "startTimeUnixNano",
                    "endTimeUnixNano", "attributes", "droppedAttributesCount", "events", "droppedEventsCount", "links",
                    "droppedLinksCount", "status"},
             where, problems);
    if (!span.contains("traceId") || !span["traceId"].is_string() || !isHex(span["traceId"], 32))
        problems.push_back(where + ": traceId must be 32 lowercase hex digits, not all zero");
    if (!span.contains("spanId") || !span["spanId"].is_string() || !isHex(span["spanId"], 16))
        problems.push_back(where + ": spanId must be 16 lowercase hex digits, not all zero");
    if (span.contains("parentSpanId") && (!span["parentSpanId"].is_string() || !isHex(span["parentSpanId"], 16)))
        problems.push_back(where + ": parentSpanId must be 16 lowercase hex digits when present");
    if (!span.contains("name") || !span["name"].is_string() || span["name"].get<std::string>().empty())
        problems.push_back(where + ": name must be a non-empty string");
    if (span.contains("kind") && (!span["kind"].is_number_integer() || span["kind"] < 0 || span["kind"] > 5))
        problems.push_back(where + ": kind must be an integer 0..5 (SpanKind)");
    const bool times = span.contains("startTimeUnixNano") && isDecimal(span["startTimeUnixNano"])
        && span.contains("endTimeUnixNano") && isDecimal(span["endTimeUnixNano"]);
    if (!times)
        problems.push_back(where + ": startTimeUnixNano and endTimeUnixNano must be decimal strings");
    else if (decimal(span["endTimeUnixNano"]) < decimal(span["startTimeUnixNano"]))
        problems.push_back(where + ": ends before it starts");
    checkAttributes(span, where, problems);
    if (span.contains("status")) {
        const json &status = span["status"];
        if (!status.is_object())
            problems.push_back(where + ": status must be an object");
        else {
            onlyKeys(status, {"code", "message"}, where + ".status", problems);
            if (status.contains("code") && (!status["code"].is_number_integer() || status["code"] < 0 || status["code"] > 2))
                problems.push_back(where + ": status.code must be an integer 0..2 (StatusCode)");
            if (status.contains("message") && !status["message"].is_string())
                problems.push_back(where + ": status.message must be a string");
        }
    }
}

// The problems of an ExportTraceServiceRequest in JSON; empty when it follows the mapping.
inline std::vector<std::string> checkTracesJson(const json &body)
{
    std::vector<std::string> problems;
    if (!body.is_object() || !body.contains("resourceSpans") || !body["resourceSpans"].is_array()) {
        problems.push_back("the body must be an object with a resourceSpans array");
        return problems;
    }
    onlyKeys(body, {"resourceSpans"}, "body", problems);
    for (size_t r = 0; r < body["resourceSpans"].size(); ++r) {
        const json &resourceSpans = body["resourceSpans"][r];
        const std::string where = "resourceSpans[" + std::to_string(r) + "]";
        if (!resourceSpans.is_object() || !resourceSpans.contains("scopeSpans") || !resourceSpans["scopeSpans"].is_array()) {
            problems.push_back(where + " must be an object with a scopeSpans array");
            continue;
        }
        onlyKeys(resourceSpans, {"resource", "scopeSpans", "schemaUrl"}, where, problems);
        if (resourceSpans.contains("resource"))
            checkResource(resourceSpans["resource"], where, problems);
        for (size_t s = 0; s < resourceSpans["scopeSpans"].size(); ++s) {
            const json &scopeSpans = resourceSpans["scopeSpans"][s];
            const std::string at = where + ".scopeSpans[" + std::to_string(s) + "]";
            if (!scopeSpans.is_object() || !scopeSpans.contains("spans") || !scopeSpans["spans"].is_array()) {
                problems.push_back(at + " must be an object with a spans array");
                continue;
            }
            onlyKeys(scopeSpans, {"scope", "spans", "schemaUrl"}, at, problems);
            checkScope(scopeSpans, at, problems);
            for (size_t i = 0; i < scopeSpans["spans"].size(); ++i)
                checkSpan(scopeSpans["spans"][i], at + ".spans[" + std::to_string(i) + "]", problems);
        }
    }
    return problems;
}

inline void checkHistogramPoint(const json &point, const std::string &where, std::vector<std::string> &problems)
{
    onlyKeys(point, {"attributes", "startTimeUnixNano", "timeUnixNano", "count", "sum", "bucketCounts", "explicitBounds",
                     "exemplars", "flags", "min", "max"},
             where, problems);
    checkAttributes(point, where, problems);
    if (!point.contains("timeUnixNano") || !isDecimal(point["timeUnixNano"])
        || (point.contains("startTimeUnixNano") && !isDecimal(point["startTimeUnixNano"])))
        problems.push_back(where + ": startTimeUnixNano and timeUnixNano must be decimal strings");
    if (!point.contains("count") || !isDecimal(point["count"])) {
        problems.push_back(where + ": count must be a decimal string");
        return;
    }
    if (point.contains("sum") && !point["sum"].is_number())
        problems.push_back(where + ": sum must be a number");
    const json bounds = point.value("explicitBounds", json::array());
    const json counts = point.value("bucketCounts", json::array());
    if (!bounds.is_array() || !counts.is_array() || (!counts.empty() && counts.size() != bounds.size() + 1)) {
        problems.push_back(where + ": bucketCounts must have one more entry than explicitBounds");
        return;
    }
    unsigned long long total = 0;
    for (const auto &count : counts) {
        if (!isDecimal(count))
            problems.push_back(where + ": every bucketCounts entry must be a decimal string");
        else
            total += decimal(count);
    }
    for (size_t i = 0; i < bounds.size(); ++i) {
        if (!bounds[i].is_number() || (i > 0 && bounds[i].get<double>() <= bounds[i - 1].get<double>()))
            problems.push_back(where + ": explicitBounds must be increasing numbers");
    }
    if (!counts.empty() && total != decimal(point["count"]))
        problems.push_back(where + ": bucketCounts add up to " + std::to_string(total) + ", not count");
}

// The problems of an ExportMetricsServiceRequest in JSON (histograms, sums and gauges).
inline std::vector<std::string> checkMetricsJson(const json &body)
{
    std::vector<std::string> problems;
    if (!body.is_object() || !body.contains("resourceMetrics") || !body["resourceMetrics"].is_array()) {
        problems.push_back("the body must be an object with a resourceMetrics array");
        return problems;
    }
    onlyKeys(body, {"resourceMetrics"}, "body", problems);
    for (size_t r = 0; r < body["resourceMetrics"].size(); ++r) {
        const json &resourceMetrics = body["resourceMetrics"][r];
        const std::string where = "resourceMetrics[" + std::to_string(r) + "]";
        if (!resourceMetrics.is_object() || !resourceMetrics.contains("scopeMetrics")
            || !resourceMetrics["scopeMetrics"].is_array()) {
            problems.push_back(where + " must be an object with a scopeMetrics array");
            continue;
        }
        onlyKeys(resourceMetrics, {"resource", "scopeMetrics", "schemaUrl"}, where, problems);
        if (resourceMetrics.contains("resource"))
            checkResource(resourceMetrics["resource"], where, problems);
        for (size_t s = 0; s < resourceMetrics["scopeMetrics"].size(); ++s) {
            const json &scopeMetrics = resourceMetrics["scopeMetrics"][s];
            const std::string at = where + ".scopeMetrics[" + std::to_string(s) + "]";
            if (!scopeMetrics.is_object() || !scopeMetrics.contains("metrics") || !scopeMetrics["metrics"].is_array()) {
                problems.push_back(at + " must be an object with a metrics array");
                continue;
            }
            onlyKeys(scopeMetrics, {"scope", "metrics", "schemaUrl"}, at, problems);
            checkScope(scopeMetrics, at, problems);
            for (size_t m = 0; m < scopeMetrics["metrics"].size(); ++m) {
                const json &metric = scopeMetrics["metrics"][m];
                const std::string mat = at + ".metrics[" + std::to_string(m) + "]";
                onlyKeys(metric, {"name", "description", "unit", "gauge", "sum", "histogram", "exponentialHistogram",
                                  "summary", "metadata"},
                         mat, problems);
                if (!metric.contains("name") || !metric["name"].is_string() || metric["name"].get<std::string>().empty())
                    problems.push_back(mat + ": name must be a non-empty string");
                if (!metric.contains("histogram")) {
                    problems.push_back(mat + ": this receiver expects histograms (the GenAI client metrics)");
                    continue;
                }
                const json &histogram = metric["histogram"];
                if (!histogram.is_object() || !histogram.contains("dataPoints") || !histogram["dataPoints"].is_array()
                    || !histogram.contains("aggregationTemporality") || !histogram["aggregationTemporality"].is_number_integer()
                    || histogram["aggregationTemporality"] < 1 || histogram["aggregationTemporality"] > 2) {
                    problems.push_back(mat + ": a histogram needs dataPoints and aggregationTemporality 1 or 2");
                    continue;
                }
                for (size_t p = 0; p < histogram["dataPoints"].size(); ++p)
                    checkHistogramPoint(histogram["dataPoints"][p], mat + ".dataPoints[" + std::to_string(p) + "]", problems);
            }
        }
    }
    return problems;
}

// An attribute's value as JSON (the AnyValue's one field), or null when the span has no such key.
inline json attribute(const json &holder, const std::string &key)
{
    for (const auto &a : holder.value("attributes", json::array())) {
        if (a.value("key", "") == key) {
            const auto &[type, v] = *a["value"].items().begin();
            if (type == "intValue")
                return std::stoll(v.get<std::string>());
            if (type == "arrayValue") {
                json out = json::array();
                for (const auto &one : v["values"])
                    out.push_back(one.begin().value());
                return out;
            }
            return v;
        }
    }
    return nullptr;
}

} // namespace otlp_check

class FakeOtlpReceiver {
public:
    struct Answer {
        int status = 200;
        std::string retryAfter;       // the Retry-After header, when not empty
        std::string body = "{}";
    };

    struct Post {
        std::string path;
        std::string authorization;
        std::string contentType;
        int status = 0;               // what it was answered
        size_t items = 0;             // spans or data points in it
    };

    FakeOtlpReceiver() { std::signal(SIGPIPE, SIG_IGN); }
    ~FakeOtlpReceiver() { stop(); }
    FakeOtlpReceiver(const FakeOtlpReceiver &) = delete;
    FakeOtlpReceiver &operator=(const FakeOtlpReceiver &) = delete;

    // Listens on 127.0.0.1:port (0: any free port); false when the port cannot be bound. What it
    // recorded before a stop() is kept.
    bool start(int port = 0)
    {
        stop();
        m_server = std::make_unique<httplib::Server>();
        for (const char *path : {"/v1/traces", "/v1/metrics"}) {
            m_server->Post(path, [this](const httplib::Request &request, httplib::Response &response) {
                answer(request, response);
            });
        }
        m_port = port == 0 ? m_server->bind_to_any_port("127.0.0.1") : (m_server->bind_to_port("127.0.0.1", port) ? port : -1);
        if (m_port <= 0)
            return false;
        m_thread = std::thread([server = m_server.get()] { server->listen_after_bind(); });
        while (!m_server->is_running())
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return true;
    }

    // Stops listening; held posts are let go (answered 503, not taken).
    void stop()
    {
        {
            std::lock_guard lock(m_mutex);
            m_stopping = true;
            m_changed.notify_all();
        }
        if (m_server)
            m_server->stop();
        if (m_thread.joinable())
            m_thread.join();
        m_server.reset();
        std::lock_guard lock(m_mutex);
        m_stopping = false;
    }

    int port() const { return m_port; }
    std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(m_port); }

    // The answers to the next posts, in order; 200 after them.
    void script(std::vector<Answer> answers)
    {
        std::lock_guard lock(m_mutex);
        m_script.assign(answers.begin(), answers.end());
    }
    // Every post waits this long before it is answered.
    void setDelay(std::chrono::milliseconds delay)
    {
        std::lock_guard lock(m_mutex);
        m_delay = delay;
    }
    // Posts wait unanswered (and untaken) until release().
    void hold()
    {
        std::lock_guard lock(m_mutex);
        m_holding = true;
    }
    // Lets the held posts go with `answer` (2xx: taken); later posts are held too when keepHolding.
    void release(Answer answer, bool keepHolding = false)
    {
        std::lock_guard lock(m_mutex);
        m_holding = keepHolding;
        m_releaseAnswer = std::move(answer);
        ++m_releases;
        m_changed.notify_all();
    }
    // Waits until `total` posts have been held since the start (a post still held or let go);
    // false after timeout.
    bool waitHeld(std::chrono::milliseconds timeout, int total = 1)
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, timeout, [&] { return m_heldTotal >= total; });
    }
    int heldTotal()
    {
        std::lock_guard lock(m_mutex);
        return m_heldTotal;
    }

    // Waits until ready() (called under the lock, with this receiver) holds; false after timeout.
    template <typename Predicate>
    bool waitUntil(std::chrono::milliseconds timeout, Predicate ready)
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, timeout, [&] { return ready(*this); });
    }

    // Under waitUntil's lock or via the accessors below.
    size_t distinctSpansLocked() const { return m_spanCounts.size(); }
    size_t postsLocked() const { return m_posts.size(); }
    size_t takenPostsLocked(const std::string &path) const
    {
        return static_cast<size_t>(std::count_if(m_posts.begin(), m_posts.end(), [&](const Post &p) {
            return p.path == path && p.status >= 200 && p.status < 300;
        }));
    }

    std::vector<std::string> problems()
    {
        std::lock_guard lock(m_mutex);
        return m_problems;
    }
    std::vector<Post> posts()
    {
        std::lock_guard lock(m_mutex);
        return m_posts;
    }
    // Every span taken, in the order it came (a span sent twice is here twice).
    std::vector<nlohmann::json> spans()
    {
        std::lock_guard lock(m_mutex);
        return m_spans;
    }
    // How many times each span id was taken.
    std::map<std::string, int> spanCounts()
    {
        std::lock_guard lock(m_mutex);
        return m_spanCounts;
    }
    // Every metric taken, each {"name", "unit", "point"} with one data point.
    std::vector<nlohmann::json> metricPoints()
    {
        std::lock_guard lock(m_mutex);
        return m_points;
    }
    // The resource attributes of the last post taken.
    nlohmann::json lastResource()
    {
        std::lock_guard lock(m_mutex);
        return m_resource;
    }

    // Parent links over every span taken: each parentSpanId names a span of the same trace, and each
    // trace has exactly one root.
    std::vector<std::string> parentProblems()
    {
        std::lock_guard lock(m_mutex);
        std::vector<std::string> problems;
        std::map<std::string, std::string> traceOf;          // span id -> trace id
        std::map<std::string, std::set<std::string>> roots;  // trace id -> its root spans' ids
        for (const auto &span : m_spans) {
            traceOf[span["spanId"]] = span["traceId"];
            auto &traceRoots = roots[span["traceId"]];
            if (!span.contains("parentSpanId"))
                traceRoots.insert(span["spanId"].get<std::string>());
        }
        for (const auto &span : m_spans) {
            if (!span.contains("parentSpanId"))
                continue;
            const auto parent = traceOf.find(span["parentSpanId"]);
            if (parent == traceOf.end())
                problems.push_back("span " + span["spanId"].get<std::string>() + " names a parent never received");
            else if (parent->second != span["traceId"])
                problems.push_back("span " + span["spanId"].get<std::string>() + " has a parent in another trace");
        }
        for (const auto &[trace, ids] : roots) {
            if (ids.size() != 1)
                problems.push_back("trace " + trace + " has " + std::to_string(ids.size()) + " root spans");
        }
        return problems;
    }

private:
    void answer(const httplib::Request &request, httplib::Response &response)
    {
        Post post;
        post.path = request.path;
        post.authorization = request.get_header_value("Authorization");
        post.contentType = request.get_header_value("Content-Type");
        const bool traces = request.path == "/v1/traces";
        const auto body = nlohmann::json::parse(request.body, nullptr, false);
        std::vector<std::string> problems;
        if (post.contentType != "application/json")
            problems.push_back("Content-Type is '" + post.contentType + "', not application/json");
        if (body.is_discarded())
            problems.push_back("the body is not JSON");
        else {
            auto found = traces ? otlp_check::checkTracesJson(body) : otlp_check::checkMetricsJson(body);
            problems.insert(problems.end(), found.begin(), found.end());
        }

        std::unique_lock lock(m_mutex);
        if (!problems.empty()) {
            for (auto &problem : problems)
                m_problems.push_back(request.path + ": " + problem);
            post.status = 400;
            m_posts.push_back(post);
            m_changed.notify_all();
            lock.unlock();
            response.status = 400;
            response.set_content(R"({"message":"the payload breaks the OTLP JSON mapping"})", "application/json");
            return;
        }
        Answer reply;
        if (!m_script.empty()) {
            reply = m_script.front();
            m_script.erase(m_script.begin());
        }
        if (m_delay.count() > 0)
            m_changed.wait_for(lock, m_delay, [this] { return m_stopping; });
        if (m_holding) {
            ++m_held;
            ++m_heldTotal;
            const int releases = m_releases;
            m_changed.notify_all();
            m_changed.wait(lock, [&] { return m_releases != releases || m_stopping; });
            --m_held;
            reply = m_stopping ? Answer{503, "", "{}"} : m_releaseAnswer;
        }
        post.status = reply.status;
        if (reply.status >= 200 && reply.status < 300)
            take(body, traces, post);
        m_posts.push_back(post);
        m_changed.notify_all();
        lock.unlock();
        response.status = reply.status;
        if (!reply.retryAfter.empty())
            response.set_header("Retry-After", reply.retryAfter);
        response.set_content(reply.body, "application/json");
    }

    // Under m_mutex.
    void take(const nlohmann::json &body, bool traces, Post &post)
    {
        const char *outer = traces ? "resourceSpans" : "resourceMetrics";
        const char *inner = traces ? "scopeSpans" : "scopeMetrics";
        for (const auto &resource : body[outer]) {
            m_resource = resource.value("resource", nlohmann::json::object()).value("attributes", nlohmann::json::array());
            for (const auto &scope : resource[inner]) {
                if (traces) {
                    for (const auto &span : scope["spans"]) {
                        m_spans.push_back(span);
                        ++m_spanCounts[span["spanId"].get<std::string>()];
                        ++post.items;
                    }
                } else {
                    for (const auto &metric : scope["metrics"]) {
                        for (const auto &point : metric["histogram"]["dataPoints"]) {
                            m_points.push_back({{"name", metric["name"]}, {"unit", metric.value("unit", "")}, {"point", point}});
                            ++post.items;
                        }
                    }
                }
            }
        }
    }

    std::unique_ptr<httplib::Server> m_server;
    std::thread m_thread;
    int m_port = -1;

    std::mutex m_mutex;
    std::condition_variable m_changed;
    std::vector<Answer> m_script;
    std::chrono::milliseconds m_delay{0};
    bool m_holding = false;
    bool m_stopping = false;
    int m_held = 0;
    int m_heldTotal = 0;
    int m_releases = 0;
    Answer m_releaseAnswer;
    std::vector<std::string> m_problems;
    std::vector<Post> m_posts;
    std::vector<nlohmann::json> m_spans;
    std::map<std::string, int> m_spanCounts;
    std::vector<nlohmann::json> m_points;
    nlohmann::json m_resource = nlohmann::json::array();
};

} // namespace paddock::test
