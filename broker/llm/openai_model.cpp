// Known limits: a streamed answer is kept whole in memory until it ends (as an unstreamed one is);
// only the first choice of a stream is read; Retry-After given as an HTTP
// date is ignored in favour of the computed backoff (http_loop.cpp); tool results longer than
// kMaxToolResultChars are cut in the middle before they are sent back to the model.

#include "broker/llm/openai_model.h"

#include "broker/llm/system_prompt.h"
#include "broker/llm/tool_catalogue.h"

#include <algorithm>
#include <map>
#include <memory>
#include <fmt/format.h>

namespace paddock::llm {

namespace {

// The tools of the catalogue as chat completions' function tools.
nlohmann::json toolDefinitions()
{
    nlohmann::json tools = nlohmann::json::array();
    for (const ToolDefinition &definition : toolCatalogue())
        tools.push_back({{"type", "function"},
                         {"function",
                          {{"name", definition.name},
                           {"description", definition.description},
                           {"parameters", definition.inputSchema()}}}});
    return tools;
}

std::string chatUrl(const OpenAiConfig &config)
{
    std::string base = config.baseUrl;
    while (base.ends_with('/'))
        base.pop_back();
    return base + "/chat/completions";
}

// "[models.openai]", or "[models.openai.local]" for the model "openai:local": where its keys are set.
std::string configSection(const std::string &modelName)
{
    std::string section = modelName;
    std::ranges::replace(section, ':', '.');
    return "[models." + section + "]";
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

// A streamed completion (chat.completion.chunk events, then "[DONE]"), gathered back into the
// chat.completion body the unstreamed API sends.
class OpenAiStream final : public TurnStream {
public:
    using TurnStream::TurnStream;

    nlohmann::json body() const override
    {
        using nlohmann::json;
        json message{{"role", "assistant"}, {"content", m_text.empty() ? json(nullptr) : json(m_text)}};
        if (!m_calls.empty()) {
            json calls = json::array();
            for (const auto &[index, call] : m_calls) {
                json one{{"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
                if (!call.id.empty())
                    one["id"] = call.id;
                calls.push_back(std::move(one));
            }
            message["tool_calls"] = std::move(calls);
        }
        json body{{"choices", json::array({{{"index", 0}, {"message", std::move(message)},
                                            {"finish_reason", m_finish.empty() ? json(nullptr) : json(m_finish)}}})}};
        if (!m_model.empty())
            body["model"] = m_model;
        if (!m_usage.is_null())
            body["usage"] = m_usage;
        return body;
    }

protected:
    void reset() override
    {
        m_text.clear();
        m_calls.clear();
        m_finish.clear();
        m_model.clear();
        m_usage = nullptr;
        m_done = false;
    }

    std::string onEvent(const SseEvent &event) override
    {
        using nlohmann::json;
        if (event.data == "[DONE]") {
            m_done = true;
            return {};
        }
        const json chunk = json::parse(event.data, nullptr, false);
        if (chunk.is_discarded() || !chunk.is_object())
            return fmt::format("an event's data is not a JSON object: \"{}\"", excerpt(event.data));
        if (const auto error = chunk.find("error"); error != chunk.end())
            return fmt::format("the stream carried an error: \"{}\"", excerpt(error->dump()));
        if (const auto model = chunk.find("model"); model != chunk.end() && model->is_string())
            m_model = model->get<std::string>();
        if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object())
            m_usage = *usage;
        const auto choices = chunk.find("choices");
        if (choices == chunk.end() || !choices->is_array() || choices->empty() || !choices->front().is_object())
            return {};   // the usage chunk has no choices
        const json &choice = choices->front();
        if (const auto reason = choice.find("finish_reason"); reason != choice.end() && reason->is_string())
            m_finish = reason->get<std::string>();
        const auto delta = choice.find("delta");
        if (delta == choice.end() || !delta->is_object())
            return {};
        if (const auto content = delta->find("content"); content != delta->end() && content->is_string()
            && !content->get_ref<const std::string &>().empty()) {
            m_text += content->get<std::string>();
            deliver({.text = content->get<std::string>()});
        }
        const auto calls = delta->find("tool_calls");
        if (calls == delta->end() || !calls->is_array())
            return {};
        for (const json &call : *calls) {
            if (!call.is_object() || !call.contains("index") || !call["index"].is_number_integer())
                return fmt::format("a tool call fragment has no index: \"{}\"", excerpt(call.dump()));
            const int index = call["index"].get<int>();
            Call &gathered = m_calls[index];
            ModelDelta piece{.toolIndex = index};
            if (const auto id = call.find("id"); id != call.end() && id->is_string())
                gathered.id = piece.toolId = id->get<std::string>();
            if (const auto function = call.find("function"); function != call.end() && function->is_object()) {
                if (const auto name = function->find("name"); name != function->end() && name->is_string())
                    gathered.name = piece.toolName = name->get<std::string>();
                if (const auto arguments = function->find("arguments");
                    arguments != function->end() && arguments->is_string()) {
                    piece.arguments = arguments->get<std::string>();
                    gathered.arguments += piece.arguments;
                }
            }
            deliver(std::move(piece));
        }
        return {};
    }

    std::string missingEnd() const override
    {
        return m_done ? std::string() : std::string("the stream ended before its \"data: [DONE]\" line");
    }

private:
    struct Call {
        std::string id;
        std::string name;
        std::string arguments;
    };
    std::string m_text;
    std::map<int, Call> m_calls;
    std::string m_finish;
    std::string m_model;
    nlohmann::json m_usage;
    bool m_done = false;
};

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
    messages.push_back({{"role", "system"}, {"content", systemPrompt(context)}});
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
                                {"content", toolResultText(result)}});
        }
    }
    json body{{"model", config.model}, {"messages", std::move(messages)}, {"tools", toolDefinitions()}};
    if (config.stream) {
        body["stream"] = true;
        body["stream_options"] = {{"include_usage", true}};
    }
    return body;
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
    if (const auto reason = choice.find("finish_reason"); reason != choice.end() && reason->is_string())
        turn.stopReason = reason->get<std::string>();
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

