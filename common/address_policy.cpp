#include "common/address_policy.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace paddock::pool::egress {
namespace {

// Names of cloud metadata services; refused even when an allowlist entry would match them.
constexpr const char *kMetadataNames[] = {"metadata.google.internal", "metadata.goog", "metadata",
                                          "instance-data", "instance-data.ec2.internal"};

bool inV4(uint32_t a, uint32_t net, int prefix)
{
    const uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
    return (a & mask) == (net & mask);
}

uint32_t v4At(const std::array<uint8_t, 16> &b, size_t offset)
{
    return (uint32_t{b[offset]} << 24) | (uint32_t{b[offset + 1]} << 16) | (uint32_t{b[offset + 2]} << 8) |
           uint32_t{b[offset + 3]};
}

// One part of an inet_aton-style literal: 0x.. hex, 0.. octal, else decimal. nullopt if invalid.
std::optional<uint64_t> parsePart(std::string_view s)
{
    if (s.empty())
        return std::nullopt;
    int base = 10;
    if (s.size() >= 2 && s[0] == '0' && s[1] == 'x') {
        base = 16;
        s.remove_prefix(2);
        if (s.empty())
            return 0;   // "0x" is 0 to inet_aton
    } else if (s.size() >= 2 && s[0] == '0') {
        base = 8;
        s.remove_prefix(1);
    }
    uint64_t v = 0;
    for (char c : s) {
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else
            return std::nullopt;
        if (d >= base)
            return std::nullopt;
        v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
        if (v > 0xffffffffull)
            return std::nullopt;
    }
    return v;
}

std::optional<IpAddress> parseV4Loose(std::string_view s)
{
    std::vector<uint64_t> parts;
    size_t start = 0;
    while (true) {
        size_t dot = s.find('.', start);
        auto part = parsePart(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
        if (!part)
            return std::nullopt;
        parts.push_back(*part);
        if (dot == std::string_view::npos)
            break;
        start = dot + 1;
        if (parts.size() == 4)
            return std::nullopt;
    }
    // a, a.b (b: 24 bits), a.b.c (c: 16 bits), a.b.c.d: the last part fills the remaining bytes.
    const size_t n = parts.size();
    uint32_t value = 0;
    for (size_t i = 0; i + 1 < n; ++i) {
        if (parts[i] > 255)
            return std::nullopt;
        value |= static_cast<uint32_t>(parts[i]) << (24 - 8 * i);
    }
    const int lastBits = 32 - 8 * static_cast<int>(n - 1);
    if (lastBits < 32 && parts[n - 1] >= (uint64_t{1} << lastBits))
        return std::nullopt;
    value |= static_cast<uint32_t>(parts[n - 1]);
    return IpAddress::fromV4(value);
}

std::optional<IpAddress> parseV6(std::string_view s)
{
    if (s.find('%') != std::string_view::npos || s.size() > 64)
        return std::nullopt;   // zone ids: refused, a sandbox has no business with link scopes
    in6_addr a6{};
    if (::inet_pton(AF_INET6, std::string(s).c_str(), &a6) != 1)
        return std::nullopt;
    IpAddress a;
    a.v6 = true;
    std::memcpy(a.bytes.data(), &a6, 16);
    // IPv4-mapped: the same destination as the IPv4 address.
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(a.bytes.data(), mapped, 12) == 0)
        return IpAddress::fromV4(v4At(a.bytes, 12));
    return a;
}

bool isNameChar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

// "host:port" or "[v6]:port" or "host" -> host, port (0 if none). false when the port is bad.
bool splitHostPort(std::string_view s, std::string *host, int *port)
{
    *port = 0;
    std::string_view h = s;
    std::string_view p;
    if (!s.empty() && s.front() == '[') {
        const size_t close = s.find(']');
        if (close == std::string_view::npos)
            return false;
        h = s.substr(0, close + 1);
        std::string_view rest = s.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':')
                return false;
            p = rest.substr(1);
            if (p.empty())
                return false;
        }
    } else if (std::count(s.begin(), s.end(), ':') == 1) {
        const size_t colon = s.find(':');
        h = s.substr(0, colon);
        p = s.substr(colon + 1);
        if (p.empty())
            return false;
    }
    if (!p.empty()) {
        int v = 0;
        for (char c : p) {
            if (c < '0' || c > '9')
                return false;
            v = v * 10 + (c - '0');
            if (v > 65535)
                return false;
        }
        if (v == 0)
            return false;
        *port = v;
    }
    *host = std::string(h);
    return true;
}

