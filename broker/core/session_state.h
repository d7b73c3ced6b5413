#pragma once
// A session's state is a fold over its events: SessionState{} folded with every event in seq order.
// The store keeps the fold's result as a projection, updated in the same transaction as the events,
// and the console computes the same fold.

#include "broker/core/event.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::core {

enum class SessionStatus { Queued, Running, WaitingApproval, Paused, Succeeded, Failed, Cancelled };

const char *statusName(SessionStatus status);                          // "queued", "running", ...
std::optional<SessionStatus> statusFromName(std::string_view name);
bool isTerminal(SessionStatus status);

// A host an approved egress_exception review opened for the session (approval.decided).
struct ApprovedHost {
    std::string host;
    std::string reviewId;
    bool operator==(const ApprovedHost &) const = default;
};

struct SessionState {
    std::string id;
    std::string agent;
    std::string goal;
    std::string model;
    std::string playbook;       // name, when the session runs a named playbook
    std::string tier;
    std::string tierChooser;    // who chose `tier` (the last granted env.decision): default, agent, platform, human
    std::vector<std::string> tags;
    std::vector<std::string> secrets;   // names granted at submit; values live in the broker's secret store
    std::vector<ApprovedHost> approvedHosts;   // every command of the session may reach these (docs/egress.md)
    SessionStatus status = SessionStatus::Queued;
    std::string statusReason;
    std::string pool;           // of the current sandbox
    std::string sandboxId;      // empty when no sandbox is held
    // The manifest id of the workspace's last durable checkpoint (a checkpoint event, or a sandbox
    // given back with one: idle, moved); "" while there is none. Restores start from it.
    std::string checkpoint;
    int64_t steps = 0;          // tool results recorded
    int64_t costMicros = 0;
    int64_t modelCostMicros = 0;     // cost events of kind "model"
    int64_t sandboxCostMicros = 0;   // cost events of kind "sandbox" and "storage"
    int64_t budgetMicros = 0;        // the session's budget, extensions included; 0: none
    int64_t dayAllowanceMicros = 0;  // approved extensions of its agent's daily budget, for this session
    bool budgetWarned = false;       // budget.warning recorded for the current budget
    std::string submittedBy;         // the principal who submitted it: the requester of its reviews
    std::string pendingReviewId;     // the review item the session waits for (status waiting_approval)
    int64_t createdUnixMs = 0;
    int64_t updatedUnixMs = 0;
    int64_t lastSeq = 0;
    std::string lastEventKind;

    // True while a step worker has something to do: the session is live, or it has ended but
    // still holds a sandbox that must be released.
    bool needsWork() const;
};

// Applies one event. Events must come in seq order; unknown kinds only advance lastSeq.
void applyEvent(SessionState &state, const Event &event);

SessionState foldEvents(std::span<const Event> events);

} // namespace paddock::core
