#include "broker/checkpoints/s3_blob_store.h"

#include "broker/checkpoints/s3_credentials.h"
#include "broker/checkpoints/s3_errors.h"
#include "broker/checkpoints/s3_http.h"
#include "broker/checkpoints/s3_xml.h"
#include "checkpoint/sha256.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace paddock::checkpoints {

namespace {

using Clock = std::chrono::steady_clock;

// SHA-256 of no bytes: the payload hash of every request but a put.
const std::string kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

int64_t nowMs()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

bool isDigits(std::string_view text)
{
    return !text.empty() && std::ranges::all_of(text, [](char c) { return c >= '0' && c <= '9'; });
}

bool isBucketName(std::string_view name)
{
    return !name.empty() && std::ranges::all_of(name, [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-'
            || c == '_';
    });
}

bool isIpLiteral(std::string_view host)
{
    auto ipv4Character = [](char c) { return (c >= '0' && c <= '9') || c == '.'; };
    return host.starts_with('[') || std::ranges::all_of(host, ipv4Character);
}

std::unexpected<Error> badOption(const std::string &message)
{
    return fail(ErrorCode::InvalidArgument, "S3 checkpoint store: " + message);
}

} // namespace

S3BlobStore::S3BlobStore(S3Options options, Endpoint endpoint, s3::Credentials credentials)
    : m_options(std::move(options)),
      m_endpoint(std::move(endpoint)),
      m_credentials(std::move(credentials)),
      m_http(std::make_unique<s3::HttpClient>(m_options.curlResolve))
{
}

S3BlobStore::~S3BlobStore() = default;

Result<S3BlobStore::Endpoint> S3BlobStore::parseEndpoint(const S3Options &options)
{
    std::string_view rest = options.endpoint;
    Endpoint endpoint;
    for (const char *scheme : {"http", "https"}) {
        if (rest.starts_with(std::string(scheme) + "://")) {
            endpoint.scheme = scheme;
            rest.remove_prefix(endpoint.scheme.size() + 3);
        }
    }
    if (rest.ends_with('/'))
        rest.remove_suffix(1);
    // After a bracketed IPv6 address, or anywhere in a name, ':' starts the port.
    const size_t hostEnd = rest.starts_with('[') ? rest.find(']') + 1 : rest.find(':');
    endpoint.host = std::string(rest.substr(0, hostEnd));
    if (hostEnd != std::string_view::npos && hostEnd < rest.size()) {
        if (rest[hostEnd] != ':' || !isDigits(rest.substr(hostEnd + 1)))
            endpoint.host.clear();
        endpoint.port = std::string(rest.substr(hostEnd + 1));
    }
    if (endpoint.scheme.empty() || endpoint.host.empty() || endpoint.host == "[]"
        || endpoint.host.find_first_of("/?#@ ") != std::string::npos)
        return badOption("endpoint '" + options.endpoint
                         + "' is not http[s]://HOST[:PORT], e.g. http://127.0.0.1:9000 or "
                           "https://s3.eu-west-1.amazonaws.com");
    if (!options.pathStyle && isIpLiteral(endpoint.host))
        return badOption("virtual-host style needs a host name in the endpoint, not the address "
                         + endpoint.host + "; use path style or name the host");
    return endpoint;
}

Result<std::unique_ptr<S3BlobStore>> S3BlobStore::open(S3Options options)
{
    auto endpoint = parseEndpoint(options);
    if (!endpoint)
        return std::unexpected(endpoint.error());
    if (!isBucketName(options.bucket))
        return badOption("bucket name '" + options.bucket + "' is empty or holds characters outside [a-zA-Z0-9._-]");
    if (options.region.empty())
        return badOption("no region for bucket '" + options.bucket + "'; set it (us-east-1 for MinIO and most others)");
    if (options.prefix.starts_with('/'))
        return badOption("prefix '" + options.prefix + "' starts with '/'; drop it (\"paddock/\", not \"/paddock/\")");
    if (options.timeoutMs <= 0)
        return badOption("timeout " + std::to_string(options.timeoutMs) + " ms is not positive");
    if (options.listPageSize < 1 || options.listPageSize > 1000)
        return badOption("list page size " + std::to_string(options.listPageSize) + " is outside 1..1000");
    auto credentials = s3::readCredentialsFile(options.credentialsFile);
    if (!credentials)
        return std::unexpected(credentials.error());
    return std::unique_ptr<S3BlobStore>(
        new S3BlobStore(std::move(options), std::move(*endpoint), std::move(*credentials)));
}