bool isMetadataName(const std::string &host)
{
    for (const char *name : kMetadataNames)
        if (host == name)
            return true;
    return false;
}

} // namespace

IpAddress IpAddress::fromV4(uint32_t hostOrder)
{
    IpAddress a;
    a.bytes[0] = static_cast<uint8_t>(hostOrder >> 24);
    a.bytes[1] = static_cast<uint8_t>(hostOrder >> 16);
    a.bytes[2] = static_cast<uint8_t>(hostOrder >> 8);
    a.bytes[3] = static_cast<uint8_t>(hostOrder);
    return a;
}

uint32_t IpAddress::v4() const { return v4At(bytes, 0); }

std::string IpAddress::toString() const
{
    char buf[INET6_ADDRSTRLEN] = {};
    ::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
    return buf;
}

const char *addressClassName(AddressClass c)
{
    switch (c) {
    case AddressClass::Public: return "public";
    case AddressClass::Loopback: return "loopback";
    case AddressClass::Unspecified: return "unspecified";
    case AddressClass::Multicast: return "multicast";
    case AddressClass::Metadata: return "metadata";
    case AddressClass::LinkLocal: return "link_local";
    case AddressClass::Private: return "private";
    case AddressClass::Cgnat: return "cgnat";
    case AddressClass::UniqueLocal: return "unique_local";
    case AddressClass::Reserved: return "reserved";
    }
    return "reserved";
}

bool neverAllowed(AddressClass c)
{
    return c == AddressClass::Loopback || c == AddressClass::Unspecified || c == AddressClass::Multicast ||
           c == AddressClass::Metadata;
}

AddressClass classify(const IpAddress &address)
{
    if (!address.v6) {
        const uint32_t a = address.v4();
        // Metadata services: AWS/GCP/Azure, Alibaba, Oracle.
        if (a == 0xa9fea9fe || a == 0x646464c8 || a == 0xc00000c0)
            return AddressClass::Metadata;
        if (inV4(a, 0x00000000, 8))
            return AddressClass::Unspecified;
        if (inV4(a, 0x7f000000, 8))
            return AddressClass::Loopback;
        if (inV4(a, 0xa9fe0000, 16))
            return AddressClass::LinkLocal;
        if (inV4(a, 0x0a000000, 8) || inV4(a, 0xac100000, 12) || inV4(a, 0xc0a80000, 16))
            return AddressClass::Private;
        if (inV4(a, 0x64400000, 10))
            return AddressClass::Cgnat;
        if (inV4(a, 0xe0000000, 4))
            return AddressClass::Multicast;
        if (inV4(a, 0xf0000000, 4) || inV4(a, 0xc0000000, 24) || inV4(a, 0xc6120000, 15))
            return AddressClass::Reserved;
        return AddressClass::Public;
    }
    const auto &b = address.bytes;
    auto prefixIs = [&](std::initializer_list<uint8_t> p) { return std::equal(p.begin(), p.end(), b.begin()); };
    bool zero12 = std::all_of(b.begin(), b.begin() + 12, [](uint8_t x) { return x == 0; });
    if (zero12) {
        const uint32_t low = v4At(b, 12);
        if (low == 0)
            return AddressClass::Unspecified;
        if (low == 1)
            return AddressClass::Loopback;
        return classify(IpAddress::fromV4(low));   // IPv4-compatible ::a.b.c.d
    }
    static const IpAddress awsMetadata = [] {
        IpAddress m;
        m.v6 = true;
        in6_addr a6{};
        ::inet_pton(AF_INET6, "fd00:ec2::254", &a6);
        std::memcpy(m.bytes.data(), &a6, 16);
        return m;
    }();
    if (address == awsMetadata)
        return AddressClass::Metadata;
    if (prefixIs({0x00, 0x64, 0xff, 0x9b}) && std::all_of(b.begin() + 4, b.begin() + 12, [](uint8_t x) { return x == 0; }))
        return classify(IpAddress::fromV4(v4At(b, 12)));   // NAT64 64:ff9b::/96
    if (prefixIs({0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}))
        return AddressClass::Private;                     // local-use NAT64 64:ff9b:1::/48
    if (prefixIs({0x20, 0x02}))
        return classify(IpAddress::fromV4(v4At(b, 2)));    // 6to4 2002:V4ADDR::/48
    if (prefixIs({0x20, 0x01, 0x00, 0x00}))
        return AddressClass::Reserved;                     // Teredo: an IPv4 address hidden inside
    if (prefixIs({0x01, 0x00, 0, 0, 0, 0, 0, 0}))
        return AddressClass::Reserved;                     // discard 100::/64
    if ((b[0] & 0xfe) == 0xfc)
        return AddressClass::UniqueLocal;
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
        return AddressClass::LinkLocal;
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
        return AddressClass::Private;                      // site-local fec0::/10
    if (b[0] == 0xff)
        return AddressClass::Multicast;
    return AddressClass::Public;
}

