#pragma once
// Agents: durable identities that outlive every session and sandbox (docs/governance.md, "Agents and
// environment decisions"). Plain data and pure checks; thread-agnostic, copy freely.

#include "common/result.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::agents {

// Who chooses a session's tier (docs/governance.md).
enum class SelectionMode { Default, Agent, Platform, Human, Hybrid };

const char *selectionModeName(SelectionMode mode);   // "default", "agent", ...
std::optional<SelectionMode> selectionModeFromName(std::string_view name);

struct Agent {
    std::string name;
    std::string owner;
    std::string defaultTier;                 // empty: the broker's default tier
    std::vector<std::string> allowedTiers;   // empty: every tier the pools offer
    SelectionMode selectionMode = SelectionMode::Default;
    int64_t budgetPerSessionMicros = 0;      // 0: no budget
    int64_t budgetPerDayMicros = 0;
    std::map<std::string, std::string> records;   // key -> JSON document
    int64_t createdUnixMs = 0;
    int64_t updatedUnixMs = 0;

    // allowedTiers, or every offered tier when it is empty.
    bool allows(const std::string &tier) const;
};

// The agent every session without an agent runs as: always present, never stored, selection mode
// default, the broker's default tier.
inline constexpr const char *kDefaultAgentName = "default";
Agent builtInDefaultAgent(const std::string &brokerDefaultTier);

// Limits of what an agent may hold.
inline constexpr size_t kMaxAgentNameBytes = 64;
inline constexpr size_t kMaxRecordKeyBytes = 256;
inline constexpr size_t kMaxRecordBytes = 256 * 1024;

// InvalidArgument naming the problem and the fix, or ok. A name: 1-64 of [a-z0-9._-], starting
// with a letter or digit.
Status validateAgentName(std::string_view name);
// A record key: 1-256 printable ASCII bytes without spaces; the value: one JSON document.
Status validateRecord(std::string_view key, std::string_view json);
// The whole agent. knownTiers: the tiers the broker's pools offer; nullopt when no pool answers
// (tiers are then not checked, only their form).
Status validateAgent(const Agent &agent, const std::optional<std::set<std::string>> &knownTiers);

} // namespace paddock::agents
