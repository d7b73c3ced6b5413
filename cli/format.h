#pragma once
// How paddockctl shows sessions, events and pools: aligned tables for people, JSON for scripts.
// Pure functions of their inputs (the current time is a parameter) so tests pin the output.
//
// Threads: free functions over values; call from anywhere.

#include "paddock/v1/access.pb.h"
#include "paddock/v1/governance.pb.h"
#include "paddock/v1/operations.pb.h"
#include "paddock/v1/sessions.pb.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace paddock::cli {

enum class OutputFormat { Table, Json };

// "queued", "running", "waiting_approval", ...; "unknown" for unspecified values.
std::string statusName(paddock::v1::SessionStatus status);
std::optional<paddock::v1::SessionStatus> statusFromName(std::string_view name);
bool isFinal(paddock::v1::SessionStatus status);

std::string formatCost(int64_t costMicros);              // "$0.0012": dollars with 4 decimals
std::string formatAge(int64_t sinceUnixMs, int64_t nowUnixMs);  // "42s", "5m", "3h", "2d"; "-" for no time (0)
std::string formatSpan(int64_t ms);                                // the same units, for a length of time
// "HH:MM:SS.mmm", local time unless utc.
std::string formatClock(int64_t unixMs, bool utc = false);
std::string formatIsoTime(int64_t unixMs);                // "2024-05-01T12:00:00.123Z"

// Cuts text to at most width characters (UTF-8 aware), ending in "..." when cut; newlines become spaces.
std::string truncateText(std::string_view text, size_t width);

// Rows under a header, columns padded to their widest cell, two spaces apart. rightAligned lists
// column indexes to right-align (numbers). The last column is never padded.
std::string renderTable(const std::vector<std::string> &header, const std::vector<std::vector<std::string>> &rows,
                        const std::vector<size_t> &rightAligned = {});

nlohmann::json sessionToJson(const paddock::v1::Session &session);
// ID, STATUS, AGENT, TIER, STEPS, COST, AGE, GOAL (truncated).
std::string formatSessionTable(std::span<const paddock::v1::Session> sessions, int64_t nowUnixMs);
// `show`: one field a line.
std::string formatSessionDetail(const paddock::v1::Session &session, int64_t nowUnixMs);

nlohmann::json eventToJson(const paddock::v1::Event &event);
// One line: seq, time, kind and the event in words (trace/event_summary.h, the console's words);
// tool.result adds its output, indented, and tool.output (a running command's output) its lines;
// with `state`, a result whose output was shown live does not show it again. Everything an agent
// wrote is escaped (trace/safe_text.h), so a terminal shows its escape sequences instead of running
// them.
// What formatEvent remembers between the events of one stream: the calls whose output was shown
// live (tool.output), so their tool.result does not print the same lines again.
struct EventPrintState {
    std::unordered_set<std::string> shownLive;
};
std::string formatEvent(const paddock::v1::Event &event, bool utc = false, EventPrintState *state = nullptr);
// costMicros: a cost event's amount, which its line then names; -1 leaves it out.
std::string eventSummary(std::string_view kind, std::string_view payloadJson, int64_t costMicros = -1);

nlohmann::json poolsToJson(const paddock::v1::ListPoolsResponse &pools);
std::string formatPoolsTable(const paddock::v1::ListPoolsResponse &pools);

} // namespace paddock::cli
