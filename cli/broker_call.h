#pragma once
// The broker connection as every command family gets it (secrets, post-mortems and debug shells,
// override, agents, decisions, reviews, cost, tokens, audit): the stubs, the deadline each call
// carries, whether calls reach the broker (for the exit code), the address to name in messages,
// and one way to report a failed call.
//
// Threads: everything runs on the caller's thread, like the rest of paddockctl.

#include "rpc/broker_stubs.h"

#include <functional>
#include <ostream>
#include <string>
#include <string_view>

namespace paddock::cli {

struct BrokerCall {
    rpc::BrokerStubs &stubs;   // one per service (rpc/broker_stubs.h)
    std::function<void(grpc::ClientContext &)> setDeadline;
    std::function<bool()> connected;   // whether calls reach the broker (for the exit code)
    std::string shownAddress;          // the broker address as the user gave it
    std::function<bool()> interrupted; // Ctrl-C was pressed (commands that wait: debug shells)

    // Prints "paddockctl: ACTION: what went wrong, what to do" (exit_codes.h's describeFailure)
    // and returns the exit code for status.
    int fail(std::ostream &err, std::string_view action, const grpc::Status &status,
             std::string_view hint = {}) const;
};

} // namespace paddock::cli
