#pragma once
// Every event kind of the session log (docs/events.md) in words: one line a person reads without
// JSON ("checkpoint 12 files, 3 changed, 1 removed, 48 KiB sent, 35 ms"), and the few figures the
// console puts in columns of their own. paddockctl events prints these lines; the console's trace
// shows them.
//
// Every piece of payload text in a summary went through safeLine (trace/safe_text.h): no control
// character or terminal escape sequence, valid UTF-8, long text cut. A summary is at most
// kMaxSummaryChars characters.
//
// A kind with no words of its own (a newer broker's) is shown as its scalar fields, key=value.
//
// Threads: pure functions; call from anywhere.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::trace {

inline constexpr size_t kMaxSummaryChars = 240;

// What a row shows of one event.
struct EventLine {
    std::string summary;          // one line, safe (see above)
    int64_t latencyMs = -1;       // a duration the event reports (a model call, a command, a claim); -1: none
    int64_t tokens = 0;           // input + output tokens of a model response
    bool isError = false;         // something failed: a command, a model call, a sandbox
    bool hasDetails = false;      // there is more to read than the line (output, a model's text)
    std::string postMortemPool;   // the post-mortem a failed command left, when it names one
    std::string postMortemSandbox;
};

// costMicros: the event's cost; a cost event's line ends with it ("..., $0.0008"). -1: not known.
EventLine describeEvent(std::string_view kind, const nlohmann::json &payload, int64_t costMicros = -1);
// The same from the payload's JSON text; a payload that is not a JSON object is shown as its text.
EventLine describeEvent(std::string_view kind, std::string_view payloadJson, int64_t costMicros = -1);

inline std::string summarize(std::string_view kind, const nlohmann::json &payload, int64_t costMicros = -1)
{
    return describeEvent(kind, payload, costMicros).summary;
}
inline std::string summarize(std::string_view kind, std::string_view payloadJson, int64_t costMicros = -1)
{
    return describeEvent(kind, payloadJson, costMicros).summary;
}

// The kinds that have words of their own (the rest fall back to key=value).
std::vector<std::string_view> kindsWithSummaries();
bool hasOwnSummary(std::string_view kind);

// Parses a payload for a summary: the whole JSON object, or a discarded value when it is not one.
// Never throws.
nlohmann::json parsePayload(std::string_view payloadJson);

} // namespace paddock::trace
