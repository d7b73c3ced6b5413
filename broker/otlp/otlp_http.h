#pragma once
// One OTLP/HTTP POST over libcurl's easy interface, and how its answer is to be taken (the OTLP
// specification's retry rules, plus Paddock's choice to wait out an endpoint that refuses us rather
// than drop spans): success, retry (after Retry-After when the receiver gives one), split (too
// large), or drop (the receiver will never take this payload).
//
// Threads: an OtlpHttp belongs to one thread (the exporter's): its handle keeps the connection to
// the receiver between posts. A post returns early, as a transport failure, once `stop` is set.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace paddock::otlp {

struct PostResult {
    bool answered = false;          // an HTTP answer came back (any status)
    long status = 0;
    std::string body;               // at most 64 KiB of it
    std::string retryAfter;         // the Retry-After header, "" when absent
    std::string transportError;     // curl's words when nothing came back
};

enum class Verdict {
    Delivered,   // 2xx: the receiver has the payload
    Retry,       // nothing came back, 408, 429, 5xx, or the receiver refuses us (401, 403, 404...):
                 // keep the cursor, wait, try again
    Split,       // 413: send it in smaller parts
    Drop,        // 400: the receiver will never take this payload; retrying cannot help
};

Verdict verdictOf(const PostResult &result);

// The wait a Retry-After value asks for, in ms: delay-seconds ("120") or an HTTP date (relative to
// nowUnixMs). nullopt when it is absent or neither.
std::optional<int64_t> retryAfterMs(std::string_view value, int64_t nowUnixMs);

// One line on what a failed post saw, for logs: "HTTP 503: <start of the body>" or curl's words.
std::string describeFailure(const PostResult &result);

class OtlpHttp {
public:
    OtlpHttp(std::vector<std::pair<std::string, std::string>> headers, int64_t timeoutMs);
    ~OtlpHttp();
    OtlpHttp(const OtlpHttp &) = delete;
    OtlpHttp &operator=(const OtlpHttp &) = delete;

    PostResult post(const std::string &url, const std::string &json, const std::atomic<bool> &stop);

private:
    void *m_handle = nullptr;   // CURL *
    std::vector<std::string> m_headerLines;
    int64_t m_timeoutMs;
};

} // namespace paddock::otlp
