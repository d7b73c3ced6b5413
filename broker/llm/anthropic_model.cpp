// Known limits: a streamed message is kept whole in memory until it ends; extended thinking is not asked
// for (thinking blocks in a response are skipped); retry-after given as an HTTP date is ignored in
// favour of the computed backoff (http_loop.cpp); a 429 for a spent monthly limit is retried like a
// rate limit before it is reported; tool results longer than kMaxToolResultChars are cut in the
// middle before they are sent back.

#include "broker/llm/anthropic_model.h"

#include "broker/llm/system_prompt.h"
#include "broker/llm/tool_catalogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <cctype>

namespace paddock::llm {

namespace {

using nlohmann::json;

// "[models.anthropic]", or "[models.anthropic.fast]" for the model "anthropic:fast".
std::string configSection(const std::string &modelName)
{
    std::string section = modelName;
    std::ranges::replace(section, ':', '.');
    return "[models." + section + "]";
}

// Tool use ids on the wire match ^[a-zA-Z0-9_-]+$: anything else in a recorded id becomes '_'.
std::string wireId(const std::string &id)
{
    std::string out = id.empty() ? std::string("call") : id;
    std::ranges::replace_if(
        out, [](unsigned char c) { return !std::isalnum(c) && c != '_' && c != '-'; }, '_');
    return out;
}

bool hasVisibleText(const std::string &text)
{
    return std::ranges::any_of(text, [](unsigned char c) { return !std::isspace(c); });
}

// A field of a streamed event as the type it must have, else the fallback: a server's event is
// read, never trusted (nlohmann's value() throws when the field has another type).
std::string stringField(const json &object, const char *key, std::string fallback = {})
{
    const auto found = object.is_object() ? object.find(key) : object.end();
    return found != object.end() && found->is_string() ? found->get<std::string>() : fallback;
}

json objectField(const json &object, const char *key)
{
    const auto found = object.is_object() ? object.find(key) : object.end();
    return found != object.end() && found->is_object() ? *found : json::object();
}

// A content block's index: a non-negative int, else -1.
int blockIndex(const json &object)
{
    const auto found = object.find("index");
    if (found == object.end() || !found->is_number_integer())
        return -1;
    const auto index = found->get<int64_t>();
    return index >= 0 && index <= INT32_MAX ? static_cast<int>(index) : -1;
}

json textBlock(std::string text)
{
    return {{"type", "text"}, {"text", std::move(text)}};
}

json toolDefinitions()
{
    json tools = json::array();
    for (const ToolDefinition &definition : toolCatalogue())
        tools.push_back({{"name", definition.name},
                         {"description", definition.description},
                         {"input_schema", definition.inputSchema()}});
    return tools;
}

int64_t usageCount(const json &usage, const char *key)
{
    const auto it = usage.find(key);
    return it != usage.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// "authentication_error: invalid x-api-key" from an error body, else a quote of the body.
std::string describeError(const std::string &body)
{
    const json doc = json::parse(body, nullptr, false);
    if (doc.is_object()) {
        const auto error = doc.find("error");
        if (error != doc.end() && error->is_object()) {
            const std::string type = stringField(*error, "type");
            const std::string message = stringField(*error, "message");
            if (!type.empty() || !message.empty())
                return excerpt(type.empty() ? message : message.empty() ? type : type + ": " + message);
        }
    }
    return "\"" + excerpt(body) + "\"";
}

// Where the key was looked for, for the fix of a 401.
std::string keySource(const AnthropicConfig &config, const std::string &section)
{
    if (!config.apiKeyFile.empty())
        return fmt::format("the file {} (api_key_file in the {} config)", config.apiKeyFile.string(), section);
    if (!config.apiKeyEnv.empty())
        return fmt::format("the environment variable {} (api_key_env in the {} config; or set api_key_file)",
                           config.apiKeyEnv, section);
    return fmt::format("the {} config, which names none: set api_key_file or api_key_env", section);
}

// A streamed message (message_start, content_block_start/delta/stop, message_delta, message_stop;
// ping and unknown events skipped), gathered back into the message the unstreamed API sends.
class AnthropicStream final : public TurnStream {
public:
    using TurnStream::TurnStream;

    nlohmann::json body() const override
    {
        nlohmann::json message = m_message;
        nlohmann::json content = nlohmann::json::array();
        for (const auto &[index, block] : m_blocks)
            content.push_back(block);
        message["content"] = std::move(content);
        return message;
    }

protected:
    void reset() override
    {
        m_message = nlohmann::json::object();
        m_blocks.clear();
        m_json.clear();
        m_toolOrdinal.clear();
        m_stopped = false;
        m_textStreamed = false;
    }

    std::string onEvent(const SseEvent &event) override
    {
        using nlohmann::json;
        const json data = json::parse(event.data, nullptr, false);
        if (data.is_discarded() || !data.is_object())
            return fmt::format("an event's data is not a JSON object: \"{}\"", excerpt(event.data));
        const std::string type = stringField(data, "type", event.event);
        if (type == "error") {
            const json error = objectField(data, "error");
            return fmt::format("the stream carried an error: {}: {}", stringField(error, "type", "error"),
                               stringField(error, "message", excerpt(event.data)));
        }
        if (type == "message_start") {
            if (!data.contains("message") || !data["message"].is_object())
                return fmt::format("message_start has no message: \"{}\"", excerpt(event.data));
            m_message = data["message"];
            return {};
        }
        const int index = blockIndex(data);
        if (type == "content_block_start") {
            const auto found = data.find("content_block");
            if (index < 0 || found == data.end() || !found->is_object())
                return fmt::format("content_block_start has no index or block: \"{}\"", excerpt(event.data));
            json block = *found;
            const std::string blockType = stringField(block, "type");
            if (blockType == "tool_use") {
                const int ordinal = static_cast<int>(m_toolOrdinal.size());
                m_toolOrdinal[index] = ordinal;
                deliver({.toolIndex = ordinal, .toolId = stringField(block, "id"), .toolName = stringField(block, "name")});
            } else if (blockType == "text") {
                // parseResponse joins a turn's text blocks with a newline: the deltas say it too,
                // so that what streamed reads as the model.response that ends it.
                if (m_textStreamed)
                    deliverText("\n");
                deliverText(stringField(block, "text"));
            }
            m_blocks[index] = std::move(block);
            return {};
        }
        if (type == "content_block_delta") {
            const auto block = m_blocks.find(index);
            const json delta = objectField(data, "delta");
            if (block == m_blocks.end())
                return fmt::format("content_block_delta for a block that did not start: \"{}\"", excerpt(event.data));
            const std::string deltaType = stringField(delta, "type");
            if (deltaType == "text_delta") {
                const std::string text = stringField(delta, "text");
                block->second["text"] = stringField(block->second, "text") + text;
                deliverText(text);
            } else if (deltaType == "input_json_delta") {
                const std::string part = stringField(delta, "partial_json");
                m_json[index] += part;
                deliver({.toolIndex = m_toolOrdinal[index], .arguments = part});
            }
            return {};
        }
        if (type == "content_block_stop") {
            const auto block = m_blocks.find(index);
            if (block != m_blocks.end() && stringField(block->second, "type") == "tool_use" && m_json.contains(index)) {
                const std::string &text = m_json[index];
                // Not JSON: kept as the text it is, which parseResponse names as not an object.
                json input = text.empty() ? json::object() : json::parse(text, nullptr, false);
                block->second["input"] = input.is_discarded() ? json(text) : std::move(input);
            }
            return {};
        }
        if (type == "message_delta") {
            if (const auto delta = data.find("delta"); delta != data.end() && delta->is_object()) {
                for (const auto &[key, value] : delta->items())
                    m_message[key] = value;
            }
            if (const auto usage = data.find("usage"); usage != data.end() && usage->is_object()) {
                if (!m_message.contains("usage") || !m_message["usage"].is_object())
                    m_message["usage"] = json::object();
                for (const auto &[key, value] : usage->items())
                    m_message["usage"][key] = value;
            }
            return {};
        }
        if (type == "message_stop")
            m_stopped = true;
        return {};   // ping, and events newer than this adapter
    }

    std::string missingEnd() const override
    {
        return m_stopped ? std::string() : std::string("the stream ended before its message_stop event");
    }

private:
    void deliverText(const std::string &text)
    {
        if (text.empty())
            return;
        m_textStreamed = true;
        deliver({.text = text});
    }

    nlohmann::json m_message = nlohmann::json::object();
    std::map<int, nlohmann::json> m_blocks;   // by the stream's block index
    std::map<int, std::string> m_json;        // a tool_use block's input so far
    std::map<int, int> m_toolOrdinal;         // block index -> the tool call's place among the turn's
    bool m_stopped = false;
    bool m_textStreamed = false;   // some text delta went out (the next text block starts with "\n")
};

} // namespace

AnthropicModel::AnthropicModel(std::string name, AnthropicConfig config, BackoffHook backoff)
    : m_name(std::move(name))
    , m_config(std::move(config))
    , m_loop(std::move(backoff))
{
}

std::string AnthropicModel::messagesUrl(const AnthropicConfig &config)
{
    std::string base = config.baseUrl;
    while (base.ends_with('/'))
        base.pop_back();
    return base + (base.ends_with("/v1") ? "/messages" : "/v1/messages");
}

json AnthropicModel::buildRequest(const AnthropicConfig &config, const ModelContext &context)
{
    json system = textBlock(systemPrompt(context));
    if (config.promptCaching)
        system["cache_control"] = {{"type", "ephemeral"}};

    json messages = json::array();
    messages.push_back({{"role", "user"},
                        {"content", json::array({textBlock(context.goal.empty() ? "(no goal given)" : context.goal)})}});
    for (const Exchange &exchange : context.history) {
        // The API refuses empty text blocks and empty assistant messages.
        json said = json::array();
        if (hasVisibleText(exchange.turn.text))
            said.push_back(textBlock(exchange.turn.text));
        for (const ToolCall &call : exchange.turn.toolCalls)
            said.push_back({{"type", "tool_use"},
                            {"id", wireId(call.id)},
                            {"name", call.name},
                            {"input", call.arguments.is_object() ? call.arguments : json::object()}});
        if (said.empty())
            said.push_back(textBlock("(no answer)"));
        messages.push_back({{"role", "assistant"}, {"content", std::move(said)}});

        // Every tool_use is answered in the next user message, in order, tool results first.
        json answers = json::array();
        for (size_t i = 0; i < exchange.turn.toolCalls.size(); ++i) {
            const json result = i < exchange.results.size() ? exchange.results[i]
                                                            : json{{"error", "no result was recorded"}};
            json block = {{"type", "tool_result"},
                          {"tool_use_id", wireId(exchange.turn.toolCalls[i].id)},
                          {"content", toolResultText(result)}};
            if (result.is_object() && result.contains("error"))
                block["is_error"] = true;
            answers.push_back(std::move(block));
        }
        if (answers.empty())
            answers.push_back(textBlock("Go on: call a tool, or finish."));
        messages.push_back({{"role", "user"}, {"content", std::move(answers)}});
    }
    if (config.promptCaching)
        messages.back()["content"].back()["cache_control"] = {{"type", "ephemeral"}};

    json body{{"model", config.model},
              {"max_tokens", config.maxTokens},
              {"system", json::array({std::move(system)})},
              {"messages", std::move(messages)},
              {"tools", toolDefinitions()}};
    if (config.stream)
        body["stream"] = true;
    return body;
}

Result<ModelTurn> AnthropicModel::parseResponse(std::string_view body, const AnthropicConfig &config,
                                                const std::string &idempotencyKey)
{
    const std::string url = messagesUrl(config);
    auto malformed = [&](std::string_view problem) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the Anthropic API at {} sent a malformed response: {}. Check that base_url points "
                                "at the Messages API (https://api.anthropic.com, or a gateway that speaks it).",
                                url, problem));
    };

    const json doc = json::parse(body, nullptr, false);
    if (doc.is_discarded())
        return malformed(fmt::format("the body is not JSON: \"{}\"", excerpt(body)));
    if (!doc.is_object())
        return malformed(fmt::format("the body is not a JSON object: \"{}\"", excerpt(body)));
    if (stringField(doc, "type") == "error")
        return malformed(fmt::format("a success status with an error in the body: {}", describeError(std::string(body))));
    const auto content = doc.find("content");
    if (content == doc.end() || !content->is_array())
        return malformed(fmt::format("it has no content array: \"{}\"", excerpt(body)));

    ModelTurn turn;
    for (size_t i = 0; i < content->size(); ++i) {
        const json &block = (*content)[i];
        const std::string type = stringField(block, "type");
        if (type.empty())
            return malformed(fmt::format("content[{}] is not a block with a type: \"{}\"", i, excerpt(block.dump())));
        if (type == "text") {
            const auto text = block.find("text");
            if (text == block.end() || !text->is_string())
                return malformed(fmt::format("content[{}], a text block, has no text", i));
            turn.text += (turn.text.empty() ? "" : "\n") + text->get<std::string>();
        } else if (type == "tool_use") {
            const auto name = block.find("name");
            if (name == block.end() || !name->is_string() || name->get<std::string>().empty())
                return malformed(fmt::format("content[{}], a tool_use block, has no name: \"{}\"", i,
                                             excerpt(block.dump())));
            ToolCall call;
            call.name = name->get<std::string>();
            const auto id = block.find("id");
            call.id = id != block.end() && id->is_string() && !id->get<std::string>().empty()
                ? id->get<std::string>()
                : wireId(fmt::format("toolu_{}_{}", idempotencyKey, i));
            const auto input = block.find("input");
            if (input == block.end() || !input->is_object())
                return malformed(fmt::format("the input of tool_use '{}' ({}) is not a JSON object: \"{}\"", call.name,
                                             call.id, input == block.end() ? std::string("(none)") : excerpt(input->dump())));
            call.arguments = *input;
            turn.toolCalls.push_back(std::move(call));
        }
        // thinking and redacted_thinking blocks (not asked for) and blocks of server tools (none are
        // offered) carry nothing the session records.
    }

    const auto stop = doc.find("stop_reason");
    turn.stopReason = stop != doc.end() && stop->is_string() ? stop->get<std::string>() : std::string();
    const std::string section = "[models.anthropic]";
    if (turn.stopReason == "max_tokens")
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the Anthropic API at {} stopped the answer at max_tokens ({}){}: it is incomplete. "
                                "Raise max_tokens in the {} config (the step asks again).",
                                url, config.maxTokens,
                                turn.toolCalls.empty() ? "" : fmt::format(", inside the call of tool '{}'",
                                                                          turn.toolCalls.back().name),
                                section));
    if (turn.stopReason == "refusal")
        return fail(ErrorCode::FailedPrecondition,
                    fmt::format("the model refused to go on (stop_reason refusal){}. Asking again will not change "
                                "that: change the goal, or the session's model.",
                                turn.text.empty() ? "" : fmt::format(", saying \"{}\"", excerpt(turn.text))));
    if (turn.stopReason == "model_context_window_exceeded")
        return fail(ErrorCode::FailedPrecondition,
                    "the conversation outgrew the model's context window (stop_reason model_context_window_exceeded). "
                    "Split the goal into shorter sessions, or use a model with a larger context window.");
    if (turn.stopReason == "pause_turn")
        return malformed("it paused the turn (stop_reason pause_turn), which only server tools do, and Paddock "
                         "offers none");
    if (turn.stopReason == "tool_use" && turn.toolCalls.empty())
        return malformed("stop_reason is tool_use but the content has no tool_use block");

    if (const auto usage = doc.find("usage"); usage != doc.end() && usage->is_object()) {
        const int64_t uncached = usageCount(*usage, "input_tokens");
        turn.usage.cacheWriteTokens = usageCount(*usage, "cache_creation_input_tokens");
        turn.usage.cachedTokens = usageCount(*usage, "cache_read_input_tokens");
        turn.usage.inputTokens = uncached + turn.usage.cacheWriteTokens + turn.usage.cachedTokens;
        turn.usage.outputTokens = usageCount(*usage, "output_tokens");
    }
    const auto model = doc.find("model");
    turn.model = model != doc.end() && model->is_string() ? model->get<std::string>() : config.model;
    return turn;
}

