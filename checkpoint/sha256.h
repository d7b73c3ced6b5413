#pragma once
// SHA-256 (OpenSSL's EVP), as lowercase hex: the name of a checkpoint chunk and of a manifest.
//
// Threads: a Sha256 is used by one thread at a time; sha256Hex is free to call from any.

#include <memory>
#include <string>
#include <string_view>

namespace paddock::checkpoint {

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256 &) = delete;
    Sha256 &operator=(const Sha256 &) = delete;

    void update(std::string_view bytes);
    // The digest of everything updated so far, as 64 lowercase hex digits; the hasher starts over.
    std::string finishHex();

private:
    struct Context;
    std::unique_ptr<Context> m_context;
};

std::string sha256Hex(std::string_view bytes);

// 64 lowercase hex digits.
bool isSha256Hex(std::string_view text);

} // namespace paddock::checkpoint
