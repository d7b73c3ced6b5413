#include "cli/address.h"

#include <algorithm>
#include <charconv>

namespace paddock::cli {
namespace {

constexpr std::string_view kUnixPrefix = "unix:";

bool validPort(std::string_view text)
{
    int port = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    return ec == std::errc() && end == text.data() + text.size() && port > 0 && port < 65536;
}

Error badAddress(std::string_view text, std::string_view why)
{
    return Error{ErrorCode::InvalidArgument,
                 "bad broker address '" + std::string(text) + "': " + std::string(why)
                     + "; use unix:/path/to/broker.sock, /path/to/broker.sock or host:port"};
}

} // namespace

Result<BrokerAddress> parseBrokerAddress(std::string_view text)
{
    if (text.empty())
        return std::unexpected(badAddress(text, "it is empty"));
    if (text.starts_with(kUnixPrefix)) {
        std::string_view path = text.substr(kUnixPrefix.size());
        // gRPC also spells absolute paths unix:///path; keep one leading slash.
        while (path.starts_with("//"))
            path.remove_prefix(1);
        if (path.empty())
            return std::unexpected(badAddress(text, "the socket path is missing"));
        return BrokerAddress{"unix:" + std::string(path), std::string(path)};
    }
    if (text.starts_with('/') || text.starts_with("./") || text.starts_with("../"))
        return BrokerAddress{"unix:" + std::string(text), std::string(text)};

    // host:port, with [v6]:port allowed.
    std::string_view host;
    std::string_view port;
    if (text.starts_with('[')) {
        const auto close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
            return std::unexpected(badAddress(text, "an IPv6 address needs the form [addr]:port"));
        host = text.substr(0, close + 1);
        port = text.substr(close + 2);
    } else {
        const auto colon = text.rfind(':');
        if (colon == std::string_view::npos)
            return std::unexpected(badAddress(text, "a TCP address needs a port"));
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (host.find(':') != std::string_view::npos)
            return std::unexpected(badAddress(text, "write an IPv6 address in brackets"));
    }
    if (host.empty() || host == "[]")
        return std::unexpected(badAddress(text, "the host is missing"));
    if (!validPort(port))
        return std::unexpected(badAddress(text, "the port must be a number from 1 to 65535"));
    return BrokerAddress{std::string(text), {}};
}

Result<std::vector<BrokerAddress>> parseBrokerAddresses(std::string_view text)
{
    std::vector<BrokerAddress> out;
    size_t start = 0;
    for (;;) {
        const size_t comma = text.find(',', start);
        std::string_view entry = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        while (!entry.empty() && entry.front() == ' ')
            entry.remove_prefix(1);
        while (!entry.empty() && entry.back() == ' ')
            entry.remove_suffix(1);
        if (entry.empty() && (comma != std::string_view::npos || !out.empty())) {
            return std::unexpected(Error{ErrorCode::InvalidArgument,
                                         "bad broker list '" + std::string(text) + "': entry " + std::to_string(out.size() + 1)
                                             + " is empty; separate the brokers with single commas, e.g. "
                                               "a.example:7443,b.example:7443"});
        }
        auto address = parseBrokerAddress(entry);
        if (!address)
            return std::unexpected(address.error());
        address->written = std::string(entry);
        out.push_back(std::move(*address));
        if (comma == std::string_view::npos)
            return out;
        start = comma + 1;
    }
}

std::string chooseBrokerAddress(const std::optional<std::string> &flag, const std::optional<std::string> &env,
                                const std::string &defaultSocketPath)
{
    if (flag && !flag->empty())
        return *flag;
    if (env && !env->empty())
        return *env;
    return "unix:" + defaultSocketPath;
}

} // namespace paddock::cli
