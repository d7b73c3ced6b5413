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
#include <type_traits>

namespace paddock::cli {

using SessionStub = v1::SessionService::Stub;
using GovernanceStub = v1::GovernanceService::Stub;
using OperationsStub = v1::OperationsService::Stub;
using AccessStub = v1::AccessService::Stub;

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

    // One unary call under the deadline, to the service whose method it is, e.g.
    //   call.unary(&AccessStub::ListTokens, request, response)
    template <typename Stub, typename Request, typename Response>
    grpc::Status unary(grpc::Status (Stub::*method)(grpc::ClientContext *, const Request &, Response *),
                       const Request &request, Response &response) const
    {
        grpc::ClientContext context;
        setDeadline(context);
        return (stubOf<Stub>().*method)(&context, request, &response);
    }

private:
    template <typename Stub>
    Stub &stubOf() const
    {
        if constexpr (std::is_same_v<Stub, SessionStub>)
            return *stubs.sessions;
        else if constexpr (std::is_same_v<Stub, GovernanceStub>)
            return *stubs.governance;
        else if constexpr (std::is_same_v<Stub, OperationsStub>)
            return *stubs.operations;
        else {
            static_assert(std::is_same_v<Stub, AccessStub>, "not a method of the broker's services");
            return *stubs.access;
        }
    }
};

} // namespace paddock::cli
