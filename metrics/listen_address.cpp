#include "metrics/listen_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>

namespace paddock::metrics {

Result<ListenAddress> parseListenAddress(std::string_view listen, std::string_view setting)
{
    const std::string example = " (for example \"127.0.0.1:9464\", \"0.0.0.0:9464\" or \"[::1]:9464\")";
    auto bad = [&](const std::string &why) {
        return fail(ErrorCode::InvalidArgument, std::string(setting) + " \"" + std::string(listen) + "\" " + why + example);
    };
    std::string_view host;
    std::string_view port;
    if (listen.starts_with('[')) {
        const auto close = listen.find("]:");
        if (close == std::string_view::npos)
            return bad("opens '[' without closing it with \"]:PORT\"");
        host = listen.substr(1, close - 1);
        port = listen.substr(close + 2);
    } else {
        const auto colon = listen.rfind(':');
        if (colon == std::string_view::npos)
            return bad("is not HOST:PORT");
        host = listen.substr(0, colon);
        port = listen.substr(colon + 1);
        if (host.find(':') != std::string_view::npos)
            return bad("has an IPv6 address without brackets: write [ADDRESS]:PORT");
    }
    if (host.empty())
        return bad("names no host: write 0.0.0.0 for every interface, 127.0.0.1 for this host only");
    ListenAddress out{std::string(host), 0};
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || out.port < 0 || out.port > 65535)
        return bad("has no port from 0 to 65535 after the last ':'");
    return out;
}

bool isLoopbackHost(std::string_view host)
{
    std::string text(host);
    for (auto &c : text)
        c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (text == "localhost")
        return true;
    in_addr v4{};
    if (::inet_pton(AF_INET, text.c_str(), &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    in6_addr v6{};
    if (::inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&v6))
            return true;
        return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
    }
    return false;
}

} // namespace paddock::metrics
