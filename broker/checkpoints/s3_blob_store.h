#pragma once
// The team backend of BlobStore: an S3-compatible bucket (AWS S3, MinIO, Ceph RGW, ...), spoken to
// over its REST API with AWS Signature Version 4 (s3_signature.h) over libcurl (s3_http.h).
// PutObject, GetObject, HeadObject, ListObjectsV2 and DeleteObject; a blob key K lives at object
// key prefix + K.
//
// Every request is idempotent, so each is tried again on 5xx, 429, a refused or dropped
// connection: up to kMaxAttempts in all, 100 ms, 200 ms, 400 ms apart (or what Retry-After asks,
// at most kMaxRetryWaitMs), all within one timeoutMs budget per request (list sends one per page).
//
// Errors follow blob_store.h, plus FailedPrecondition for a missing bucket, a clock too far off or
// a bucket in another region, and Internal for an answer this client does not understand.
//
// Known limits: one PUT per object (no multipart upload: S3 caps a single PUT at 5 GiB); the whole
// object is held in memory both ways; credentials are read once, at open, from the [default]
// section only; a HEAD answering 404 is checked against the bucket (a HEAD has no body saying
// which is missing) at most once per kBucketCheckMs. AWS answers a missing key with 403, not 404,
// to a key without s3:ListBucket on the bucket: give it that right, or exists() is PermissionDenied.
//
// Threads: every method may be called from any thread concurrently.

#include "broker/checkpoints/blob_store.h"
#include "broker/checkpoints/s3_signature.h"

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace paddock::checkpoints {

namespace s3 {
class HttpClient;
struct HttpResponse;
} // namespace s3

struct S3Options {
    std::string endpoint;          // "http://127.0.0.1:9000" or "https://s3.eu-west-1.amazonaws.com"
    std::string bucket;
    std::string region = "us-east-1";
    std::string prefix;            // optional key prefix inside the bucket, e.g. "paddock/"
    bool pathStyle = true;         // false: virtual-host style, the URL host is <bucket>.<endpoint host>
    std::filesystem::path credentialsFile;
    int64_t timeoutMs = 30000;     // for one request, its retries included
    int listPageSize = 1000;       // ListObjectsV2 max-keys; tests make it small to walk many pages
    // CURLOPT_RESOLVE entries "HOST:PORT:ADDRESS", for tests (virtual-host names on loopback) and
    // split-horizon DNS; empty in the usual case.
    std::vector<std::string> curlResolve;
};

class S3BlobStore final : public BlobStore {
public:
    static constexpr int kMaxAttempts = 4;
    static constexpr int64_t kFirstRetryWaitMs = 100;
    static constexpr int64_t kMaxRetryWaitMs = 5000;
    static constexpr int64_t kBucketCheckMs = 60000;

    // Checks the options and reads the credentials file; sends nothing. InvalidArgument for a bad
    // option or credentials file, FailedPrecondition for a credentials file others may read.
    static Result<std::unique_ptr<S3BlobStore>> open(S3Options options);
    ~S3BlobStore() override;

    std::string describe() const override;
    Status put(const std::string &key, std::string_view bytes) override;
    Result<std::string> get(const std::string &key) override;
    Result<bool> exists(const std::string &key) override;
    Result<std::vector<BlobInfo>> list(const std::string &prefix) override;
    Status remove(const std::string &key) override;

private:
    struct Endpoint {
        std::string scheme;   // "http" or "https"
        std::string host;     // the URL's host, brackets kept for IPv6: "[::1]"
        std::string port;     // "" for the scheme's default
    };
    struct Request {
        std::string method;
        std::string key;            // the blob key, "" for the bucket itself
        s3::NameValues query;
        std::string_view body;
        std::string payloadHash;    // hex SHA-256 of body
        std::string what;           // "get of 'k'", for messages
    };

    S3BlobStore(S3Options options, Endpoint endpoint, s3::Credentials credentials);

    static Result<Endpoint> parseEndpoint(const S3Options &options);
    Status checkKey(const std::string &key) const;
    std::string hostHeader() const;
    std::string pathOf(const std::string &key) const;
    std::unexpected<Error> failure(const Request &request, ErrorCode code, const std::string &why) const;

    // Signs and sends request, again while the answer is retryable and time remains. A 2xx answer,
    // else the error it (or the failure to get one) means.
    Result<s3::HttpResponse> exchange(const Request &request) const;
    s3::HttpResponse sendOnce(const Request &request, int64_t timeoutMs) const;
    // After a HEAD answered 404: FailedPrecondition when the bucket itself is missing.
    Status checkBucket(const Request &request) const;

    const S3Options m_options;
    const Endpoint m_endpoint;
    const s3::Credentials m_credentials;
    std::unique_ptr<s3::HttpClient> m_http;
    // Steady-clock ms when an answer last proved the bucket exists; 0 before any did.
    mutable std::atomic<int64_t> m_bucketSeenMs{0};
};

} // namespace paddock::checkpoints
