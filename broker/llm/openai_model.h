#pragma once
// The openai adapter: chat completions with tool calls (POST {base_url}/chat/completions). Serves
// OpenAI and the servers that speak its wire format (vLLM, llama.cpp server, Ollama).
//
// Threads: next(), nextAsync() and cancelInFlight() may be called from any thread, several at once.
// Every request runs on the adapter's own HttpLoop (one thread, started by the first request), so a
// turn being waited for holds no thread: nextAsync's `done` runs on that loop thread, and must not
// block. next() waits for nextAsync on the caller's thread, so it must not be called from a `done`.

#include "broker/llm/http_loop.h"
#include "broker/llm/model_adapter.h"
#include "broker/llm/model_http.h"

#include <memory>
#include <string>
#include <string_view>

namespace paddock::llm {

struct OpenAiConfig {
    std::string baseUrl = "https://api.openai.com/v1";
    std::string model = "gpt-4o-mini";
    // The NAME of the environment variable that holds the API key, read at each call so a key can be
    // rotated without a restart. Empty: send no Authorization header (local servers need none).
    std::string apiKeyEnv = "OPENAI_API_KEY";
    int64_t timeoutMs = 120000;         // per attempt
    int maxRetries = 4;                 // retries after the first attempt (429, 5xx, connection errors)
    int64_t initialBackoffMs = 500;     // doubles per retry, with jitter in [half, full]
    int64_t maxBackoffMs = 30000;       // caps backoff and Retry-After alike
    // Ask for the answer as server-sent events (stream: true, with usage in the last chunk): its
    // text and tool-call arguments reach the session's log as they come (model.delta).
    bool stream = true;
};

class OpenAiModel final : public ModelAdapter {
public:
    // How long the adapter waits before a retry, given what backoff or Retry-After chose; tests
    // substitute one that records the choice and returns zero. Runs on the loop thread.
    using BackoffHook = HttpLoop::BackoffHook;

    // name is what users select (e.g. "openai" or "openai:local"); see model_registry.h.
    OpenAiModel(std::string name, OpenAiConfig config, BackoffHook backoff = {});
    // Ends the requests still open with Cancelled (their `done` runs) before it returns.
    ~OpenAiModel() override = default;
    OpenAiModel(const OpenAiModel &) = delete;
    OpenAiModel &operator=(const OpenAiModel &) = delete;

    std::string name() const override { return m_name; }
    const OpenAiConfig &config() const { return m_config; }

    // Usage: inputTokens is prompt_tokens as the API reports it (cached tokens included), cachedTokens
    // is prompt_tokens_details.cached_tokens; stopReason is finish_reason. latencyMs covers every
    // attempt and backoff. The tools offered are the whole catalogue (tool_catalogue.h); the system
    // prompt (system_prompt.h) tells the model its tiers and its bound.
    // A request that fails before it is sent (no API key) calls `done` before nextAsync returns.
    void nextAsync(ModelContext context, TurnDone done) override;
    // nextAsync, waited for. Internal when called on the loop thread (from a `done`): it would wait
    // for itself.
    Result<ModelTurn> next(const ModelContext &context) override;
    void cancelInFlight() override { m_loop.cancelAll(); }

    // The request body for a context: exposed so tests and debugging tools can see the exact wire form.
    static nlohmann::json buildRequest(const OpenAiConfig &config, const ModelContext &context);
    // Parses a 2xx response body; idempotencyKey names tool calls that come without an id.
    // Errors: InvalidArgument quoting what was wrong.
    static Result<ModelTurn> parseResponse(std::string_view body, const OpenAiConfig &config,
                                           const std::string &idempotencyKey);
    // The decoder of a streamed answer (server-sent events in, deltas to sink, body() the answer as
    // the unstreamed API sends it, for parseResponse): exposed for the fuzz target.
    static std::shared_ptr<TurnStream> makeStream(DeltaSink sink);

private:
    Result<TurnCall> callFor(const ModelContext &context) const;
    Result<ModelTurn> turnFrom(HttpResult result, const std::string &idempotencyKey, const TurnStream *stream) const;

    const std::string m_name;
    const OpenAiConfig m_config;
    HttpLoop m_loop;   // last: destroyed first, so the callbacks it runs while stopping see the rest
};

} // namespace paddock::llm
