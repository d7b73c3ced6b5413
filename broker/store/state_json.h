#pragma once
// SessionState <-> the JSON kept in the sessions projection's `state` column. Thread-agnostic.

#include "broker/core/session_state.h"

#include <optional>
#include <string>
#include <string_view>

namespace paddock::store {

std::string sessionStateToJson(const core::SessionState &state);
// nullopt when the text is not a JSON object; missing fields keep their defaults, so a column
// written by an older build with fewer fields still reads.
std::optional<core::SessionState> sessionStateFromJson(std::string_view text);

} // namespace paddock::store