std::string S3BlobStore::describe() const
{
    std::string text = "s3 bucket " + m_options.bucket + " at " + m_options.endpoint;
    if (!m_options.prefix.empty())
        text += " under '" + m_options.prefix + "'";
    return text;
}

Status S3BlobStore::checkKey(const std::string &key) const
{
    if (std::string problem = blobKeyProblem(key); !problem.empty())
        return fail(ErrorCode::InvalidArgument, describe() + ": checkpoint key '" + key + "' " + problem);
    return {};
}

std::string S3BlobStore::hostHeader() const
{
    std::string host = m_options.pathStyle ? m_endpoint.host : m_options.bucket + "." + m_endpoint.host;
    return m_endpoint.port.empty() ? host : host + ":" + m_endpoint.port;
}

std::string S3BlobStore::pathOf(const std::string &key) const
{
    const std::string object = key.empty() ? "" : m_options.prefix + key;
    if (!m_options.pathStyle)
        return "/" + object;
    return object.empty() ? "/" + m_options.bucket : "/" + m_options.bucket + "/" + object;
}

std::unexpected<Error> S3BlobStore::failure(const Request &request, ErrorCode code, const std::string &why) const
{
    return fail(code, describe() + ": " + request.what + ": " + why);
}

s3::HttpResponse S3BlobStore::sendOnce(const Request &request, int64_t timeoutMs) const
{
    const std::string amzDate = s3::amzDateOf(std::chrono::system_clock::now());
    s3::SigningInput signing;
    signing.method = request.method;
    signing.path = pathOf(request.key);
    signing.query = request.query;
    signing.payloadHash = request.payloadHash;
    signing.headers = {{"host", hostHeader()}, {"x-amz-content-sha256", signing.payloadHash}, {"x-amz-date", amzDate}};
    if (!m_credentials.sessionToken.empty())
        signing.headers.emplace_back("x-amz-security-token", m_credentials.sessionToken);
    const s3::Signature signature =
        s3::signRequest(signing, m_credentials, m_options.region, "s3", amzDate);

    s3::HttpRequest http;
    http.method = request.method;
    http.url = m_endpoint.scheme + "://" + hostHeader() + s3::uriEncode(signing.path, true);
    if (!request.query.empty())
        http.url += "?" + s3::canonicalQuery(request.query);
    for (const auto &[name, value] : signing.headers)
        http.headers.push_back(name + ": " + value);
    http.headers.push_back("Authorization: " + signature.authorization);
    if (request.method == "PUT")
        http.headers.push_back("Content-Type: application/octet-stream");
    http.body = request.body;
    http.timeoutMs = timeoutMs;
    return m_http->perform(http);
}

Result<s3::HttpResponse> S3BlobStore::exchange(const Request &request) const
{
    const int64_t deadlineMs = nowMs() + m_options.timeoutMs;
    int64_t backoffMs = kFirstRetryWaitMs;
    int attempts = 0;
    s3::HttpResponse response;
    while (true) {
        ++attempts;
        response = sendOnce(request, deadlineMs - nowMs());
        if (!s3::isRetryable(response) || attempts == kMaxAttempts)
            break;
        const int64_t waitMs = std::min(s3::retryAfterMs(response).value_or(backoffMs), kMaxRetryWaitMs);
        if (nowMs() + waitMs >= deadlineMs)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(waitMs));
        backoffMs *= 2;
    }

    const s3::CallContext context{describe(), request.what, m_options.bucket, m_options.endpoint,
                                  m_options.credentialsFile.string(), m_options.timeoutMs, attempts};
    if (response.transport != s3::Transport::Ok)
        return std::unexpected(s3::errorForTransport(context, response));
    if (response.status >= 200 && response.status < 300) {
        m_bucketSeenMs = nowMs();
        return response;
    }
    const s3::ErrorBody body = s3::parseErrorBody(response.body);
    if (body.code == "NoSuchKey")
        m_bucketSeenMs = nowMs();
    return std::unexpected(s3::errorForAnswer(context, response.status, body));
}

