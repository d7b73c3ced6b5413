// Known limits: no streaming (the whole completion arrives at once); Retry-After given as an HTTP
// date is ignored in favour of the computed backoff (http_loop.cpp); tool results longer than
// kMaxToolResultChars are cut in the middle before they are sent back to the model.

#include "broker/llm/openai_model.h"

#include "common/clock.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <future>

namespace paddock::llm {

namespace {

constexpr size_t kExcerptChars = 300;
constexpr size_t kMaxResponseBytes = 16 * 1024 * 1024;
constexpr size_t kMaxToolResultChars = 32 * 1024;
constexpr int64_t kMaxConnectTimeoutMs = 10000;

constexpr const char *kSystemPrompt =
    "You are an agent working in a sandboxed Linux machine. Your working directory is /workspace, "
    "which is writable; the rest of the file system is read-only and there is no network. Work "
    "toward the user's goal by calling tools, one per turn, and read each result before the next "
    "step. Tools: run_command runs a shell line with sh -c in /workspace and returns exit_code, "
    "stdout, stderr, duration_ms and timed_out; write_file writes a whole file; read_file returns a "
    "file's content. When the goal is met, or cannot be met, call finish with status \"succeeded\" "
    "or \"failed\" and a short summary of what was done and why.";

// A short, single-line quote of a body for error messages.
std::string excerpt(std::string_view text)
{
    std::string out;
    size_t end = std::min(text.size(), kExcerptChars);
    while (end > 0 && end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
        --end;   // never split a UTF-8 sequence: messages end up in JSON
    for (char c : text.substr(0, end)) {
        if (c == '\n')
            out += "\\n";
        else if (c == '\r')
            out += "\\r";
        else if (static_cast<unsigned char>(c) < 0x20)
            out += ' ';
        else
            out += c;
    }
    if (text.size() > kExcerptChars)
        out += fmt::format("... ({} bytes)", text.size());
    if (text.empty())
        out = "(empty body)";
    return out;
}

std::string limitToolResult(std::string text)
{
    if (text.size() <= kMaxToolResultChars)
        return text;
    const size_t half = kMaxToolResultChars / 2;
    return text.substr(0, half) + fmt::format("\n[... {} characters cut ...]\n", text.size() - 2 * half)
        + text.substr(text.size() - half);
}

nlohmann::json functionTool(const char *name, const char *description, nlohmann::json properties,
                            nlohmann::json required)
{
    return {{"type", "function"},
            {"function",
             {{"name", name},
              {"description", description},
              {"parameters",
               {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)},
                {"additionalProperties", false}}}}}};
}

nlohmann::json toolDefinitions()
{
    using nlohmann::json;
    return json::array({
        functionTool(tool::RunCommand, "Run a shell command line with sh -c in /workspace.",
                     {{"command", {{"type", "string"}, {"description", "the shell command line"}}},
                      {"timeout_ms", {{"type", "integer"}, {"description", "time limit in milliseconds"}}}},
                     json::array({"command"})),
        functionTool(tool::WriteFile, "Write a whole file (created or replaced), relative to /workspace.",
                     {{"path", {{"type", "string"}}}, {"content", {{"type", "string"}}}},
                     json::array({"path", "content"})),
        functionTool(tool::ReadFile, "Read a file, relative to /workspace.", {{"path", {{"type", "string"}}}},
                     json::array({"path"})),
        functionTool(tool::Finish, "End the session, saying whether the goal was met.",
                     {{"status", {{"type", "string"}, {"enum", {"succeeded", "failed"}}}},
                      {"summary", {{"type", "string"}}}},
                     json::array({"status", "summary"})),
        functionTool(tool::ProposeChange,
                     "Propose a change that policy may send to a human for review: a unified diff over files "
                     "(applied in /workspace), durable records, a host to reach, or a secret to use. Beyond "
                     "policy's limits the session waits for the decision; the result says whether it was "
                     "approved and applied.",
                     {{"kind", {{"type", "string"}, {"enum", {"bulk_change", "egress_exception", "secret_access"}}}},
                      {"targets", {{"type", "array"}, {"items", {{"type", "string"}}},
                                   {"description", "the files, record keys, host or secret name the change touches"}}},
                      {"change", {{"type", "string"},
                                  {"description", "a unified diff, or a JSON array of {key, value} records"}}},
                      {"change_format", {{"type", "string"}, {"enum", {"diff", "records", "text"}}}},
                      {"justification", {{"type", "string"}}}},
                     json::array({"targets", "change", "justification"})),
    });
}

std::string chatUrl(const OpenAiConfig &config)
{
    std::string base = config.baseUrl;
    while (base.ends_with('/'))
        base.pop_back();
    return base + "/chat/completions";
}

// The API key, read from the environment variable the config names at each call; empty when the
// config names none (local servers need no key).
Result<std::string> apiKeyFromEnvironment(const std::string &modelName, const OpenAiConfig &config)
{
    std::string apiKey;
    if (!config.apiKeyEnv.empty()) {
        const char *value = std::getenv(config.apiKeyEnv.c_str());
        if (value == nullptr || *value == '\0')
            return fail(ErrorCode::FailedPrecondition,
                        fmt::format("model '{}' needs an API key in the environment variable {}, which is "
                                    "not set for the broker. Set it where paddockd starts, or change "
                                    "api_key_env in the [models.openai] config.",
                                    modelName, config.apiKeyEnv));
        apiKey = value;
    }
    return apiKey;
}

// The error for an HTTP status that is neither a success nor worth a retry: what to check.
std::unexpected<Error> refusal(const std::string &url, const HttpResult &response, const OpenAiConfig &config)
{
    const std::string what = fmt::format("the model API at {} refused the request with HTTP {}: \"{}\"",
                                         url, response.status, excerpt(response.body));
    if (response.status == 401 || response.status == 403)
        return fail(ErrorCode::PermissionDenied,
                    fmt::format("{}. Check the key in {}.", what,
                                config.apiKeyEnv.empty() ? "api_key_env (none is configured)"
                                                         : config.apiKeyEnv));
    if (response.status == 404)
        return fail(ErrorCode::NotFound,
                    fmt::format("{}. Check base_url and the model name '{}'.", what, config.model));
    return fail(ErrorCode::InvalidArgument,
                fmt::format("{}. Check the model name and the [models.openai] config.", what));
}

} // namespace