std::optional<IpAddress> parseIpLiteral(std::string_view host)
{
    if (host.find(':') != std::string_view::npos)
        return parseV6(host);
    if (!looksNumeric(host))
        return std::nullopt;   // inet_aton's forms all end in a number
    return parseV4Loose(host);
}

bool looksNumeric(std::string_view host)
{
    if (host.empty())
        return false;
    const size_t dot = host.rfind('.');
    const char first = dot == std::string_view::npos ? host.front() : (dot + 1 < host.size() ? host[dot + 1] : '\0');
    return first >= '0' && first <= '9';
}

std::string normalizeHost(std::string_view raw, std::string *error)
{
    std::string h;
    h.reserve(raw.size());
    for (char c : raw)
        h.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    if (h.size() >= 2 && h.front() == '[' && h.back() == ']') {
        h = h.substr(1, h.size() - 2);
        if (h.find(':') == std::string::npos) {
            *error = "brackets are only for IPv6 addresses";
            return {};
        }
    }
    if (h.find(':') != std::string::npos) {
        if (h.find_first_not_of("0123456789abcdef:.") != std::string::npos) {
            *error = "not a valid IPv6 address";
            return {};
        }
        return h;
    }
    while (!h.empty() && h.back() == '.')
        h.pop_back();
    if (h.empty()) {
        *error = "empty host";
        return {};
    }
    if (h.size() > 253) {
        *error = "host name longer than 253 characters";
        return {};
    }
    if (!std::all_of(h.begin(), h.end(), isNameChar)) {
        *error = "host contains characters that are not allowed in a DNS name";
        return {};
    }
    if (h.front() == '.' || h.find("..") != std::string::npos) {
        *error = "host has an empty label";
        return {};
    }
    return h;
}

bool Cidr::contains(const IpAddress &a) const
{
    if (a.v6 != base.v6)
        return false;
    const int bits = base.v6 ? 128 : 32;
    const int p = std::min(prefix, bits);
    for (int i = 0; i < p / 8; ++i)
        if (a.bytes[static_cast<size_t>(i)] != base.bytes[static_cast<size_t>(i)])
            return false;
    if (p % 8) {
        const uint8_t mask = static_cast<uint8_t>(0xff << (8 - p % 8));
        const auto i = static_cast<size_t>(p / 8);
        if ((a.bytes[i] & mask) != (base.bytes[i] & mask))
            return false;
    }
    return true;
}

