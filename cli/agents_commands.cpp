#include "cli/agents_commands.h"

#include "cli/exit_codes.h"
#include "cli/format.h"

#include <cmath>

namespace paddock::cli {

namespace {

std::optional<v1::SelectionMode> modeFromText(const std::string &text)
{
    if (text == "default")
        return v1::SELECTION_MODE_DEFAULT;
    if (text == "agent")
        return v1::SELECTION_MODE_AGENT;
    if (text == "platform")
        return v1::SELECTION_MODE_PLATFORM;
    if (text == "human")
        return v1::SELECTION_MODE_HUMAN;
    if (text == "hybrid")
        return v1::SELECTION_MODE_HYBRID;
    return std::nullopt;
}

int64_t usdToMicros(double usd)
{
    return std::llround(usd * 1e6);
}

std::string joined(const google::protobuf::RepeatedPtrField<std::string> &items)
{
    std::string out;
    for (const auto &item : items)
        out += (out.empty() ? "" : ",") + item;
    return out.empty() ? "(any)" : out;
}

// Applies the settings the command line gave to agent.
void applySettings(const Invocation &inv, v1::Agent &agent)
{
    auto given = [&](const char *name) { return inv.agentGiven.contains(name); };
    if (given("owner"))
        agent.set_owner(inv.agentOwner);
    if (given("default-tier"))
        agent.set_default_tier(inv.agentDefaultTier);
    if (given("allow")) {
        agent.clear_allowed_tiers();
        for (const auto &tier : inv.agentAllowedTiers) {
            if (!tier.empty())
                agent.add_allowed_tiers(tier);
        }
    }
    if (given("mode"))
        agent.set_selection_mode(*modeFromText(inv.agentMode));
    if (given("budget-session"))
        agent.set_budget_per_session_micros(usdToMicros(inv.agentBudgetSessionUsd));
    if (given("budget-day"))
        agent.set_budget_per_day_micros(usdToMicros(inv.agentBudgetDayUsd));
}

void printAgent(const Invocation &inv, const v1::Agent &agent, std::ostream &out)
{
    if (inv.output == OutputFormat::Json)
        out << agentToJson(agent).dump(2) << "\n";
    else
        out << formatAgentDetail(agent);
}

} // namespace

std::string selectionModeText(v1::SelectionMode mode)
{
    switch (mode) {
    case v1::SELECTION_MODE_DEFAULT: return "default";
    case v1::SELECTION_MODE_AGENT: return "agent";
    case v1::SELECTION_MODE_PLATFORM: return "platform";
    case v1::SELECTION_MODE_HUMAN: return "human";
    case v1::SELECTION_MODE_HYBRID: return "hybrid";
    default: return "unspecified";
    }
}

nlohmann::json agentToJson(const v1::Agent &agent)
{
    nlohmann::json records = nlohmann::json::object();
    for (const auto &[key, text] : agent.records_json()) {
        auto value = nlohmann::json::parse(text, nullptr, false);
        records[key] = value.is_discarded() ? nlohmann::json(text) : value;
    }
    return {{"name", agent.name()},
            {"owner", agent.owner()},
            {"default_tier", agent.default_tier()},
            {"allowed_tiers", std::vector<std::string>(agent.allowed_tiers().begin(), agent.allowed_tiers().end())},
            {"selection_mode", selectionModeText(agent.selection_mode())},
            {"budget_per_session_micros", agent.budget_per_session_micros()},
            {"budget_per_day_micros", agent.budget_per_day_micros()},
            {"records", records},
            {"created_unix_ms", agent.created_unix_ms()},
            {"updated_unix_ms", agent.updated_unix_ms()}};
}

std::string formatAgentDetail(const v1::Agent &agent)
{
    std::string out;
    auto line = [&](const char *name, const std::string &value) { out += std::string(name) + ": " + value + "\n"; };
    line("name", agent.name());
    line("owner", agent.owner());
    line("selection mode", selectionModeText(agent.selection_mode()));
    line("default tier", agent.default_tier().empty() ? "(the broker's)" : agent.default_tier());
    line("allowed tiers", joined(agent.allowed_tiers()));
    line("budget per session", agent.budget_per_session_micros() ? formatCost(agent.budget_per_session_micros()) : "none");
    line("budget per day", agent.budget_per_day_micros() ? formatCost(agent.budget_per_day_micros()) : "none");
    std::vector<std::string> keys;
    for (const auto &[key, value] : agent.records_json())
        keys.push_back(key);
    std::sort(keys.begin(), keys.end());
    line("records", std::to_string(keys.size()));
    for (const auto &key : keys)
        out += "  " + key + " = " + truncateText(agent.records_json().at(key), 100) + "\n";
    return out;
}

AgentsSubcommands addAgentsCommands(CLI::App &app, Invocation &inv)
{
    auto *agents = app.add_subcommand("agents", "Agents: durable identities with tier bounds, budgets and records");
    agents->require_subcommand(1);
    AgentsSubcommands commands;
    auto settings = [&](CLI::App *command) {
        commands.editOptions.emplace_back(command->add_option("--owner", inv.agentOwner, "Who answers for the agent"),
                                          "owner");
        commands.editOptions.emplace_back(
            command->add_option("--default-tier", inv.agentDefaultTier, "The tier its sessions start on"), "default-tier");
        commands.editOptions.emplace_back(
            command->add_option("--allow", inv.agentAllowedTiers, "Allowed tiers, comma-separated (empty: any)")
                ->delimiter(','),
            "allow");
        commands.editOptions.emplace_back(
            command->add_option("--mode", inv.agentMode, "Who picks the tier: default, agent, platform, human, hybrid")
                ->check(CLI::IsMember({"default", "agent", "platform", "human", "hybrid"})),
            "mode");
        commands.editOptions.emplace_back(
            command->add_option("--budget-session", inv.agentBudgetSessionUsd, "Budget per session in USD (0: none)"),
            "budget-session");
        commands.editOptions.emplace_back(
            command->add_option("--budget-day", inv.agentBudgetDayUsd, "Budget per day in USD (0: none)"), "budget-day");
    };
    commands.create = agents->add_subcommand("create", "Create an agent");
    commands.create->add_option("NAME", inv.agentName, "Agent name: a-z, 0-9, '.', '_', '-'")->required();
    settings(commands.create);
    commands.list = agents->add_subcommand("ls", "List the agents (the built-in 'default' first)");
    commands.show = agents->add_subcommand("show", "Show an agent with its records");
    commands.show->add_option("NAME", inv.agentName, "Agent name")->required();
    commands.edit = agents->add_subcommand("edit", "Change an agent's settings (only those given)");
    commands.edit->add_option("NAME", inv.agentName, "Agent name")->required();
    settings(commands.edit);
    auto *records = agents->add_subcommand("records", "An agent's durable records (key -> JSON document)");
    records->require_subcommand(1);
    commands.recordsSet = records->add_subcommand("set", "Set one record, e.g. `agents records set bot repo '{\"branch\":\"main\"}'`");
    commands.recordsSet->add_option("NAME", inv.agentName, "Agent name")->required();
    commands.recordsSet->add_option("KEY", inv.recordKey, "Record key")->required();
    commands.recordsSet->add_option("JSON", inv.recordJson, "The record: one JSON document")->required();
    commands.recordsGet = records->add_subcommand("get", "Print records (all, or one KEY)");
    commands.recordsGet->add_option("NAME", inv.agentName, "Agent name")->required();
    commands.recordsGet->add_option("KEY", inv.recordKey, "Record key (default: all)");
    return commands;
}

std::optional<Command> parsedAgentsCommand(const AgentsSubcommands &commands, Invocation &inv)
{
    for (const auto &[option, name] : commands.editOptions) {
        if (option->count() > 0)
            inv.agentGiven.insert(name);
    }
    if (commands.create && commands.create->parsed())
        return Command::AgentsCreate;
    if (commands.list && commands.list->parsed())
        return Command::AgentsList;
    if (commands.show && commands.show->parsed())
        return Command::AgentsShow;
    if (commands.edit && commands.edit->parsed())
        return Command::AgentsEdit;
    if (commands.recordsSet && commands.recordsSet->parsed())
        return Command::AgentsRecordsSet;
    if (commands.recordsGet && commands.recordsGet->parsed())
        return Command::AgentsRecordsGet;
    return std::nullopt;
}

namespace {

grpc::Status getAgent(const Invocation &inv, const BrokerCall &call, v1::Agent &agent)
{
    v1::GetAgentRequest request;
    request.set_name(inv.agentName);
    return call.unary(&GovernanceStub::GetAgent, request, agent);
}

int createAgent(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::Agent agent;
    agent.set_name(inv.agentName);
    applySettings(inv, agent);
    v1::Agent created;
    const grpc::Status status = call.unary(&GovernanceStub::CreateAgent, agent, created);
    if (!status.ok())
        return call.fail(err, "cannot create agent " + inv.agentName, status);
    printAgent(inv, created, out);
    return toInt(ExitCode::Ok);
}

int listAgents(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    std::vector<v1::Agent> agents;
    std::string token;
    do {
        v1::ListAgentsRequest request;
        request.set_page_token(token);
        v1::ListAgentsResponse response;
        const grpc::Status status = call.unary(&GovernanceStub::ListAgents, request, response);
        if (!status.ok())
            return call.fail(err, "cannot list agents", status);
        agents.insert(agents.end(), response.agents().begin(), response.agents().end());
        token = response.next_page_token();
    } while (!token.empty());
    if (inv.output == OutputFormat::Json) {
        for (const auto &agent : agents)
            out << agentToJson(agent).dump() << "\n";
        return toInt(ExitCode::Ok);
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto &agent : agents) {
        rows.push_back({agent.name(), selectionModeText(agent.selection_mode()),
                        agent.default_tier().empty() ? "-" : agent.default_tier(), joined(agent.allowed_tiers()),
                        agent.budget_per_session_micros() ? formatCost(agent.budget_per_session_micros()) : "-",
                        std::to_string(agent.records_json_size()), agent.owner()});
    }
    out << renderTable({"NAME", "MODE", "DEFAULT", "ALLOWED", "BUDGET/SESSION", "RECORDS", "OWNER"}, rows, {5});
    return toInt(ExitCode::Ok);
}

int showAgent(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::Agent agent;
    const grpc::Status status = getAgent(inv, call, agent);
    if (!status.ok())
        return call.fail(err, "cannot show agent " + inv.agentName, status, "`paddockctl agents ls` lists them");
    printAgent(inv, agent, out);
    return toInt(ExitCode::Ok);
}

// agents edit and agents records set: read the agent, change it, send it back.
int changeAgent(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    const std::string action = inv.command == Command::AgentsEdit ? "cannot edit agent " + inv.agentName
                                                                  : "cannot set record " + inv.recordKey + " of agent "
                                                                      + inv.agentName;
    v1::Agent agent;
    grpc::Status status = getAgent(inv, call, agent);
    if (!status.ok())
        return call.fail(err, action, status);
    if (inv.command == Command::AgentsEdit) {
        if (inv.agentGiven.empty()) {
            err << "paddockctl agents edit: nothing to change: give --owner, --default-tier, --allow, --mode, "
                   "--budget-session or --budget-day\n";
            return toInt(ExitCode::Usage);
        }
        applySettings(inv, agent);
        agent.clear_records_json();   // records are kept; only those sent are set
    } else {
        agent.clear_records_json();
        (*agent.mutable_records_json())[inv.recordKey] = inv.recordJson;
    }
    v1::Agent updated;
    status = call.unary(&GovernanceStub::UpdateAgent, agent, updated);
    if (!status.ok())
        return call.fail(err, action, status);
    printAgent(inv, updated, out);
    return toInt(ExitCode::Ok);
}

int printRecords(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    v1::Agent agent;
    const grpc::Status status = getAgent(inv, call, agent);
    if (!status.ok())
        return call.fail(err, "cannot read the records of agent " + inv.agentName, status);
    nlohmann::json records = agentToJson(agent)["records"];
    if (!inv.recordKey.empty()) {
        if (!records.contains(inv.recordKey)) {
            err << "paddockctl: agent " << inv.agentName << " has no record '" << inv.recordKey
                << "': `paddockctl agents records get " << inv.agentName << "` lists them\n";
            return toInt(ExitCode::NotFound);
        }
        out << records[inv.recordKey].dump(2) << "\n";
    } else {
        out << records.dump(2) << "\n";
    }
    return toInt(ExitCode::Ok);
}

} // namespace

int runAgentsCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    switch (inv.command) {
    case Command::AgentsCreate: return createAgent(inv, call, out, err);
    case Command::AgentsList: return listAgents(inv, call, out, err);
    case Command::AgentsShow: return showAgent(inv, call, out, err);
    case Command::AgentsEdit:
    case Command::AgentsRecordsSet: return changeAgent(inv, call, out, err);
    case Command::AgentsRecordsGet: return printRecords(inv, call, out, err);
    default:
        return toInt(ExitCode::Error);
    }
}

} // namespace paddock::cli
