#pragma once
// paddockctl decisions ls [filters] and decisions stats --by tier|agent|chooser: every environment
// decision with its chooser, reason and outcome (docs/governance.md; docs/cli.md).
//
// Threads: everything runs on the caller's thread, like the rest of paddockctl.

#include "cli/agents_commands.h"

#include <CLI/CLI.hpp>

#include <optional>

namespace paddock::cli {

struct DecisionsSubcommands {
    CLI::App *list = nullptr, *stats = nullptr;
};

DecisionsSubcommands addDecisionsCommands(CLI::App &app, Invocation &inv);
std::optional<Command> parsedDecisionsCommand(const DecisionsSubcommands &commands);
int runDecisionsCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err);

nlohmann::json decisionToJson(const v1::EnvironmentDecision &decision);
// TIME, SESSION, TRIGGER, CHOOSER, REQUESTED, CHOSEN, OUTCOME, FITS, REASON.
std::string formatDecisionsTable(std::span<const v1::EnvironmentDecision> decisions, bool utc = false);

} // namespace paddock::cli
