// step_fold_bench: the cost of deciding one step of a session whose log has 100, 10,000 and 100,000
// events, with the engine's cached fold (apply the one new event, then decide()) against decide()
// over the whole log (the way every step paid before the fold was kept). Prints figures; not a test.
//
// The log is a realistic mix, one step after another: model.response with one run_command call, a
// model cost event, the tool.call, the tool.result with ~400 bytes of stdout, a sandbox cost event.
// A "cached step" is the mean over the last 50 events of the log, each applied to a fold of
// everything before it and followed by decide(): every kind of event of the mix is in it. Each figure
// is the best of several rounds, so a burst of load from something else does not decide the ratio.
//
// The model's conversation is measured too: modelContext() copies it (the model call sends all of
// it anyway), so it grows with the log in both columns; the copy saves the parsing.

#include "broker/engine/decide.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using paddock::core::Event;
using paddock::engine::SessionFold;
using nlohmann::json;
namespace kind = paddock::core::kind;
using Clock = std::chrono::steady_clock;

constexpr size_t kStepEvents = 50;   // the cached step's figure is the mean over this many events

std::vector<Event> realisticLog(size_t count)
{
    std::vector<Event> events;
    auto add = [&](const char *eventKind, const json &payload, int64_t costMicros = 0) {
        Event event;
        event.sessionId = "bench-session";
        event.seq = static_cast<int64_t>(events.size()) + 1;
        event.timeUnixMs = 1'700'000'000'000 + event.seq * 250;
        event.kind = eventKind;
        event.payload = payload.dump();
        event.costMicros = costMicros;
        events.push_back(std::move(event));
    };
    add(kind::SessionCreated, {{"goal", "make the tests pass"}, {"model", "scripted"}, {"tier", "lite"},
                               {"agent", "bench"}, {"playbook_toml", "[[step]]\nrun = \"make\"\n"}});
    add(kind::SandboxClaimed, {{"sandbox_id", "sb-1"}, {"pool", "local"}, {"tier", "lite"}, {"price_per_hour", 0.05}});
    std::string stdoutText;
    for (int line = 0; stdoutText.size() < 400; ++line)
        stdoutText += "[" + std::to_string(line) + "/40] Building CXX object src/unit_" + std::to_string(line) + ".o\n";
    while (events.size() < count) {
        const size_t step = (events.size() - 2) / 5;
        const std::string id = "call-" + std::to_string(step);
        const json arguments = {{"command", "make -j8 target_" + std::to_string(step)}, {"timeout_ms", 600000}};
        switch ((events.size() - 2) % 5) {
        case 0:
            add(kind::ModelResponse, {{"text", "Building the next target."}, {"model", "scripted"},
                                      {"tool_calls", json::array({{{"id", id}, {"name", "run_command"}, {"arguments", arguments}}})},
                                      {"usage", {{"input_tokens", 1200 + step}, {"output_tokens", 40}, {"cached_tokens", 1000}}}});
            break;
        case 1: add(kind::Cost, {{"kind", "model"}, {"model", "scripted"}}, 120); break;
        case 2: add(kind::ToolCall, {{"call_id", id}, {"name", "run_command"}, {"arguments", arguments}}); break;
        case 3:
            add(kind::ToolResult, {{"call_id", id}, {"name", "run_command"}, {"exit_code", 0}, {"stdout", stdoutText},
                                   {"stderr", ""}, {"duration_ms", 840}, {"timed_out", false}});
            break;
        default: add(kind::Cost, {{"kind", "sandbox"}, {"until_unix_ms", events.back().timeUnixMs}}, 12); break;
        }
    }
    return events;
}

double microsSince(Clock::time_point start)
{
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

struct Figures {
    double spanDecideUs = 1e300;     // decide(span) over the whole log
    double foldStepUs = 1e300;       // apply(one event) + decide()
    double firstFoldUs = 1e300;      // a fold built from the whole log (a broker taking the session up)
    double spanContextUs = 1e300;    // buildModelContext(span)
    double foldContextUs = 1e300;    // modelContext()
};

Figures measure(const std::vector<Event> &events, int rounds)
{
    Figures figures;
    const std::span<const Event> all(events);
    volatile size_t sink = 0;
    for (int round = 0; round < rounds; ++round) {
        auto start = Clock::now();
        sink = sink + paddock::engine::decide(all).idempotencyKey.size();
        figures.spanDecideUs = std::min(figures.spanDecideUs, microsSince(start));

        // Not timed, and built by apply() rather than copied: a copied vector has no spare capacity,
        // so the next model.response would pay for moving the whole conversation, which a fold the
        // engine keeps pays only as often as the vector doubles.
        SessionFold fold;
        fold.apply(all.first(all.size() - kStepEvents));
        start = Clock::now();
        for (const Event &event : all.last(kStepEvents)) {
            fold.apply(event);
            sink = sink + static_cast<size_t>(fold.decide().kind);
        }
        figures.foldStepUs = std::min(figures.foldStepUs, microsSince(start) / kStepEvents);

        start = Clock::now();
        SessionFold whole;
        whole.apply(all);
        figures.firstFoldUs = std::min(figures.firstFoldUs, microsSince(start));

        start = Clock::now();
        sink = sink + paddock::engine::buildModelContext(all).history.size();
        figures.spanContextUs = std::min(figures.spanContextUs, microsSince(start));

        start = Clock::now();
        sink = sink + whole.modelContext().history.size();
        figures.foldContextUs = std::min(figures.foldContextUs, microsSince(start));
    }
    return figures;
}

} // namespace

int main()
{
    std::printf("one step's decide: the cached fold (apply 1 event + decide()) against decide(span) over the whole log\n");
    std::printf("%9s %15s %15s %10s %15s | %18s %17s %8s\n", "events", "decide(span) us", "fold step us",
                "x faster", "first fold us", "buildContext(span)", "modelContext() us", "x faster");
    for (size_t count : {size_t{100}, size_t{10'000}, size_t{100'000}}) {
        const std::vector<Event> events = realisticLog(count);
        const int rounds = count <= 100 ? 2000 : count <= 10'000 ? 30 : 5;
        const Figures f = measure(events, rounds);
        std::printf("%9zu %15.1f %15.2f %10.0f %15.1f | %18.1f %17.1f %8.1f\n", count, f.spanDecideUs, f.foldStepUs,
                    f.spanDecideUs / f.foldStepUs, f.firstFoldUs, f.spanContextUs, f.foldContextUs,
                    f.spanContextUs / f.foldContextUs);
    }
    return 0;
}
