#pragma once
// AWS Signature Version 4 as S3 wants it: the canonical request, the string to sign, the signature
// and the Authorization header. Kept apart from HTTP so that AWS's published examples test each
// step exactly (tests/unit/broker/checkpoints/s3_blob_store_test.cpp).
//
// S3's flavour of SigV4: the path is URI-encoded once (other services encode it twice) and never
// normalized, so "a//b" and "a/./b" stay what they are.
//
// Threads: pure functions, callable from any thread.

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace paddock::checkpoints::s3 {

struct Credentials {
    std::string accessKeyId;
    std::string secretAccessKey;
    std::string sessionToken;   // "" unless the credentials are temporary ones
};

using NameValues = std::vector<std::pair<std::string, std::string>>;

struct SigningInput {
    std::string method;        // "GET", "PUT", "HEAD", "DELETE"
    std::string path;          // not yet encoded: "/bucket/chunks/ab12"
    NameValues query;          // not yet encoded names and values; a bare flag has value ""
    NameValues headers;        // every header to sign, host and x-amz-date among them; any case
    std::string payloadHash;   // lowercase hex SHA-256 of the body (checkpoint::sha256Hex)
};

struct Signature {
    std::string canonicalRequest;
    std::string stringToSign;
    std::string signedHeaders;   // "host;x-amz-content-sha256;x-amz-date"
    std::string signature;       // 64 lowercase hex digits
    std::string authorization;   // the Authorization header's value
};

// amzDate is the request's x-amz-date, "20130524T000000Z"; its first 8 characters date the scope.
Signature signRequest(const SigningInput &input, const Credentials &credentials, std::string_view region,
                      std::string_view service, std::string_view amzDate);

// RFC 3986 percent-encoding as SigV4 defines it: A-Z a-z 0-9 - . _ ~ stay, every other byte
// becomes %XX (uppercase); '/' stays too when keepSlash (paths), not in query names and values.
std::string uriEncode(std::string_view text, bool keepSlash);

// The query as signed, and so as sent: encoded pairs sorted by name then value, joined by '&'.
std::string canonicalQuery(const NameValues &query);

// "20130524T000000Z" in UTC.
std::string amzDateOf(std::chrono::system_clock::time_point when);

} // namespace paddock::checkpoints::s3