Result<Allowlist> Allowlist::parse(const std::vector<std::string> &entries)
{
    Allowlist list;
    for (const auto &raw : entries) {
        auto bad = [&](const std::string &why) {
            return fail(ErrorCode::InvalidArgument,
                        "allowlist entry '" + raw + "': " + why +
                            "; use \"host\", \"host:port\", \"*.domain\", an address, or a CIDR range like \"10.1.0.0/16\"");
        };
        std::string s;
        for (char c : raw)
            s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
        if (s.empty())
            return bad("empty");
        if (const size_t slash = s.find('/'); slash != std::string::npos) {
            const std::string addr = s.substr(0, slash);
            const std::string bits = s.substr(slash + 1);
            Cidr cidr;
            in6_addr a6{};
            in_addr a4{};
            if (::inet_pton(AF_INET, addr.c_str(), &a4) == 1) {
                std::memcpy(cidr.base.bytes.data(), &a4, 4);
            } else if (::inet_pton(AF_INET6, addr.c_str(), &a6) == 1) {
                cidr.base.v6 = true;
                std::memcpy(cidr.base.bytes.data(), &a6, 16);
            } else {
                return bad("'" + addr + "' is not an IPv4 or IPv6 address in standard notation");
            }
            if (bits.empty() || bits.size() > 3 || bits.find_first_not_of("0123456789") != std::string::npos)
                return bad("the prefix length must be a number");
            cidr.prefix = std::stoi(bits);
            if (cidr.prefix > (cidr.base.v6 ? 128 : 32))
                return bad("prefix length " + bits + " is too long");
            list.m_ranges.push_back({cidr, 0});
            continue;
        }
        std::string host;
        int port = 0;
        if (!splitHostPort(s, &host, &port))
            return bad("the port must be a number from 1 to 65535");
        bool suffix = false;
        if (host.rfind("*.", 0) == 0) {
            suffix = true;
            host = host.substr(2);
        }
        std::string error;
        std::string normalized = normalizeHost(host, &error);
        if (normalized.empty())
            return bad(error);
        if (auto ip = parseIpLiteral(normalized)) {
            if (suffix)
                return bad("a wildcard cannot apply to an address");
            // Only standard notation in the config: what an operator writes is what is meant.
            in6_addr a6{};
            in_addr a4{};
            if (::inet_pton(AF_INET, normalized.c_str(), &a4) != 1 && ::inet_pton(AF_INET6, normalized.c_str(), &a6) != 1)
                return bad("write addresses in standard notation (like 203.0.113.5)");
            list.m_ranges.push_back({Cidr{*ip, ip->v6 ? 128 : 32}, port});
            continue;
        }
        if (looksNumeric(normalized))
            return bad("'" + normalized + "' is neither a host name nor a valid address");
        list.m_hosts.push_back({normalized, suffix, port});
    }
    return list;
}

bool Allowlist::allowsName(const std::string &host, int port) const
{
    for (const auto &e : m_hosts) {
        if (e.port != 0 && e.port != port)
            continue;
        if (!e.suffix && host == e.host)
            return true;
        if (e.suffix && host.size() > e.host.size() + 1 && host.ends_with(e.host) &&
            host[host.size() - e.host.size() - 1] == '.')
            return true;
    }
    return false;
}

bool Allowlist::inRange(const IpAddress &address, int port) const
{
    for (const auto &r : m_ranges)
        if ((r.port == 0 || r.port == port) && r.cidr.contains(address))
            return true;
    return false;
}

Result<std::vector<IpAddress>> systemResolve(const std::string &host, int port)
{
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    addrinfo *res = nullptr;
    const std::string service = std::to_string(port);
    int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (rc != 0)
        return fail(ErrorCode::NotFound, std::string("cannot resolve '") + host + "': " + ::gai_strerror(rc));
    std::vector<IpAddress> out;
    for (addrinfo *ai = res; ai; ai = ai->ai_next) {
        IpAddress a;
        if (ai->ai_family == AF_INET) {
            const auto *sin = reinterpret_cast<const sockaddr_in *>(ai->ai_addr);
            std::memcpy(a.bytes.data(), &sin->sin_addr, 4);
        } else if (ai->ai_family == AF_INET6) {
            const auto *sin6 = reinterpret_cast<const sockaddr_in6 *>(ai->ai_addr);
            a.v6 = true;
            std::memcpy(a.bytes.data(), &sin6->sin6_addr, 16);
            if (auto v4 = parseIpLiteral(a.toString()); v4 && !v4->v6)
                a = *v4;   // mapped
        } else {
            continue;
        }
        if (std::find(out.begin(), out.end(), a) == out.end())
            out.push_back(a);
    }
    ::freeaddrinfo(res);
    if (out.empty())
        return fail(ErrorCode::NotFound, "'" + host + "' has no IPv4 or IPv6 address");
    return out;
}

