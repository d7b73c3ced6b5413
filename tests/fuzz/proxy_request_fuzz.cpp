// The egress proxy's request head parser (pool/egress/proxy_request.h): what a sandbox sends the
// proxy, plain HTTP or CONNECT. A parsed destination must be one the policy can judge (a host and
// a port in range), and a request that was not refused is forwarded with Connection: close.

#include "pool/egress/proxy_request.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    // The proxy parses a head once it holds "\r\n\r\n"; give it one the same way.
    std::string head(reinterpret_cast<const char *>(data), size);
    head += "\r\n\r\n";
    const auto request = paddock::pool::egress::parseProxyRequest(head);
    if (request.error.empty()) {
        if (request.port < 1 || request.port > 65535)
            std::abort();   // the policy would judge a port that cannot exist
        if (!request.tunnel && request.forwardHead.find("Connection: close\r\n\r\n") == std::string::npos)
            std::abort();
    }
    std::string host;
    int port = 0;
    if (paddock::pool::egress::splitAuthority(std::string(reinterpret_cast<const char *>(data), size), 443, &host, &port) &&
        (port < 1 || port > 65535))
        std::abort();
    return 0;
}
