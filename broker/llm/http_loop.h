#pragma once
// HttpLoop: HTTP POSTs that hold no thread while they wait. One thread runs libcurl's multi interface
// (curl_multi_poll) for every request of the loop; a request is submitted from any thread and ends
// in a callback. Retries (connection errors, HTTP 408, 429 and 5xx) wait on timers of the same
// thread, with exponential backoff and jitter, or as long as the server's Retry-After says.
//
// Threads: submit() and cancelAll() may be called from any thread, a completion callback included.
// The thread starts with the first submit(). Completion callbacks run on the loop thread, one at a
// time: they must not block (least of all wait for another request of the same loop, which would
// wait forever); they hand the result on and return. The destructor ends what is still open with
// Cancelled (each callback runs, on the loop thread) and joins the thread: it must not run on the
// loop thread itself.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace paddock::llm {

// A response read as it arrives (server-sent events): a 2xx answer whose Content-Type is
// text/event-stream goes to it, attempt by attempt, instead of into HttpResult::body. Any other
// answer (an error status, a server that ignored the request to stream) is read whole as usual.
// Runs on the loop thread; must not block.
class HttpStream {
public:
    virtual ~HttpStream() = default;
    // An attempt's streamed answer begins (attempt counts from 1): what an earlier one sent is void.
    virtual void begin(int attempt) = 0;
    // The next bytes. A non-empty answer says what is wrong with the stream: the attempt ends as
    // a broken stream (retried like a connection error).
    virtual std::string data(std::string_view bytes) = 0;
    // The answer ended with the connection in order: "" when the stream is complete, else why not
    // (cut before its last event; retried).
    virtual std::string end() = 0;
};

struct HttpRequest {
    std::string url;
    std::vector<std::string> headers;           // "Name: value" lines
    std::string body;                           // sent as a POST
    int64_t timeoutMs = 120000;                 // per attempt, connecting included
    int64_t connectTimeoutMs = 10000;
    size_t maxResponseBytes = 16 * 1024 * 1024;
    int maxRetries = 0;                         // retries after the first attempt
    int64_t initialBackoffMs = 500;             // doubles per retry, with jitter in [half, full]
    int64_t maxBackoffMs = 30000;               // caps backoff and Retry-After alike
    std::shared_ptr<HttpStream> stream;         // null: the answer is read whole
};

// How a request ended: the outcome of its last attempt.
struct HttpResult {
    enum class End {
        Answered,           // an HTTP response of any status: status and body
        ConnectionError,    // no response (refused, reset, timed out): error says what curl saw
        CannotSend,         // the request cannot be made (malformed URL, unsupported protocol): error
        TooLarge,           // the response passed maxResponseBytes
        BrokenStream,       // a streamed answer was cut or malformed (HttpStream): error says how
        Cancelled,          // cancelAll() or the loop's destructor
    };
    End end = End::Cancelled;
    long status = 0;
    std::string body;
    std::string error;
    int attempts = 0;       // requests made, the last one included
    bool gaveUp = false;    // the last attempt was worth a retry, but maxRetries were spent
    bool streamed = false;  // Answered: the body went to HttpRequest::stream (body is empty)
};

class HttpLoop {
public:
    using Done = std::function<void(HttpResult)>;
    // Chooses the wait before a retry, given the one the policy chose (backoff or Retry-After).
    // Tests substitute one that records it and returns zero. Runs on the loop thread.
    using BackoffHook = std::function<std::chrono::milliseconds(std::chrono::milliseconds)>;

    explicit HttpLoop(BackoffHook backoff = {});
    ~HttpLoop();
    HttpLoop(const HttpLoop &) = delete;
    HttpLoop &operator=(const HttpLoop &) = delete;

    // Starts the request; done runs exactly once, on the loop thread, when it ends.
    void submit(HttpRequest request, Done done);

    // Ends every request submitted before this call, in flight or waiting to retry, with Cancelled.
    // Returns at once; the callbacks follow on the loop thread (so a caller may hold a lock that they
    // take).
    void cancelAll();

    bool onLoopThread() const { return std::this_thread::get_id() == m_threadId.load(); }

private:
    struct Transfer;
    class Runner;   // the loop thread's own state: the multi handle, the transfers and their timers

    void run();

    const BackoffHook m_backoff;
    void *m_multi = nullptr;                    // CURLM *: the loop thread's, but curl_multi_wakeup may be called from any thread
    std::mutex m_mutex;
    std::vector<std::unique_ptr<Transfer>> m_submitted;   // guarded by m_mutex; the loop takes them
    uint64_t m_cancelsAsked = 0;                // guarded by m_mutex
    bool m_stopping = false;                    // guarded by m_mutex
    std::thread m_thread;                       // started by the first submit(), under m_mutex
    std::atomic<std::thread::id> m_threadId;
};

} // namespace paddock::llm
