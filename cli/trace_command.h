#pragma once
// paddockctl trace ID: a session's span timeline as text (trace/spans.h): model calls, tool calls,
// claims, restores, moves and waits, each with its start (from the session's first event), its
// duration or "running", its kind and what it was, grouped by step (a model call and the calls it
// led to); egress attempts, failures and overrides as marks. --output json: one span per line.
//
// Threads: everything runs on the caller's thread, like the rest of paddockctl.

#include "cli/app.h"
#include "cli/broker_call.h"
#include "trace/spans.h"

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>

namespace paddock::cli {

// The timeline of spans, pure: what `trace` prints for people. sessionEnded: open spans read
// "running" (false) or were ended with the session (true; SpanBuilder did that).
std::string formatTrace(const trace::SpanBuilder &spans);
// One span for scripts: times in Unix ms and as offsets from the session's first event.
nlohmann::json spanToJson(const trace::Span &span, int64_t originMs);
// "+0.050s", "+1:02.300", "+1:02:03": an offset from the session's start.
std::string formatOffset(int64_t ms);

int runTraceCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err);

} // namespace paddock::cli
