#pragma once
// Bearer tokens for callers over TCP (docs/permissions.md). A token is "pdk_<id>_<secret>": 32
// random bytes of secret, shown once at creation; the broker keeps only the SHA-256 of the whole
// token and compares it in constant time. Tokens name a principal of the config, may expire, can be
// revoked, and remember when they were last used.
//
// Threads: TokenRegistry is called from gRPC's threads (verify on every TCP call, the token RPCs);
// a mutex guards it. Persistence is the caller's (broker/store/auth_tables.h): the registry is the
// in-memory copy of the tokens table.

#include "common/result.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace paddock::auth {

struct TokenInfo {
    std::string id;
    std::string principal;
    std::string description;
    int64_t createdUnixMs = 0;
    int64_t expiresUnixMs = 0;    // 0: never
    int64_t lastUsedUnixMs = 0;
    bool revoked = false;
};

struct TokenRecord {
    TokenInfo info;
    std::string hash;             // hex SHA-256 of the whole token
};

struct NewToken {
    TokenRecord record;
    std::string token;            // the only copy; give it to the user and forget it
};

// A fresh token for principal (random id and secret).
NewToken generateToken(const std::string &principal, const std::string &description, int64_t nowUnixMs,
                       int64_t ttlSeconds);
// Hex SHA-256.
std::string sha256Hex(std::string_view data);
// The id a token of the form "pdk_<id>_<secret>" names ("tok-<id>", as TokenInfo::id), whether or
// not this broker issued it; empty for anything else. Never returns any part of the secret.
std::string tokenIdOf(std::string_view token);

class TokenRegistry {
public:
    void load(std::vector<TokenRecord> records);
    void add(TokenRecord record);
    // The token's record, or an error saying what is wrong and what to do (never the token); the
    // caller answers it as UNAUTHENTICATED.
    // A success updates last_used in memory; lastUsedToPersist tells whether it is worth writing.
    Result<TokenInfo> verify(std::string_view token, int64_t nowUnixMs, bool *lastUsedToPersist = nullptr);
    Result<TokenInfo> find(const std::string &id) const;
    // Marks it revoked; NotFound for an unknown id.
    Result<TokenInfo> revoke(const std::string &id);
    void restore(const TokenInfo &info);   // undo revoke() or a last_used touch when persisting failed
    std::vector<TokenInfo> list() const;   // oldest first

private:
    mutable std::mutex m_mutex;
    std::unordered_map<std::string, TokenRecord> m_byId;
    std::unordered_map<std::string, int64_t> m_persistedLastUsed;   // id -> last_used as written
};

// How often a token's last_used is written back at most.
inline constexpr int64_t kLastUsedPersistIntervalMs = 60000;

} // namespace paddock::auth
