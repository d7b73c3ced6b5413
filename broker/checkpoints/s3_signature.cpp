#include "broker/checkpoints/s3_signature.h"

#include "checkpoint/sha256.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <ctime>
#include <map>

namespace paddock::checkpoints::s3 {

namespace {

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";

std::string hmacSha256(std::string_view key, std::string_view data)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
         reinterpret_cast<const unsigned char *>(data.data()), data.size(), digest, &length);
    return std::string(reinterpret_cast<const char *>(digest), length);
}

std::string hexOf(std::string_view bytes)
{
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        hex.push_back(kHex[c >> 4]);
        hex.push_back(kHex[c & 0xf]);
    }
    return hex;
}

std::string lowercase(std::string_view text)
{
    std::string out(text);
    for (char &c : out)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    return out;
}

// A header value as signed: leading and trailing blanks dropped, inner runs of blanks made one space.
std::string trimmedValue(std::string_view value)
{
    std::string out;
    bool pendingSpace = false;
    for (char c : value) {
        if (c == ' ' || c == '\t') {
            pendingSpace = !out.empty();
            continue;
        }
        if (pendingSpace)
            out.push_back(' ');
        pendingSpace = false;
        out.push_back(c);
    }
    return out;
}

struct CanonicalHeaders {
    std::string lines;     // "name:value\n" each
    std::string names;     // "name;name"
};

CanonicalHeaders canonicalHeaders(const NameValues &headers)
{
    // A name given twice is signed once, its values joined by commas in the order given.
    std::map<std::string, std::string> byName;
    for (const auto &[name, value] : headers) {
        std::string &joined = byName[lowercase(name)];
        if (!joined.empty())
            joined += ',';
        joined += trimmedValue(value);
    }
    CanonicalHeaders out;
    for (const auto &[name, value] : byName) {
        out.lines += name + ':' + value + '\n';
        if (!out.names.empty())
            out.names += ';';
        out.names += name;
    }
    return out;
}

std::string signingKey(std::string_view secret, std::string_view date, std::string_view region,
                       std::string_view service)
{
    const std::string dateKey = hmacSha256("AWS4" + std::string(secret), date);
    const std::string regionKey = hmacSha256(dateKey, region);
    const std::string serviceKey = hmacSha256(regionKey, service);
    return hmacSha256(serviceKey, "aws4_request");
}

} // namespace

std::string uriEncode(std::string_view text, bool keepSlash)
{
    static constexpr char kHex[] = "0123456789ABCDEF";
    // ASCII only, whatever the locale: isalnum() could keep bytes of a multibyte character.
    auto unreserved = [](unsigned char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'
            || c == '_' || c == '~';
    };
    std::string out;
    out.reserve(text.size());
    for (unsigned char c : text) {
        if (unreserved(c) || (keepSlash && c == '/')) {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('%');
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 0xf]);
        }
    }
    return out;
}

std::string canonicalQuery(const NameValues &query)
{
    NameValues encoded;
    encoded.reserve(query.size());
    for (const auto &[name, value] : query)
        encoded.emplace_back(uriEncode(name, false), uriEncode(value, false));
    std::ranges::sort(encoded);
    std::string out;
    for (const auto &[name, value] : encoded) {
        if (!out.empty())
            out += '&';
        out += name + '=' + value;
    }
    return out;
}

std::string amzDateOf(std::chrono::system_clock::time_point when)
{
    const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
    return text;
}

Signature signRequest(const SigningInput &input, const Credentials &credentials, std::string_view region,
                      std::string_view service, std::string_view amzDate)
{
    const CanonicalHeaders headers = canonicalHeaders(input.headers);
    Signature out;
    out.signedHeaders = headers.names;
    out.canonicalRequest = input.method + '\n' + uriEncode(input.path, true) + '\n' + canonicalQuery(input.query)
        + '\n' + headers.lines + '\n' + headers.names + '\n' + input.payloadHash;

    const std::string_view date = amzDate.substr(0, 8);
    const std::string scope =
        std::string(date) + '/' + std::string(region) + '/' + std::string(service) + "/aws4_request";
    out.stringToSign = std::string(kAlgorithm) + '\n' + std::string(amzDate) + '\n' + scope + '\n'
        + checkpoint::sha256Hex(out.canonicalRequest);

    const std::string key = signingKey(credentials.secretAccessKey, date, region, service);
    out.signature = hexOf(hmacSha256(key, out.stringToSign));
    out.authorization = std::string(kAlgorithm) + " Credential=" + credentials.accessKeyId + '/' + scope
        + ", SignedHeaders=" + out.signedHeaders + ", Signature=" + out.signature;
    return out;
}

} // namespace paddock::checkpoints::s3
