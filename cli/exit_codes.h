#pragma once
// paddockctl's exit codes and how a failed call maps onto them. The numbers are part of the CLI's
// contract with scripts: docs/cli.md and `paddockctl --help` list them; never renumber.
//
// Threads: free functions over values; call from anywhere.

#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

namespace paddock::cli {

enum class ExitCode : int {
    Ok = 0,
    Error = 1,              // anything not listed below
    Usage = 2,              // bad flags or arguments
    NotFound = 3,           // unknown session id, playbook or model
    BrokerUnreachable = 4,  // nothing answers at the broker address
    InvalidArgument = 5,    // malformed playbook, bad seq, ...
    Conflict = 6,           // failed precondition: the session's state does not allow it
    SessionFailed = 7,      // the followed session ended failed or cancelled
    Denied = 8,             // not allowed: the role does not permit it, or no valid token
    Interrupted = 130,      // Ctrl-C while following (128 + SIGINT, as shells report it)
};

inline int toInt(ExitCode code) { return static_cast<int>(code); }

// connected: whether the call reached the broker. An UNAVAILABLE that the broker itself returned
// (a pool is down, say) is not "broker unreachable".
ExitCode exitCodeFor(grpc::StatusCode code, bool connected);

// The text for --help's footer and docs/cli.md.
std::string_view exitCodeHelp();

// One message for a failed call: what was being done, what went wrong, what to do about it.
// action: "cannot show session abc" ; address: the broker address as the user gave it.
// hint: a command-specific fix appended when the broker's message does not already carry one.
std::string describeFailure(std::string_view action, const grpc::Status &status, bool connected,
                            std::string_view address, std::string_view hint = {});

std::string unreachableMessage(std::string_view address);

} // namespace paddock::cli
