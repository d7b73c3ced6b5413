#include "broker/checkpoints/s3_http.h"

#include <algorithm>
#include <mutex>

namespace paddock::checkpoints::s3 {

namespace {

// curl_global_init is not safe to race with other threads' curl calls in every libcurl build: do it
// once, before this process's first handle.
void initCurlOnce()
{
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t appendBody(char *data, size_t size, size_t count, void *target)
{
    static_cast<std::string *>(target)->append(data, size * count);
    return size * count;
}

size_t readHeader(char *data, size_t size, size_t count, void *target)
{
    const std::string_view line(data, size * count);
    constexpr std::string_view kRetryAfter = "retry-after:";
    if (line.size() > kRetryAfter.size()) {
        std::string name(line.substr(0, kRetryAfter.size()));
        for (char &c : name)
            if (c >= 'A' && c <= 'Z')
                c = static_cast<char>(c - 'A' + 'a');
        if (name == kRetryAfter) {
            std::string_view value = line.substr(kRetryAfter.size());
            const auto first = value.find_first_not_of(" \t");
            const auto last = value.find_last_not_of(" \t\r\n");
            auto *response = static_cast<HttpResponse *>(target);
            response->retryAfter =
                first == std::string_view::npos ? "" : std::string(value.substr(first, last - first + 1));
        }
    }
    return size * count;
}

Transport transportOf(CURLcode code)
{
    switch (code) {
    case CURLE_OK:
        return Transport::Ok;
    case CURLE_COULDNT_CONNECT:
        return Transport::Refused;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return Transport::Unresolved;
    case CURLE_OPERATION_TIMEDOUT:
        return Transport::TimedOut;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return Transport::Broken;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
        return Transport::Tls;
    default:
        return Transport::Other;
    }
}

void setMethod(CURL *curl, const HttpRequest &request)
{
    if (request.method == "HEAD") {
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (request.method == "PUT") {
        // POSTFIELDS sends the bytes from memory and resends them itself on a retried connection; a
        // null pointer would make curl read the body from stdin instead, hence "" for an empty body.
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.empty() ? "" : request.body.data());
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
    } else if (request.method == "GET") {
        curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
}

} // namespace

HttpClient::HttpClient(const std::vector<std::string> &resolve)
{
    initCurlOnce();
    for (const std::string &entry : resolve)
        m_resolve = curl_slist_append(m_resolve, entry.c_str());
}

HttpClient::~HttpClient()
{
    for (CURL *handle : m_idle)
        curl_easy_cleanup(handle);
    curl_slist_free_all(m_resolve);
}

CURL *HttpClient::take()
{
    {
        std::lock_guard lock(m_mutex);
        if (!m_idle.empty()) {
            CURL *handle = m_idle.back();
            m_idle.pop_back();
            return handle;
        }
    }
    return curl_easy_init();
}

void HttpClient::give(CURL *handle)
{
    // reset keeps the handle's open connections and DNS cache, and drops every option.
    curl_easy_reset(handle);
    {
        std::lock_guard lock(m_mutex);
        if (m_idle.size() < kMaxIdleHandles) {
            m_idle.push_back(handle);
            return;
        }
    }
    curl_easy_cleanup(handle);
}

HttpResponse HttpClient::perform(const HttpRequest &request)
{
    HttpResponse response;
    CURL *curl = take();
    if (!curl) {
        response.transportDetail = "libcurl could not make a handle (out of memory?)";
        return response;
    }
    curl_slist *headers = nullptr;
    for (const std::string &header : request.headers)
        headers = curl_slist_append(headers, header.c_str());
    // No "Expect: 100-continue" round trip before large puts: S3 answers errors to the whole request.
    headers = curl_slist_append(headers, "Expect:");

    char error[CURL_ERROR_SIZE] = {};
    const long timeoutMs = static_cast<long>(std::max<int64_t>(request.timeoutMs, 1));
    curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);   // threads: no SIGALRM for resolver timeouts
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeoutMs);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeoutMs);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, appendBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, readHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response);
    if (m_resolve)
        curl_easy_setopt(curl, CURLOPT_RESOLVE, m_resolve);
    setMethod(curl, request);

    const CURLcode code = curl_easy_perform(curl);
    response.transport = transportOf(code);
    if (code == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
    else
        response.transportDetail = error[0] != '\0' ? error : curl_easy_strerror(code);
    give(curl);   // its reset also forgets the error buffer on this stack
    curl_slist_free_all(headers);
    return response;
}

} // namespace paddock::checkpoints::s3