OpenAiModel::OpenAiModel(std::string name, OpenAiConfig config, BackoffHook backoff)
    : m_name(std::move(name))
    , m_config(std::move(config))
    , m_loop(std::move(backoff))
{
}

nlohmann::json OpenAiModel::buildRequest(const OpenAiConfig &config, const ModelContext &context)
{
    using nlohmann::json;
    json messages = json::array();
    messages.push_back({{"role", "system"}, {"content", kSystemPrompt}});
    messages.push_back({{"role", "user"}, {"content", context.goal.empty() ? "(no goal given)" : context.goal}});
    for (const Exchange &exchange : context.history) {
        json assistant = {{"role", "assistant"},
                          {"content", exchange.turn.text.empty() ? json(nullptr) : json(exchange.turn.text)}};
        if (!exchange.turn.toolCalls.empty()) {
            json calls = json::array();
            for (const ToolCall &call : exchange.turn.toolCalls)
                calls.push_back({{"id", call.id},
                                 {"type", "function"},
                                 {"function", {{"name", call.name}, {"arguments", call.arguments.dump()}}}});
            assistant["tool_calls"] = std::move(calls);
        }
        messages.push_back(std::move(assistant));
        for (size_t i = 0; i < exchange.turn.toolCalls.size(); ++i) {
            const json result = i < exchange.results.size() ? exchange.results[i]
                                                            : json{{"error", "no result was recorded"}};
            messages.push_back({{"role", "tool"},
                                {"tool_call_id", exchange.turn.toolCalls[i].id},
                                {"content", limitToolResult(result.dump(-1, ' ', false,
                                                                         json::error_handler_t::replace))}});
        }
    }
    return {{"model", config.model}, {"messages", std::move(messages)}, {"tools", toolDefinitions()}};
}

