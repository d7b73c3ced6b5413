#include "checkpoint/sha256.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace paddock::checkpoint {

struct Sha256::Context {
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    ~Context() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : m_context(std::make_unique<Context>())
{
    if (!m_context->md || EVP_DigestInit_ex(m_context->md, EVP_sha256(), nullptr) != 1)
        throw std::runtime_error("OpenSSL could not start a SHA-256 digest");
}

Sha256::~Sha256() = default;

void Sha256::update(std::string_view bytes)
{
    EVP_DigestUpdate(m_context->md, bytes.data(), bytes.size());
}

std::string Sha256::finishHex()
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_DigestFinal_ex(m_context->md, digest, &length);
    EVP_DigestInit_ex(m_context->md, EVP_sha256(), nullptr);
    static const char kHex[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(length * 2);
    for (unsigned int i = 0; i < length; ++i) {
        hex.push_back(kHex[digest[i] >> 4]);
        hex.push_back(kHex[digest[i] & 0xf]);
    }
    return hex;
}

std::string sha256Hex(std::string_view bytes)
{
    Sha256 hasher;
    hasher.update(bytes);
    return hasher.finishHex();
}

bool isSha256Hex(std::string_view text)
{
    if (text.size() != 64)
        return false;
    for (char c : text)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    return true;
}

} // namespace paddock::checkpoint
