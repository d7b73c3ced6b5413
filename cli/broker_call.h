#pragma once
// The broker connection as every command family gets it (secrets, post-mortems and debug shells,
// override, agents, decisions, reviews, cost, tokens, audit): the stubs, the deadline each call
// carries, whether calls reach the broker (for the exit code), the address to name in messages,
// and one way to report a failed call.
//
// A unary call whose outcome is unknown (UNAVAILABLE, DEADLINE_EXCEEDED) is sent again on another
// broker of the list (cli/broker_endpoints.h) when sending it twice is harmless: reads, and a
// submit carrying a request_id (the broker makes one session per id). Other changes are not
// repeated: their error says the outcome is unknown.
//
// Threads: everything runs on the caller's thread, like the rest of paddockctl.

#include "rpc/broker_stubs.h"

#include <algorithm>
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

// Requests of calls that only read: sent again on another broker when one does not answer.
template <typename Request>
inline constexpr bool kReadOnlyRequest =
    std::is_same_v<Request, v1::GetSessionRequest> || std::is_same_v<Request, v1::ListSessionsRequest>
    || std::is_same_v<Request, v1::WhoAmIRequest> || std::is_same_v<Request, v1::ListTokensRequest>
    || std::is_same_v<Request, v1::ListAuditRequest> || std::is_same_v<Request, v1::ListSecretsRequest>
    || std::is_same_v<Request, v1::GetAgentRequest> || std::is_same_v<Request, v1::ListAgentsRequest>
    || std::is_same_v<Request, v1::ListDecisionsRequest> || std::is_same_v<Request, v1::GetDecisionStatsRequest>
    || std::is_same_v<Request, v1::ListReviewItemsRequest> || std::is_same_v<Request, v1::GetReviewItemRequest>
    || std::is_same_v<Request, v1::GetApproverStatsRequest> || std::is_same_v<Request, v1::GetCostSummaryRequest>
    || std::is_same_v<Request, v1::ListBudgetsRequest> || std::is_same_v<Request, v1::ListPoolsRequest>
    || std::is_same_v<Request, v1::ListPoolPostMortemsRequest> || std::is_same_v<Request, v1::GetPoolPostMortemRequest>
    || std::is_same_v<Request, v1::ListPoolSnapshotFilesRequest> || std::is_same_v<Request, v1::GetStorageRequest>;

// Whether a call failed without saying what became of it: the broker went away or did not answer.
inline bool outcomeUnknown(const grpc::Status &status)
{
    return status.error_code() == grpc::StatusCode::UNAVAILABLE
        || status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

struct BrokerCall {
    rpc::BrokerStubs &stubs;   // one per service (rpc/broker_stubs.h); rebuilt in place by failover
    std::function<void(grpc::ClientContext &)> setDeadline;
    std::function<bool()> connected;   // whether calls reach the broker (for the exit code)
    std::string shownAddress;          // the broker address(es) as the user gave them
    std::function<bool()> interrupted; // Ctrl-C was pressed (commands that wait: debug shells)
    // After a call whose outcome is unknown (its status given): moves to a broker that answers
    // (another of the list, or the only one once it is back) and says so on stderr. True when
    // there is one to send the call to again. Empty: calls are never sent again.
    std::function<bool(const grpc::Status &)> failover;
    int endpoints = 1;                 // how many brokers the list names

    // A submit with a request_id is sent up to this many times (more when the list is longer).
    static constexpr int kSubmitAttempts = 3;

    // Prints "paddockctl: ACTION: what went wrong, what to do" (exit_codes.h's describeFailure)
    // and returns the exit code for status.
    int fail(std::ostream &err, std::string_view action, const grpc::Status &status,
             std::string_view hint = {}) const;

    // One unary call under the deadline, to the service whose method it is, e.g.
    //   call.unary(&AccessStub::ListTokens, request, response)
    // Sent again after a failover when the request may be (see the top of this file).
    template <typename Stub, typename Request, typename Response>
    grpc::Status unary(grpc::Status (Stub::*method)(grpc::ClientContext *, const Request &, Response *),
                       const Request &request, Response &response) const
    {
        const int attempts = attemptsFor(request);
        for (int attempt = 1;; ++attempt) {
            grpc::ClientContext context;
            setDeadline(context);
            grpc::Status status = (stubOf<Stub>().*method)(&context, request, &response);
            if (attempt >= attempts || !outcomeUnknown(status) || !failover || !failover(status))
                return status;
        }
    }

    // How many times request may be sent when the broker does not answer.
    template <typename Request>
    int attemptsFor(const Request &request) const
    {
        if constexpr (std::is_same_v<Request, v1::SubmitSessionRequest>)
            return request.request_id().empty() ? 1 : std::max(endpoints, kSubmitAttempts);
        else if constexpr (kReadOnlyRequest<Request>)
            return endpoints;
        else
            return 1;
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
