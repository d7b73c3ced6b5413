// Known limits: requests are POSTs; a Retry-After given as an HTTP date is ignored in favour of the
// computed backoff; an exception thrown by a completion callback is logged and dropped so that the
// loop serves the other requests.

#include "broker/llm/http_loop.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <map>
#include <optional>
#include <random>
#include <string_view>
#include <unordered_map>

namespace paddock::llm {

namespace {

using Clock = std::chrono::steady_clock;

// The longest poll with nothing to wait for; curl_multi_wakeup ends a poll early.
constexpr int64_t kIdlePollMs = 60000;

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

int64_t backoffMs(const HttpRequest &request, int retry)
{
    // Exponential with "equal jitter": requests that hit a rate limit together spread out again.
    const double full = std::min<double>(static_cast<double>(request.maxBackoffMs),
                                         static_cast<double>(request.initialBackoffMs) * std::pow(2.0, retry - 1));
    const auto fullMs = static_cast<int64_t>(full);
    if (fullMs <= 1)
        return std::max<int64_t>(fullMs, 0);
    thread_local std::mt19937_64 random{std::random_device{}()};
    std::uniform_int_distribution<int64_t> jitter(0, fullMs / 2);
    return fullMs - fullMs / 2 + jitter(random);
}

} // namespace

// One request, from submit() to its callback, across its attempts.
struct HttpLoop::Transfer {
    HttpRequest request;
    Done done;
    CURL *easy = nullptr;
    curl_slist *headers = nullptr;
    int attempts = 0;
    bool attached = false;   // added to the multi handle; otherwise waiting for a retry

    // The attempt in progress.
    std::string body;
    std::optional<int64_t> retryAfterMs;
    bool tooLarge = false;
    bool streaming = false;        // the answer goes to request.stream
    std::string streamError;       // what request.stream found wrong
    char errorBuffer[CURL_ERROR_SIZE] = {};

    Transfer() = default;
    Transfer(const Transfer &) = delete;
    Transfer &operator=(const Transfer &) = delete;
    ~Transfer()
    {
        if (easy != nullptr)
            curl_easy_cleanup(easy);
        curl_slist_free_all(headers);
    }

    static size_t writeBody(char *data, size_t size, size_t count, void *user)
    {
        auto *transfer = static_cast<Transfer *>(user);
        const size_t bytes = size * count;
        if (transfer->request.stream && transfer->body.empty() && !transfer->streaming)
            transfer->streaming = streamsAnswer(*transfer);
        if (transfer->streaming) {
            transfer->streamError = transfer->request.stream->data(std::string_view(data, bytes));
            return transfer->streamError.empty() ? bytes : 0;   // 0 makes curl end the attempt
        }
        if (transfer->body.size() + bytes > transfer->request.maxResponseBytes) {
            transfer->tooLarge = true;
            return 0;   // makes curl fail with CURLE_WRITE_ERROR
        }
        transfer->body.append(data, bytes);
        return bytes;
    }

    // Whether the answer now arriving is a stream to hand over (a 2xx of text/event-stream); says
    // so to the stream.
    static bool streamsAnswer(Transfer &transfer)
    {
        long status = 0;
        curl_easy_getinfo(transfer.easy, CURLINFO_RESPONSE_CODE, &status);
        const char *type = nullptr;
        curl_easy_getinfo(transfer.easy, CURLINFO_CONTENT_TYPE, &type);
        if (status < 200 || status >= 300 || type == nullptr || std::string_view(type).find("text/event-stream") != 0)
            return false;
        transfer.request.stream->begin(transfer.attempts);
        return true;
    }

    static size_t readHeader(char *data, size_t size, size_t count, void *user)
    {
        auto *transfer = static_cast<Transfer *>(user);
        const size_t bytes = size * count;
        const std::string_view line(data, bytes);
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos) {
            if (line.starts_with("HTTP/"))
                transfer->retryAfterMs.reset();   // a new response (after a redirect or 100-continue)
            return bytes;
        }
        std::string key(line.substr(0, colon));
        std::ranges::transform(key, key.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        // retry-after-ms is OpenAI's finer-grained variant; it wins over retry-after when both are sent.
        if (key == "retry-after-ms") {
            if (auto ms = parseDelay(line.substr(colon + 1), 1.0))
                transfer->retryAfterMs = ms;
        } else if (key == "retry-after" && !transfer->retryAfterMs) {
            transfer->retryAfterMs = parseDelay(line.substr(colon + 1), 1000.0);
        }
        return bytes;
    }
};

class HttpLoop::Runner {
public:
    explicit Runner(HttpLoop &loop)
        : m_loop(loop)
        , m_multi(static_cast<CURLM *>(loop.m_multi))
    {
    }

