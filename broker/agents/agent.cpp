#include "broker/agents/agent.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace paddock::agents {

namespace {

struct ModeName {
    SelectionMode mode;
    const char *name;
};

constexpr std::array kModeNames{
    ModeName{SelectionMode::Default, "default"}, ModeName{SelectionMode::Agent, "agent"},
    ModeName{SelectionMode::Platform, "platform"}, ModeName{SelectionMode::Human, "human"},
    ModeName{SelectionMode::Hybrid, "hybrid"},
};

std::string joined(const std::set<std::string> &names)
{
    std::string out;
    for (const auto &name : names)
        out += (out.empty() ? "" : ", ") + name;
    return out.empty() ? "(none)" : out;
}

} // namespace

const char *selectionModeName(SelectionMode mode)
{
    for (const auto &entry : kModeNames) {
        if (entry.mode == mode)
            return entry.name;
    }
    return "default";
}

std::optional<SelectionMode> selectionModeFromName(std::string_view name)
{
    for (const auto &entry : kModeNames) {
        if (name == entry.name)
            return entry.mode;
    }
    return std::nullopt;
}

bool Agent::allows(const std::string &tier) const
{
    return allowedTiers.empty() || std::ranges::find(allowedTiers, tier) != allowedTiers.end();
}

Agent builtInDefaultAgent(const std::string &brokerDefaultTier)
{
    Agent agent;
    agent.name = kDefaultAgentName;
    agent.owner = "paddock";
    agent.defaultTier = brokerDefaultTier;
    agent.selectionMode = SelectionMode::Default;
    return agent;
}

Status validateAgentName(std::string_view name)
{
    const std::string fix = "use 1 to 64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit "
                            "(e.g. \"build-bot\")";
    if (name.empty())
        return fail(ErrorCode::InvalidArgument, "the agent has no name: " + fix);
    if (name.size() > kMaxAgentNameBytes)
        return fail(ErrorCode::InvalidArgument, "agent name '" + std::string(name.substr(0, 20)) + "...' is "
                        + std::to_string(name.size()) + " bytes long: " + fix);
    auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    if (!alnum(name.front()))
        return fail(ErrorCode::InvalidArgument, "agent name '" + std::string(name) + "' does not start with a "
                        "lower-case letter or digit: " + fix);
    for (char c : name) {
        if (!alnum(c) && c != '.' && c != '_' && c != '-')
            return fail(ErrorCode::InvalidArgument, "agent name '" + std::string(name) + "' contains '"
                            + std::string(1, c) + "': " + fix);
    }
    return {};
}

Status validateRecord(std::string_view key, std::string_view json)
{
    if (key.empty() || key.size() > kMaxRecordKeyBytes)
        return fail(ErrorCode::InvalidArgument, "record key '" + std::string(key.substr(0, 40)) + "' must be 1 to "
                        + std::to_string(kMaxRecordKeyBytes) + " bytes long");
    for (unsigned char c : key) {
        if (c <= ' ' || c >= 127)
            return fail(ErrorCode::InvalidArgument, "record key '" + std::string(key) + "' contains a space or a "
                            "non-printable byte: use printable ASCII such as \"repos/paddock\"");
    }
    if (json.size() > kMaxRecordBytes)
        return fail(ErrorCode::InvalidArgument, "record '" + std::string(key) + "' is " + std::to_string(json.size())
                        + " bytes; a record holds at most " + std::to_string(kMaxRecordBytes)
                        + " bytes: split it over several keys");
    const auto parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded())
        return fail(ErrorCode::InvalidArgument, "record '" + std::string(key) + "' is not a JSON document: "
                        + std::string(json.substr(0, 60)) + (json.size() > 60 ? "..." : "")
                        + ". Quote text as a JSON string (e.g. '\"main\"') or give an object such as '{\"branch\": \"main\"}'");
    return {};
}

Status validateAgent(const Agent &agent, const std::optional<std::set<std::string>> &knownTiers)
{
    if (auto status = validateAgentName(agent.name); !status)
        return status;
    if (agent.name == kDefaultAgentName)
        return fail(ErrorCode::InvalidArgument, "agent 'default' is built in and cannot be created or edited; pick "
                        "another name");
    if (agent.budgetPerSessionMicros < 0 || agent.budgetPerDayMicros < 0)
        return fail(ErrorCode::InvalidArgument, "agent '" + agent.name + "' has a negative budget ("
                        + std::to_string(std::min(agent.budgetPerSessionMicros, agent.budgetPerDayMicros))
                        + " micro-USD): give 0 for no budget, or a positive amount");
    auto checkTier = [&](const std::string &tier, const char *what) -> Status {
        if (tier.empty())
            return fail(ErrorCode::InvalidArgument, std::string("agent '") + agent.name + "' has an empty name in its "
                            + what + ": remove it");
        if (knownTiers && !knownTiers->contains(tier))
            return fail(ErrorCode::InvalidArgument, std::string("agent '") + agent.name + "': unknown tier '" + tier
                            + "' in its " + what + "; the pools offer: " + joined(*knownTiers)
                            + ". Pick one of those, or add the tier to a pool's configuration");
        return {};
    };
    if (!agent.defaultTier.empty()) {
        if (auto status = checkTier(agent.defaultTier, "default tier"); !status)
            return status;
    }
    std::set<std::string> seen;
    for (const auto &tier : agent.allowedTiers) {
        if (auto status = checkTier(tier, "allowed tiers"); !status)
            return status;
        if (!seen.insert(tier).second)
            return fail(ErrorCode::InvalidArgument, "agent '" + agent.name + "' lists tier '" + tier
                            + "' twice in its allowed tiers: list each once");
    }
    if (!agent.defaultTier.empty() && !agent.allows(agent.defaultTier))
        return fail(ErrorCode::InvalidArgument, "agent '" + agent.name + "': its default tier '" + agent.defaultTier
                        + "' is not among its allowed tiers (" + joined(seen) + "); add it to the allowed tiers "
                        "or pick one of them as the default");
    for (const auto &[key, json] : agent.records) {
        if (auto status = validateRecord(key, json); !status)
            return status;
    }
    return {};
}

} // namespace paddock::agents
