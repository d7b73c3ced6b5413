#include "cli/address.h"

#include <gtest/gtest.h>

namespace paddock::cli {
namespace {

TEST(BrokerAddress, UnixPrefixKeepsThePath)
{
    auto address = parseBrokerAddress("unix:/run/user/1000/paddock/broker.sock");
    ASSERT_TRUE(address) << address.error().message;
    EXPECT_EQ(address->target, "unix:/run/user/1000/paddock/broker.sock");
    EXPECT_EQ(address->unixPath, "/run/user/1000/paddock/broker.sock");
    EXPECT_TRUE(address->isUnix());
}

TEST(BrokerAddress, TripleSlashFormIsTheSameSocket)
{
    auto address = parseBrokerAddress("unix:///tmp/b.sock");
    ASSERT_TRUE(address);
    EXPECT_EQ(address->target, "unix:/tmp/b.sock");
    EXPECT_EQ(address->unixPath, "/tmp/b.sock");
}

TEST(BrokerAddress, BarePathIsAUnixSocket)
{
    auto address = parseBrokerAddress("/tmp/x/broker.sock");
    ASSERT_TRUE(address);
    EXPECT_EQ(address->target, "unix:/tmp/x/broker.sock");
    EXPECT_TRUE(address->isUnix());

    auto relative = parseBrokerAddress("./broker.sock");
    ASSERT_TRUE(relative);
    EXPECT_EQ(relative->unixPath, "./broker.sock");
}

TEST(BrokerAddress, HostPortIsTcp)
{
    auto address = parseBrokerAddress("127.0.0.1:7443");
    ASSERT_TRUE(address);
    EXPECT_EQ(address->target, "127.0.0.1:7443");
    EXPECT_FALSE(address->isUnix());

    auto named = parseBrokerAddress("broker.example.com:443");
    ASSERT_TRUE(named);
    EXPECT_EQ(named->target, "broker.example.com:443");

    auto v6 = parseBrokerAddress("[::1]:7443");
    ASSERT_TRUE(v6);
    EXPECT_EQ(v6->target, "[::1]:7443");
}

TEST(BrokerAddress, RejectsMalformedAddressesAndNamesTheForms)
{
    for (const char *bad : {"", "localhost", "host:", "host:0", "host:70000", "host:12ab", ":80", "unix:",
                            "::1:80", "[::1]", "[::1]80"}) {
        auto address = parseBrokerAddress(bad);
        ASSERT_FALSE(address) << bad;
        EXPECT_EQ(address.error().code, ErrorCode::InvalidArgument);
        EXPECT_NE(address.error().message.find("host:port"), std::string::npos) << address.error().message;
    }
}

TEST(BrokerAddress, FlagWinsOverEnvironmentOverDefault)
{
    EXPECT_EQ(chooseBrokerAddress(std::string("a:1"), std::string("b:2"), "/d.sock"), "a:1");
    EXPECT_EQ(chooseBrokerAddress(std::nullopt, std::string("b:2"), "/d.sock"), "b:2");
    EXPECT_EQ(chooseBrokerAddress(std::nullopt, std::nullopt, "/d.sock"), "unix:/d.sock");
    // An empty variable means "unset", not "an empty address".
    EXPECT_EQ(chooseBrokerAddress(std::nullopt, std::string(), "/d.sock"), "unix:/d.sock");
}

TEST(BrokerAddress, AListIsSplitAtCommasInOrder)
{
    auto list = parseBrokerAddresses("a.example:7443, unix:/run/b.sock ,[::1]:7443");
    ASSERT_TRUE(list) << list.error().message;
    ASSERT_EQ(list->size(), 3u);
    EXPECT_EQ((*list)[0].target, "a.example:7443");
    EXPECT_EQ((*list)[1].unixPath, "/run/b.sock");
    EXPECT_EQ((*list)[1].written, "unix:/run/b.sock");
    EXPECT_EQ((*list)[2].target, "[::1]:7443");

    auto one = parseBrokerAddresses("127.0.0.1:7443");
    ASSERT_TRUE(one);
    ASSERT_EQ(one->size(), 1u);
    EXPECT_EQ(one->front().written, "127.0.0.1:7443");

    for (const char *bad : {"a:1,", ",a:1", "a:1,,b:2", "a:1,b"}) {
        auto parsed = parseBrokerAddresses(bad);
        ASSERT_FALSE(parsed) << bad;
        EXPECT_EQ(parsed.error().code, ErrorCode::InvalidArgument);
    }
    EXPECT_NE(parseBrokerAddresses("a:1,,b:2").error().message.find("entry 2 is empty"), std::string::npos);
}

} // namespace
} // namespace paddock::cli
