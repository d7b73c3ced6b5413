// The pool's door: the bearer-token check and the credentials' start-up refusals (no TLS
// handshake here; pool_tls_test and multi_host_test run the real thing).

#include "pool/server/pool_auth.h"

#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

namespace paddock::pool {
namespace {

TEST(PoolAuth, ConstantTimeEqualsComparesLengthAndEveryByte)
{
    EXPECT_TRUE(constantTimeEquals("token-1", "token-1"));
    EXPECT_FALSE(constantTimeEquals("token-1", "token-2"));
    EXPECT_FALSE(constantTimeEquals("token-1", "token-12"));
    EXPECT_FALSE(constantTimeEquals("token-12", "token-1"));
    EXPECT_FALSE(constantTimeEquals("", "x"));
    EXPECT_TRUE(constantTimeEquals("", ""));
}

TEST(PoolAuth, BearerCheckNamesWhatIsMissingAndNeverTheToken)
{
    const std::string token = "pool-token-xyz";
    EXPECT_TRUE(checkBearer("Bearer pool-token-xyz", true, token).ok());
    EXPECT_TRUE(checkBearer("bearer pool-token-xyz", true, token).ok()) << "the scheme is case-insensitive";

    const grpc::Status none = checkBearer("", false, token);
    EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_NE(none.error_message().find("token_file"), std::string::npos) << none.error_message();

    const grpc::Status basic = checkBearer("Basic dXNlcjpwYXNz", true, token);
    EXPECT_EQ(basic.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_NE(basic.error_message().find("Bearer"), std::string::npos);

    const grpc::Status wrong = checkBearer("Bearer pool-token-abc", true, token);
    EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(wrong.error_message().find(token), std::string::npos);
    EXPECT_EQ(wrong.error_message().find("pool-token-abc"), std::string::npos);
}

TEST(PoolAuth, CredentialsRefuseATokenWithoutTlsAndHalfAPair)
{
    const auto dir = std::filesystem::temp_directory_path() / ("paddock-pool-auth-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "token") << "t\n";
    std::ofstream(dir / "cert.pem") << "not a certificate\n";

    EXPECT_TRUE(makePoolServerCredentials({}).has_value()) << "plaintext when nothing is set";

    PoolTlsOptions tokenOnly;
    tokenOnly.tokenFile = dir / "token";
    auto refused = makePoolServerCredentials(tokenOnly);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("--token-file needs TLS"), std::string::npos);

    PoolTlsOptions half;
    half.certFile = dir / "cert.pem";
    ASSERT_FALSE(makePoolServerCredentials(half));

    PoolTlsOptions notPem;
    notPem.certFile = dir / "cert.pem";
    notPem.keyFile = dir / "cert.pem";
    auto bad = makePoolServerCredentials(notPem);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("holds no PEM block"), std::string::npos) << bad.error().message;
    std::filesystem::remove_all(dir);
}

} // namespace
} // namespace paddock::pool
