#include "pool/egress/proxy_request.h"

#include <cctype>

namespace paddock::pool::egress {
namespace {

std::string lower(std::string s)
{
    for (auto &c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

} // namespace

bool splitAuthority(const std::string &authority, int defaultPort, std::string *host, int *port)
{
    std::string h = authority;
    std::string p;
    if (!h.empty() && h.front() == '[') {
        const size_t close = h.find(']');
        if (close == std::string::npos)
            return false;
        p = h.substr(close + 1);
        h = h.substr(0, close + 1);
        if (!p.empty() && p.front() != ':')
            return false;
        if (!p.empty())
            p = p.substr(1);
    } else if (const size_t colon = h.rfind(':'); colon != std::string::npos) {
        if (h.find(':') != colon)
            return false;   // an IPv6 address without brackets
        p = h.substr(colon + 1);
        h = h.substr(0, colon);
    }
    *host = h;
    if (p.empty()) {
        *port = defaultPort;
        return defaultPort > 0;
    }
    if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos)
        return false;
    *port = std::stoi(p);
    return *port > 0 && *port <= 65535;
}

ProxyRequest parseProxyRequest(const std::string &head)
{
    ProxyRequest r;
    const size_t lineEnd = head.find("\r\n");
    const std::string line = head.substr(0, lineEnd);
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
    if (sp1 == std::string::npos || sp2 == std::string::npos || line.find(' ', sp2 + 1) != std::string::npos) {
        r.error = "malformed request line";
        return r;
    }
    r.method = line.substr(0, sp1);
    const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    const std::string version = line.substr(sp2 + 1);
    if (version.rfind("HTTP/1.", 0) != 0) {
        r.error = "only HTTP/1.x proxy requests are understood";
        return r;
    }
    if (r.method == "CONNECT") {
        r.tunnel = true;
        if (!splitAuthority(target, 0, &r.host, &r.port))
            r.error = "CONNECT needs host:port, got '" + target + "'";
        return r;
    }
    if (lower(target.substr(0, 7)) != "http://") {
        r.error = lower(target.substr(0, 8)) == "https://"
                      ? "an https:// URL goes through CONNECT (set https_proxy; curl and most clients do this)"
                      : "a proxy request needs an absolute http:// URL or CONNECT host:port";
        return r;
    }
    std::string rest = target.substr(7);
    const size_t pathStart = rest.find_first_of("/?#");
    std::string authority = rest.substr(0, pathStart);
    std::string path = pathStart == std::string::npos ? "/" : rest.substr(pathStart);
    if (path.front() != '/')
        path = "/" + path;
    if (const size_t hash = path.find('#'); hash != std::string::npos)
        path = path.substr(0, hash);
    if (const size_t at = authority.rfind('@'); at != std::string::npos)
        authority = authority.substr(at + 1);   // userinfo is not part of the destination
    if (authority.find('\\') != std::string::npos || !splitAuthority(authority, 80, &r.host, &r.port)) {
        r.error = "malformed host in '" + target + "'";
        return r;
    }
    std::string out = r.method + " " + path + " " + version + "\r\n";
    size_t pos = lineEnd + 2;
    while (pos < head.size()) {
        const size_t end = head.find("\r\n", pos);
        if (end == std::string::npos || end == pos)
            break;
        const std::string header = head.substr(pos, end - pos);
        const std::string name = lower(header.substr(0, header.find(':')));
        if (name != "proxy-connection" && name != "proxy-authorization" && name != "connection" && name != "keep-alive")
            out += header + "\r\n";
        pos = end + 2;
    }
    out += "Connection: close\r\n\r\n";
    r.forwardHead = std::move(out);
    return r;
}

} // namespace paddock::pool::egress
