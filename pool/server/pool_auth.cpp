#include "pool/server/pool_auth.h"

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/server_credentials.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace paddock::pool {
namespace {

Result<std::string> readFile(const char *flag, const std::filesystem::path &path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return fail(ErrorCode::FailedPrecondition, std::string(flag) + " " + path.string()
                        + ": cannot read the file; check the path and its permissions");
    std::ostringstream data;
    data << in.rdbuf();
    return data.str();
}

Result<std::string> readPem(const char *flag, const std::filesystem::path &path)
{
    auto data = readFile(flag, path);
    if (data && data->find("-----BEGIN ") == std::string::npos)
        return fail(ErrorCode::FailedPrecondition, std::string(flag) + " " + path.string()
                        + " holds no PEM block (-----BEGIN ...); point it at a PEM file");
    return data;
}

class BearerTokenProcessor final : public grpc::AuthMetadataProcessor {
public:
    explicit BearerTokenProcessor(std::string token) : m_token(std::move(token)) {}

    // The check is a comparison in memory: no need for gRPC to hop to another thread for it.
    bool IsBlocking() const override { return false; }

    grpc::Status Process(const InputMetadata &metadata, grpc::AuthContext *, OutputMetadata *consumed,
                         OutputMetadata *) override
    {
        auto it = metadata.find("authorization");
        const bool present = it != metadata.end();
        const std::string_view value = present ? std::string_view(it->second.data(), it->second.size()) : std::string_view();
        grpc::Status status = checkBearer(value, present, m_token);
        if (status.ok())
            consumed->insert({"authorization", std::string(value)});   // handlers never see the token
        return status;
    }

private:
    const std::string m_token;
};

} // namespace

bool constantTimeEquals(std::string_view a, std::string_view b)
{
    // Every byte of the longer one is looked at whatever the content; only the lengths show.
    const size_t n = std::max(a.size(), b.size());
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < n; ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= static_cast<unsigned char>(x ^ y);
    }
    return diff == 0;
}

grpc::Status checkBearer(std::string_view authorization, bool present, std::string_view token)
{
    if (!present)
        return {grpc::StatusCode::UNAUTHENTICATED,
                "this pool requires 'authorization: Bearer <token>' on every call and the call had none; "
                "set token_file in the broker's [[pool]] entry to a file holding the pool's token"};
    constexpr std::string_view kScheme = "Bearer ";
    if (authorization.size() < kScheme.size()
        || !std::equal(kScheme.begin(), kScheme.end(), authorization.begin(),
                       [](char x, char y) { return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y)); }))
        return {grpc::StatusCode::UNAUTHENTICATED,
                "the authorization header is not 'Bearer <token>'; send the pool's token as a bearer token"};
    if (!constantTimeEquals(authorization.substr(kScheme.size()), token))
        return {grpc::StatusCode::UNAUTHENTICATED,
                "the bearer token does not match this pool's --token-file; put the pool's token in the "
                "broker's token_file for this pool"};
    return grpc::Status::OK;
}

Result<std::shared_ptr<grpc::ServerCredentials>> makePoolServerCredentials(const PoolTlsOptions &options)
{
    const bool tls = !options.certFile.empty() || !options.keyFile.empty();
    if (options.certFile.empty() != options.keyFile.empty())
        return fail(ErrorCode::InvalidArgument, "--tls-cert and --tls-key go together: pass both (or neither)");
    if (!tls && !options.clientCaFile.empty())
        return fail(ErrorCode::InvalidArgument, "--tls-client-ca needs TLS: pass --tls-cert and --tls-key too");
    if (!tls && !options.tokenFile.empty())
        return fail(ErrorCode::InvalidArgument, "--token-file needs TLS (over plaintext the token could be read on the "
                                                "way and replayed): pass --tls-cert and --tls-key too");
    if (!tls)
        return grpc::InsecureServerCredentials();

    grpc::SslServerCredentialsOptions ssl;
    auto cert = readPem("--tls-cert", options.certFile);
    if (!cert)
        return std::unexpected(cert.error());
    auto key = readPem("--tls-key", options.keyFile);
    if (!key)
        return std::unexpected(key.error());
    ssl.pem_key_cert_pairs.push_back({std::move(*key), std::move(*cert)});
    if (!options.clientCaFile.empty()) {
        auto ca = readPem("--tls-client-ca", options.clientCaFile);
        if (!ca)
            return std::unexpected(ca.error());
        ssl.pem_root_certs = std::move(*ca);
        ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    auto credentials = grpc::SslServerCredentials(ssl);
    if (!options.tokenFile.empty()) {
        auto token = readPoolToken(options.tokenFile);
        if (!token)
            return std::unexpected(token.error());
        credentials->SetAuthMetadataProcessor(std::make_shared<BearerTokenProcessor>(std::move(*token)));
    }
    return credentials;
}

Result<std::string> readPoolToken(const std::filesystem::path &tokenFile)
{
    auto token = readFile("--token-file", tokenFile);
    if (!token)
        return std::unexpected(token.error());
    while (!token->empty() && std::isspace(static_cast<unsigned char>(token->back())))
        token->pop_back();
    if (token->empty() || !std::all_of(token->begin(), token->end(), [](char c) { return c > ' ' && c < 127; }))
        return fail(ErrorCode::InvalidArgument, "--token-file " + tokenFile.string()
                        + " must hold one line with the token (printable ASCII, no spaces)");
    return token;
}

} // namespace paddock::pool
