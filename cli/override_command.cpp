#include "cli/override_command.h"

#include "cli/decisions_commands.h"
#include "cli/exit_codes.h"

#include <nlohmann/json.hpp>

namespace paddock::cli {

CLI::App *addOverrideCommand(CLI::App &app, Invocation &inv)
{
    auto *command = app.add_subcommand(
        "override", "Move a session to another tier at its next step (snapshot, claim, restore); its files survive");
    command->add_option("ID", inv.sessionId, "Session id")->required();
    command->add_option("TIER", inv.tier, "The tier to move to (`paddockctl pools` lists them)")->required();
    command->add_option("--reason", inv.reason, "Why; recorded in the session's log")->required();
    return command;
}

int runOverrideCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::OverrideTierRequest request;
    request.set_session_id(inv.sessionId);
    request.set_tier(inv.tier);
    request.set_reason(inv.reason);
    v1::EnvironmentDecision decision;
    const grpc::Status status = call.unary(&GovernanceStub::OverrideTier, request, decision);
    if (!status.ok())
        return call.fail(err, "cannot move session " + inv.sessionId + " to tier " + inv.tier, status,
                         "`paddockctl pools` lists the tiers");
    if (inv.output == OutputFormat::Json) {
        out << decisionToJson(decision).dump(2) << "\n";
    } else {
        out << "session " << decision.session_id() << " moves to tier " << decision.chosen_tier()
            << " at its next step (`paddockctl events " << decision.session_id() << "` shows sandbox.moved)\n"
            << "decision " << decision.id() << ": chooser " << decision.chooser()
            << (decision.who().empty() ? "" : " (" + decision.who() + ")") << ", " << decision.reason() << "\n";
    }
    return toInt(ExitCode::Ok);
}

} // namespace paddock::cli
