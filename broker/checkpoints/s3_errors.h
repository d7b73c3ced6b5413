#pragma once
// What a failed S3 exchange means to a BlobStore caller: the error code of the contract in
// blob_store.h and a message naming the store, the key, the cause and the fix. Pure functions, so
// that answers a test server cannot be made to give (507, EntityTooLarge, SlowDown) are tested too.
//
// Threads: pure functions, callable from any thread.

#include "broker/checkpoints/s3_http.h"
#include "broker/checkpoints/s3_xml.h"
#include "common/result.h"

#include <cstdint>
#include <optional>
#include <string>

namespace paddock::checkpoints::s3 {

struct CallContext {
    std::string store;             // "s3 bucket b at http://host:9000"
    std::string what;              // "get of 'chunks/ab'"
    std::string bucket;
    std::string endpoint;
    std::string credentialsFile;
    int64_t timeoutMs = 0;
    int attempts = 1;
};

// Whether trying the same request again may succeed: 5xx (but 501, 505, 507), 429, and dropped or
// refused connections.
bool isRetryable(const HttpResponse &response);

// Retry-After in milliseconds when it is a number of seconds (the HTTP-date form is ignored).
std::optional<int64_t> retryAfterMs(const HttpResponse &response);

// Unavailable for every way the exchange failed before an HTTP answer.
Error errorForTransport(const CallContext &context, const HttpResponse &response);

// The error for a non-2xx answer, from its S3 <Error> code when there is one, else its status.
Error errorForAnswer(const CallContext &context, long status, const ErrorBody &body);

} // namespace paddock::checkpoints::s3
