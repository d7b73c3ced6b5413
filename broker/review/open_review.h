#pragma once
// Opening a review item: the approval.requested event that stops a session at its step until an
// approver decides. The step engine opens bulk_change, egress_exception and secret_access items
// (propose_change), budget_extension items (budgets) and tier_escalation items
// (request_environment beyond the agent's bound, docs/governance.md).
//
// Threads: pure functions (the id comes from a thread-local generator).

#include "broker/core/event.h"
#include "broker/review/review_policy.h"

#include <nlohmann/json.hpp>

#include <string>

namespace paddock::review {

struct ReviewRequest {
    std::string kind;               // review::kind
    std::string summary;            // one line for the queue
    std::string change;             // the change itself: a unified diff, a record list, targets, text
    std::string changeFormat = "text";   // diff, records, targets, text
    std::string impact;             // e.g. "12 files, +40 -3"
    std::string risk;               // empty: the policy's riskOf(kind, targetCount)
    std::string justification;      // the agent's
    std::string policyVerdict;      // why policy sent it to review
    std::string requester;          // the session's submitted_by
    std::string agent;
    std::string toolCallId;         // the tool call that waits for the decision; empty for none
    int targetCount = 0;
    int64_t costMicros = 0;         // what approving costs (e.g. the budget extension asked for)
    nlohmann::json payload = nlohmann::json::object();   // kind-specific, e.g. {"tier": "heavy"}
};

// "sha256:<64 hex digits>" of the change's bytes: what an approval names.
std::string changeHash(const std::string &change);

// The approval.requested event (docs/events.md) with a new review id, the change's hash and the
// expiry from the policy. The session's status becomes waiting_approval when it is appended.
core::NewEvent openReview(const ReviewRequest &request, const ReviewPolicy &policy, int64_t nowUnixMs);

} // namespace paddock::review
