#pragma once
// paddockctl cost [--by KEY] [--since WHEN] [--session ID] [--agent NAME] [--bucket DURATION] and
// paddockctl budgets: spend from the broker's cost ledger and the agents' budgets with their burn
// rate (docs/governance.md, "Cost and budgets").
//
// Threads: everything runs on the caller's thread, like the rest of paddockctl.

#include "cli/review_commands.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace paddock::cli {

struct CostSubcommands {
    CLI::App *cost = nullptr;
    CLI::App *budgets = nullptr;
};

CostSubcommands addCostCommands(CLI::App &app, Invocation &inv);
std::optional<Command> parsedCostCommand(const CostSubcommands &commands);
int runCostCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err);

// --since: a duration back from now ("30m", "24h", "7d") or a UTC date ("2026-11-30"); the start in
// Unix ms, or nullopt when it is neither.
std::optional<int64_t> parseSince(const std::string &text, int64_t nowUnixMs);
// --bucket and --since: "90s", "15m", "1h", "1d", "2w" in ms (a unit is required, parseDurationSeconds
// reads it); nullopt when malformed.
std::optional<int64_t> parseDurationMs(const std::string &text);
// "$1.50" -> 1500000 micro-USD (submit --budget); nullopt when not a non-negative amount.
std::optional<int64_t> parseDollars(const std::string &text);

} // namespace paddock::cli