Result<Grant> Grant::parse(const std::string &entry, const std::string &reviewId)
{
    auto list = Allowlist::parse({entry});
    if (!list)
        return fail(ErrorCode::InvalidArgument, reviewId.empty() ? list.error().message
                                                                 : "the host approved in review " + reviewId +
                                                                       " is not usable: " + list.error().message);
    return Grant{std::move(*list), entry, reviewId};
}

Decision decide(std::string_view rawHost, int port, const Allowlist &allowlist, const Resolver &resolve,
                const Grants &grants)
{
    Decision d;
    std::string error;
    d.host = normalizeHost(rawHost, &error);
    auto refuse = [&](std::string reason, std::string detail) {
        d.allowed = false;
        d.reason = std::move(reason);
        d.detail = std::move(detail);
        d.addresses.clear();
        d.reviewId.clear();
        return d;
    };
    // The review whose grant opens what the tier's allowlist does not (first match wins).
    auto grantFor = [&](auto &&matches) -> const Grant * {
        for (const auto &g : grants)
            if (matches(g.allow))
                return &g;
        return nullptr;
    };
    if (d.host.empty()) {
        d.host = std::string(rawHost);
        return refuse("invalid_host", "'" + std::string(rawHost) + "' is not a valid host: " + error);
    }
    if (port < 1 || port > 65535)
        return refuse("invalid_port", "port " + std::to_string(port) + " is out of range");
    if (isMetadataName(d.host))
        return refuse("metadata", "'" + d.host + "' is a cloud metadata service, never reachable from a sandbox");

    std::vector<IpAddress> addresses;
    const auto literal = parseIpLiteral(d.host);
    if (literal) {
        addresses.push_back(*literal);
    } else if (looksNumeric(d.host)) {
        return refuse("invalid_host", "'" + d.host + "' is neither a host name nor a valid address");
    } else {
        if (!allowlist.allowsName(d.host, port)) {
            const Grant *g = grantFor([&](const Allowlist &a) { return a.allowsName(d.host, port); });
            if (!g)
                return refuse("not_allowlisted", d.host + ":" + std::to_string(port) + " is not on this tier's allowlist");
            d.reviewId = g->reviewId;
        }
        auto resolved = resolve(d.host, port);
        if (!resolved)
            return refuse("unresolvable", resolved.error().message);
        if (resolved->empty())
            return refuse("unresolvable", "'" + d.host + "' has no address");
        addresses = std::move(*resolved);
    }
    for (const auto &a : addresses) {
        const AddressClass c = classify(a);
        d.address = a.toString();
        if (neverAllowed(c))
            return refuse(addressClassName(c), d.address + " is a " + addressClassName(c) + " address, never reachable from a sandbox");
        if (c != AddressClass::Public && !allowlist.inRange(a, port))
            return refuse(addressClassName(c), d.address + " is a " + std::string(addressClassName(c)) +
                                                   " address and no CIDR range of this tier's allowlist names it" +
                                                   (grants.empty() ? "" : " (an approved host opens public addresses only)"));
        if (c == AddressClass::Public && literal && !allowlist.inRange(a, port)) {
            const Grant *g = grantFor([&](const Allowlist &list) { return list.inRange(a, port); });
            if (!g)
                return refuse("not_allowlisted", d.address + ":" + std::to_string(port) + " is not on this tier's allowlist");
            d.reviewId = g->reviewId;
        }
    }
    d.allowed = true;
    d.addresses = std::move(addresses);
    d.address = d.addresses.front().toString();
    return d;
}

} // namespace paddock::pool::egress
