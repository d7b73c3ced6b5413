#pragma once
// paddockctl whoami, tokens create|ls|revoke and audit (docs/permissions.md): who the broker says
// you are, bearer tokens for TCP callers (admin), and the audit log (operator, admin).
//
// Threads: everything runs on the caller's thread, like the rest of paddockctl.

#include "cli/app.h"
#include "cli/broker_call.h"
#include "common/result.h"
#include "rpc/broker_stubs.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>

namespace paddock::cli {

struct AuthSubcommands {
    CLI::App *whoami = nullptr;
    CLI::App *tokensCreate = nullptr;
    CLI::App *tokensList = nullptr;
    CLI::App *tokensRevoke = nullptr;
    CLI::App *audit = nullptr;
};

AuthSubcommands addAuthCommands(CLI::App &app, Invocation &inv);
std::optional<Command> parsedAuthCommand(const AuthSubcommands &commands);

int runAuthCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err);

// "90s", "15m", "12h", "30d", "2w" or plain seconds; InvalidArgument naming the forms otherwise.
Result<int64_t> parseDurationSeconds(std::string_view text);

} // namespace paddock::cli
