#include "cli/decisions_commands.h"

#include "cli/exit_codes.h"
#include "cli/format.h"

namespace paddock::cli {

nlohmann::json decisionToJson(const v1::EnvironmentDecision &decision)
{
    nlohmann::json alternatives = nlohmann::json::array();
    for (const auto &alternative : decision.alternatives())
        alternatives.push_back({{"tier", alternative.tier()},
                                {"estimated_cost_micros", alternative.estimated_cost_micros()},
                                {"note", alternative.note()}});
    return {{"id", decision.id()},
            {"session_id", decision.session_id()},
            {"agent", decision.agent()},
            {"trigger", decision.trigger()},
            {"requested_tier", decision.requested_tier()},
            {"chosen_tier", decision.chosen_tier()},
            {"chooser", decision.chooser()},
            {"who", decision.who()},
            {"rule", decision.rule()},
            {"reason", decision.reason()},
            {"alternatives", alternatives},
            {"outcome", decision.outcome()},
            {"peak_memory_bytes", decision.peak_memory_bytes()},
            {"memory_limit_bytes", decision.memory_limit_bytes()},
            {"mean_cpu_fraction", decision.mean_cpu_fraction()},
            {"throttled_fraction", decision.throttled_fraction()},
            {"fitting_tier", decision.fitting_tier()},
            {"time_unix_ms", decision.time_unix_ms()},
            {"outcome_unix_ms", decision.outcome_unix_ms()}};
}

std::string formatDecisionsTable(std::span<const v1::EnvironmentDecision> decisions, bool utc)
{
    std::vector<std::vector<std::string>> rows;
    for (const auto &d : decisions) {
        rows.push_back({formatClock(d.time_unix_ms(), utc), d.session_id(), d.trigger(),
                        d.chooser() + (d.who().empty() ? "" : " (" + d.who() + ")"),
                        d.requested_tier().empty() ? "-" : d.requested_tier(), d.chosen_tier(),
                        d.outcome().empty() ? "pending" : d.outcome(), d.fitting_tier().empty() ? "-" : d.fitting_tier(),
                        truncateText(d.reason(), 80)});
    }
    return renderTable({"TIME", "SESSION", "TRIGGER", "CHOOSER", "REQUESTED", "CHOSEN", "OUTCOME", "FITS", "REASON"},
                       rows);
}

DecisionsSubcommands addDecisionsCommands(CLI::App &app, Invocation &inv)
{
    auto *decisions = app.add_subcommand("decisions", "Environment decisions: who chose each tier, why, and how it went");
    decisions->require_subcommand(1);
    DecisionsSubcommands commands;
    commands.list = decisions->add_subcommand("ls", "List decisions, newest first");
    commands.list->add_option("--session", inv.sessionFilter, "Only this session's");
    commands.list->add_option("--agent", inv.agent, "Only this agent's");
    commands.list->add_option("--chooser", inv.decisionChooser, "default, agent, platform or human");
    commands.list->add_option("--tier", inv.tier, "Only decisions that chose this tier");
    commands.list->add_option("--outcome", inv.decisionOutcome,
                              "pending, ok, oom, timeout, over_allocated, under_allocated, refused, needs_review");
    commands.list->add_option("--limit", inv.limit, "At most this many (default: one page of 100)");
    commands.stats = decisions->add_subcommand("stats", "Outcome counts grouped by tier, agent or chooser");
    commands.stats->add_option("--by", inv.decisionGroupBy, "tier (default), agent or chooser")
        ->check(CLI::IsMember({"tier", "agent", "chooser"}));
    return commands;
}

std::optional<Command> parsedDecisionsCommand(const DecisionsSubcommands &commands)
{
    if (commands.list && commands.list->parsed())
        return Command::DecisionsList;
    if (commands.stats && commands.stats->parsed())
        return Command::DecisionsStats;
    return std::nullopt;
}

int runDecisionsCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    if (inv.command == Command::DecisionsStats) {
        v1::GetDecisionStatsRequest request;
        request.set_group_by(inv.decisionGroupBy);
        v1::DecisionStats stats;
        const grpc::Status status = call.unary(&GovernanceStub::GetDecisionStats, request, stats);
        if (!status.ok())
            return call.fail(err, "cannot count decisions", status);
        const std::string by = inv.decisionGroupBy.empty() ? "tier" : inv.decisionGroupBy;
        if (inv.output == OutputFormat::Json) {
            for (const auto &line : stats.lines())
                out << nlohmann::json{{by, line.key()}, {"total", line.total()}, {"pending", line.pending()},
                                      {"ok", line.ok()}, {"oom", line.oom()}, {"timeout", line.timeout()},
                                      {"over_allocated", line.over_allocated()},
                                      {"under_allocated", line.under_allocated()}}
                           .dump()
                    << "\n";
            return toInt(ExitCode::Ok);
        }
        std::vector<std::vector<std::string>> rows;
        for (const auto &line : stats.lines()) {
            rows.push_back({line.key(), std::to_string(line.total()), std::to_string(line.pending()),
                            std::to_string(line.ok()), std::to_string(line.oom()), std::to_string(line.timeout()),
                            std::to_string(line.over_allocated()), std::to_string(line.under_allocated())});
        }
        std::string header = by;
        for (auto &c : header)
            c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        out << renderTable({header, "TOTAL", "PENDING", "OK", "OOM", "TIMEOUT", "OVER", "UNDER"}, rows,
                           {1, 2, 3, 4, 5, 6, 7});
        return toInt(ExitCode::Ok);
    }

    std::vector<v1::EnvironmentDecision> decisions;
    std::string token;
    do {
        v1::ListDecisionsRequest request;
        request.set_session_id(inv.sessionFilter);
        request.set_agent(inv.agent);
        request.set_chooser(inv.decisionChooser);
        request.set_tier(inv.tier);
        request.set_outcome(inv.decisionOutcome);
        request.set_page_token(token);
        if (inv.limit > 0)
            request.set_page_size(std::min(inv.limit - static_cast<int>(decisions.size()), 1000));
        v1::ListDecisionsResponse response;
        const grpc::Status status = call.unary(&GovernanceStub::ListDecisions, request, response);
        if (!status.ok())
            return call.fail(err, "cannot list decisions", status);
        decisions.insert(decisions.end(), response.decisions().begin(), response.decisions().end());
        token = inv.limit > 0 && static_cast<int>(decisions.size()) < inv.limit ? response.next_page_token() : "";
    } while (!token.empty());
    if (inv.output == OutputFormat::Json) {
        for (const auto &decision : decisions)
            out << decisionToJson(decision).dump() << "\n";
    } else {
        out << formatDecisionsTable(decisions);
    }
    return toInt(ExitCode::Ok);
}

} // namespace paddock::cli
