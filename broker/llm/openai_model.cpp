// Known limits: no streaming (the whole completion arrives at once); Retry-After given as an HTTP
// date is ignored in favour of the computed backoff; tool results longer than kMaxToolResultChars
// are cut in the middle before they are sent back to the model.

#include "broker/llm/openai_model.h"

#include "common/clock.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <optional>
#include <random>
#include <thread>

namespace paddock::llm {

struct OpenAiModel::Handle {
    CURL *curl = nullptr;
};

namespace {

constexpr size_t kExcerptChars = 300;
constexpr size_t kMaxResponseBytes = 16 * 1024 * 1024;
constexpr size_t kMaxToolResultChars = 32 * 1024;
constexpr size_t kMaxIdleHandles = 8;
constexpr int64_t kMaxConnectTimeoutMs = 10000;

constexpr const char *kSystemPrompt =
    "You are an agent working in a sandboxed Linux machine. Your working directory is /workspace, "
    "which is writable; the rest of the file system is read-only and there is no network. Work "
    "toward the user's goal by calling tools, one per turn, and read each result before the next "
    "step. Tools: run_command runs a shell line with sh -c in /workspace and returns exit_code, "
    "stdout, stderr, duration_ms and timed_out; write_file writes a whole file; read_file returns a "
    "file's content. When the goal is met, or cannot be met, call finish with status \"succeeded\" "
    "or \"failed\" and a short summary of what was done and why.";

void initCurlOnce()
{
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

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

struct Response {
    CURLcode curlCode = CURLE_OK;
    std::string curlError;
    long status = 0;
    std::string body;
    std::optional<int64_t> retryAfterMs;
    bool tooLarge = false;
};

size_t writeBody(char *data, size_t size, size_t count, void *user)
{
    auto *response = static_cast<Response *>(user);
    const size_t bytes = size * count;
    if (response->body.size() + bytes > kMaxResponseBytes) {
        response->tooLarge = true;
        return 0;   // makes curl fail with CURLE_WRITE_ERROR
    }
    response->body.append(data, bytes);
    return bytes;
}

std::optional<int64_t> parseDelay(std::string_view value, double unitMs)
{
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
        value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\r' || value.back() == '\n'))
        value.remove_suffix(1);
    if (value.empty())
        return std::nullopt;
    char *end = nullptr;
    const std::string text(value);
    const double number = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !std::isfinite(number) || number < 0)
        return std::nullopt;   // an HTTP date, which we do not interpret
    return static_cast<int64_t>(std::ceil(number * unitMs));
}

size_t readHeader(char *data, size_t size, size_t count, void *user)
{
    auto *response = static_cast<Response *>(user);
    const size_t bytes = size * count;
    const std::string_view line(data, bytes);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
        if (line.starts_with("HTTP/"))
            response->retryAfterMs.reset();   // a new response (after a redirect or 100-continue)
        return bytes;
    }
    std::string key(line.substr(0, colon));
    std::ranges::transform(key, key.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    // retry-after-ms is OpenAI's finer-grained variant; it wins over retry-after when both are sent.
    if (key == "retry-after-ms") {
        if (auto ms = parseDelay(line.substr(colon + 1), 1.0))
            response->retryAfterMs = ms;
    } else if (key == "retry-after" && !response->retryAfterMs) {
        response->retryAfterMs = parseDelay(line.substr(colon + 1), 1000.0);
    }
    return bytes;
}

bool retryableCurlError(CURLcode code)
{
    switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_FUNCTION_NOT_FOUND:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_WRITE_ERROR:
        return false;
    default:
        return true;
    }
}

bool retryableStatus(long status)
{
    return status == 408 || status == 429 || status >= 500;
}

int64_t backoffMs(const OpenAiConfig &config, int retry)
{
    // Exponential with "equal jitter": workers that hit a rate limit together spread out again.
    const double full = std::min<double>(static_cast<double>(config.maxBackoffMs),
                                         static_cast<double>(config.initialBackoffMs) * std::pow(2.0, retry - 1));
    const auto fullMs = static_cast<int64_t>(full);
    if (fullMs <= 1)
        return std::max<int64_t>(fullMs, 0);
    thread_local std::mt19937_64 random{std::random_device{}()};
    std::uniform_int_distribution<int64_t> jitter(0, fullMs / 2);
    return fullMs - fullMs / 2 + jitter(random);
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

using HeaderList = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

// JSON both ways, the key when there is one, and the step's idempotency key when it has one.
HeaderList requestHeaders(const std::string &apiKey, const std::string &idempotencyKey)
{
    curl_slist *headers = nullptr;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: application/json");
    if (!apiKey.empty())
        headers = curl_slist_append(headers, ("Authorization: Bearer " + apiKey).c_str());
    if (!idempotencyKey.empty())
        headers = curl_slist_append(headers, ("Idempotency-Key: " + idempotencyKey).c_str());
    return HeaderList(headers, curl_slist_free_all);
}

// Sets the handle up for one attempt: POST body to url, the response and its headers into
// response, curl's own error text into errorBuffer (CURL_ERROR_SIZE bytes).
void prepareAttempt(CURL *curl, const std::string &url, const std::string &body, curl_slist *headers,
                    Response &response, char *errorBuffer, const OpenAiConfig &config)
{
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, writeBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, readHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errorBuffer);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);   // signals and threads do not mix
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(config.timeoutMs));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min(config.timeoutMs, kMaxConnectTimeoutMs)));
    curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "paddockd");
}