std::shared_ptr<TurnStream> OpenAiModel::makeStream(DeltaSink sink)
{
    return std::make_shared<OpenAiStream>(std::move(sink));
}

// Everything one turn's HTTP request needs, read afresh for each turn (the key may rotate).
Result<TurnCall> OpenAiModel::callFor(const ModelContext &context) const
{
    const auto apiKey = readApiKey(m_name, configSection(m_name), ApiKeySource{m_config.apiKeyEnv, {}});
    if (!apiKey)
        return std::unexpected(apiKey.error());
    TurnCall call;
    HttpRequest &request = call.request;
    request.url = chatUrl(m_config);
    setModelRequestBasics(request, m_config, context.idempotencyKey);
    if (!apiKey->empty())
        request.headers.push_back("Authorization: Bearer " + *apiKey);
    request.body = jsonText(buildRequest(m_config, context));
    std::shared_ptr<TurnStream> stream;
    if (m_config.stream)
        request.stream = stream = makeStream(context.onDelta);
    call.interpret = [this, key = context.idempotencyKey, stream](HttpResult result) {
        return turnFrom(std::move(result), key, stream.get());
    };
    return call;
}

// What the request's end means for the session: a turn, or an error that says what to check.
Result<ModelTurn> OpenAiModel::turnFrom(HttpResult result, const std::string &idempotencyKey,
                                        const TurnStream *stream) const
{
    const std::string url = chatUrl(m_config);
    if (auto unanswered = unansweredError(result, url, configSection(m_name)))
        return std::unexpected(std::move(*unanswered));
    using End = HttpResult::End;
    if (result.end == End::Answered && result.status >= 200 && result.status < 300)
        return parseResponse(result.streamed && stream ? stream->body().dump() : result.body, m_config, idempotencyKey);
    if (!result.gaveUp)
        return refusal(url, result, m_config);
    const std::string lastProblem = result.end == End::ConnectionError
        ? fmt::format("connection error: {}", result.error)
        : result.end == End::BrokenStream
        ? fmt::format("a broken stream: {} (set stream = false in the {} config if the server cannot stream)",
                      result.error, configSection(m_name))
        : fmt::format("HTTP {}: \"{}\"", result.status, excerpt(result.body));
    return fail(ErrorCode::Unavailable,
                fmt::format("the model API at {} still failed after {} attempt(s); last: {}. The step will "
                            "be retried; if this persists, check the service and max_retries.",
                            url, result.attempts, lastProblem));
}

void OpenAiModel::nextAsync(ModelContext context, TurnDone done)
{
    submitTurn(m_loop, m_name, [&] { return callFor(context); }, std::move(done));
}

Result<ModelTurn> OpenAiModel::next(const ModelContext &context)
{
    return waitForTurn(m_loop, m_name, [&](TurnDone done) { nextAsync(context, std::move(done)); });
}

} // namespace paddock::llm
