#include "broker/engine/tool_routes.h"

#include "broker/llm/model_adapter.h"

#include <algorithm>
#include <array>

namespace paddock::engine {

namespace {

constexpr std::array kRoutes{
    ToolRouteEntry{llm::tool::RunCommand, ToolRoute::Sandbox},
    ToolRouteEntry{llm::tool::WriteFile, ToolRoute::Sandbox},
    ToolRouteEntry{llm::tool::ReadFile, ToolRoute::Sandbox},
    ToolRouteEntry{llm::tool::ReadRecords, ToolRoute::Broker},
    ToolRouteEntry{llm::tool::RequestEnvironment, ToolRoute::Broker},
    ToolRouteEntry{llm::tool::Finish, ToolRoute::Finish},
    ToolRouteEntry{llm::tool::ProposeChange, ToolRoute::Review},
};

} // namespace

std::span<const ToolRouteEntry> toolRoutes()
{
    return kRoutes;
}

std::optional<ToolRoute> toolRoute(std::string_view tool)
{
    const auto it = std::ranges::find(kRoutes, tool, &ToolRouteEntry::tool);
    if (it == kRoutes.end())
        return std::nullopt;
    return it->route;
}

} // namespace paddock::engine
