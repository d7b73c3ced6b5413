#include "broker/auth/tokens.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace paddock::auth {

namespace {

constexpr std::string_view kPrefix = "pdk_";
constexpr size_t kIdHexDigits = 12;
constexpr size_t kSecretBytes = 32;

std::string hex(const unsigned char *data, size_t size)
{
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(size * 2);
    for (size_t i = 0; i < size; ++i) {
        out.push_back(kDigits[data[i] >> 4]);
        out.push_back(kDigits[data[i] & 15]);
    }
    return out;
}

std::string randomHex(size_t bytes)
{
    std::vector<unsigned char> buffer(bytes);
    if (RAND_bytes(buffer.data(), static_cast<int>(buffer.size())) != 1) {
        // OpenSSL's generator failing is not something to limp on with a weaker one.
        std::abort();
    }
    return hex(buffer.data(), buffer.size());
}

// The id inside "pdk_<id>_<secret>", or empty when the token is not of that form.
std::string_view idOf(std::string_view token)
{
    if (!token.starts_with(kPrefix) || token.size() <= kPrefix.size() + kIdHexDigits + 1
        || token[kPrefix.size() + kIdHexDigits] != '_')
        return {};
    const std::string_view id = token.substr(kPrefix.size(), kIdHexDigits);
    const bool hex = std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
    return hex ? id : std::string_view();
}

const char *kNewTokenHint = "ask an admin for a new one (paddockctl tokens create PRINCIPAL)";

} // namespace

std::string tokenIdOf(std::string_view token)
{
    const std::string_view id = idOf(token);
    return id.empty() ? std::string() : "tok-" + std::string(id);
}

std::string sha256Hex(std::string_view data)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
    return hex(digest, length);
}

NewToken generateToken(const std::string &principal, const std::string &description, int64_t nowUnixMs,
                       int64_t ttlSeconds)
{
    NewToken out;
    const std::string id = randomHex(kIdHexDigits / 2);
    out.token = std::string(kPrefix) + id + "_" + randomHex(kSecretBytes);
    out.record.hash = sha256Hex(out.token);
    out.record.info.id = "tok-" + id;
    out.record.info.principal = principal;
    out.record.info.description = description;
    out.record.info.createdUnixMs = nowUnixMs;
    out.record.info.expiresUnixMs = ttlSeconds > 0 ? nowUnixMs + ttlSeconds * 1000 : 0;
    return out;
}

void TokenRegistry::load(std::vector<TokenRecord> records)
{
    std::lock_guard lock(m_mutex);
    m_byId.clear();
    m_persistedLastUsed.clear();
    for (auto &record : records) {
        m_persistedLastUsed[record.info.id] = record.info.lastUsedUnixMs;
        std::string id = record.info.id;
        m_byId.emplace(std::move(id), std::move(record));
    }
}

void TokenRegistry::add(TokenRecord record)
{
    std::lock_guard lock(m_mutex);
    m_persistedLastUsed[record.info.id] = record.info.lastUsedUnixMs;
    std::string id = record.info.id;
    m_byId.insert_or_assign(std::move(id), std::move(record));
}

Result<TokenInfo> TokenRegistry::verify(std::string_view token, int64_t nowUnixMs, bool *lastUsedToPersist)
{
    const std::string_view id = idOf(token);
    if (id.empty())
        return fail(ErrorCode::PermissionDenied, std::string("the bearer token is not a Paddock token (pdk_...); ")
                                                    + kNewTokenHint);
    // Hash first, whatever the id: the time taken does not tell whether the id exists.
    const std::string hash = sha256Hex(token);
    std::lock_guard lock(m_mutex);
    auto it = m_byId.find("tok-" + std::string(id));
    const bool known = it != m_byId.end();
    const std::string &stored = known ? it->second.hash : hash;
    const bool equal = stored.size() == hash.size() && CRYPTO_memcmp(stored.data(), hash.data(), hash.size()) == 0;
    if (!known || !equal)
        return fail(ErrorCode::PermissionDenied, std::string("the bearer token is not one this broker issued; ")
                                                    + kNewTokenHint);
    TokenInfo &info = it->second.info;
    if (info.revoked)
        return fail(ErrorCode::PermissionDenied, "token " + info.id + " was revoked; " + kNewTokenHint);
    if (info.expiresUnixMs > 0 && nowUnixMs >= info.expiresUnixMs)
        return fail(ErrorCode::PermissionDenied, "token " + info.id + " has expired; " + kNewTokenHint);
    info.lastUsedUnixMs = std::max(info.lastUsedUnixMs, nowUnixMs);
    if (lastUsedToPersist) {
        int64_t &persisted = m_persistedLastUsed[info.id];
        *lastUsedToPersist = info.lastUsedUnixMs - persisted >= kLastUsedPersistIntervalMs || persisted == 0;
        if (*lastUsedToPersist)
            persisted = info.lastUsedUnixMs;
    }
    return info;
}

Result<TokenInfo> TokenRegistry::find(const std::string &id) const
{
    std::lock_guard lock(m_mutex);
    auto it = m_byId.find(id);
    if (it == m_byId.end())
        return fail(ErrorCode::NotFound, "no token '" + id + "': `paddockctl tokens ls` lists them");
    return it->second.info;
}

Result<TokenInfo> TokenRegistry::revoke(const std::string &id)
{
    std::lock_guard lock(m_mutex);
    auto it = m_byId.find(id);
    if (it == m_byId.end())
        return fail(ErrorCode::NotFound, "no token '" + id + "': `paddockctl tokens ls` lists them");
    it->second.info.revoked = true;
    return it->second.info;
}

void TokenRegistry::restore(const TokenInfo &info)
{
    std::lock_guard lock(m_mutex);
    if (auto it = m_byId.find(info.id); it != m_byId.end())
        it->second.info = info;
}

std::vector<TokenInfo> TokenRegistry::list() const
{
    std::vector<TokenInfo> out;
    {
        std::lock_guard lock(m_mutex);
        for (const auto &[id, record] : m_byId)
            out.push_back(record.info);
    }
    std::sort(out.begin(), out.end(), [](const TokenInfo &a, const TokenInfo &b) {
        return a.createdUnixMs != b.createdUnixMs ? a.createdUnixMs < b.createdUnixMs : a.id < b.id;
    });
    return out;
}

} // namespace paddock::auth
