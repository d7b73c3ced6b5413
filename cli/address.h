#pragma once
// Where paddockctl finds the broker: --broker, else $PADDOCK_BROKER, else the default unix socket.
// Either may list several brokers of one team (sharing one PostgreSQL store), separated by commas:
// `--broker a.example:7443,b.example:7443` (cli/broker_endpoints.h moves between them).
//
// Threads: free functions over values; call from anywhere.

#include "common/result.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::cli {

struct BrokerAddress {
    std::string target;       // what gRPC dials: "unix:/run/user/1000/paddock/broker.sock" or "host:port"
    std::string unixPath;     // the socket path for unix targets, empty for TCP
    std::string written;      // as the user wrote it (set by parseBrokerAddresses)
    bool isUnix() const { return !unixPath.empty(); }
};

// Accepted forms: "unix:/path", "unix:relative/path", "/path" (a unix socket), "host:port" and
// "[v6addr]:port". Errors: InvalidArgument naming the form that was expected.
Result<BrokerAddress> parseBrokerAddress(std::string_view text);

// A comma-separated list of those forms (spaces around the commas allowed), in the order given;
// one address is a list of one. Errors: InvalidArgument naming the entry that is wrong.
Result<std::vector<BrokerAddress>> parseBrokerAddresses(std::string_view text);

// The flag wins over the environment, the environment over the default socket. Empty values count
// as unset so that `PADDOCK_BROKER= paddockctl ...` means "the default".
std::string chooseBrokerAddress(const std::optional<std::string> &flag, const std::optional<std::string> &env,
                                const std::string &defaultSocketPath);

} // namespace paddock::cli
