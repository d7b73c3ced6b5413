#pragma once
// paddockctl for operators: post-mortems of failed sandboxes, their snapshot files, and debug
// shells (docs/cli.md):
//   postmortems ls [--session S] [--pool P]
//   postmortems show ID            (ID: SANDBOX, or POOL/SANDBOX when several pools have one)
//   postmortems files ID [PATH]     snapshot ls POOL REF [PATH]
//   postmortems cat ID PATH         postmortems download ID PATH -o FILE
//   debug-shell ID [--tier T] [--command LINE]
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

struct OperatorSubcommands {
    CLI::App *pmList = nullptr;
    CLI::App *pmShow = nullptr;
    CLI::App *pmFiles = nullptr;
    CLI::App *pmCat = nullptr;
    CLI::App *pmDownload = nullptr;
    CLI::App *snapshotList = nullptr;
    CLI::App *debugShell = nullptr;
};

OperatorSubcommands addOperatorCommands(CLI::App &app, Invocation &inv);
std::optional<Command> parsedOperatorCommand(const OperatorSubcommands &commands);

// in: the lines an interactive debug shell runs (stdin).
int runOperatorCommand(const Invocation &inv, const BrokerCall &call, std::istream &in, std::ostream &out,
                       std::ostream &err);

nlohmann::json postMortemToJson(const v1::PostMortem &pm, bool full);
// `postmortems show`: reason, exit, the command, limits, the last output, the resource samples in
// short, the processes, the snapshot.
std::string formatPostMortem(const v1::PostMortem &pm, int64_t nowUnixMs);

} // namespace paddock::cli
