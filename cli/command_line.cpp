// paddockctl's command line: the global options and every command family's subcommands on one
// CLI11 app, and the Invocation they fill. The families add their own subcommands
// (cli/*_commands.h); the session commands (submit, ls, show, events, cancel, pause, resume,
// pools) are added here.
//
// Threads: runs on the caller's thread, like the rest of paddockctl.

#include "cli/app.h"

#include "cli/agents_commands.h"
#include "cli/auth_commands.h"
#include "cli/cost_commands.h"
#include "cli/decisions_commands.h"
#include "cli/exit_codes.h"
#include "cli/operator_commands.h"
#include "cli/override_command.h"
#include "cli/review_commands.h"
#include "cli/secrets_commands.h"
#include "cli/storage_commands.h"

#include <CLI/CLI.hpp>

#include <utility>
#include <vector>

#ifndef PADDOCK_VERSION
#define PADDOCK_VERSION "unknown"
#endif

namespace paddock::cli {
namespace {

// The global options, which may stand before or after the command.
void addGlobalOptions(CLI::App &app, Invocation &inv, std::string &broker, std::string &output)
{
    app.set_version_flag("--version", std::string("paddockctl ") + PADDOCK_VERSION);
    app.require_subcommand(1);
    app.fallthrough();   // global options may follow the command: `paddockctl ls --output json`
    app.footer(std::string("Broker address: --broker, else $PADDOCK_BROKER, else the default unix socket "
                           "($XDG_RUNTIME_DIR/paddock/broker.sock). A team's brokers may be listed with commas "
                           "(a:7443,b:7443): paddockctl uses the first that answers and moves to the next when it "
                           "stops answering.\n\n")
               + std::string(exitCodeHelp()));
    app.add_option("--broker", broker,
                   "Broker address: unix:/path, /path (a unix socket) or host:port, or several of them separated "
                   "by commas (brokers sharing one store). Default: $PADDOCK_BROKER, else the user's broker socket");
    app.add_option("-o,--output", output, "Output format of every read: table (for people) or json (for scripts)")
        ->check(CLI::IsMember({"table", "json"}));
    app.add_flag_callback("--json", [&output] { output = "json"; }, "Same as --output json");
    app.add_option("--timeout", inv.timeoutS, "Deadline in seconds of each call (not of a follow)")
        ->check(CLI::PositiveNumber);
    app.add_option("--tls-ca", inv.tlsCa, "For a host:port broker: the CA (PEM) that signed its certificate. Default: "
                                          "the system's CAs");
    app.add_option("--token-file", inv.tokenFile, "For a host:port broker: a file holding your bearer token (from "
                                                  "`paddockctl tokens create`). Default: $PADDOCK_TOKEN");
}

// Each session command's subcommand with the Command it stands for.
using SessionSubcommands = std::vector<std::pair<CLI::App *, Command>>;

CLI::App *addSubmitCommand(CLI::App &app, Invocation &inv)
{
    auto *submit = app.add_subcommand("submit", "Submit a session: a playbook, or a goal for a model");
    submit->add_option("--playbook", inv.playbook,
                       "Playbook name (shipped with the broker) or a playbook file whose text is sent");
    submit->add_option("--goal", inv.goal, "What the agent should do");
    submit->add_option("--model", inv.model, "Model: scripted (with --playbook), openai, ...");
    submit->add_option("--tier", inv.tier, "Sandbox tier (lite, standard, heavy); default: the agent's selection mode "
                                           "decides (docs/governance.md)");
    submit->add_option("--agent", inv.agent, "Agent to run as; default: the broker's default agent");
    submit->add_option("--tag", inv.tags, "Tag the session (repeatable)");
    submit->add_option("--secret", inv.secrets,
                       "Grant the broker's secret NAME: its value is in the environment of the session's commands "
                       "as $NAME and redacted from everything recorded (repeatable)");
    submit->add_option("--budget", inv.budget,
                       "The session's budget in US dollars (e.g. 0.05); past 80% it warns, at 100% it waits for a "
                       "budget_extension review. Default: the agent's");
    submit->add_flag("-f,--follow", inv.follow,
                     "Stream the events until the session ends; exit 0 if it succeeded, 7 if not");
    submit->add_option("--request-id", inv.requestId,
                       "The submit's request id (default: a fresh UUID). The broker makes one session per id and "
                       "caller: a script that runs this submit again with the same id gets the same session back");
    submit->add_option("--file", inv.submitFile,
                       "Submit many sessions: a JSON Lines file (- reads stdin), one object a line with the fields of "
                       "these flags (playbook, playbook_toml, goal, model, tier, agent, tags, secrets, budget). Every "
                       "line is checked before any is sent; prints the ids in line order");
    return submit;
}

CLI::App *addListCommand(CLI::App &app, Invocation &inv)
{
    auto *list = app.add_subcommand("ls", "List sessions, newest first");
    list->add_option("--status", inv.statuses, "Only sessions in this status (repeatable)")
        ->check(CLI::IsMember({"queued", "running", "waiting_approval", "paused", "succeeded", "failed",
                               "cancelled"}));
    list->add_option("--agent", inv.agent, "Only this agent's sessions");
    list->add_option("--search", inv.search, "Only sessions whose goal, id or playbook contains TEXT");
    list->add_option("--limit", inv.limit, "At most N sessions")->check(CLI::PositiveNumber);
    list->add_flag("--all", inv.all, "Follow page tokens to list every matching session");
    return list;
}

// cancel, pause and resume: a session id and a reason for the log.
CLI::App *addSessionActionCommand(CLI::App &app, const std::string &name, const std::string &description,
                                  Invocation &inv)
{
    auto *command = app.add_subcommand(name, description);
    command->add_option("ID", inv.sessionId, "Session id")->required();
    command->add_option("--reason", inv.reason, "Why; recorded in the session's log");
    return command;
}

SessionSubcommands addSessionCommands(CLI::App &app, Invocation &inv)
{
    SessionSubcommands commands;
    commands.emplace_back(addSubmitCommand(app, inv), Command::Submit);
    commands.emplace_back(addListCommand(app, inv), Command::List);

    auto *show = app.add_subcommand("show", "Show one session");
    show->add_option("ID", inv.sessionId, "Session id")->required();
    commands.emplace_back(show, Command::Show);

    auto *events = app.add_subcommand("events", "Print a session's events: seq, time, kind, summary");
    events->add_option("ID", inv.sessionId, "Session id")->required();
    events->add_option("--from", inv.fromSeq, "Start at this seq (default 1)");
    events->add_flag("-f,--follow", inv.follow,
                     "Keep streaming until the session ends; exit 0 if it succeeded, 7 if not");
    commands.emplace_back(events, Command::Events);

    auto *traceCommand = app.add_subcommand(
        "trace", "Print a session's span timeline: model calls, tool calls, claims, restores, moves and waits, "
                 "with start, duration (or running) and what each was, by step");
    traceCommand->add_option("ID", inv.sessionId, "Session id")->required();
    commands.emplace_back(traceCommand, Command::Trace);

    commands.emplace_back(addSessionActionCommand(app, "cancel", "Cancel a session", inv), Command::Cancel);
    commands.emplace_back(addSessionActionCommand(app, "pause", "Pause a session after its current step", inv),
                          Command::Pause);
    commands.emplace_back(addSessionActionCommand(app, "resume", "Resume a paused session", inv), Command::Resume);
    commands.emplace_back(app.add_subcommand("pools", "List the broker's pools and their tiers"), Command::Pools);
    return commands;
}

std::optional<Command> parsedSessionCommand(const SessionSubcommands &commands)
{
    for (const auto &[subcommand, command] : commands) {
        if (subcommand->parsed())
            return command;
    }
    return std::nullopt;
}

// What submit needs that CLI11 cannot check; false once it has said what is missing.
bool submitArgumentsComplete(const Invocation &inv, std::ostream &err)
{
    if (!inv.submitFile.empty()) {
        const bool perSession = !inv.playbook.empty() || !inv.goal.empty() || !inv.model.empty() || !inv.tier.empty()
            || !inv.agent.empty() || !inv.tags.empty() || !inv.secrets.empty() || !inv.budget.empty();
        if (perSession) {
            err << "paddockctl submit: --file takes every session's fields from its lines; leave out --playbook, "
                   "--goal, --model, --tier, --agent, --tag, --secret and --budget, and put them in each line\n";
            return false;
        }
        if (inv.follow) {
            err << "paddockctl submit: --file does not follow (-f) its sessions; leave out -f, then follow one with "
                   "`paddockctl events ID -f`\n";
            return false;
        }
        if (!inv.requestId.empty()) {
            err << "paddockctl submit: --file gives each line a request id of its own; leave out --request-id\n";
            return false;
        }
        return true;
    }
    if (inv.playbook.empty() && inv.goal.empty()) {
        err << "paddockctl submit: say what to run: --playbook NAME_OR_FILE, or --goal TEXT --model NAME\n";
        return false;
    }
    if (inv.playbook.empty() && inv.model.empty()) {
        err << "paddockctl submit: --goal needs --model NAME (e.g. openai), or a --playbook for the scripted "
               "model\n";
        return false;
    }
    return true;
}

// Every command family's subcommands on the one CLI::App, in the order help lists them.
struct Subcommands {
    SessionSubcommands sessions;
    CLI::App *overrideTier = nullptr;
    SecretsSubcommands secrets;
    OperatorSubcommands operatorCommands;
    AuthSubcommands auth;
    ReviewSubcommands reviews;
    CostSubcommands cost;
    AgentsSubcommands agents;
    DecisionsSubcommands decisions;
    StorageSubcommands storage;
};

Subcommands addSubcommands(CLI::App &app, Invocation &inv)
{
    Subcommands commands;
    commands.sessions = addSessionCommands(app, inv);
    commands.overrideTier = addOverrideCommand(app, inv);
    commands.secrets = addSecretsCommands(app, inv);
    commands.operatorCommands = addOperatorCommands(app, inv);
    commands.auth = addAuthCommands(app, inv);
    commands.reviews = addReviewCommands(app, inv);
    commands.cost = addCostCommands(app, inv);
    commands.agents = addAgentsCommands(app, inv);
    commands.decisions = addDecisionsCommands(app, inv);
    commands.storage = addStorageCommands(app, inv);
    return commands;
}

std::optional<Command> parsedCommand(const Subcommands &commands, Invocation &inv)
{
    if (auto command = parsedSessionCommand(commands.sessions))
        return command;
    if (commands.overrideTier->parsed())
        return Command::OverrideTier;
    if (auto command = parsedSecretsCommand(commands.secrets))
        return command;
    if (auto command = parsedOperatorCommand(commands.operatorCommands))
        return command;
    if (auto command = parsedAuthCommand(commands.auth))
        return command;
    if (auto command = parsedReviewCommand(commands.reviews))
        return command;
    if (auto command = parsedCostCommand(commands.cost))
        return command;
    if (auto command = parsedAgentsCommand(commands.agents, inv))
        return command;
    if (auto command = parsedDecisionsCommand(commands.decisions))
        return command;
    return parsedStorageCommand(commands.storage);
}

} // namespace

ParseOutcome parseCommandLine(const std::vector<std::string> &args, std::ostream &out, std::ostream &err)
{
    Invocation inv;
    std::string broker;
    std::string output = "table";

    CLI::App app{"paddockctl: drive a Paddock broker from a shell: submit agent sessions, list them, follow their "
                 "events, cancel, pause and resume them.",
                 "paddockctl"};
    addGlobalOptions(app, inv, broker, output);
    const Subcommands commands = addSubcommands(app, inv);

    try {
        // CLI11 consumes the vector from the back.
        std::vector<std::string> reversed(args.rbegin(), args.rend());
        app.parse(reversed);
    } catch (const CLI::ParseError &e) {
        const int cliCode = app.exit(e, out, err);
        return {std::nullopt, cliCode == 0 ? toInt(ExitCode::Ok) : toInt(ExitCode::Usage)};
    }

    if (auto command = parsedCommand(commands, inv))
        inv.command = *command;
    if (inv.command == Command::Submit && !submitArgumentsComplete(inv, err))
        return {std::nullopt, toInt(ExitCode::Usage)};
    if (!broker.empty())
        inv.broker = broker;
    inv.output = output == "json" ? OutputFormat::Json : OutputFormat::Table;
    return {std::move(inv), 0};
}

} // namespace paddock::cli