Status S3BlobStore::checkBucket(const Request &request) const
{
    const int64_t seenMs = m_bucketSeenMs;
    if (seenMs != 0 && nowMs() - seenMs < kBucketCheckMs)
        return {};
    const Request head{"HEAD", "", {}, {}, kEmptySha256, request.what + ", checking the bucket"};
    const auto answer = exchange(head);
    // Only a definite 404 says the bucket is missing: a key may lack the right to HEAD a bucket
    // (s3:ListBucket) and still read objects, so any other failure leaves the key's 404 standing.
    if (!answer && answer.error().code == ErrorCode::NotFound)
        return failure(request, ErrorCode::FailedPrecondition,
                       "bucket '" + m_options.bucket + "' does not exist at " + m_options.endpoint
                           + "; create it (e.g. `aws s3 mb s3://" + m_options.bucket + " --endpoint-url "
                           + m_options.endpoint + "`) or fix the bucket name in the broker's configuration");
    return {};
}

Status S3BlobStore::put(const std::string &key, std::string_view bytes)
{
    if (auto valid = checkKey(key); !valid)
        return valid;
    // Hashed once, not per attempt: 1 MiB costs a few milliseconds.
    const auto answer = exchange({"PUT", key, {}, bytes, checkpoint::sha256Hex(bytes), "put of '" + key + "'"});
    if (!answer)
        return std::unexpected(answer.error());
    return {};
}

Result<std::string> S3BlobStore::get(const std::string &key)
{
    if (auto valid = checkKey(key); !valid)
        return std::unexpected(valid.error());
    auto answer = exchange({"GET", key, {}, {}, kEmptySha256, "get of '" + key + "'"});
    if (!answer)
        return std::unexpected(answer.error());
    return std::move(answer->body);
}

Result<bool> S3BlobStore::exists(const std::string &key)
{
    if (auto valid = checkKey(key); !valid)
        return std::unexpected(valid.error());
    const Request request{"HEAD", key, {}, {}, kEmptySha256, "exists of '" + key + "'"};
    const auto answer = exchange(request);
    if (answer)
        return true;
    if (answer.error().code != ErrorCode::NotFound)
        return std::unexpected(answer.error());
    if (auto bucket = checkBucket(request); !bucket)
        return std::unexpected(bucket.error());
    return false;
}

Result<std::vector<BlobInfo>> S3BlobStore::list(const std::string &prefix)
{
    // A prefix is fine when some key can start with it: it and one more character make a key.
    if (std::string problem = blobKeyProblem(prefix + "x"); !problem.empty())
        return fail(ErrorCode::InvalidArgument,
                    describe() + ": list prefix '" + prefix + "' cannot begin a checkpoint key: it " + problem);
    Request request{"GET", "", {}, {}, kEmptySha256, "list of prefix '" + prefix + "'"};
    std::vector<BlobInfo> blobs;
    std::string token;
    std::string lastKey;   // the bucket key last listed: each page must go on past it
    do {
        request.query = {{"list-type", "2"}, {"max-keys", std::to_string(m_options.listPageSize)}};
        if (!(m_options.prefix + prefix).empty())
            request.query.emplace_back("prefix", m_options.prefix + prefix);
        if (!token.empty())
            request.query.emplace_back("continuation-token", token);
        const auto answer = exchange(request);
        if (!answer)
            return std::unexpected(answer.error());
        auto page = s3::parseListPage(answer->body);
        if (!page)
            return failure(request, ErrorCode::Internal,
                           "cannot read the server's ListObjectsV2 answer: " + page.error().message
                               + "; report it with this message");
        for (BlobInfo &blob : page->objects) {
            // Pages in key order, each past the last: a server that repeats a page would loop forever.
            if (!lastKey.empty() && blob.key <= lastKey)
                return failure(request, ErrorCode::Internal,
                               "the server listed '" + blob.key + "' after '" + lastKey
                                   + "': its pages do not go on in key order; report it with this message");
            lastKey = blob.key;
            if (!blob.key.starts_with(m_options.prefix + prefix))
                continue;   // the server ignored the prefix: not ours to list
            blob.key.erase(0, m_options.prefix.size());
            blobs.push_back(std::move(blob));
        }
        if (page->truncated && page->objects.empty())
            return failure(request, ErrorCode::Internal,
                           "the server answered an empty page that says more follow; report it with this message");
        token = page->truncated ? page->nextContinuationToken : "";
    } while (!token.empty());
    return blobs;
}

Status S3BlobStore::remove(const std::string &key)
{
    if (auto valid = checkKey(key); !valid)
        return valid;
    const auto answer = exchange({"DELETE", key, {}, {}, kEmptySha256, "remove of '" + key + "'"});
    if (!answer && answer.error().code != ErrorCode::NotFound)
        return std::unexpected(answer.error());
    return {};
}

} // namespace paddock::checkpoints
