#pragma once
// The engine's dispatch table: which part of the step engine carries out each tool. step() sends a
// tool call nowhere else, so this is the list of the tools the engine supports; it must name
// exactly the tools of the tool catalogue (broker/llm/tool_catalogue.h), which the models are
// offered and the playbooks are checked against (tests/unit/broker/llm/tool_catalogue_test.cpp
// fails when the two differ).
//
// Threads: a constant table; any thread.

#include <optional>
#include <span>
#include <string_view>

namespace paddock::engine {

enum class ToolRoute {
    Sandbox,   // runTool: in the session's sandbox, through its pool (step_engine_tools.cpp)
    Broker,    // runBrokerTool: answered by the broker, no sandbox (step_engine_broker_tools.cpp)
    Review,    // proposeChange: policy, maybe a review, then applied (step_engine_changes.cpp)
    Finish,    // ends the session (decide() makes it an ActionKind::Finish)
};

struct ToolRouteEntry {
    std::string_view tool;
    ToolRoute route;
};

std::span<const ToolRouteEntry> toolRoutes();
// nullopt for a tool the engine does not carry out.
std::optional<ToolRoute> toolRoute(std::string_view tool);

} // namespace paddock::engine
