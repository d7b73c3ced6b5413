#include "broker/auth/permissions.h"

#include <algorithm>
#include <array>

namespace paddock::auth {

namespace {

constexpr std::array kRoleNames = {std::string_view("viewer"), std::string_view("engineer"),
                                   std::string_view("approver"), std::string_view("operator"),
                                   std::string_view("admin")};

using R = Role;
// The table. Reads are open to viewers unless they show what only operators should see
// (post-mortems hold sandboxes' output, snapshots hold workspaces); secrets and tokens are admin's.
constexpr MethodRule kRules[] = {
    {"SubmitSession", R::Engineer, true},
    {"GetSession", R::Viewer, false},
    {"ListSessions", R::Viewer, false},
    {"WatchSessions", R::Viewer, false},
    {"StreamEvents", R::Viewer, false},
    {"CancelSession", R::Engineer, true},
    {"PauseSession", R::Engineer, true},
    {"ResumeSession", R::Engineer, true},
    {"ListPools", R::Viewer, false},
    {"ListPostMortems", R::Engineer, false},
    {"GetPostMortem", R::Engineer, false},
    {"ListSnapshotFiles", R::Engineer, false},
    {"ReadSnapshotFile", R::Engineer, false},
    {"OpenDebugShell", R::Operator, true},
    {"DebugExec", R::Operator, true},
    {"CloseDebugShell", R::Operator, true},
    {"WatchSandboxSamples", R::Viewer, false},
    {"GetStorage", R::Viewer, false},
    {"CollectStorage", R::Operator, true},
    {"SetSecret", R::Admin, true},
    {"ListSecrets", R::Engineer, false},
    {"DeleteSecret", R::Admin, true},
    {"CreateAgent", R::Engineer, true},
    {"GetAgent", R::Viewer, false},
    {"ListAgents", R::Viewer, false},
    {"UpdateAgent", R::Engineer, true},
    {"ListDecisions", R::Viewer, false},
    {"GetDecisionStats", R::Viewer, false},
    {"OverrideTier", R::Engineer, true},
    {"ListReviewItems", R::Viewer, false},
    {"GetReviewItem", R::Viewer, false},
    {"DecideReviewItems", R::Approver, true},
    {"GetApproverStats", R::Viewer, false},
    {"GetCostSummary", R::Viewer, false},
    {"ListBudgets", R::Viewer, false},
    {"WhoAmI", R::Viewer, false},
    {"CreateToken", R::Admin, true},
    {"ListTokens", R::Admin, false},
    {"RevokeToken", R::Admin, true},
    {"ListAudit", R::Operator, false},
};

} // namespace

std::string_view roleName(Role role)
{
    return kRoleNames[static_cast<size_t>(role)];
}

std::optional<Role> parseRole(std::string_view name)
{
    for (size_t i = 0; i < kRoleNames.size(); ++i) {
        if (kRoleNames[i] == name)
            return static_cast<Role>(i);
    }
    return std::nullopt;
}

std::string_view roleNames()
{
    return "viewer, engineer, approver, operator, admin";
}

bool roleIncludes(Role role, Role needed)
{
    if (role == needed || role == Role::Admin || needed == Role::Viewer)
        return true;
    // Approver and operator each include engineer, and not each other.
    return needed == Role::Engineer && (role == Role::Approver || role == Role::Operator);
}

std::span<const MethodRule> methodRules()
{
    return kRules;
}

const MethodRule *findMethodRule(std::string_view method)
{
    const auto *it = std::find_if(std::begin(kRules), std::end(kRules),
                                  [&](const MethodRule &rule) { return rule.method == method; });
    return it == std::end(kRules) ? nullptr : it;
}

std::vector<std::string> permittedMethods(Role role)
{
    std::vector<std::string> out;
    for (const auto &rule : kRules) {
        if (roleIncludes(role, rule.needed))
            out.emplace_back(rule.method);
    }
    return out;
}

} // namespace paddock::auth
