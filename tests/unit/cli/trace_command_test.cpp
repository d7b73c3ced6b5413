// paddockctl events in words and paddockctl trace: the command line, the timeline's text, and
// both against the broker paddockd runs (tests/support/in_process_broker.h) reading a log the test
// appended, with an agent's escape sequences in it. The store stamps the times, so durations are
// never asserted here; tests/unit/trace/spans_test.cpp pins them with times of its own.

#include "cli/app.h"
#include "cli/exit_codes.h"
#include "cli/trace_command.h"

#include "broker/core/event.h"
#include "tests/support/in_process_broker.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <unistd.h>

namespace paddock::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(TraceCommand, ParsesTraceAndTheJsonShorthand)
{
    std::ostringstream out, err;
    auto trace = parseCommandLine({"trace", "s-1"}, out, err);
    ASSERT_TRUE(trace.invocation) << err.str();
    EXPECT_EQ(trace.invocation->command, Command::Trace);
    EXPECT_EQ(trace.invocation->sessionId, "s-1");
    EXPECT_EQ(trace.invocation->output, OutputFormat::Table);
    auto events = parseCommandLine({"events", "s-1", "--json"}, out, err);
    ASSERT_TRUE(events.invocation) << err.str();
    EXPECT_EQ(events.invocation->output, OutputFormat::Json);
    EXPECT_EQ(parseCommandLine({"trace"}, out, err).exitCode, toInt(ExitCode::Usage));
}

TEST(TraceCommand, OffsetsReadFromTheSessionsStart)
{
    EXPECT_EQ(formatOffset(0), "+0.000s");
    EXPECT_EQ(formatOffset(50), "+0.050s");
    EXPECT_EQ(formatOffset(62'300), "+1:02.300");
    EXPECT_EQ(formatOffset(3'723'000), "+1:02:03");
}

TEST(TraceCommand, TheTimelineByStep)
{
    constexpr int64_t t0 = 1'800'000'000'000;
    trace::SpanBuilder spans;
    spans.apply(1, t0, "session.created", json{{"goal", "g"}});
    spans.apply(2, t0 + 900, "sandbox.claimed", json{{"sandbox_id", "sb-1"}, {"tier", "lite"}, {"pool", "p"}, {"claim_ms", 4}});
    spans.apply(3, t0 + 900, "model.response",
                json{{"model", "m"}, {"latency_ms", 850}, {"usage", {{"input_tokens", 18}, {"output_tokens", 70}}}});
    spans.apply(4, t0 + 900, "tool.call", json{{"call_id", "c1"}, {"name", "run_command"}, {"arguments", {{"command", "make"}}}});
    spans.apply(5, t0 + 2100, "tool.result", json{{"call_id", "c1"}, {"command", "make"}, {"exit_code", 2}, {"duration_ms", 1150}});
    spans.apply(6, t0 + 2100, "egress.refused", json{{"host", "169.254.169.254"}, {"port", 80}, {"reason", "metadata"}});
    spans.apply(7, t0 + 2200, "model.response", json{{"model", "m"}, {"latency_ms", 100}});
    spans.apply(8, t0 + 2200, "tool.call", json{{"call_id", "c2"}, {"name", "run_command"}, {"arguments", {{"command", "sleep 60"}}}});
    EXPECT_EQ(formatTrace(spans),
              "       START   DURATION  KIND         WHAT\n"
              "before the first model call\n"
              "     +0.896s       4 ms  claim        sb-1 (lite) from pool p, claim 4 ms\n"
              "step 1\n"
              "     +0.050s     850 ms  model        m, 18 in / 70 out tokens, 850 ms\n"
              "     +0.900s      1.2 s  tool !       run_command: make → exit 2 in 1.1 s\n"
              "     +2.100s          -  egress!      refused 169.254.169.254:80, metadata\n"
              "step 2\n"
              "     +2.100s     100 ms  model        m, 0 in / 0 out tokens, 100 ms\n"
              "     +2.200s    running  tool         run_command: sleep 60\n");
    const json open = spanToJson(spans.spans().back(), spans.originMs());
    EXPECT_TRUE(open["open"].get<bool>());
    EXPECT_TRUE(open["duration_ms"].is_null());
    EXPECT_EQ(open["start_offset_ms"], 2200);
    EXPECT_EQ(open["kind"], "tool");
    EXPECT_EQ(open["start_seq"], 8);
}

class EventsAndTraceAgainstBroker : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_dir = fs::temp_directory_path() / ("paddock-cli-trace-" + std::to_string(::getpid()));
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
        m_broker = std::make_unique<test::InProcessBroker>(m_dir);
        ASSERT_TRUE(m_broker->start());
    }
    void TearDown() override
    {
        m_broker->stop();
        fs::remove_all(m_dir);
    }

    struct Run {
        int code = 0;
        std::string out, err;
    };
    Run run(std::vector<std::string> args)
    {
        args.insert(args.begin(), {"--broker", m_broker->address()});
        std::ostringstream out, err;
        Run result;
        result.code = runCli(args, Environment{}, out, err);
        result.out = out.str();
        result.err = err.str();
        return result;
    }

    // A session in the middle of its second command, whose first printed escape sequences.
    void appendSession(const std::string &id)
    {
        const std::string hostile = "\x1b[2J\x1b]0;owned\x07\xc2\x9b" "31m";
        store::AppendRequest request;
        request.sessionId = id;
        request.expectedLastSeq = 0;
        auto add = [&](const char *kind, const json &payload, int64_t cost = 0) {
            request.events.push_back({kind, payload.dump(), cost});
        };
        add(core::kind::SessionCreated, {{"goal", "build it"}, {"model", "scripted"}, {"tier", "lite"}});
        add(core::kind::StateChanged, {{"status", "running"}});
        add(core::kind::SandboxClaimed, {{"pool", "local"}, {"sandbox_id", "sb-1"}, {"tier", "lite"}, {"claim_ms", 3}});
        add(core::kind::ModelResponse, {{"model", "scripted"}, {"latency_ms", 20}, {"usage", {{"input_tokens", 188}, {"output_tokens", 14}}}});
        add(core::kind::Cost, {{"kind", "model"}, {"model", "scripted"}, {"input_tokens", 188}, {"output_tokens", 14}}, 774);
        add(core::kind::ToolCall, {{"call_id", "c1"}, {"name", "run_command"}, {"arguments", {{"command", "cat evil" + hostile}}}});
        add(core::kind::ToolResult, {{"call_id", "c1"}, {"name", "run_command"}, {"command", "cat evil" + hostile}, {"exit_code", 0},
                                     {"stdout", hostile + "\nsecond line\n"}, {"duration_ms", 5}});
        add(core::kind::Checkpoint, {{"files", 12}, {"changed", 3}, {"removed", 1}, {"sent_bytes", 49152}, {"duration_ms", 35}});
        add(core::kind::ToolCall, {{"call_id", "c2"}, {"name", "run_command"}, {"arguments", {{"command", "sleep 60"}}}});
        ASSERT_TRUE(m_broker->store().appendSync(std::move(request)));
    }

    fs::path m_dir;
    std::unique_ptr<test::InProcessBroker> m_broker;
};

