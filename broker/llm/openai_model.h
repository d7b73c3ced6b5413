#pragma once
// The openai adapter: chat completions with tool calls (POST {base_url}/chat/completions). Serves
// OpenAI and the servers that speak its wire format (vLLM, llama.cpp server, Ollama).
//
// Threads: next() may be called from several step workers at once. Each call uses its own curl easy
// handle, taken from a small mutex-guarded pool so connections are reused between turns.

#include "broker/llm/model_adapter.h"

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

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
};

class OpenAiModel final : public ModelAdapter {
public:
    // How the adapter waits between retries; tests substitute one that records instead of sleeping.
    using SleepFunction = std::function<void(std::chrono::milliseconds)>;

    // name is what users select (e.g. "openai" or "openai:local"); see model_registry.h.
    OpenAiModel(std::string name, OpenAiConfig config, SleepFunction sleep = {});
    ~OpenAiModel() override;
    OpenAiModel(const OpenAiModel &) = delete;
    OpenAiModel &operator=(const OpenAiModel &) = delete;

    std::string name() const override { return m_name; }
    const OpenAiConfig &config() const { return m_config; }

    // Usage: inputTokens is prompt_tokens as the API reports it (cached tokens included), cachedTokens
    // is prompt_tokens_details.cached_tokens. latencyMs covers every attempt and backoff.
    Result<ModelTurn> next(const ModelContext &context) override;

    // The request body for a context: exposed so tests and debugging tools can see the exact wire form.
    static nlohmann::json buildRequest(const OpenAiConfig &config, const ModelContext &context);
    // Parses a 2xx response body. Errors: InvalidArgument quoting what was wrong.
    static Result<ModelTurn> parseResponse(std::string_view body, const OpenAiConfig &config,
                                           const ModelContext &context);

private:
    struct Handle;
    Handle *acquireHandle();
    void releaseHandle(Handle *handle);

    std::string m_name;
    OpenAiConfig m_config;
    SleepFunction m_sleep;
    std::mutex m_handlesMutex;
    std::vector<Handle *> m_idleHandles;   // guarded by m_handlesMutex
};

} // namespace paddock::llm
