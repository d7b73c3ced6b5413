#include "cli/trace_command.h"

#include "cli/exit_codes.h"

#include <fmt/format.h>

#include <cmath>

namespace paddock::cli {
namespace {

// A span's duration for people; a mark has none.
std::string durationText(const trace::Span &span)
{
    if (span.mark)
        return "-";
    if (span.open())
        return span.queued ? "queued" : "running";
    const int64_t ms = span.endMs - span.startMs;
    if (ms < 1000)
        return std::to_string(ms) + " ms";
    if (ms < 60'000)
        return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000.0);
    return formatOffset(ms).substr(1);
}

} // namespace

std::string formatOffset(int64_t ms)
{
    const char *sign = ms < 0 ? "-" : "+";
    ms = std::llabs(ms);
    const int64_t s = ms / 1000;
    if (s < 60)
        return fmt::format("{}{}.{:03}s", sign, s, ms % 1000);
    if (s < 3600)
        return fmt::format("{}{}:{:02}.{:03}", sign, s / 60, s % 60, ms % 1000);
    return fmt::format("{}{}:{:02}:{:02}", sign, s / 3600, s / 60 % 60, s % 60);
}

std::string formatTrace(const trace::SpanBuilder &spans)
{
    std::string out = fmt::format("{:>12}  {:>9}  {:<12} {}\n", "START", "DURATION", "KIND", "WHAT");
    int step = -1;
    for (const trace::Span &span : spans.spans()) {
        if (span.step != step) {
            step = span.step;
            out += step == 0 ? "before the first model call\n" : fmt::format("step {}\n", step);
        }
        std::string what = span.label;
        if (!span.outcome.empty())
            what += (what.empty() ? "" : " → ") + span.outcome;
        if (span.interrupted)
            what += " (cut short)";
        out += fmt::format("{:>12}  {:>9}  {:<12} {}\n", formatOffset(span.startMs - spans.originMs()), durationText(span),
                           std::string(trace::spanKindName(span.kind)) + (span.error ? " !" : ""), what);
    }
    if (spans.spans().empty())
        out += "(no spans yet: the session has not called its model or claimed a sandbox)\n";
    return out;
}

nlohmann::json spanToJson(const trace::Span &span, int64_t originMs)
{
    nlohmann::json j{
        {"step", span.step},
        {"kind", trace::spanKindName(span.kind)},
        {"start_unix_ms", span.startMs},
        {"start_offset_ms", span.startMs - originMs},
        {"end_unix_ms", span.open() ? nlohmann::json() : nlohmann::json(span.endMs)},
        {"duration_ms", span.open() ? nlohmann::json() : nlohmann::json(span.endMs - span.startMs)},
        {"open", span.open()},
        {"mark", span.mark},
        {"error", span.error},
        {"queued", span.queued},
        {"interrupted", span.interrupted},
        {"start_seq", span.startSeq},
        {"end_seq", span.endSeq},
        {"key", span.key},
        {"label", span.label},
        {"outcome", span.outcome},
    };
    return j;
}

int runTraceCommand(const Invocation &inv, const BrokerCall &call, std::ostream &out, std::ostream &err)
{
    const std::string action = "cannot read the events of session " + inv.sessionId;
    v1::StreamEventsRequest request;
    request.set_session_id(inv.sessionId);
    request.set_from_seq(1);
    request.set_follow(false);
    grpc::ClientContext context;
    call.setDeadline(context);
    auto reader = call.stubs.sessions->StreamEvents(&context, request);
    trace::SpanBuilder spans;
    v1::EventBatch batch;
    while (reader->Read(&batch)) {
        for (const auto &event : batch.events())
            spans.apply(event.seq(), event.time_unix_ms(), event.kind(), std::string_view(event.payload_json()));
    }
    const grpc::Status status = reader->Finish();
    if (!status.ok()) {
        const std::string hint = status.error_code() == grpc::StatusCode::NOT_FOUND
            ? "check the id; `paddockctl ls` lists the sessions this broker knows" : std::string();
        return call.fail(err, action, status, hint);
    }
    if (inv.output == OutputFormat::Json) {
        for (const trace::Span &span : spans.spans())
            out << spanToJson(span, spans.originMs()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
        out << formatTrace(spans);
    }
    return toInt(ExitCode::Ok);
}

} // namespace paddock::cli
