#pragma once
// Roles and the one table that says which role each method of the broker's four services needs
// (docs/permissions.md). A method that is not in the table is refused to everyone, so a new RPC
// stays closed until someone decides who may call it (permissions_test walks the service descriptor
// to prove every RPC is listed).
//
// Threads: immutable data and pure functions; call from anywhere.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::auth {

// viewer < engineer < approver, operator < admin. Approver and operator are siblings: each has
// every right of an engineer plus its own (review decisions; debug shells and the audit log).
enum class Role { Viewer, Engineer, Approver, Operator, Admin };

std::string_view roleName(Role role);
std::optional<Role> parseRole(std::string_view name);
// "viewer, engineer, approver, operator, admin", for messages.
std::string_view roleNames();

// True when `role` holds every right of `needed`.
bool roleIncludes(Role role, Role needed);

struct MethodRule {
    std::string_view method;   // the short name: "CancelSession"
    Role needed;               // the least role that may call it
    bool mutating;             // changes something: audited (every denied call is audited too)
};

// Every rule, in the service's order.
std::span<const MethodRule> methodRules();
// nullptr for a method the table does not know (refused).
const MethodRule *findMethodRule(std::string_view method);
// The methods `role` may call, in the table's order (WhoAmI's permitted_methods).
std::vector<std::string> permittedMethods(Role role);

} // namespace paddock::auth
