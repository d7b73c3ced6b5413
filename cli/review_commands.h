#pragma once
// paddockctl reviews ls|show|approve|reject|stats: the review queue (docs/governance.md, "Review
// queue"). `show` fetches an item's full change (the broker records the fetch) and prints its
// change_hash; `approve` binds each approval to the hash the queue lists now, or to the one given
// with --hash ID=HASH, and refuses a high-risk item the user has not shown first.
//
// Threads: everything runs on the caller's thread, like the rest of paddockctl.

#include "cli/app.h"
#include "cli/broker_call.h"
#include "rpc/broker_stubs.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>

namespace paddock::cli {

struct ReviewSubcommands {
    CLI::App *list = nullptr;
    CLI::App *show = nullptr;
    CLI::App *approve = nullptr;
    CLI::App *reject = nullptr;
    CLI::App *stats = nullptr;
};

ReviewSubcommands addReviewCommands(CLI::App &app, Invocation &inv);
std::optional<Command> parsedReviewCommand(const ReviewSubcommands &commands);
int runReviewCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err);

// "id=hash" pairs of --hash, or a lone hash when exactly one id is decided. Empty map and a
// message on a malformed value.
std::optional<std::map<std::string, std::string>> parseHashOptions(const std::vector<std::string> &values,
                                                                   const std::vector<std::string> &ids,
                                                                   std::string *error);

} // namespace paddock::cli
