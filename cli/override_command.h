#pragma once
// paddockctl override SESSION TIER --reason TEXT: a human moves a live session to another tier. The
// broker records tier.override now; the move itself (snapshot, claim, restore) happens at the
// session's next step boundary and shows in its events as sandbox.moved.
//
// Threads: everything runs on the caller's thread, like the rest of paddockctl.

#include "cli/app.h"
#include "cli/broker_call.h"
#include "rpc/broker_stubs.h"

#include <CLI/CLI.hpp>

#include <functional>

namespace paddock::cli {

// Adds `override` to app, storing what it parses in inv (sessionId, tier, reason).
CLI::App *addOverrideCommand(CLI::App &app, Invocation &inv);

int runOverrideCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err);

} // namespace paddock::cli