std::shared_ptr<TurnStream> AnthropicModel::makeStream(DeltaSink sink)
{
    return std::make_shared<AnthropicStream>(std::move(sink));
}

Result<TurnCall> AnthropicModel::callFor(const ModelContext &context) const
{
    const auto apiKey = readApiKey(m_name, configSection(m_name), ApiKeySource{m_config.apiKeyEnv, m_config.apiKeyFile});
    if (!apiKey)
        return std::unexpected(apiKey.error());
    TurnCall call;
    HttpRequest &request = call.request;
    request.url = messagesUrl(m_config);
    setModelRequestBasics(request, m_config, context.idempotencyKey);
    request.headers.push_back("anthropic-version: " + m_config.anthropicVersion);
    if (!apiKey->empty())
        request.headers.push_back("x-api-key: " + *apiKey);
    request.body = jsonText(buildRequest(m_config, context));
    std::shared_ptr<TurnStream> stream;
    if (m_config.stream)
        request.stream = stream = makeStream(context.onDelta);
    call.interpret = [this, key = context.idempotencyKey, stream](HttpResult result) {
        return turnFrom(std::move(result), key, stream.get());
    };
    return call;
}

Result<ModelTurn> AnthropicModel::turnFrom(HttpResult result, const std::string &idempotencyKey,
                                           const TurnStream *stream) const
{
    const std::string url = messagesUrl(m_config);
    const std::string section = configSection(m_name);
    if (auto unanswered = unansweredError(result, url, section))
        return std::unexpected(std::move(*unanswered));
    using End = HttpResult::End;
    if (result.end == End::Answered && result.status >= 200 && result.status < 300)
        return parseResponse(result.streamed && stream ? stream->body().dump() : result.body, m_config, idempotencyKey);

    if (result.gaveUp) {
        std::string last;
        if (result.end == End::ConnectionError)
            last = fmt::format("connection error: {}", result.error);
        else if (result.end == End::BrokenStream)
            last = fmt::format("a broken stream: {} (set stream = false in the {} config if a proxy cannot pass "
                               "server-sent events)",
                               result.error, section);
        else if (result.status == 529)
            last = fmt::format("HTTP 529 {} (the API is overloaded for everyone, not over your limits)",
                               describeError(result.body));
        else if (result.status == 429)
            last = fmt::format("HTTP 429 {} (over the key's rate limits; each wait followed retry-after)",
                               describeError(result.body));
        else
            last = fmt::format("HTTP {} {}", result.status, describeError(result.body));
        return fail(ErrorCode::Unavailable,
                    fmt::format("the Anthropic API at {} still failed after {} attempt(s); last: {}. The step will be "
                                "retried; if this persists, check the service's status and max_retries in the {} "
                                "config.",
                                url, result.attempts, last, section));
    }

    const std::string what = fmt::format("the Anthropic API at {} refused the request with HTTP {} {}", url,
                                         result.status, describeError(result.body));
    switch (result.status) {
    case 401:
        return fail(ErrorCode::PermissionDenied,
                    fmt::format("{}. The API key was not accepted: check the key in {}.", what,
                                keySource(m_config, section)));
    case 403:
        return fail(ErrorCode::PermissionDenied,
                    fmt::format("{}. The key may not use this model or feature: check the key's workspace in the "
                                "Anthropic console, and model in the {} config.",
                                what, section));
    case 404:
        return fail(ErrorCode::NotFound,
                    fmt::format("{}. Check base_url and the model name '{}' in the {} config.", what, m_config.model,
                                section));
    case 413:
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{}. The conversation is larger than the API accepts; split the goal into shorter "
                                "sessions.",
                                what));
    default:
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{}. Check the model name, max_tokens and anthropic_version in the {} config.", what,
                                section));
    }
}

void AnthropicModel::nextAsync(ModelContext context, TurnDone done)
{
    submitTurn(m_loop, m_name, [&] { return callFor(context); }, std::move(done));
}

Result<ModelTurn> AnthropicModel::next(const ModelContext &context)
{
    return waitForTurn(m_loop, m_name, [&](TurnDone done) { nextAsync(context, std::move(done)); });
}

} // namespace paddock::llm