Result<ModelTurn> OpenAiModel::parseResponse(std::string_view body, const OpenAiConfig &config,
                                             const std::string &idempotencyKey)
{
    using nlohmann::json;
    const std::string url = chatUrl(config);
    auto malformed = [&](std::string_view problem) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the model API at {} sent a malformed response: {}. Check that base_url "
                                "points at an OpenAI-compatible endpoint (usually ending in /v1).",
                                url, problem));
    };

    const json doc = json::parse(body, nullptr, false);
    if (doc.is_discarded())
        return malformed(fmt::format("the body is not JSON: \"{}\"", excerpt(body)));
    if (!doc.is_object())
        return malformed(fmt::format("the body is not a JSON object: \"{}\"", excerpt(body)));
    const auto choices = doc.find("choices");
    if (choices == doc.end() || !choices->is_array() || choices->empty())
        return malformed(fmt::format("it has no choices: \"{}\"", excerpt(body)));
    const json &choice = choices->front();
    const auto message = choice.is_object() ? choice.find("message") : choice.end();
    if (!choice.is_object() || message == choice.end() || !message->is_object())
        return malformed(fmt::format("choices[0] has no message object: \"{}\"", excerpt(choice.dump())));

    ModelTurn turn;
    if (const auto content = message->find("content"); content != message->end() && content->is_string())
        turn.text = content->get<std::string>();

    if (const auto calls = message->find("tool_calls"); calls != message->end() && !calls->is_null()) {
        if (!calls->is_array())
            return malformed(fmt::format("choices[0].message.tool_calls is not an array: \"{}\"",
                                         excerpt(calls->dump())));
        for (size_t i = 0; i < calls->size(); ++i) {
            const json &call = (*calls)[i];
            const auto function = call.is_object() ? call.find("function") : call.end();
            if (!call.is_object() || function == call.end() || !function->is_object()
                || !function->contains("name") || !(*function)["name"].is_string())
                return malformed(fmt::format("tool_calls[{}] has no function name: \"{}\"", i, excerpt(call.dump())));
            ToolCall toolCall;
            toolCall.name = (*function)["name"].get<std::string>();
            // Some servers omit the id; derive one that is stable for this recorded response.
            const auto id = call.find("id");
            toolCall.id = id != call.end() && id->is_string() && !id->get<std::string>().empty()
                ? id->get<std::string>()
                : fmt::format("call-{}-{}", idempotencyKey, i);
            const auto arguments = function->find("arguments");
            if (arguments == function->end() || arguments->is_null()) {
                toolCall.arguments = json::object();
            } else if (arguments->is_object()) {
                toolCall.arguments = *arguments;   // Ollama sends an object instead of a string
            } else if (arguments->is_string()) {
                const std::string &text = arguments->get_ref<const std::string &>();
                toolCall.arguments = text.empty() ? json::object() : json::parse(text, nullptr, false);
                if (toolCall.arguments.is_discarded())
                    return malformed(fmt::format("the arguments of tool call '{}' ({}) are not valid JSON: \"{}\"",
                                                 toolCall.name, toolCall.id, excerpt(text)));
                if (!toolCall.arguments.is_object())
                    return malformed(fmt::format("the arguments of tool call '{}' ({}) are not a JSON object: \"{}\"",
                                                 toolCall.name, toolCall.id, excerpt(text)));
            } else {
                return malformed(fmt::format("the arguments of tool call '{}' are neither a string nor an object: "
                                             "\"{}\"",
                                             toolCall.name, excerpt(arguments->dump())));
            }
            turn.toolCalls.push_back(std::move(toolCall));
        }
    }

    if (const auto usage = doc.find("usage"); usage != doc.end() && usage->is_object()) {
        auto integer = [](const json &object, const char *key) -> int64_t {
            const auto it = object.find(key);
            return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
        };
        turn.usage.inputTokens = integer(*usage, "prompt_tokens");
        turn.usage.outputTokens = integer(*usage, "completion_tokens");
        if (const auto details = usage->find("prompt_tokens_details");
            details != usage->end() && details->is_object())
            turn.usage.cachedTokens = integer(*details, "cached_tokens");
    }
    const auto model = doc.find("model");
    turn.model = model != doc.end() && model->is_string() ? model->get<std::string>() : config.model;
    return turn;
}


