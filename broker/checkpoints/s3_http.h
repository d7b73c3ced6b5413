#pragma once
// One HTTP exchange over libcurl's easy interface, for S3BlobStore: no retries, no S3 knowledge.
//
// Handles are pooled per client, not made per call nor kept per thread: a handle keeps its open
// connections (and TLS sessions) between calls, so a run of small puts to one endpoint costs one
// handshake, not one each; a pool owned by the client dies with it, where thread_local handles would
// outlive the store and leak its resolve overrides into other stores on the same thread. Concurrent
// calls each take their own handle; at most kMaxIdleHandles wait for reuse.
//
// Threads: perform() may be called from any thread concurrently.

#include <curl/curl.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::checkpoints::s3 {

struct HttpRequest {
    std::string method;                 // "GET", "PUT", "HEAD", "DELETE"
    std::string url;
    std::vector<std::string> headers;   // "Name: value"
    std::string_view body;              // sent with PUT
    int64_t timeoutMs = 30000;          // for the whole exchange, connecting included
};

enum class Transport {
    Ok,           // an HTTP answer came back (any status)
    Refused,      // nothing listens there
    Unresolved,   // the host name did not resolve
    TimedOut,
    Broken,       // the connection failed midway: reset, closed, no answer
    Tls,          // the TLS handshake or the certificate check failed
    Other,
};

struct HttpResponse {
    Transport transport = Transport::Other;
    std::string transportDetail;   // curl's words for a failure
    long status = 0;
    std::string body;
    std::string retryAfter;        // the Retry-After header, "" when absent
};

class HttpClient {
public:
    // resolve: CURLOPT_RESOLVE entries, "HOST:PORT:ADDRESS".
    explicit HttpClient(const std::vector<std::string> &resolve);
    ~HttpClient();
    HttpClient(const HttpClient &) = delete;
    HttpClient &operator=(const HttpClient &) = delete;

    HttpResponse perform(const HttpRequest &request);

private:
    static constexpr size_t kMaxIdleHandles = 16;

    CURL *take();
    void give(CURL *handle);

    curl_slist *m_resolve = nullptr;
    std::mutex m_mutex;
    std::vector<CURL *> m_idle;   // guarded by m_mutex
};

} // namespace paddock::checkpoints::s3
