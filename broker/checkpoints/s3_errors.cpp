#include "broker/checkpoints/s3_errors.h"

#include <algorithm>
#include <charconv>

namespace paddock::checkpoints::s3 {

namespace {

bool oneOf(std::string_view code, std::initializer_list<std::string_view> codes)
{
    return std::ranges::find(codes, code) != codes.end();
}

std::string prefixOf(const CallContext &context)
{
    return context.store + ": " + context.what + ": ";
}

// "403 SignatureDoesNotMatch (The request signature ...)" or just "403".
std::string answerText(long status, const ErrorBody &body)
{
    std::string text = std::to_string(status);
    if (!body.code.empty())
        text += " " + body.code;
    if (!body.message.empty())
        text += " (" + body.message + ")";
    return text;
}

std::string attemptsText(const CallContext &context)
{
    return context.attempts == 1 ? "" : " (" + std::to_string(context.attempts) + " attempts)";
}

Error credentialsRefused(const CallContext &context, long status, const ErrorBody &body)
{
    return {ErrorCode::PermissionDenied,
            prefixOf(context) + "the server refused the request: " + answerText(status, body)
                + "; check the credentials file " + context.credentialsFile
                + " and that its key may use bucket '" + context.bucket + "'"};
}

Error noSuchBucket(const CallContext &context)
{
    return {ErrorCode::FailedPrecondition,
            prefixOf(context) + "bucket '" + context.bucket + "' does not exist at " + context.endpoint
                + "; create it (e.g. `aws s3 mb s3://" + context.bucket + " --endpoint-url " + context.endpoint
                + "`) or fix the bucket name in the broker's configuration"};
}

Error storeFull(const CallContext &context, long status, const ErrorBody &body)
{
    return {ErrorCode::ResourceExhausted,
            prefixOf(context) + "the store is full or the object too large: " + answerText(status, body)
                + "; free space in bucket '" + context.bucket + "' or raise its quota"};
}

Error serverTrouble(const CallContext &context, long status, const ErrorBody &body)
{
    return {ErrorCode::Unavailable, prefixOf(context) + "the server at " + context.endpoint + " answered "
                                        + answerText(status, body) + attemptsText(context) + "; retry later"};
}

Error wrongRegion(const CallContext &context, long status, const ErrorBody &body)
{
    return {ErrorCode::FailedPrecondition,
            prefixOf(context) + "the server answered " + answerText(status, body) + ": bucket '" + context.bucket
                + "' is elsewhere; set the store's region (and endpoint) to where the bucket lives"};
}

} // namespace

bool isRetryable(const HttpResponse &response)
{
    switch (response.transport) {
    case Transport::Ok:
        // Not 501, 505 or 507 (Insufficient Storage): the same request gets the same answer.
        return response.status == 429
            || (response.status >= 500 && response.status != 501 && response.status != 505 && response.status != 507);
    case Transport::Refused:
    case Transport::Broken:
        return true;
    default:
        return false;
    }
}

std::optional<int64_t> retryAfterMs(const HttpResponse &response)
{
    const std::string &text = response.retryAfter;
    int64_t seconds = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (text.empty() || error != std::errc() || end != text.data() + text.size() || seconds < 0)
        return std::nullopt;
    return seconds * 1000;
}

Error errorForTransport(const CallContext &context, const HttpResponse &response)
{
    const std::string prefix = prefixOf(context);
    const std::string detail = " (" + response.transportDetail + ")";
    switch (response.transport) {
    case Transport::Refused:
        return {ErrorCode::Unavailable, prefix + "cannot connect to " + context.endpoint + detail
                                            + attemptsText(context)
                                            + "; is the S3 server running there and the endpoint right?"};
    case Transport::Unresolved:
        return {ErrorCode::Unavailable,
                prefix + "cannot resolve the host of " + context.endpoint + detail + "; check the endpoint and DNS"};
    case Transport::TimedOut:
        return {ErrorCode::Unavailable, prefix + "timed out after " + std::to_string(context.timeoutMs)
                                            + " ms waiting for " + context.endpoint + detail
                                            + "; check the server, or raise the store's timeout_ms"};
    case Transport::Broken:
        return {ErrorCode::Unavailable, prefix + "the connection to " + context.endpoint + " failed" + detail
                                            + attemptsText(context) + "; retry later"};
    case Transport::Tls:
        return {ErrorCode::Unavailable, prefix + "TLS with " + context.endpoint + " failed" + detail
                                            + "; check the endpoint's certificate and this machine's CA store"};
    case Transport::Ok:
    case Transport::Other:
        break;
    }
    return {ErrorCode::Unavailable, prefix + "the request to " + context.endpoint + " failed" + detail};
}

Error errorForAnswer(const CallContext &context, long status, const ErrorBody &body)
{
    const std::string &code = body.code;
    if (code == "NoSuchKey" || (code.empty() && status == 404))
        return {ErrorCode::NotFound, prefixOf(context) + "no such key"};
    if (code == "NoSuchBucket")
        return noSuchBucket(context);
    if (code == "RequestTimeTooSkewed")
        return {ErrorCode::FailedPrecondition,
                prefixOf(context) + "the server says this machine's clock is off by more than 15 minutes; "
                                    "synchronize it (NTP)"};
    if (oneOf(code, {"AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId", "InvalidToken", "ExpiredToken",
                     "TokenRefreshRequired", "AccountProblem", "AllAccessDisabled"})
        || (code.empty() && (status == 401 || status == 403)))
        return credentialsRefused(context, status, body);
    if (oneOf(code, {"EntityTooLarge", "QuotaExceeded", "XMinioStorageFull", "XMinioAdminBucketQuotaExceeded",
                     "InsufficientStorage", "StorageFull"})
        || status == 507 || status == 413)
        return storeFull(context, status, body);
    if (oneOf(code, {"AuthorizationHeaderMalformed", "PermanentRedirect", "TemporaryRedirect",
                     "IllegalLocationConstraintException"})
        || (code.empty() && status >= 300 && status < 400))
        return wrongRegion(context, status, body);
    if (oneOf(code, {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout"}) || status >= 500
        || status == 429)
        return serverTrouble(context, status, body);
    if (status == 403)
        return credentialsRefused(context, status, body);
    return {ErrorCode::Internal, prefixOf(context) + "unexpected answer " + answerText(status, body)
                                     + " from " + context.endpoint
                                     + "; this S3 server may not support the request: report it with this message"};
}

} // namespace paddock::checkpoints::s3
