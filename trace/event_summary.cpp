#include "trace/event_summary.h"

#include "trace/event_summary_kinds.h"
#include "trace/safe_text.h"
#include "trace/summary_text.h"

#include <algorithm>
#include <unordered_map>

namespace paddock::trace {
namespace {

using nlohmann::json;
using namespace text;

// Tool arguments arrive as an object, or as a JSON string of one (OpenAI's spelling).
json arguments(const json &payload)
{
    const auto it = payload.find("arguments");
    if (it == payload.end())
        return json::object();
    if (it->is_object())
        return *it;
    if (it->is_string()) {
        json parsed = json::parse(it->get_ref<const std::string &>(), nullptr, false);
        if (parsed.is_object())
            return parsed;
    }
    return json::object();
}

// key=value for each scalar field, strings with spaces quoted, nested values as compact JSON; what
// a kind without words of its own shows.
std::string keyValues(const json &payload)
{
    std::vector<std::string> parts;
    for (const auto &[key, value] : payload.items()) {
        if (value.is_null() || (value.is_string() && value.get_ref<const std::string &>().empty())
            || ((value.is_array() || value.is_object()) && value.empty()))
            continue;
        std::string shown = value.is_string() ? safeLine(value.get_ref<const std::string &>(), kFieldChars)
                                              : safeLine(value.dump(-1, ' ', false, json::error_handler_t::replace), kFieldChars);
        if (value.is_string() && shown.find_first_of(" \"") != std::string::npos)
            shown = "\"" + shown + "\"";
        parts.push_back(safeLine(key, 40) + "=" + shown);
    }
    return join(parts, " ");
}

void generic(std::string_view, const json &payload, EventLine &line) { line.summary = keyValues(payload); }

void sessionCreated(std::string_view, const json &p, EventLine &line)
{
    std::string goal = str(p, "goal");
    if (goal.empty() && has(p, "playbook_toml") && str(p, "playbook").empty())
        goal = "a submitted playbook (" + bytes(rawSize(p, "playbook_toml")) + ")";
    std::vector<std::string> parts;
    if (const std::string playbook = str(p, "playbook"); !playbook.empty())
        parts.push_back("playbook " + playbook);
    if (const std::string model = str(p, "model"); !model.empty())
        parts.push_back("model " + model);
    if (const std::string tier = str(p, "tier"); !tier.empty())
        parts.push_back("tier " + tier);
    if (const std::string agent = str(p, "agent"); !agent.empty())
        parts.push_back("agent " + agent);
    if (const int64_t budget = num(p, "budget_micros"); budget > 0)
        parts.push_back("budget " + dollars(budget));
    if (const auto secrets = p.find("secrets"); secrets != p.end() && secrets->is_array() && !secrets->empty())
        parts.push_back(count(static_cast<int64_t>(secrets->size()), "secret", "secrets") + " granted");
    if (const std::string by = str(p, "submitted_by"); !by.empty())
        parts.push_back("by " + by);
    line.summary = withDetail(goal, join(parts), goal.empty() ? "" : "; ");
}

void stateChanged(std::string_view, const json &p, EventLine &line)
{
    const std::string status = str(p, "status");
    line.summary = withDetail(status, str(p, "reason", 200));
    line.isError = status == "failed";
}

void modelRequest(std::string_view, const json &p, EventLine &line)
{
    std::vector<std::string> parts{"calling " + (str(p, "model").empty() ? std::string("the model") : str(p, "model"))};
    if (const int64_t attempt = num(p, "attempt"); attempt > 1)
        parts.push_back("attempt " + std::to_string(attempt));
    if (const auto messages = p.find("messages"); messages != p.end() && messages->is_array())
        parts.push_back(count(static_cast<int64_t>(messages->size()), "message", "messages"));
    line.summary = join(parts);
}

void modelResponse(std::string_view, const json &p, EventLine &line)
{
    const json &usage = object(p, "usage");
    const int64_t in = num(usage, "input_tokens");
    const int64_t out = num(usage, "output_tokens");
    line.tokens = in + out;
    line.latencyMs = num(p, "latency_ms", -1);
    std::vector<std::string> parts{str(p, "model"), std::to_string(in) + " in / " + std::to_string(out) + " out tokens"};
    if (line.latencyMs >= 0)
        parts.push_back(millis(static_cast<double>(line.latencyMs)));
    if (const int64_t attempts = num(p, "attempts"); attempts > 1)
        parts.push_back(std::to_string(attempts) + " attempts");
    size_t calls = 0;
    if (const auto it = p.find("tool_calls"); it != p.end() && it->is_array())
        calls = it->size();
    if (calls > 0)
        parts.push_back(count(static_cast<int64_t>(calls), "tool call", "tool calls"));
    const std::string words = str(p, "text");
    line.summary = withDetail(join(parts), words);
    line.hasDetails = !words.empty() || calls > 0;
}

void modelError(std::string_view, const json &p, EventLine &line)
{
    const std::string code = str(p, "code");
    line.summary = withDetail("model error" + (code.empty() ? std::string() : " (" + code + ")"), str(p, "error", 200));
    line.isError = true;
}

// The one argument that says what a call does.
std::string mainArgument(const std::string &name, const json &args)
{
    if (name == "write_file") {
        return withDetail(str(args, "path"), "(" + bytes(rawSize(args, "content")) + ")", " ");
    }
    if (name == "finish")
        return withDetail(str(args, "status"), str(args, "summary"));
    if (name == "request_environment")
        return withDetail(str(args, "tier"), str(args, "reason"));
    if (name == "wait")
        return has(args, "seconds") ? seconds(real(args, "seconds")) : keyValues(args);
    if (std::string main = firstStr(args, {"command", "path", "key", "agent", "summary", "query", "goal"}); !main.empty())
        return main;
    return keyValues(args);
}

void toolCall(std::string_view, const json &p, EventLine &line)
{
    const std::string name = str(p, "name");
    line.summary = withDetail(name, mainArgument(name, arguments(p)));
}

// A tool.result of run_command: how it ended, how long it took, the command line.
void commandResult(const json &p, EventLine &line)
{
    const int64_t exitCode = num(p, "exit_code");
    const int64_t signal = num(p, "signal");
    const bool timedOut = flag(p, "timed_out");
    const std::string reason = str(p, "reason");
    std::string ending = timedOut ? "timed out" : signal > 0 ? "killed by signal " + std::to_string(signal)
                                                             : "exit " + std::to_string(exitCode);
    if (!reason.empty() && !(timedOut && reason == "timeout"))
        ending += " (" + reason + ")";
    line.latencyMs = num(p, "duration_ms", -1);
    if (line.latencyMs >= 0)
        ending += (timedOut ? " after " : " in ") + millis(static_cast<double>(line.latencyMs));
    std::vector<std::string> parts{ending};
    if (flag(p, "replayed"))
        parts.push_back("replayed");
    if (flag(p, "stdout_clipped") || flag(p, "stderr_clipped"))
        parts.push_back("output clipped");
    line.summary = withDetail(join(parts), str(p, "command"));
    line.isError = exitCode != 0 || signal > 0 || timedOut;
    line.hasDetails = rawSize(p, "stdout") > 0 || rawSize(p, "stderr") > 0;
}

void requestEnvironmentResult(const json &p, EventLine &line)
{
    const std::string tier = firstStr(p, {"tier", "requested_tier"});
    std::string head = flag(p, "granted") ? "tier " + tier + " granted" : "tier " + str(p, "requested_tier") + " not granted";
    if (has(p, "review_id"))
        head += flag(p, "approved") ? ", approved in review " + str(p, "review_id") + " by " + str(p, "decider")
                                    : ", rejected in review " + str(p, "review_id");
    line.summary = withDetail(head, firstStr(p, {"reason", "note", "decision_reason"}));
}

void toolResult(std::string_view, const json &p, EventLine &line)
{
    const std::string name = str(p, "name");
    if (const std::string error = str(p, "error", 200); !error.empty() && !has(p, "exit_code")) {
        line.summary = withDetail(name, "error: " + error, " ");
        line.isError = true;
    } else if (has(p, "exit_code") || has(p, "command")) {
        commandResult(p, line);
    } else if (name == "write_file") {
        line.summary = "wrote " + bytes(num(p, "bytes")) + " to " + str(p, "path");
    } else if (name == "read_file") {
        // Without its content (a span's parse leaves it out) there is no size to give.
        line.summary = "read " + str(p, "path") + (has(p, "content") ? " (" + bytes(rawSize(p, "content")) + ")" : "");
        line.hasDetails = rawSize(p, "content") > 0;
    } else if (name == "read_records") {
        const int64_t missing = num(p, "missing");
        line.summary = "read " + count(num(p, "count"), "record", "records")
                     + (str(p, "agent").empty() ? "" : " of agent " + str(p, "agent"))
                     + (missing > 0 ? " (" + std::to_string(missing) + " missing)" : "");
        line.hasDetails = true;
    } else if (name == "request_environment") {
        requestEnvironmentResult(p, line);
    } else if (flag(p, "ok")) {
        line.summary = name + " ok";
    } else {
        json rest = p;
        rest.erase("name");
        rest.erase("call_id");
        line.summary = withDetail(name, keyValues(rest));
    }
    if (const json &postMortem = object(p, "post_mortem"); !postMortem.empty()) {
        line.postMortemPool = str(postMortem, "pool", kNoLimit);
        line.postMortemSandbox = str(postMortem, "sandbox_id", kNoLimit);
        line.summary += "; post-mortem kept";
    }
}

// A chunk of a running command's output (docs/events.md, tool.output).
void toolOutput(std::string_view, const json &p, EventLine &line)
{
    const std::string stream = str(p, "stream");
    std::string head = stream.empty() ? std::string("output") : stream;
    if (flag(p, "clipped") || flag(p, "cut") || has(p, "dropped_bytes"))
        head += " (cut at the output limit)";
    line.summary = withDetail(head, firstStr(p, {"text", "data", "chunk", "output"}, 200));
    line.hasDetails = true;
}

// A piece of a model's streamed answer (docs/events.md, model.delta): its text, else its first
// tool call's argument fragment.
void modelDelta(std::string_view, const json &p, EventLine &line)
{
    std::string head = "attempt " + std::to_string(num(p, "attempt", 1));
    if (has(p, "supersedes"))
        head += " (replaces attempt " + std::to_string(num(p, "supersedes")) + ")";
    std::string detail = str(p, "text", 200);
    if (const auto calls = p.find("tool_calls"); detail.empty() && calls != p.end() && calls->is_array()
        && !calls->empty() && calls->front().is_object()) {
        const json &call = calls->front();
        detail = "args" + (has(call, "name") ? " " + str(call, "name") : std::string()) + ": " + str(call, "arguments", 200);
    }
    line.summary = withDetail(head, detail);
}

const std::unordered_map<std::string_view, kinds::Describe> &table()
{
    static const auto built = [] {
        std::unordered_map<std::string_view, kinds::Describe> all;
        for (const auto &part : {kinds::sessionKinds(), kinds::sandboxKinds(), kinds::governanceKinds()}) {
            for (const auto &[kind, describe] : part)
                all.emplace(kind, describe);
        }
        return all;
    }();
    return built;
}

} // namespace

namespace kinds {

std::vector<Entry> sessionKinds()
{
    return {
        {"session.created", &sessionCreated}, {"state.changed", &stateChanged}, {"model.request", &modelRequest},
        {"model.response", &modelResponse},   {"model.error", &modelError},     {"tool.call", &toolCall},
        {"tool.result", &toolResult},         {"tool.output", &toolOutput},     {"model.delta", &modelDelta},
    };
}

} // namespace kinds

json parsePayload(std::string_view payloadJson)
{
    return json::parse(payloadJson, nullptr, false);
}

EventLine describeEvent(std::string_view kind, const json &payload, int64_t costMicros)
{
    EventLine line;
    const auto found = table().find(kind);
    (found != table().end() ? found->second : &generic)(kind, payload, line);
    if (kind == "cost" && costMicros >= 0)
        line.summary += ", " + dollars(costMicros);
    line.summary = safeLine(line.summary, kMaxSummaryChars);
    return line;
}

EventLine describeEvent(std::string_view kind, std::string_view payloadJson, int64_t costMicros)
{
    const json payload = parsePayload(payloadJson);
    if (!payload.is_object()) {
        EventLine line;
        line.summary = safeLine(payloadJson, kMaxSummaryChars);
        return line;
    }
    return describeEvent(kind, payload, costMicros);
}

std::vector<std::string_view> kindsWithSummaries()
{
    std::vector<std::string_view> out;
    for (const auto &[kind, describe] : table())
        out.push_back(kind);
    std::ranges::sort(out);
    return out;
}

bool hasOwnSummary(std::string_view kind) { return table().contains(kind); }

} // namespace paddock::trace
