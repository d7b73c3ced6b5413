#pragma once
// What the HTTP model adapters (openai_model.h, anthropic_model.h) share. A turn is one request on
// the adapter's HttpLoop, in two parts kept apart: the request a context needs (built on the
// caller's thread) and what the finished request means (interpreted on the loop thread), so that
// the transport can change (a streamed response) without touching either. Also: quoting bodies in
// error messages, tool results as sent back to a model, the API key read afresh at every call.
//
// Threads: free functions. submitTurn may be called from any thread; `interpret` and `done` run on
// the loop's thread. waitForTurn blocks the calling thread, which must not be the loop's.

#include "broker/llm/http_loop.h"
#include "broker/llm/model_adapter.h"
#include "broker/llm/sse.h"
#include "common/result.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace paddock::llm {

inline constexpr size_t kMaxModelResponseBytes = 16 * 1024 * 1024;
inline constexpr size_t kMaxToolResultChars = 32 * 1024;
inline constexpr int64_t kMaxModelConnectTimeoutMs = 10000;

// What both adapters set alike on a model call's request: JSON in, the answer asked for as a
// stream or whole, the step's idempotency key, and the timeouts and retries of the model's section
// (any config with timeoutMs, maxRetries, initialBackoffMs, maxBackoffMs and stream). The caller
// adds its URL, credentials and body.
template <typename Config>
void setModelRequestBasics(HttpRequest &request, const Config &config, const std::string &idempotencyKey)
{
    request.headers = {"Content-Type: application/json",
                       config.stream ? "Accept: text/event-stream" : "Accept: application/json"};
    if (!idempotencyKey.empty())
        request.headers.push_back("Idempotency-Key: " + idempotencyKey);
    request.timeoutMs = config.timeoutMs;
    request.connectTimeoutMs = std::min<int64_t>(config.timeoutMs, kMaxModelConnectTimeoutMs);
    request.maxResponseBytes = kMaxModelResponseBytes;
    request.maxRetries = config.maxRetries;
    request.initialBackoffMs = config.initialBackoffMs;
    request.maxBackoffMs = config.maxBackoffMs;
}

// A short, single-line quote of a body for error messages; never splits a UTF-8 sequence.
std::string excerpt(std::string_view text);

// JSON text with invalid UTF-8 replaced (what a model is sent must be valid JSON).
std::string jsonText(const nlohmann::json &value);

// A tool's recorded result as a model is sent it: its JSON text, cut in the middle past
// kMaxToolResultChars (a command's head and tail say the most).
std::string toolResultText(const nlohmann::json &result);

// Where an adapter finds its API key: a file (wins when set) or an environment variable, read at
// every call so that a key can be rotated without a restart. Neither: no key is sent.
struct ApiKeySource {
    std::string envVariable;        // the variable's NAME, never the key
    std::filesystem::path file;     // one line holding the key; mode 0600 (group or others may not read it)
};

// The key, or "" when the source names neither. FailedPrecondition naming the file or the variable,
// the config keys (section, e.g. "[models.anthropic]") and the fix.
Result<std::string> readApiKey(const std::string &modelName, std::string_view section, const ApiKeySource &source);

// One turn's request and what its end means. interpret runs once, on the loop thread: it must not
// block, and may use only what outlives the loop (adapters keep their HttpLoop as their last
// member, so their own members qualify).
struct TurnCall {
    HttpRequest request;
    std::function<Result<ModelTurn>(HttpResult)> interpret;
};

// A turn read as server-sent events: the request's HttpStream. It parses the events, hands each to
// the adapter's decoder (onEvent), passes the decoder's deltas to the context's sink with their
// attempt, and leaves the answer (body()) as the API would have sent it unstreamed, so that the
// final turn is parsed by the same code either way. A new attempt starts the decoder afresh.
//
// Threads: the loop thread only (HttpStream's calls), then interpret on the same thread.
class TurnStream : public HttpStream {
public:
    explicit TurnStream(DeltaSink sink) : m_sink(std::move(sink)) {}

    void begin(int attempt) final;
    std::string data(std::string_view bytes) final;
    std::string end() final;

    // The answer as the unstreamed API sends it; once end() found the stream complete.
    virtual nlohmann::json body() const = 0;

protected:
    virtual void reset() = 0;
    // One event: "" or what is wrong with it (the stream is then broken).
    virtual std::string onEvent(const SseEvent &event) = 0;
    // "" when the stream's last event came, else what is missing.
    virtual std::string missingEnd() const = 0;
    // Not `emit`: Qt defines that as a macro, and this header reaches the console's test code.
    void deliver(ModelDelta delta);

private:
    DeltaSink m_sink;
    SseParser m_parser;
    std::vector<SseEvent> m_events;
    int m_attempt = 0;
};

// Sends the call on loop; done gets what interpret made of its end, with attempts and latency (every
// attempt and wait) filled in. A call that could not be built (an error instead of a TurnCall) ends
// in done before submitTurn returns. An exception in build or in interpret (nlohmann throws on
// invalid UTF-8 and type errors) is an Internal error naming the model.
void submitTurn(HttpLoop &loop, const std::string &modelName, const std::function<Result<TurnCall>()> &build,
                ModelAdapter::TurnDone done);

// start(done), waited for on this thread. Internal when called on the loop thread (from a `done`),
// where it would wait for itself.
Result<ModelTurn> waitForTurn(const HttpLoop &loop, const std::string &modelName,
                              const std::function<void(ModelAdapter::TurnDone)> &start);

// The error for a request that ended with no answer to read and nothing to retry: cancelled (the
// broker is stopping), a response over the size limit, a request that cannot be sent (fix: base_url
// in `section`). nullopt for an HTTP answer or a connection error.
std::optional<Error> unansweredError(const HttpResult &result, const std::string &url, std::string_view section);

} // namespace paddock::llm
