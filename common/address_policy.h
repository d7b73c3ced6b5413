#pragma once
// The egress proxy's address policy, as pure functions: which destinations a sandbox of an
// allowlist tier may reach. No I/O here except through the Resolver the caller passes, so every
// case is unit-tested (tests/unit/pool/egress_policy_test.cpp).
//
// The rules, in order (decide()):
//  1. The host is normalized: brackets around IPv6 dropped, lowercased, trailing dots dropped.
//     Anything that is not a plain DNS name or an IP literal is refused (invalid_host).
//  2. Metadata names (metadata.google.internal, ...) are refused whatever the allowlist says.
//  3. An IP literal is parsed in every spelling the C library's resolver would accept (inet_aton
//     forms: decimal 2852039166, hex 0xa9fea9fe, octal 0251.0376.0251.0376, short forms
//     169.254.43518; IPv6, IPv4-mapped ::ffff:169.254.169.254 and ::ffff:a9fe:a9fe). A literal
//     is allowed only inside a range of the allowlist (CIDR or single address).
//  4. A name must match a host entry of the allowlist (host, host:port, *.domain); only then is
//     it resolved (so names off the allowlist never reach DNS).
//  5. Every resolved address is checked: loopback, unspecified, multicast and metadata addresses
//     are refused always; link-local, private (RFC 1918), CGNAT, IPv6 ULA/site-local and
//     reserved ranges only unless a CIDR entry of the allowlist names them. The caller connects
//     to the checked addresses, never to a new resolution (DNS rebinding).
//  6. Grants (hosts an approved egress_exception review adds for one command) extend only steps 3
//     and 4 for public addresses: a granted name may be resolved, and a public address it resolves
//     to (or a granted public literal) is allowed. Forbidden classes stay refused, and a private,
//     link-local, CGNAT or reserved address still needs a CIDR of the tier's own allowlist, so an
//     approval never opens the metadata service or an internal range.
//
// Threads: plain values and pure functions; an Allowlist is immutable after parse and may be
// shared between threads.

#include "common/result.h"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct sockaddr_storage;

namespace paddock::pool::egress {

struct IpAddress {
    bool v6 = false;
    std::array<uint8_t, 16> bytes{};   // IPv4 in the first 4 bytes

    static IpAddress fromV4(uint32_t hostOrder);
    uint32_t v4() const;   // host order; only for !v6
    std::string toString() const;
    bool operator==(const IpAddress &) const = default;
};

enum class AddressClass {
    Public,
    Loopback,
    Unspecified,
    Multicast,
    Metadata,
    LinkLocal,
    Private,       // RFC 1918, IPv6 site-local
    Cgnat,         // 100.64.0.0/10
    UniqueLocal,   // IPv6 fc00::/7
    Reserved,      // 240/4, broadcast, 192.0.0/24, 198.18/15, Teredo, discard, ...
};

// The reason code recorded for a refused address of this class ("loopback", "link_local", ...).
const char *addressClassName(AddressClass c);
AddressClass classify(const IpAddress &address);
// Classes no allowlist entry can open.
bool neverAllowed(AddressClass c);

// An IP literal in any spelling (see above), after normalizeHost. IPv4-mapped IPv6 addresses
// come back as IPv4. nullopt: not an IP literal.
std::optional<IpAddress> parseIpLiteral(std::string_view host);
// True when the host looks like an IPv4 literal (last label starts with a digit) but does not
// parse as one: refused rather than handed to DNS.
bool looksNumeric(std::string_view host);
// Lowercase, brackets and trailing dots dropped; error (empty result) for characters outside
// [a-z0-9._-] in a name, empty labels, or over-long names.
std::string normalizeHost(std::string_view host, std::string *error);

struct Cidr {
    IpAddress base;
    int prefix = 0;
    bool contains(const IpAddress &a) const;
};

// A tier's allowlist, parsed from pool.toml's `allowlist` strings.
class Allowlist {
public:
    // Entries: "host", "host:port", "*.domain", "*.domain:port", "10.1.0.0/16", "fd00::/8",
    // "203.0.113.5", "203.0.113.5:8080", "[2001:db8::1]:443". An invalid entry is an
    // InvalidArgument naming it and the forms that are accepted.
    static Result<Allowlist> parse(const std::vector<std::string> &entries);

    bool allowsName(const std::string &normalizedHost, int port) const;
    bool inRange(const IpAddress &address, int port) const;
    bool empty() const { return m_hosts.empty() && m_ranges.empty(); }

private:
    struct HostEntry {
        std::string host;   // without "*." for suffix entries
        bool suffix = false;
        int port = 0;       // 0: any
    };
    struct RangeEntry {
        Cidr cidr;
        int port = 0;
    };
    std::vector<HostEntry> m_hosts;
    std::vector<RangeEntry> m_ranges;
};

// One host an approved egress_exception review adds to a sandbox's allowlist for a command.
struct Grant {
    Allowlist allow;        // the one entry, parsed like an allowlist entry
    std::string entry;      // as approved
    std::string reviewId;   // the review that approved it

    // An entry in any allowlist form ("other.example", "other.example:443", "*.example.org",
    // "203.0.113.9"); an invalid one is an InvalidArgument naming it and its review (if any).
    static Result<Grant> parse(const std::string &entry, const std::string &reviewId);
};
using Grants = std::vector<Grant>;

using Resolver = std::function<Result<std::vector<IpAddress>>(const std::string &host, int port)>;
// getaddrinfo on this host (blocking).
Result<std::vector<IpAddress>> systemResolve(const std::string &host, int port);

struct Decision {
    bool allowed = false;
    std::string host;                  // normalized (the raw one if it did not normalize)
    std::string reason;                // refused: invalid_host, invalid_port, metadata, not_allowlisted,
                                       // unresolvable, or an address class name
    std::string detail;                // a sentence for people
    std::string address;               // the refused address, or the first one to connect to
    std::vector<IpAddress> addresses;  // allowed: every resolved address, each checked
    std::string reviewId;              // allowed by a grant, not by the tier's allowlist: its review
};

Decision decide(std::string_view rawHost, int port, const Allowlist &allowlist, const Resolver &resolve,
                const Grants &grants = {});

} // namespace paddock::pool::egress
