#pragma once
// What the pieces of StepEngine share: step_engine.cpp (leases, the worker loops, dispatch of one
// step) and step_engine_*.cpp (one file per kind of effect: sandbox, model, tools, changes, tiers,
// billing, broker-side tools). Not for use outside broker/engine.
//
// Threads: every function here is either pure or works on the pool client it is given; they are
// called by the step workers and the idle releaser, never while m_leasesMutex is held.

#include "broker/engine/step_engine.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace paddock::engine {

// Failover events (docs/events.md): the pool holding the session's sandbox was lost; the session
// then claims elsewhere and says so. sandbox.waiting: no pool can take the claim now.
inline constexpr const char *kSandboxLost = core::kind::SandboxLost;
inline constexpr const char *kSandboxMoved = core::kind::SandboxMoved;
inline constexpr const char *kSandboxWaiting = core::kind::SandboxWaiting;

// StepOutcome::note of a replayOnly RunTool the pool had no run for: the command never started.
inline constexpr const char *kNothingRan = "the command never started in this sandbox";

// An event to append, its payload dumped as JSON (invalid UTF-8 replaced). step_engine.cpp.
core::NewEvent event(const char *kind, const nlohmann::json &payload);

// A tool call's string argument; empty when missing or not a string. step_engine.cpp.
std::string stringArg(const llm::ToolCall &call, const char *key);

// The fields every tool.result starts with: call_id and name. step_engine.cpp.
nlohmann::json toolResultBase(const llm::ToolCall &call);

// Wall clock, milliseconds since the epoch. step_engine.cpp.
int64_t nowUnixMs();

// Keeps the head and the tail of a long output, which is where compilers and test runners put what
// matters, and says how much was left out. step_engine_tools.cpp.
std::string clipOutput(const std::string &data, bool *clipped);

// Every command the broker runs for a session carries the hosts approved for it; the pool's proxy
// allows them while that command runs (docs/egress.md, "Approved hosts"). step_engine_tools.cpp.
std::vector<pool_client::EgressGrant> egressGrants(const core::SessionState &state);

// The sandbox.claimed event of a claim on the named pool. step_engine_sandbox.cpp.
core::NewEvent sandboxClaimed(const std::string &pool, const pool_client::ClaimedSandbox &claimed, double pricePerHour);

} // namespace paddock::engine
