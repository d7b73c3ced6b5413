#pragma once
// paddockctl agents create|ls|show|edit and agents records set|get: agents as durable identities
// (docs/governance.md, "Agents and environment decisions"; docs/cli.md).
//
// Threads: everything runs on the caller's thread, like the rest of paddockctl.

#include "cli/app.h"
#include "cli/broker_call.h"

#include <CLI/CLI.hpp>

#include <optional>

namespace paddock::cli {

struct AgentsSubcommands {
    CLI::App *create = nullptr, *list = nullptr, *show = nullptr, *edit = nullptr;
    CLI::App *recordsSet = nullptr, *recordsGet = nullptr;
    // The settings options of create and edit: edit changes only those given.
    std::vector<std::pair<CLI::Option *, std::string>> editOptions;
};

AgentsSubcommands addAgentsCommands(CLI::App &app, Invocation &inv);
// The command parsed, if one of these; fills inv.agentGiven for edit.
std::optional<Command> parsedAgentsCommand(const AgentsSubcommands &commands, Invocation &inv);

// The calls share override's shape: a stub, a deadline, the connection state.
int runAgentsCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err);

// "default", "agent", ... for the proto's enum; "unspecified" for 0.
std::string selectionModeText(v1::SelectionMode mode);
nlohmann::json agentToJson(const v1::Agent &agent);
std::string formatAgentDetail(const v1::Agent &agent);

} // namespace paddock::cli
