#pragma once
// paddockctl secrets set|ls|rm: the broker's named secrets (docs/secrets.md). Values are read from
// stdin and never printed; ls shows names and fingerprints.
//
// Threads: everything runs on the caller's thread, like the rest of paddockctl.

#include "cli/app.h"
#include "cli/broker_call.h"
#include "rpc/broker_stubs.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <istream>
#include <optional>

namespace paddock::cli {

struct SecretsSubcommands {
    CLI::App *set = nullptr;
    CLI::App *list = nullptr;
    CLI::App *remove = nullptr;
};

// Adds `secrets` and its three subcommands to app, storing what they parse in inv.
SecretsSubcommands addSecretsCommands(CLI::App &app, Invocation &inv);
// The command that was parsed, if it was one of these.
std::optional<Command> parsedSecretsCommand(const SecretsSubcommands &commands);

// Runs SecretsSet, SecretsList or SecretsRemove. in: where `set` reads the value (stdin).
int runSecretsCommand(const Invocation &inv, const BrokerCall &call, std::istream &in, bool inIsTerminal,
                      std::ostream &out, std::ostream &err);

// The value as `secrets set` stores it: the input with one trailing newline ("\n" or "\r\n")
// removed, so `echo TOKEN | paddockctl secrets set NAME` stores TOKEN.
std::string secretValueFromInput(std::string input);

} // namespace paddock::cli
