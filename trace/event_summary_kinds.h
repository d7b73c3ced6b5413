#pragma once
// The table from event kind to the function that puts it in words, split over the files that
// write them. Internal to paddock_trace.
//
// Threads: pure functions; call from anywhere.

#include "trace/event_summary.h"

#include <utility>

namespace paddock::trace::kinds {

using Describe = void (*)(std::string_view kind, const nlohmann::json &payload, EventLine &line);
using Entry = std::pair<std::string_view, Describe>;

// event_summary.cpp: the session, the model and tools.
std::vector<Entry> sessionKinds();
// event_summary_sandbox.cpp: sandboxes, checkpoints, egress, debug shells.
std::vector<Entry> sandboxKinds();
// event_summary_governance.cpp: tiers, cost, budgets, reviews.
std::vector<Entry> governanceKinds();

} // namespace paddock::trace::kinds
