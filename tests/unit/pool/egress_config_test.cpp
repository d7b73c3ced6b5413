// A pool refuses to start with an egress configuration it cannot enforce, naming the tier and the
// entry (before it starts any runtime or touches its state directory).

#include "pool/core/sandbox_pool.h"

#include <gtest/gtest.h>

namespace paddock::pool {
namespace {

PoolConfig configWith(TierConfig tier)
{
    PoolConfig config;
    config.stateDir = ::testing::TempDir() + "/egress-config-never-created";
    config.tiers.push_back(std::move(tier));
    return config;
}

TEST(EgressConfig, InvalidAllowlistEntryStopsThePoolNamingIt)
{
    TierConfig tier;
    tier.name = "standard";
    tier.network = "allowlist";
    tier.allowlist = {"pypi.org:443", "10.0.0.0/33"};
    auto pool = SandboxPool::create(configWith(tier));
    ASSERT_FALSE(pool);
    EXPECT_EQ(pool.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(pool.error().message.find("tier 'standard'"), std::string::npos) << pool.error().message;
    EXPECT_NE(pool.error().message.find("'10.0.0.0/33'"), std::string::npos) << pool.error().message;
    EXPECT_NE(pool.error().message.find("CIDR range like"), std::string::npos) << pool.error().message;
}

TEST(EgressConfig, UnknownNetworkValueStopsThePool)
{
    TierConfig tier;
    tier.name = "standard";
    tier.network = "open";
    auto pool = SandboxPool::create(configWith(tier));
    ASSERT_FALSE(pool);
    EXPECT_EQ(pool.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(pool.error().message.find("network = \"open\""), std::string::npos) << pool.error().message;
    EXPECT_NE(pool.error().message.find("\"none\" or \"allowlist\""), std::string::npos) << pool.error().message;
    EXPECT_FALSE(std::filesystem::exists(::testing::TempDir() + "/egress-config-never-created"));
}

} // namespace
} // namespace paddock::pool
