#include "broker/otlp/otlp_http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <mutex>

namespace paddock::otlp {

namespace {

constexpr size_t kMaxBodyBytes = 64 * 1024;
constexpr int64_t kMaxRetryAfterMs = 10 * 60 * 1000;

size_t collectBody(char *data, size_t size, size_t count, void *user)
{
    auto *body = static_cast<std::string *>(user);
    const size_t bytes = size * count;
    if (body->size() < kMaxBodyBytes)
        body->append(data, std::min(bytes, kMaxBodyBytes - body->size()));
    return bytes;
}

size_t collectHeader(char *data, size_t size, size_t count, void *user)
{
    const size_t bytes = size * count;
    std::string_view line(data, bytes);
    constexpr std::string_view name = "retry-after:";
    if (line.size() > name.size()) {
        bool match = true;
        for (size_t i = 0; i < name.size() && match; ++i)
            match = std::tolower(static_cast<unsigned char>(line[i])) == name[i];
        if (match) {
            std::string value(line.substr(name.size()));
            const auto first = value.find_first_not_of(" \t");
            const auto last = value.find_last_not_of(" \t\r\n");
            *static_cast<std::string *>(user) = first == std::string::npos ? std::string() : value.substr(first, last - first + 1);
        }
    }
    return bytes;
}

int abortOnStop(void *user, curl_off_t, curl_off_t, curl_off_t, curl_off_t)
{
    return static_cast<const std::atomic<bool> *>(user)->load() ? 1 : 0;
}

} // namespace

Verdict verdictOf(const PostResult &result)
{
    if (!result.answered)
        return Verdict::Retry;
    if (result.status >= 200 && result.status < 300)
        return Verdict::Delivered;
    if (result.status == 413)
        return Verdict::Split;
    if (result.status == 400)
        return Verdict::Drop;
    // 408, 429 and 5xx are the specification's retryable answers. Others (401, 403, 404, 405...)
    // say the endpoint or its credentials are wrong: an operator fixes that, and until then the
    // spans wait in the store rather than being thrown away.
    return Verdict::Retry;
}

std::optional<int64_t> retryAfterMs(std::string_view value, int64_t nowUnixMs)
{
    if (value.empty())
        return std::nullopt;
    if (std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); })) {
        int64_t seconds = 0;
        const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
        if (error != std::errc() || end != value.data() + value.size())
            return kMaxRetryAfterMs;   // more digits than an int64: as long as we ever wait
        return std::min(seconds, kMaxRetryAfterMs / 1000) * 1000;
    }
    const std::string date(value);
    const time_t when = curl_getdate(date.c_str(), nullptr);
    if (when < 0)
        return std::nullopt;
    return std::clamp<int64_t>(static_cast<int64_t>(when) * 1000 - nowUnixMs, 0, kMaxRetryAfterMs);
}

std::string describeFailure(const PostResult &result)
{
    if (!result.answered)
        return result.transportError;
    std::string body = result.body.substr(0, 200);
    for (char &c : body) {
        if (static_cast<unsigned char>(c) < 0x20)
            c = ' ';
    }
    std::string out = "HTTP " + std::to_string(result.status);
    if (!body.empty())
        out += ": " + body;
    return out;
}

OtlpHttp::OtlpHttp(std::vector<std::pair<std::string, std::string>> headers, int64_t timeoutMs)
    : m_timeoutMs(timeoutMs)
{
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    m_handle = curl_easy_init();
    m_headerLines.push_back("Content-Type: application/json");
    m_headerLines.push_back("Expect:");   // no 100-continue round trip before each body
    for (const auto &[name, value] : headers)
        m_headerLines.push_back(name + ": " + value);
}

OtlpHttp::~OtlpHttp()
{
    if (m_handle)
        curl_easy_cleanup(static_cast<CURL *>(m_handle));
}

PostResult OtlpHttp::post(const std::string &url, const std::string &json, const std::atomic<bool> &stop)
{
    PostResult result;
    CURL *curl = static_cast<CURL *>(m_handle);
    if (!curl) {
        result.transportError = "libcurl could not make a handle (out of memory?)";
        return result;
    }
    curl_slist *headers = nullptr;
    for (const auto &line : m_headerLines)
        headers = curl_slist_append(headers, line.c_str());
    char error[CURL_ERROR_SIZE] = {};
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, json.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(json.size()));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(m_timeoutMs));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::min<int64_t>(m_timeoutMs, 10000)));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collectBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &result.body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, collectHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &result.retryAfter);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, abortOnStop);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &stop);
    // Only http and https, and no redirects: a receiver that moved is a configuration to fix.
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");

    const CURLcode code = curl_easy_perform(curl);
    curl_slist_free_all(headers);
    if (code == CURLE_OK) {
        result.answered = true;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
    } else if (code == CURLE_ABORTED_BY_CALLBACK) {
        result.transportError = "the broker is stopping";
    } else {
        result.transportError = error[0] ? std::string(error) : std::string(curl_easy_strerror(code));
    }
    return result;
}

} // namespace paddock::otlp
