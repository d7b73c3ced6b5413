#pragma once
// The head of a request to the egress proxy, parsed: CONNECT host:port (a tunnel), or a plain
// HTTP request with an absolute http:// URL, rewritten to origin form for the upstream with the
// proxy's own headers dropped and "Connection: close". Everything else is an error the proxy
// answers with 400 and the reason. Kept apart from the proxy's event loop so that it can be
// fuzzed on its own (tests/fuzz/proxy_request_fuzz.cpp): it reads what a sandbox sends.
//
// Threads: pure functions.

#include <string>

namespace paddock::pool::egress {

struct ProxyRequest {
    std::string method;
    std::string host;          // raw, as sent (brackets kept)
    int port = 0;
    bool tunnel = false;       // CONNECT
    std::string forwardHead;   // plain HTTP: the head to send upstream (origin form, Connection: close)
    std::string error;         // set: answer 400 with this
};

// "host:port" / "[v6]:port" / "host" (defaultPort) -> host, port. false on a malformed port.
bool splitAuthority(const std::string &authority, int defaultPort, std::string *host, int *port);

// head: the request line and headers, up to and including the blank line ("\r\n\r\n").
ProxyRequest parseProxyRequest(const std::string &head);

} // namespace paddock::pool::egress
