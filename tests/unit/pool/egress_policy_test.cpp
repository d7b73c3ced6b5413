// The egress address policy as a pure function: every spelling of a forbidden address, the
// allowlist forms, DNS answers that mix good and bad addresses.

#include "common/address_policy.h"

#include <gtest/gtest.h>

#include <map>

namespace paddock::pool::egress {
namespace {

Allowlist list(const std::vector<std::string> &entries)
{
    auto l = Allowlist::parse(entries);
    EXPECT_TRUE(l) << (l ? "" : l.error().message);
    return l ? *l : Allowlist{};
}

// A resolver from a table; names not in it fail like NXDOMAIN. Counts lookups.
struct FakeDns {
    std::map<std::string, std::vector<std::string>> table;
    std::vector<std::string> asked;
    Resolver resolver()
    {
        return [this](const std::string &host, int) -> Result<std::vector<IpAddress>> {
            asked.push_back(host);
            auto it = table.find(host);
            if (it == table.end())
                return fail(ErrorCode::NotFound, "cannot resolve '" + host + "'");
            std::vector<IpAddress> out;
            for (const auto &a : it->second)
                out.push_back(*parseIpLiteral(a));
            return out;
        };
    }
};

TEST(EgressPolicy, ParsesEveryIpv4Spelling)
{
    const IpAddress metadata = IpAddress::fromV4(0xa9fea9fe);
    for (const char *s : {"169.254.169.254", "2852039166", "0xa9fea9fe", "0xA9FEA9FE", "0251.0376.0251.0376",
                          "169.254.43518", "169.16689662", "0xa9.0xfe.0xa9.0xfe", "0251.254.0xa9.254",
                          "::ffff:169.254.169.254", "::ffff:a9fe:a9fe", "0:0:0:0:0:ffff:a9fe:a9fe"}) {
        std::string error;
        const std::string host = normalizeHost(s, &error);
        ASSERT_FALSE(host.empty()) << s << ": " << error;
        auto ip = parseIpLiteral(host);
        ASSERT_TRUE(ip) << s;
        EXPECT_EQ(*ip, metadata) << s << " parsed as " << ip->toString();
    }
    EXPECT_EQ(parseIpLiteral("127.1"), IpAddress::fromV4(0x7f000001));
    EXPECT_EQ(parseIpLiteral("0"), IpAddress::fromV4(0));
    EXPECT_FALSE(parseIpLiteral("256.1.1.1"));
    EXPECT_FALSE(parseIpLiteral("1.2.3.4.5"));
    EXPECT_FALSE(parseIpLiteral("08.1.1.1"));   // 8 is not an octal digit
    EXPECT_FALSE(parseIpLiteral("1.2.65536"));
    EXPECT_FALSE(parseIpLiteral("example.com"));
    EXPECT_FALSE(parseIpLiteral("cafe.be"));
}

TEST(EgressPolicy, NormalizesHosts)
{
    std::string error;
    EXPECT_EQ(normalizeHost("Example.COM.", &error), "example.com");
    EXPECT_EQ(normalizeHost("169.254.169.254..", &error), "169.254.169.254");
    EXPECT_EQ(normalizeHost("[FD00:EC2::254]", &error), "fd00:ec2::254");
    EXPECT_EQ(normalizeHost("exa mple.com", &error), "");
    EXPECT_EQ(normalizeHost("a..b", &error), "");
    EXPECT_EQ(normalizeHost("", &error), "");
    EXPECT_EQ(normalizeHost("[1.2.3.4]", &error), "");
    EXPECT_EQ(normalizeHost("evil.com%2f@x", &error), "");
    EXPECT_EQ(normalizeHost("fe80::1%eth0", &error), "");
}

TEST(EgressPolicy, ClassifiesRanges)
{
    auto cls = [](const char *s) { return classify(*parseIpLiteral(s)); };
    EXPECT_EQ(cls("169.254.169.254"), AddressClass::Metadata);
    EXPECT_EQ(cls("fd00:ec2::254"), AddressClass::Metadata);
    EXPECT_EQ(cls("100.100.100.200"), AddressClass::Metadata);
    EXPECT_EQ(cls("127.0.0.1"), AddressClass::Loopback);
    EXPECT_EQ(cls("127.255.1.2"), AddressClass::Loopback);
    EXPECT_EQ(cls("::1"), AddressClass::Loopback);
    EXPECT_EQ(cls("0.0.0.0"), AddressClass::Unspecified);
    EXPECT_EQ(cls("0.1.2.3"), AddressClass::Unspecified);
    EXPECT_EQ(cls("::"), AddressClass::Unspecified);
    EXPECT_EQ(cls("169.254.1.1"), AddressClass::LinkLocal);
    EXPECT_EQ(cls("fe80::1"), AddressClass::LinkLocal);
    EXPECT_EQ(cls("10.0.0.1"), AddressClass::Private);
    EXPECT_EQ(cls("172.16.0.1"), AddressClass::Private);
    EXPECT_EQ(cls("172.31.255.255"), AddressClass::Private);
    EXPECT_EQ(cls("172.32.0.1"), AddressClass::Public);
    EXPECT_EQ(cls("192.168.1.1"), AddressClass::Private);
    EXPECT_EQ(cls("fec0::1"), AddressClass::Private);
    EXPECT_EQ(cls("100.64.0.1"), AddressClass::Cgnat);
    EXPECT_EQ(cls("100.127.255.255"), AddressClass::Cgnat);
    EXPECT_EQ(cls("100.128.0.1"), AddressClass::Public);
    EXPECT_EQ(cls("fc00::1"), AddressClass::UniqueLocal);
    EXPECT_EQ(cls("fdff::1"), AddressClass::UniqueLocal);
    EXPECT_EQ(cls("224.0.0.1"), AddressClass::Multicast);
    EXPECT_EQ(cls("ff02::1"), AddressClass::Multicast);
    EXPECT_EQ(cls("255.255.255.255"), AddressClass::Reserved);
    EXPECT_EQ(cls("240.0.0.1"), AddressClass::Reserved);
    EXPECT_EQ(cls("2001::1"), AddressClass::Reserved);   // Teredo
    // Addresses that embed an IPv4 address are judged by it.
    EXPECT_EQ(cls("::169.254.169.254"), AddressClass::Metadata);
    EXPECT_EQ(cls("64:ff9b::a9fe:a9fe"), AddressClass::Metadata);
    EXPECT_EQ(cls("2002:a9fe:a9fe::1"), AddressClass::Metadata);
    EXPECT_EQ(cls("2002:7f00:1::1"), AddressClass::Loopback);
    EXPECT_EQ(cls("::127.0.0.1"), AddressClass::Loopback);
    EXPECT_EQ(cls("8.8.8.8"), AddressClass::Public);
    EXPECT_EQ(cls("2606:4700::1111"), AddressClass::Public);
}

// Every spelling of the metadata address is refused, whatever the allowlist says (even a CIDR
// that covers it), and refused without asking DNS.
TEST(EgressPolicy, MetadataRefusedInEverySpelling)
{
    FakeDns dns;
    const Allowlist open = list({"169.254.0.0/16", "0.0.0.0/0", "::/0", "*.internal", "metadata.google.internal"});
    for (const char *s : {"169.254.169.254", "2852039166", "0xa9fea9fe", "0XA9FEA9FE", "0251.0376.0251.0376",
                          "169.254.43518", "::ffff:169.254.169.254", "[::ffff:169.254.169.254]", "::ffff:a9fe:a9fe",
                          "[::ffff:a9fe:a9fe]", "169.254.169.254.", "[fd00:ec2::254]", "fd00:ec2::254",
                          "FD00:EC2:0::254", "metadata.google.internal", "METADATA.GOOGLE.INTERNAL.",
                          "metadata.google.internal..", "metadata", "64:ff9b::a9fe:a9fe", "[::169.254.169.254]"}) {
        Decision d = decide(s, 80, open, dns.resolver());
        EXPECT_FALSE(d.allowed) << s;
        EXPECT_EQ(d.reason, "metadata") << s << ": " << d.detail;
    }
    EXPECT_TRUE(dns.asked.empty());
}

TEST(EgressPolicy, LoopbackAndUnspecifiedNeverAllowed)
{
    FakeDns dns;
    const Allowlist l = list({"127.0.0.0/8", "::1/128", "0.0.0.0/8", "localhost"});
    for (const char *s : {"127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "[::1]", "::ffff:127.0.0.1",
                          "[::ffff:7f00:1]", "LOCALHOST"}) {
        dns.table["localhost"] = {"127.0.0.1", "::1"};
        Decision d = decide(s, 7701, l, dns.resolver());
        EXPECT_FALSE(d.allowed) << s;
        EXPECT_EQ(d.reason, "loopback") << s;
    }
    for (const char *s : {"0.0.0.0", "0", "[::]"}) {
        Decision d = decide(s, 80, l, dns.resolver());
        EXPECT_FALSE(d.allowed) << s;
        EXPECT_EQ(d.reason, "unspecified") << s;
    }
    Decision m = decide("224.0.0.251", 5353, list({"224.0.0.0/4"}), dns.resolver());
    EXPECT_EQ(m.reason, "multicast");
}

TEST(EgressPolicy, PrivateRangesOnlyWhenNamedAsCidr)
{
    FakeDns dns;
    const Allowlist none = list({"db.corp"});
    for (auto [s, reason] : std::vector<std::pair<const char *, const char *>>{
             {"10.1.2.3", "private"}, {"012.1.2.3", "private"}, {"167838211", "private"}, {"172.16.9.9", "private"},
             {"192.168.0.10", "private"}, {"100.64.1.1", "cgnat"}, {"[fd12::1]", "unique_local"},
             {"[fe80::1]", "link_local"}, {"169.254.10.10", "link_local"}}) {
        Decision d = decide(s, 5432, none, dns.resolver());
        EXPECT_FALSE(d.allowed) << s;
        EXPECT_EQ(d.reason, reason) << s;
    }
    const Allowlist corp = list({"10.1.0.0/16", "fd12::/16", "db.corp"});
    EXPECT_TRUE(decide("10.1.2.3", 5432, corp, dns.resolver()).allowed);
    EXPECT_TRUE(decide("167838211", 5432, corp, dns.resolver()).allowed);   // the same address
    EXPECT_TRUE(decide("[fd12::1]", 443, corp, dns.resolver()).allowed);
    EXPECT_EQ(decide("10.2.0.1", 5432, corp, dns.resolver()).reason, "private");
    // A listed name that resolves into a private range needs the range listed too.
    dns.table["db.corp"] = {"10.1.0.5"};
    EXPECT_TRUE(decide("db.corp", 5432, corp, dns.resolver()).allowed);
    EXPECT_EQ(decide("db.corp", 5432, none, dns.resolver()).reason, "private");
}

TEST(EgressPolicy, NamesMustBeOnTheAllowlistBeforeDnsIsAsked)
{
    FakeDns dns;
    dns.table["pypi.org"] = {"151.101.0.223"};
    dns.table["files.pythonhosted.org"] = {"151.101.1.63"};
    dns.table["evil.com"] = {"6.6.6.6"};
    const Allowlist l = list({"pypi.org:443", "*.pythonhosted.org", "example.com"});
    EXPECT_TRUE(decide("pypi.org", 443, l, dns.resolver()).allowed);
    EXPECT_TRUE(decide("PyPI.org.", 443, l, dns.resolver()).allowed);
    EXPECT_EQ(decide("pypi.org", 80, l, dns.resolver()).reason, "not_allowlisted");
    EXPECT_TRUE(decide("files.pythonhosted.org", 443, l, dns.resolver()).allowed);
    EXPECT_EQ(decide("pythonhosted.org", 443, l, dns.resolver()).reason, "not_allowlisted");   // apex not covered
    EXPECT_EQ(decide("xpythonhosted.org", 443, l, dns.resolver()).reason, "not_allowlisted");
    EXPECT_EQ(decide("evil.com", 443, l, dns.resolver()).reason, "not_allowlisted");
    EXPECT_EQ(decide("example.com.evil.com", 443, l, dns.resolver()).reason, "not_allowlisted");
    EXPECT_EQ(decide("6.6.6.6", 443, l, dns.resolver()).reason, "not_allowlisted");   // a public literal too
    EXPECT_EQ(std::count(dns.asked.begin(), dns.asked.end(), "evil.com"), 0);
    // An allowlisted name that does not resolve.
    EXPECT_EQ(decide("example.com", 443, l, dns.resolver()).reason, "unresolvable");
}

// DNS rebinding: a listed name whose answer includes a forbidden address is refused as a whole,
// and an allowed decision carries exactly the addresses that were checked.
TEST(EgressPolicy, EveryResolvedAddressIsChecked)
{
    FakeDns dns;
    dns.table["cdn.example"] = {"93.184.216.34", "169.254.169.254"};
    dns.table["split.example"] = {"93.184.216.34", "10.0.0.5"};
    dns.table["v6.example"] = {"2606:4700::1111", "::ffff:127.0.0.1"};
    dns.table["good.example"] = {"93.184.216.34", "2606:4700::1111"};
    const Allowlist l = list({"*.example"});
    Decision a = decide("cdn.example", 443, l, dns.resolver());
    EXPECT_FALSE(a.allowed);
    EXPECT_EQ(a.reason, "metadata");
    EXPECT_EQ(a.address, "169.254.169.254");
    EXPECT_EQ(decide("split.example", 443, l, dns.resolver()).reason, "private");
    EXPECT_EQ(decide("v6.example", 443, l, dns.resolver()).reason, "loopback");
    Decision g = decide("good.example", 443, l, dns.resolver());
    ASSERT_TRUE(g.allowed);
    ASSERT_EQ(g.addresses.size(), 2u);
    EXPECT_EQ(g.addresses[0].toString(), "93.184.216.34");
    EXPECT_EQ(g.addresses[1].toString(), "2606:4700::1111");
}

Grants grants(const std::vector<std::pair<std::string, std::string>> &entries)
{
    Grants out;
    for (const auto &[entry, review] : entries) {
        auto g = Grant::parse(entry, review);
        EXPECT_TRUE(g) << (g ? "" : g.error().message);
        if (g)
            out.push_back(std::move(*g));
    }
    return out;
}

// An approved host (egress_exception review) opens a name or a public address for the command
// that carries it, and says which review did; it never opens what the tier's allowlist could not.
TEST(EgressPolicy, GrantsOpenPublicDestinationsOnlyAndNameTheirReview)
{
    FakeDns dns;
    dns.table["other.example"] = {"93.184.216.40"};
    dns.table["inside.example"] = {"10.20.0.7"};
    dns.table["corp.example"] = {"10.1.0.9"};
    dns.table["rebind.example"] = {"93.184.216.41", "169.254.169.254"};
    dns.table["allowed.example"] = {"93.184.216.42"};
    const Allowlist tier = list({"allowed.example", "10.1.0.0/16"});
    const Grants none;
    const Grants approved = grants({{"other.example", "rev-1"}, {"203.0.113.9", "rev-2"}, {"inside.example", "rev-3"},
                                    {"169.254.169.254", "rev-4"}, {"metadata.google.internal", "rev-5"},
                                    {"10.0.0.0/8", "rev-6"}, {"rebind.example:443", "rev-7"},
                                    {"corp.example", "rev-8"}, {"localhost", "rev-9"}});
    dns.table["localhost"] = {"127.0.0.1"};

    // Off the tier's allowlist: refused without the grant (and not resolved), allowed with it.
    EXPECT_EQ(decide("other.example", 443, tier, dns.resolver(), none).reason, "not_allowlisted");
    EXPECT_EQ(std::count(dns.asked.begin(), dns.asked.end(), "other.example"), 0);
    Decision d = decide("other.example", 443, tier, dns.resolver(), approved);
    ASSERT_TRUE(d.allowed) << d.detail;
    EXPECT_EQ(d.reviewId, "rev-1");
    EXPECT_EQ(d.address, "93.184.216.40");
    d = decide("203.0.113.9", 8080, tier, dns.resolver(), approved);
    ASSERT_TRUE(d.allowed) << d.detail;
    EXPECT_EQ(d.reviewId, "rev-2");
    EXPECT_EQ(decide("203.0.113.10", 8080, tier, dns.resolver(), approved).reason, "not_allowlisted");
    // What the tier allows anyway carries no review.
    d = decide("allowed.example", 443, tier, dns.resolver(), approved);
    ASSERT_TRUE(d.allowed);
    EXPECT_TRUE(d.reviewId.empty());
    // A granted port is that port only.
    EXPECT_TRUE(decide("rebind.example", 80, tier, dns.resolver(), approved).reason == "not_allowlisted");

    // Never: the metadata service in any spelling, loopback, a rebinding answer.
    for (const char *s : {"169.254.169.254", "2852039166", "0xa9fea9fe", "[::ffff:169.254.169.254]",
                          "metadata.google.internal"}) {
        d = decide(s, 80, tier, dns.resolver(), approved);
        EXPECT_FALSE(d.allowed) << s;
        EXPECT_EQ(d.reason, "metadata") << s;
        EXPECT_TRUE(d.reviewId.empty()) << s;
    }
    EXPECT_EQ(decide("localhost", 80, tier, dns.resolver(), approved).reason, "loopback");
    EXPECT_EQ(decide("rebind.example", 443, tier, dns.resolver(), approved).reason, "metadata");
    // A private range only when the tier's own allowlist names it, whatever the grants say.
    d = decide("inside.example", 80, tier, dns.resolver(), approved);
    EXPECT_EQ(d.reason, "private");
    EXPECT_NE(d.detail.find("public addresses only"), std::string::npos) << d.detail;
    EXPECT_EQ(decide("10.20.0.7", 80, tier, dns.resolver(), approved).reason, "private");
    d = decide("corp.example", 80, tier, dns.resolver(), approved);
    EXPECT_TRUE(d.allowed) << d.detail;   // 10.1.0.0/16 is the tier's
    EXPECT_EQ(d.reviewId, "rev-8");       // the name was the approval's

    // An approval that is not an allowlist entry is refused, naming its review.
    auto bad = Grant::parse("http://other.example/", "rev-10");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("rev-10"), std::string::npos) << bad.error().message;
    EXPECT_NE(bad.error().message.find("http://other.example/"), std::string::npos) << bad.error().message;
}

TEST(EgressPolicy, RefusesMalformedHostsAndPorts)
{
    FakeDns dns;
    const Allowlist l = list({"*.example", "0.0.0.0/0"});
    for (const char *s : {"", "a b.example", "x.example\r\nHost: evil", "1.2.3.4.5", "0x1g.1.1.1", "999999999999",
                          "08.0.0.1", "1.2.3.256", "[nope]", "fe80::1%25eth0", "a..example", "exa%6dple.example"}) {
        Decision d = decide(s, 80, l, dns.resolver());
        EXPECT_FALSE(d.allowed) << s;
        EXPECT_EQ(d.reason, "invalid_host") << s << ": " << d.detail;
    }
    EXPECT_EQ(decide("a.example", 0, l, dns.resolver()).reason, "invalid_port");
    EXPECT_EQ(decide("a.example", 65536, l, dns.resolver()).reason, "invalid_port");
    EXPECT_TRUE(dns.asked.empty());
}

TEST(EgressPolicy, AllowlistEntriesAreValidated)
{
    EXPECT_TRUE(Allowlist::parse({"example.com", "example.com:443", "*.example.org", "*.example.org:8443", "10.0.0.0/8",
                                  "fd00::/8", "203.0.113.5", "203.0.113.5:8080", "[2001:db8::1]:443", "2001:db8::2"}));
    for (const char *bad : {"", "10.0.0.0/33", "10.0.0.0/x", "0xa9fea9fe/32", "example.com:0", "example.com:99999",
                            "example.com:http", "*.10.0.0.1", "exa mple.com", "2852039166", "[::1"}) {
        auto r = Allowlist::parse({bad});
        ASSERT_FALSE(r) << bad;
        EXPECT_NE(r.error().message.find("allowlist entry"), std::string::npos) << r.error().message;
        EXPECT_NE(r.error().message.find("CIDR"), std::string::npos) << r.error().message;
    }
    const Allowlist l = list({"203.0.113.5:8080", "198.51.100.0/24"});
    FakeDns dns;
    EXPECT_TRUE(decide("203.0.113.5", 8080, l, dns.resolver()).allowed);
    EXPECT_EQ(decide("203.0.113.5", 80, l, dns.resolver()).reason, "not_allowlisted");
    EXPECT_TRUE(decide("198.51.100.77", 80, l, dns.resolver()).allowed);
    EXPECT_TRUE(decide("3325256781", 80, l, dns.resolver()).allowed);   // 198.51.100.77
}

} // namespace
} // namespace paddock::pool::egress
