#pragma once
// Server-sent events (the text/event-stream format both model APIs stream in): bytes in, events out.
// Chunks may end anywhere (inside a line, between a CR and its LF); lines end in LF, CRLF or CR;
// comment lines (": ...") are skipped; an event's data lines are joined with "\n". An event is
// handed out at the blank line that ends it.
//
// Stricter than a browser's EventSource, on purpose: a model API that sends a field other than
// data, event, id or retry, or a line past kMaxSseLineBytes, is not speaking SSE (a proxy's error
// page, a wrong base_url), and the caller is better told so than left waiting for an event.
//
// Threads: one parser per response; not thread-safe.

#include "common/result.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace paddock::llm {

inline constexpr size_t kMaxSseLineBytes = 4 * 1024 * 1024;

struct SseEvent {
    std::string event;   // the event field; empty when the event named none ("message")
    std::string data;    // its data lines, joined with "\n"
    std::string id;
};

class SseParser {
public:
    // Appends the events `bytes` complete to `out`. InvalidArgument naming the line when the input
    // is not SSE; the parser then refuses everything after it.
    Status feed(std::string_view bytes, std::vector<SseEvent> &out);
    // The response ended: InvalidArgument when it ended inside an event (a line or data not yet
    // closed by a blank line). A final line with no newline is an unfinished event too.
    Status finish() const;

private:
    Status endLine(std::vector<SseEvent> &out);

    std::string m_line;        // the line so far
    bool m_afterCr = false;    // the last byte was a CR: an LF next belongs to it
    SseEvent m_event;          // the event so far
    bool m_hasData = false;    // m_event has a data line
    bool m_pending = false;    // a field of an event not yet dispatched was read
    std::string m_error;       // once set, every feed fails with it
};

} // namespace paddock::llm