// Everything one turn's HTTP request needs, read afresh for each turn (the key may rotate).
Result<HttpRequest> OpenAiModel::requestFor(const ModelContext &context) const
{
    const auto apiKey = apiKeyFromEnvironment(m_name, m_config);
    if (!apiKey)
        return std::unexpected(apiKey.error());
    HttpRequest request;
    request.url = chatUrl(m_config);
    request.headers = {"Content-Type: application/json", "Accept: application/json"};
    if (!apiKey->empty())
        request.headers.push_back("Authorization: Bearer " + *apiKey);
    if (!context.idempotencyKey.empty())
        request.headers.push_back("Idempotency-Key: " + context.idempotencyKey);
    request.body = buildRequest(m_config, context).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    request.timeoutMs = m_config.timeoutMs;
    request.connectTimeoutMs = std::min(m_config.timeoutMs, kMaxConnectTimeoutMs);
    request.maxResponseBytes = kMaxResponseBytes;
    request.maxRetries = m_config.maxRetries;
    request.initialBackoffMs = m_config.initialBackoffMs;
    request.maxBackoffMs = m_config.maxBackoffMs;
    return request;
}

// What the request's end means for the session: a turn, or an error that says what to check.
Result<ModelTurn> OpenAiModel::turnFrom(HttpResult result, const std::string &idempotencyKey, int64_t startUs) const
{
    const std::string url = chatUrl(m_config);
    using End = HttpResult::End;
    switch (result.end) {
    case End::Cancelled:
        return fail(ErrorCode::Cancelled,
                    fmt::format("the request to the model API at {} was cancelled: the broker is stopping. Nothing "
                                "was recorded; the step asks again when the broker restarts.",
                                url));
    case End::TooLarge:
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the model API at {} sent a response larger than {} bytes; check base_url", url,
                                kMaxResponseBytes));
    case End::CannotSend:
        return fail(ErrorCode::FailedPrecondition,
                    fmt::format("cannot send a request to the model API at {}: {}. Check base_url in the "
                                "[models.openai] config.",
                                url, result.error));
    case End::ConnectionError:
    case End::Answered:
        break;
    }
    if (result.end == End::Answered && result.status >= 200 && result.status < 300) {
        auto turn = parseResponse(result.body, m_config, idempotencyKey);
        if (turn) {
            turn->attempts = result.attempts;
            turn->latencyMs = static_cast<double>(monotonicUs() - startUs) / 1000.0;
        }
        return turn;
    }
    if (!result.gaveUp)
        return refusal(url, result, m_config);
    const std::string lastProblem = result.end == End::ConnectionError
        ? fmt::format("connection error: {}", result.error)
        : fmt::format("HTTP {}: \"{}\"", result.status, excerpt(result.body));
    return fail(ErrorCode::Unavailable,
                fmt::format("the model API at {} still failed after {} attempt(s); last: {}. The step will "
                            "be retried; if this persists, check the service and max_retries.",
                            url, result.attempts, lastProblem));
}

void OpenAiModel::nextAsync(ModelContext context, TurnDone done)
{
    // nlohmann throws on invalid UTF-8 and type errors: keep them values, on both threads.
    auto unexpected = [this](const std::exception &e) {
        return fail(ErrorCode::Internal, fmt::format("openai model '{}': unexpected error: {}", m_name, e.what()));
    };
    Result<HttpRequest> request;
    try {
        request = requestFor(context);
    } catch (const std::exception &e) {
        request = unexpected(e);
    }
    if (!request) {
        done(std::unexpected(std::move(request.error())));
        return;
    }
    const int64_t startUs = monotonicUs();
    m_loop.submit(std::move(*request), [this, unexpected, key = std::move(context.idempotencyKey), startUs,
                                        done = std::move(done)](HttpResult result) {
        Result<ModelTurn> turn;
        try {
            turn = turnFrom(std::move(result), key, startUs);
        } catch (const std::exception &e) {
            turn = unexpected(e);
        }
        done(std::move(turn));
    });
}

Result<ModelTurn> OpenAiModel::next(const ModelContext &context)
{
    if (m_loop.onLoopThread())
        return fail(ErrorCode::Internal, fmt::format("openai model '{}': next() was called from a completion "
                                                     "callback, where it would wait for itself; use nextAsync",
                                                     m_name));
    std::promise<Result<ModelTurn>> promise;
    auto future = promise.get_future();
    nextAsync(context, [&promise](Result<ModelTurn> turn) { promise.set_value(std::move(turn)); });
    return future.get();
}

} // namespace paddock::llm