    bool empty() const { return m_transfers.empty(); }

    void adopt(std::unique_ptr<Transfer> owned)
    {
        Transfer &transfer = *owned;
        m_transfers.emplace(&transfer, std::move(owned));
        for (const std::string &line : transfer.request.headers)
            transfer.headers = curl_slist_append(transfer.headers, line.c_str());
        transfer.easy = curl_easy_init();
        if (transfer.easy == nullptr) {
            end(transfer, cannotSend(transfer, "curl_easy_init failed; the process is probably out of memory"));
            return;
        }
        startAttempt(transfer);
    }

    void cancelEverything()
    {
        m_retries.clear();
        while (!m_transfers.empty()) {
            Transfer &transfer = *m_transfers.begin()->first;
            detach(transfer);
            HttpResult result;
            result.end = HttpResult::End::Cancelled;
            result.attempts = transfer.attempts;
            end(transfer, std::move(result));
        }
    }

    void startDueRetries()
    {
        const Clock::time_point now = Clock::now();
        while (!m_retries.empty() && m_retries.begin()->first <= now) {
            Transfer *transfer = m_retries.begin()->second;
            m_retries.erase(m_retries.begin());
            startAttempt(*transfer);
        }
    }

    // Moves every transfer along and ends the attempts that finished.
    void perform()
    {
        int running = 0;
        curl_multi_perform(m_multi, &running);
        int queued = 0;
        while (CURLMsg *message = curl_multi_info_read(m_multi, &queued)) {
            if (message->msg != CURLMSG_DONE)
                continue;
            const CURLcode code = message->data.result;
            char *owner = nullptr;
            curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &owner);
            finishAttempt(*reinterpret_cast<Transfer *>(owner), code);
        }
    }

    // How long the next poll may sleep: until curl's next timeout or the next retry.
    int pollTimeoutMs() const
    {
        long curlMs = -1;
        curl_multi_timeout(m_multi, &curlMs);
        int64_t ms = curlMs < 0 ? kIdlePollMs : std::min<int64_t>(curlMs, kIdlePollMs);
        if (!m_retries.empty()) {
            const auto untilRetry = std::chrono::ceil<std::chrono::milliseconds>(m_retries.begin()->first - Clock::now());
            ms = std::clamp<int64_t>(untilRetry.count(), 0, ms);
        }
        return static_cast<int>(ms);
    }

private:
    static HttpResult cannotSend(const Transfer &transfer, std::string error)
    {
        HttpResult result;
        result.end = HttpResult::End::CannotSend;
        result.error = std::move(error);
        result.attempts = transfer.attempts;
        return result;
    }