// The error for an HTTP status that is neither a success nor worth a retry: what to check.
std::unexpected<Error> refusal(const std::string &url, const Response &response, const OpenAiConfig &config)
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

OpenAiModel::OpenAiModel(std::string name, OpenAiConfig config, SleepFunction sleep)
    : m_name(std::move(name))
    , m_config(std::move(config))
    , m_sleep(std::move(sleep))
{
    initCurlOnce();
    if (!m_sleep)
        m_sleep = [](std::chrono::milliseconds delay) { std::this_thread::sleep_for(delay); };
}

OpenAiModel::~OpenAiModel()
{
    for (Handle *handle : m_idleHandles) {
        curl_easy_cleanup(handle->curl);
        delete handle;
    }
}

OpenAiModel::Handle *OpenAiModel::acquireHandle()
{
    {
        std::lock_guard lock(m_handlesMutex);
        if (!m_idleHandles.empty()) {
            Handle *handle = m_idleHandles.back();
            m_idleHandles.pop_back();
            return handle;
        }
    }
    CURL *curl = curl_easy_init();
    return curl ? new Handle{curl} : nullptr;
}

void OpenAiModel::releaseHandle(Handle *handle)
{
    // reset keeps the connection cache, so the next turn reuses the TCP/TLS connection.
    curl_easy_reset(handle->curl);
    std::lock_guard lock(m_handlesMutex);
    if (m_idleHandles.size() < kMaxIdleHandles) {
        m_idleHandles.push_back(handle);
        return;
    }
    curl_easy_cleanup(handle->curl);
    delete handle;
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
                                             const ModelContext &context)
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
                : fmt::format("call-{}-{}", context.idempotencyKey, i);
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

Result<ModelTurn> OpenAiModel::next(const ModelContext &context)
{
    try {
        const auto apiKey = apiKeyFromEnvironment(m_name, m_config);
        if (!apiKey)
            return std::unexpected(apiKey.error());

        const std::string url = chatUrl(m_config);
        const std::string body = buildRequest(m_config, context).dump(-1, ' ', false,
                                                                      nlohmann::json::error_handler_t::replace);
        const HeaderList headerList = requestHeaders(*apiKey, context.idempotencyKey);

        Handle *handle = acquireHandle();
        if (handle == nullptr)
            return fail(ErrorCode::Internal, "curl_easy_init failed; the broker is probably out of memory");
        std::unique_ptr<Handle, std::function<void(Handle *)>> handleGuard(
            handle, [this](Handle *h) { releaseHandle(h); });

        const int64_t startUs = monotonicUs();
        const int maxAttempts = 1 + std::max(0, m_config.maxRetries);
        std::string lastProblem;
        for (int attempt = 1; attempt <= maxAttempts; ++attempt) {
            Response response;
            CURL *curl = handle->curl;
            char errorBuffer[CURL_ERROR_SIZE] = {};
            prepareAttempt(curl, url, body, headerList.get(), response, errorBuffer, m_config);

            response.curlCode = curl_easy_perform(curl);
            if (response.curlCode == CURLE_OK)
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);

            if (response.tooLarge)
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("the model API at {} sent a response larger than {} bytes; check base_url",
                                        url, kMaxResponseBytes));
            if (response.curlCode != CURLE_OK) {
                const std::string detail = errorBuffer[0] != '\0' ? std::string(errorBuffer)
                                                                  : curl_easy_strerror(response.curlCode);
                if (!retryableCurlError(response.curlCode))
                    return fail(ErrorCode::FailedPrecondition,
                                fmt::format("cannot send a request to the model API at {}: {}. Check base_url "
                                            "in the [models.openai] config.",
                                            url, detail));
                lastProblem = fmt::format("connection error: {}", detail);
            } else if (response.status >= 200 && response.status < 300) {
                auto turn = parseResponse(response.body, m_config, context);
                if (turn) {
                    turn->attempts = attempt;
                    turn->latencyMs = static_cast<double>(monotonicUs() - startUs) / 1000.0;
                }
                return turn;
            } else if (retryableStatus(response.status)) {
                lastProblem = fmt::format("HTTP {}: \"{}\"", response.status, excerpt(response.body));
            } else {
                return refusal(url, response, m_config);
            }

            if (attempt == maxAttempts)
                break;
            const int64_t delayMs = response.retryAfterMs
                ? std::min(*response.retryAfterMs, m_config.maxBackoffMs)
                : backoffMs(m_config, attempt);
            m_sleep(std::chrono::milliseconds(delayMs));
        }
        return fail(ErrorCode::Unavailable,
                    fmt::format("the model API at {} still failed after {} attempt(s); last: {}. The step will "
                                "be retried; if this persists, check the service and max_retries.",
                                url, maxAttempts, lastProblem));
    } catch (const std::exception &e) {
        // nlohmann throws on invalid UTF-8 and type errors; keep it a value.
        return fail(ErrorCode::Internal, fmt::format("openai model '{}': unexpected error: {}", m_name, e.what()));
    }
}

} // namespace paddock::llm
