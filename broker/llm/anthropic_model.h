#pragma once
// The anthropic adapter: Anthropic's Messages API with tool use (POST {base_url}/v1/messages, with
// the x-api-key and anthropic-version headers). The system prompt goes in the top-level `system`,
// the tools in `tools` with their `input_schema` (both from the shared definitions: system_prompt.h,
// tool_catalogue.h), every earlier turn as an assistant message of text and tool_use blocks followed
// by a user message of tool_result blocks, one per tool_use, in order.
//
// Stop reasons: end_turn, stop_sequence and tool_use make a turn; max_tokens is InvalidArgument
// (the answer, or a tool call's input, was cut: raise max_tokens), refusal and
// model_context_window_exceeded are FailedPrecondition (asking again cannot mend them). Usage: the
// turn's inputTokens adds up input_tokens, cache_creation_input_tokens and cache_read_input_tokens;
// cachedTokens is the cache reads and cacheWriteTokens the cache writes, each priced on its own
// ([prices.models.NAME], broker/cost/prices.h). With prompt_caching on, the system prompt (and the
// tools before it) and the conversation so far are marked for the prompt cache.
//
// Threads: as openai_model.h: next(), nextAsync() and cancelInFlight() may be called from any
// thread, several at once; every request runs on the adapter's own HttpLoop, whose thread runs
// nextAsync's `done` (which must not block); next() must not be called from a `done`.

#include "broker/llm/http_loop.h"
#include "broker/llm/model_adapter.h"
#include "broker/llm/model_http.h"

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace paddock::llm {

struct AnthropicConfig {
    std::string baseUrl = "https://api.anthropic.com";   // requests go to {base_url}/v1/messages
    std::string model = "claude-sonnet-4-5";
    // Where the API key is: a file (one line, mode 0600; wins when set) or the NAME of an environment
    // variable, read at each call so a key can be rotated without a restart. Both empty: no x-api-key
    // header (a gateway that adds its own).
    std::string apiKeyEnv = "ANTHROPIC_API_KEY";
    std::filesystem::path apiKeyFile;
    std::string anthropicVersion = "2023-06-01";          // the anthropic-version header
    int64_t maxTokens = 8192;                             // the most output tokens a turn may have
    bool promptCaching = true;                            // cache_control on the system prompt and the conversation
    int64_t timeoutMs = 120000;                           // per attempt
    int maxRetries = 4;                                   // retries after the first attempt (408, 429, 5xx, 529, connection errors)
    int64_t initialBackoffMs = 500;                       // doubles per retry, with jitter in [half, full]
    int64_t maxBackoffMs = 30000;                         // caps backoff and retry-after alike
    // Ask for the answer as server-sent events (stream: true): its text and tool inputs reach the
    // session's log as they come (model.delta).
    bool stream = true;
};

class AnthropicModel final : public ModelAdapter {
public:
    using BackoffHook = HttpLoop::BackoffHook;

    // name is what users select ("anthropic" or "anthropic:<profile>"; model_registry.h).
    AnthropicModel(std::string name, AnthropicConfig config, BackoffHook backoff = {});
    // Ends the requests still open with Cancelled (their `done` runs) before it returns.
    ~AnthropicModel() override = default;
    AnthropicModel(const AnthropicModel &) = delete;
    AnthropicModel &operator=(const AnthropicModel &) = delete;

    std::string name() const override { return m_name; }
    const AnthropicConfig &config() const { return m_config; }

    // A request that fails before it is sent (no key) calls `done` before nextAsync returns.
    void nextAsync(ModelContext context, TurnDone done) override;
    Result<ModelTurn> next(const ModelContext &context) override;
    void cancelInFlight() override { m_loop.cancelAll(); }

    // The request body for a context: the exact wire form, for tests and debugging tools.
    static nlohmann::json buildRequest(const AnthropicConfig &config, const ModelContext &context);
    // Parses a 2xx response body; idempotencyKey names a tool_use that comes without an id.
    // Errors: InvalidArgument quoting what was wrong, or naming max_tokens; FailedPrecondition for
    // a refusal or a conversation longer than the model's context window.
    static Result<ModelTurn> parseResponse(std::string_view body, const AnthropicConfig &config,
                                           const std::string &idempotencyKey);
    // The decoder of a streamed answer (server-sent events in, deltas to sink, body() the answer as
    // the unstreamed API sends it, for parseResponse): exposed for the fuzz target.
    static std::shared_ptr<TurnStream> makeStream(DeltaSink sink);
    // {base_url}/v1/messages (a base_url that already ends in /v1 gets /messages).
    static std::string messagesUrl(const AnthropicConfig &config);

private:
    Result<TurnCall> callFor(const ModelContext &context) const;
    Result<ModelTurn> turnFrom(HttpResult result, const std::string &idempotencyKey, const TurnStream *stream) const;

    const std::string m_name;
    const AnthropicConfig m_config;
    HttpLoop m_loop;   // last: destroyed first, so the callbacks it runs while stopping see the rest
};

} // namespace paddock::llm