    void startAttempt(Transfer &transfer)
    {
        ++transfer.attempts;
        transfer.body.clear();
        transfer.retryAfterMs.reset();
        transfer.tooLarge = false;
        transfer.streaming = false;
        transfer.streamError.clear();
        transfer.errorBuffer[0] = '\0';

        const HttpRequest &request = transfer.request;
        CURL *curl = transfer.easy;
        curl_easy_reset(curl);
        curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, transfer.headers);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Transfer::writeBody);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, Transfer::readHeader);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
        curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, transfer.errorBuffer);
        curl_easy_setopt(curl, CURLOPT_PRIVATE, &transfer);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);   // signals and threads do not mix
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeoutMs));
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connectTimeoutMs));
        curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
        curl_easy_setopt(curl, CURLOPT_USERAGENT, "paddockd");

        const CURLMcode code = curl_multi_add_handle(m_multi, curl);
        if (code != CURLM_OK) {
            end(transfer, cannotSend(transfer, curl_multi_strerror(code)));
            return;
        }
        transfer.attached = true;
    }

    void detach(Transfer &transfer)
    {
        if (transfer.attached)
            curl_multi_remove_handle(m_multi, transfer.easy);
        transfer.attached = false;
    }

    void finishAttempt(Transfer &transfer, CURLcode code)
    {
        detach(transfer);
        HttpResult result;
        result.attempts = transfer.attempts;
        if (!transfer.streamError.empty()) {
            result.end = HttpResult::End::BrokenStream;
            result.error = transfer.streamError;
        } else if (transfer.tooLarge) {
            result.end = HttpResult::End::TooLarge;
        } else if (code != CURLE_OK && transfer.streaming) {
            result.end = HttpResult::End::BrokenStream;
            result.error = fmt::format("the connection ended before the stream did ({})",
                                       transfer.errorBuffer[0] != '\0' ? std::string(transfer.errorBuffer)
                                                                       : curl_easy_strerror(code));
        } else if (code != CURLE_OK) {
            result.end = retryableCurlError(code) ? HttpResult::End::ConnectionError : HttpResult::End::CannotSend;
            result.error = transfer.errorBuffer[0] != '\0' ? std::string(transfer.errorBuffer) : curl_easy_strerror(code);
        } else {
            result.end = HttpResult::End::Answered;
            curl_easy_getinfo(transfer.easy, CURLINFO_RESPONSE_CODE, &result.status);
            result.body = std::move(transfer.body);
            // An empty streamed answer wrote nothing: whether it was a stream is asked now.
            if (transfer.request.stream && !transfer.streaming && result.body.empty())
                transfer.streaming = Transfer::streamsAnswer(transfer);
            result.streamed = transfer.streaming;
            if (transfer.streaming) {
                if (std::string incomplete = transfer.request.stream->end(); !incomplete.empty()) {
                    result.end = HttpResult::End::BrokenStream;
                    result.error = std::move(incomplete);
                }
            }
        }

        const bool retryable = result.end == HttpResult::End::ConnectionError || result.end == HttpResult::End::BrokenStream
            || (result.end == HttpResult::End::Answered && retryableStatus(result.status));
        if (retryable && transfer.attempts <= transfer.request.maxRetries) {
            const HttpRequest &request = transfer.request;
            std::chrono::milliseconds wait(transfer.retryAfterMs ? std::min(*transfer.retryAfterMs, request.maxBackoffMs)
                                                                 : backoffMs(request, transfer.attempts));
            if (m_loop.m_backoff)
                wait = m_loop.m_backoff(wait);
            m_retries.emplace(Clock::now() + wait, &transfer);
            return;
        }
        result.gaveUp = retryable;
        end(transfer, std::move(result));
    }

    // Forgets the transfer, then runs its callback (which may submit the next request at once).
    void end(Transfer &transfer, HttpResult result)
    {
        Done done = std::move(transfer.done);
        m_transfers.erase(&transfer);
        try {
            done(std::move(result));
        } catch (const std::exception &e) {
            spdlog::error("an HTTP request's completion callback threw ({}); the request loop goes on", e.what());
        }
    }

    HttpLoop &m_loop;
    CURLM *const m_multi;
    std::unordered_map<Transfer *, std::unique_ptr<Transfer>> m_transfers;   // in flight or waiting to retry
    std::multimap<Clock::time_point, Transfer *> m_retries;                  // when each waiting one goes again
};

HttpLoop::HttpLoop(BackoffHook backoff)
    : m_backoff(std::move(backoff))
{
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    m_multi = curl_multi_init();
}

HttpLoop::~HttpLoop()
{
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    curl_multi_wakeup(static_cast<CURLM *>(m_multi));
    if (m_thread.joinable())
        m_thread.join();
    curl_multi_cleanup(static_cast<CURLM *>(m_multi));
}

void HttpLoop::submit(HttpRequest request, Done done)
{
    auto transfer = std::make_unique<Transfer>();
    transfer->request = std::move(request);
    transfer->done = std::move(done);
    {
        std::lock_guard lock(m_mutex);
        m_submitted.push_back(std::move(transfer));
        if (!m_thread.joinable())
            m_thread = std::thread([this] { run(); });
    }
    curl_multi_wakeup(static_cast<CURLM *>(m_multi));
}

void HttpLoop::cancelAll()
{
    {
        std::lock_guard lock(m_mutex);
        ++m_cancelsAsked;
    }
    curl_multi_wakeup(static_cast<CURLM *>(m_multi));
}

void HttpLoop::run()
{
    m_threadId = std::this_thread::get_id();
    Runner runner(*this);
    uint64_t cancelsDone = 0;
    for (;;) {
        std::vector<std::unique_ptr<Transfer>> submitted;
        uint64_t cancelsAsked = 0;
        bool stopping = false;
        {
            std::lock_guard lock(m_mutex);
            submitted.swap(m_submitted);
            cancelsAsked = m_cancelsAsked;
            stopping = m_stopping;
        }
        const bool tookNone = submitted.empty();
        for (std::unique_ptr<Transfer> &transfer : submitted)
            runner.adopt(std::move(transfer));
        if (stopping || cancelsAsked != cancelsDone) {
            cancelsDone = cancelsAsked;
            runner.cancelEverything();
            // Stop once a round took nothing new: the callbacks just run may have submitted more.
            if (stopping && tookNone)
                break;
            continue;
        }
        runner.startDueRetries();
        runner.perform();
        curl_multi_poll(static_cast<CURLM *>(m_multi), nullptr, 0, runner.pollTimeoutMs(), nullptr);
    }
}

} // namespace paddock::llm
