// The span mapping from hand-built logs: which spans a session's events make, with which ids, times,
// parents and GenAI attributes, when each is complete (emitSeq), that a replay from seq 1 gives the
// same spans, and that their OTLP JSON (traces and metrics) follows the mapping the fake receiver
// checks.

#include "broker/otlp/otlp_json.h"
#include "broker/otlp/span_mapping.h"
#include "tests/support/fake_otlp_receiver.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>

namespace paddock::otlp {
namespace {

using nlohmann::json;
using test::otlp_check::attribute;

core::Event event(int64_t seq, int64_t timeMs, const char *kind, json payload, int64_t costMicros = 0)
{
    return core::Event{"s-1", seq, timeMs, kind, payload.dump(), costMicros};
}

// A scripted session: a failing make, then a write and finish in one response.
std::vector<core::Event> helloLog()
{
    return {
        event(1, 1000, "session.created",
              {{"agent", "builder"}, {"goal", "build it"}, {"model", "scripted"}, {"playbook", "hello-c"}, {"tier", "lite"}}),
        event(2, 1000, "env.decision", {{"verdict", "granted"}, {"chosen_tier", "lite"}, {"chooser", "default"}}),
        event(3, 1500, "sandbox.claimed", {{"pool", "local"}, {"sandbox_id", "sb-1"}, {"tier", "lite"}, {"claim_ms", 3}}),
        event(4, 2000, "model.response",
              {{"model", "scripted"},
               {"text", "Step 1"},
               {"tool_calls", {{{"id", "call-1"}, {"name", "run_command"}, {"arguments", {{"command", "make"}}}}}},
               {"usage", {{"input_tokens", 188}, {"output_tokens", 14}, {"cached_tokens", 20}}},
               {"latency_ms", 850},
               {"attempts", 1}}),
        event(5, 2000, "cost", {{"kind", "model"}, {"model", "scripted"}}, 800),
        event(6, 2000, "tool.call", {{"call_id", "call-1"}, {"name", "run_command"}, {"arguments", {{"command", "make"}}}}),
        event(7, 2100, "tool.output", {{"call_id", "call-1"}, {"stream", "stdout"}, {"text", "cc a.c\n"}}),
        event(8, 2300, "tool.result",
              {{"call_id", "call-1"}, {"name", "run_command"}, {"command", "make"}, {"exit_code", 2}, {"duration_ms", 250}}),
        event(9, 2400, "model.response",
              {{"model", "scripted"},
               {"tool_calls",
                {{{"id", "call-2"}, {"name", "write_file"}, {"arguments", json::object()}},
                 {{"id", "call-3"}, {"name", "finish"}, {"arguments", json::object()}}}},
               {"usage", {{"input_tokens", 100}, {"output_tokens", 10}, {"cached_tokens", 0}}},
               {"latency_ms", 100}}),
        event(10, 2400, "cost", {{"kind", "model"}}, 500),
        event(11, 2400, "tool.call", {{"call_id", "call-2"}, {"name", "write_file"}}),
        event(12, 2400, "tool.call", {{"call_id", "call-3"}, {"name", "finish"}}),
        event(13, 2450, "tool.result", {{"call_id", "call-2"}, {"name", "write_file"}, {"path", "a"}, {"bytes", 3}}),
        event(14, 2460, "tool.result", {{"call_id", "call-3"}, {"name", "finish"}}),
        event(15, 2460, "state.changed", {{"status", "succeeded"}, {"reason", "done"}}),
        event(16, 2500, "sandbox.released", {{"sandbox_id", "sb-1"}, {"pool", "local"}}),
    };
}

Completed mapAll(const std::vector<core::Event> &log)
{
    SessionSpanMapper mapper("s-1");
    Completed out;
    for (const auto &e : log)
        mapper.apply(e, out);
    return out;
}

json asJson(const ExportSpan &span)
{
    const Producer producer;
    const json body = json::parse(encodeTraces(producer, std::vector<ExportSpan>{span}));
    return body["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
}

TEST(OtlpSpanMapping, ASessionIsARootWithAChatSpanPerModelCallAndAToolSpanPerCall)
{
    const Completed done = mapAll(helloLog());
    ASSERT_EQ(done.spans.size(), 6u);
    std::vector<std::string> names;
    for (const auto &span : done.spans)
        names.push_back(span.name);
    EXPECT_EQ(names, (std::vector<std::string>{"chat scripted", "execute_tool run_command", "chat scripted",
                                               "execute_tool write_file", "execute_tool finish", "invoke_agent builder"}));

    const ExportSpan &root = done.spans.back();
    EXPECT_EQ(root.traceId, traceIdFor("s-1"));
    EXPECT_EQ(root.spanId, spanIdFor("s-1", "session", 0));
    EXPECT_TRUE(root.parentSpanId.empty());
    for (const auto &span : done.spans) {
        EXPECT_EQ(span.traceId, root.traceId) << span.name;
        EXPECT_EQ(span.sessionId, "s-1");
        if (&span != &root) {
            EXPECT_EQ(span.parentSpanId, root.spanId) << span.name;
        }
    }
    // Every id differs, and each is the hash of what opened the span.
    std::set<std::string> ids;
    for (const auto &span : done.spans)
        ids.insert(span.spanId);
    EXPECT_EQ(ids.size(), done.spans.size());
    EXPECT_EQ(done.spans[0].spanId, spanIdFor("s-1", "chat", 4));
    EXPECT_EQ(done.spans[1].spanId, spanIdFor("s-1", "execute_tool", 6));
    EXPECT_EQ(done.spans[4].spanId, spanIdFor("s-1", "execute_tool", 12));
}

TEST(OtlpSpanMapping, TimesComeFromTheLogAndEachSpanEndsAtTheEventThatCompletesIt)
{
    const Completed done = mapAll(helloLog());
    ASSERT_EQ(done.spans.size(), 6u);
    struct Expected {
        int64_t start, end, emitSeq;
    };
    // The model call started latency_ms before its response and is complete at its cost; the calls
    // of one response run one after the other.
    const std::vector<Expected> expected{{1150, 2000, 5}, {2000, 2300, 8}, {2300, 2400, 10},
                                         {2400, 2450, 13}, {2450, 2460, 14}, {1000, 2460, 15}};
    for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(done.spans[i].startUnixMs, expected[i].start) << done.spans[i].name;
        EXPECT_EQ(done.spans[i].endUnixMs, expected[i].end) << done.spans[i].name;
        EXPECT_EQ(done.spans[i].emitSeq, expected[i].emitSeq) << done.spans[i].name;
    }
    const json root = asJson(done.spans.back());
    EXPECT_EQ(root["startTimeUnixNano"], "1000000000");
    EXPECT_EQ(root["endTimeUnixNano"], "2460000000");
}

TEST(OtlpSpanMapping, AttributesFollowTheGenAiConventions)
{
    const Completed done = mapAll(helloLog());
    ASSERT_EQ(done.spans.size(), 6u);
    const json chat = asJson(done.spans[0]);
    EXPECT_EQ(chat["kind"], 3) << "a model call is a client span";
    EXPECT_EQ(attribute(chat, "gen_ai.operation.name"), "chat");
    EXPECT_EQ(attribute(chat, "gen_ai.provider.name"), "paddock.scripted");
    EXPECT_EQ(attribute(chat, "gen_ai.request.model"), "scripted");
    EXPECT_EQ(attribute(chat, "gen_ai.usage.input_tokens"), 188);
    EXPECT_EQ(attribute(chat, "gen_ai.usage.output_tokens"), 14);
    EXPECT_EQ(attribute(chat, "gen_ai.usage.cache_read.input_tokens"), 20);
    EXPECT_EQ(attribute(chat, "gen_ai.conversation.id"), "s-1");
    EXPECT_EQ(attribute(chat, "gen_ai.response.finish_reasons"), json::array({"tool_calls"}));
    EXPECT_DOUBLE_EQ(attribute(chat, "paddock.cost_usd").get<double>(), 0.0008);
    EXPECT_EQ(attribute(chat, "paddock.tier"), "lite");
    EXPECT_EQ(attribute(chat, "paddock.pool"), "local");
    EXPECT_EQ(attribute(chat, "paddock.sandbox.id"), "sb-1");
    EXPECT_EQ(attribute(chat, "paddock.event.seq"), 4);
    EXPECT_EQ(chat["status"], json::object());

    const json make = asJson(done.spans[1]);
    EXPECT_EQ(make["kind"], 1);
    EXPECT_EQ(attribute(make, "gen_ai.operation.name"), "execute_tool");
    EXPECT_EQ(attribute(make, "gen_ai.tool.name"), "run_command");
    EXPECT_EQ(attribute(make, "gen_ai.tool.call.id"), "call-1");
    EXPECT_EQ(attribute(make, "gen_ai.conversation.id"), "s-1");
    EXPECT_EQ(attribute(make, "paddock.tool.exit_code"), 2);
    EXPECT_EQ(attribute(make, "error.type"), "nonzero_exit");
    EXPECT_EQ(make["status"]["code"], 2);
    EXPECT_EQ(make["status"]["message"], "exit 2");
    EXPECT_EQ(attribute(asJson(done.spans[3]), "error.type"), nullptr) << "a write that worked is no error";

    const json root = asJson(done.spans.back());
    EXPECT_EQ(attribute(root, "gen_ai.operation.name"), "invoke_agent");
    EXPECT_EQ(attribute(root, "gen_ai.agent.name"), "builder");
    EXPECT_EQ(attribute(root, "gen_ai.conversation.id"), "s-1");
    EXPECT_EQ(attribute(root, "gen_ai.usage.input_tokens"), 288);
    EXPECT_EQ(attribute(root, "gen_ai.usage.output_tokens"), 24);
    EXPECT_EQ(attribute(root, "paddock.session.status"), "succeeded");
    EXPECT_DOUBLE_EQ(attribute(root, "paddock.cost_usd").get<double>(), 0.0013);
    EXPECT_EQ(attribute(root, "paddock.model_calls"), 2);
    EXPECT_EQ(attribute(root, "paddock.tool_calls"), 3);
    EXPECT_EQ(attribute(root, "paddock.tier.chooser"), "default");
    EXPECT_EQ(attribute(root, "error.type"), nullptr);

    // Every attribute of every span is typed, and the whole payload follows the mapping.
    const Producer producer{{textAttribute("service.name", "paddockd")}, "paddock.broker", "1.0"};
    const auto problems = test::otlp_check::checkTracesJson(json::parse(encodeTraces(producer, done.spans)));
    EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
}

TEST(OtlpSpanMapping, AReplayFromSeqOneGivesTheSameSpansAndACursorSkipsWhatWasAcknowledged)
{
    const auto log = helloLog();
    const Producer producer;
    const std::string first = encodeTraces(producer, mapAll(log).spans);
    EXPECT_EQ(encodeTraces(producer, mapAll(log).spans), first);

    // What a restart does with a cursor at seq 8: map from seq 1, keep what completes after it.
    std::vector<ExportSpan> after;
    for (const auto &span : mapAll(log).spans) {
        if (span.emitSeq > 8)
            after.push_back(span);
    }
    ASSERT_EQ(after.size(), 4u);
    EXPECT_EQ(after.front().name, "chat scripted");
    EXPECT_EQ(after.front().spanId, spanIdFor("s-1", "chat", 9));

    // Another session: other ids.
    EXPECT_NE(traceIdFor("s-2"), traceIdFor("s-1"));
    EXPECT_NE(spanIdFor("s-2", "chat", 4), spanIdFor("s-1", "chat", 4));
    EXPECT_EQ(traceIdFor("s-1").size(), 32u);
    EXPECT_EQ(spanIdFor("s-1", "chat", 4).size(), 16u);
}

TEST(OtlpSpanMapping, AModelCallIsCompleteOnlyOnceTheEventAfterItsResponseIsRead)
{
    auto log = helloLog();
    SessionSpanMapper mapper("s-1");
    Completed out;
    for (int i = 0; i < 4; ++i)
        mapper.apply(log[static_cast<size_t>(i)], out);
    EXPECT_TRUE(out.spans.empty()) << "the response's cost has not been read yet";
    mapper.apply(log[4], out);
    ASSERT_EQ(out.spans.size(), 1u);
    EXPECT_EQ(out.spans[0].emitSeq, 5);
    ASSERT_EQ(out.calls.size(), 1u);
    EXPECT_EQ(out.calls[0].inputTokens, 188);
    EXPECT_EQ(out.calls[0].startUnixMs, 1150);
}

TEST(OtlpSpanMapping, FailuresCarryErrorTypeAndOpenCallsEndWithTheSession)
{
    const std::vector<core::Event> log{
        event(1, 1000, "session.created", {{"agent", "a"}, {"model", "openai:local"}, {"tier", "lite"}}),
        event(2, 1200, "model.error", {{"error", "the model API did not answer"}, {"code", "Unavailable"}}),
        event(3, 3000, "model.response",
              {{"model", "gpt-test"},
               {"tool_calls", {{{"id", "c1"}, {"name", "run_command"}}}},
               {"usage", {{"input_tokens", 5}, {"output_tokens", 1}, {"cached_tokens", 0}}},
               {"latency_ms", 400},
               {"stop_reason", "tool_use"}}),
        event(4, 3000, "cost", {{"kind", "model"}}, 10),
        event(5, 3000, "tool.call", {{"call_id", "c1"}, {"name", "run_command"}}),
        event(6, 4000, "state.changed", {{"status", "failed"}, {"reason", "budget spent"}}),
        event(7, 4100, "tool.result", {{"call_id", "c1"}, {"name", "run_command"}, {"exit_code", 0}}),
    };
    const Completed done = mapAll(log);
    ASSERT_EQ(done.spans.size(), 4u);

    const json error = asJson(done.spans[0]);
    EXPECT_EQ(attribute(error, "error.type"), "unavailable");
    EXPECT_EQ(attribute(error, "gen_ai.provider.name"), "openai");
    EXPECT_EQ(error["status"]["code"], 2);
    EXPECT_EQ(error["status"]["message"], "the model API did not answer");

    const json chat = asJson(done.spans[1]);
    EXPECT_EQ(attribute(chat, "gen_ai.request.model"), "gpt-test");
    EXPECT_EQ(attribute(chat, "paddock.model"), "openai:local");
    EXPECT_EQ(attribute(chat, "gen_ai.response.finish_reasons"), json::array({"tool_use"}));

    const json interrupted = asJson(done.spans[2]);
    EXPECT_EQ(attribute(interrupted, "error.type"), "interrupted");
    EXPECT_EQ(done.spans[2].emitSeq, 6);
    EXPECT_EQ(done.spans[2].endUnixMs, 4000);

    const json root = asJson(done.spans[3]);
    EXPECT_EQ(attribute(root, "error.type"), "session_failed");
    EXPECT_EQ(root["status"]["message"], "budget spent");

    ASSERT_EQ(done.calls.size(), 2u);
    EXPECT_EQ(done.calls[0].errorType, "unavailable");
    EXPECT_FALSE(done.calls[0].hasUsage);
}

TEST(OtlpSpanMapping, MetricsAreDeltaHistogramsOfTokensAndDurationPerModel)
{
    const Completed done = mapAll(helloLog());
    ASSERT_EQ(done.calls.size(), 2u);
    const json body = json::parse(encodeMetrics(Producer{}, done.calls));
    EXPECT_TRUE(test::otlp_check::checkMetricsJson(body).empty())
        << ::testing::PrintToString(test::otlp_check::checkMetricsJson(body));
    std::map<std::string, json> points;   // metric name + token type -> its point
    for (const auto &metric : body["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]) {
        EXPECT_EQ(metric["histogram"]["aggregationTemporality"], 1);
        for (const auto &point : metric["histogram"]["dataPoints"]) {
            const json type = attribute(point, "gen_ai.token.type");
            points[metric["name"].get<std::string>() + (type.is_string() ? "/" + type.get<std::string>() : "")] = point;
        }
    }
    ASSERT_EQ(points.size(), 3u);
    const json &input = points["gen_ai.client.token.usage/input"];
    EXPECT_EQ(input["count"], "2");
    EXPECT_EQ(input["sum"], 288.0);
    EXPECT_EQ(attribute(input, "gen_ai.provider.name"), "paddock.scripted");
    EXPECT_EQ(attribute(input, "gen_ai.request.model"), "scripted");
    EXPECT_EQ(points["gen_ai.client.token.usage/output"]["sum"], 24.0);
    const json &duration = points["gen_ai.client.operation.duration"];
    EXPECT_EQ(duration["count"], "2");
    EXPECT_DOUBLE_EQ(duration["sum"].get<double>(), 0.95);
    EXPECT_EQ(duration["startTimeUnixNano"], "1150000000");
    EXPECT_EQ(duration["timeUnixNano"], "2400000000");
}

} // namespace
} // namespace paddock::otlp