TEST_F(EventsAndTraceAgainstBroker, EventsAreLinesInWordsAndJsonStaysRaw)
{
    appendSession("s-words");
    const Run words = run({"events", "s-words"});
    ASSERT_EQ(words.code, 0) << words.err;
    for (const char raw : {'\x1b', '\x07'})
        EXPECT_EQ(words.out.find(raw), std::string::npos) << words.out;
    for (const char *line : {"cost             model scripted, 188 in / 14 out tokens, $0.0008\n",
                             "checkpoint       checkpoint 12 files, 3 changed, 1 removed, 48 KiB sent, 35 ms\n",
                             "tool.result      exit 0 in 5 ms: cat evil\\x1b[2J\\x1b]0;owned\\x07\\u009b31m\n",
                             "        \\x1b[2J\\x1b]0;owned\\x07\\u009b31m\n        second line\n",
                             "tool.call        run_command: sleep 60\n"})
        EXPECT_NE(words.out.find(line), std::string::npos) << line << "\nin:\n" << words.out;

    // --output json (and its shorthand) keeps the raw events for scripts: the bytes as recorded.
    const Run raw = run({"events", "s-words", "--json"});
    ASSERT_EQ(raw.code, 0) << raw.err;
    std::istringstream lines(raw.out);
    std::vector<json> events;
    for (std::string line; std::getline(lines, line);)
        events.push_back(json::parse(line));
    ASSERT_EQ(events.size(), 9u);
    EXPECT_EQ(events[6]["payload"]["stdout"].get<std::string>().substr(0, 4), "\x1b[2J");
    EXPECT_EQ(events[4]["cost_micros"], 774);
}

TEST_F(EventsAndTraceAgainstBroker, TraceShowsTheSpansAndWhatIsStillRunning)
{
    appendSession("s-spans");
    const Run text = run({"trace", "s-spans"});
    ASSERT_EQ(text.code, 0) << text.err;
    EXPECT_EQ(text.out.find('\x1b'), std::string::npos) << text.out;
    for (const char *needle : {"START   DURATION  KIND         WHAT\n", "before the first model call\n", "  claim  ", "step 1\n",
                               "  model        scripted, 188 in / 14 out tokens, 20 ms\n",
                               "  tool         run_command: cat evil\\x1b[2J\\x1b]0;owned\\x07\\u009b31m → exit 0 in 5 ms\n",
                               "    running  tool         run_command: sleep 60\n"})
        EXPECT_NE(text.out.find(needle), std::string::npos) << needle << "\nin:\n" << text.out;

    const Run spans = run({"trace", "s-spans", "-o", "json"});
    ASSERT_EQ(spans.code, 0) << spans.err;
    std::istringstream lines(spans.out);
    std::vector<json> all;
    for (std::string line; std::getline(lines, line);)
        all.push_back(json::parse(line));
    ASSERT_EQ(all.size(), 4u);   // the claim, the model call, two tool calls
    EXPECT_EQ(all[0]["kind"], "claim");
    EXPECT_EQ(all[1]["kind"], "model");
    EXPECT_FALSE(all[2]["open"].get<bool>());
    EXPECT_EQ(all[2]["start_seq"], 6);
    EXPECT_EQ(all[2]["end_seq"], 7);
    EXPECT_TRUE(all[3]["open"].get<bool>());
    EXPECT_EQ(all[3]["key"], "c2");
}

TEST_F(EventsAndTraceAgainstBroker, AnUnknownSessionSaysHowToFindOne)
{
    const Run missing = run({"trace", "s-nope"});
    EXPECT_EQ(missing.code, toInt(ExitCode::NotFound)) << missing.err;
    EXPECT_NE(missing.err.find("cannot read the events of session s-nope"), std::string::npos) << missing.err;
    EXPECT_NE(missing.err.find("paddockctl ls"), std::string::npos) << missing.err;
}

} // namespace
} // namespace paddock::cli
