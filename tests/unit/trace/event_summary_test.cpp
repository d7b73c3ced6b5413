// Every event kind in words: the session, the model, tools, tiers, cost, budgets and reviews. The
// sandbox kinds and the check that no kind is left without words are in event_summary_kinds_test.cpp.

#include "trace/event_summary.h"
#include "trace/safe_text.h"

#include <gtest/gtest.h>

namespace paddock::trace {
namespace {

using nlohmann::json;

std::string say(std::string_view kind, const char *payload, int64_t costMicros = -1)
{
    return summarize(kind, std::string_view(payload), costMicros);
}

TEST(EventSummary, SessionCreated)
{
    EXPECT_EQ(say("session.created", R"({"agent":"default","goal":"Say hello","model":"scripted","playbook":"hello-c",
        "tier":"lite","secrets":["GH"],"submitted_by":"ana","budget_micros":500000,"playbook_toml":"x = 1"})"),
              "Say hello; playbook hello-c, model scripted, tier lite, agent default, budget $0.5000, 1 secret granted, by ana");
    EXPECT_EQ(say("session.created", R"({"model":"scripted","playbook_toml":"name = \"x\"\n","tier":"lite"})"),
              "a submitted playbook (11 B); model scripted, tier lite");
}

TEST(EventSummary, StateChanged)
{
    EXPECT_EQ(say("state.changed", R"({"status":"running"})"), "running");
    const EventLine failed = describeEvent("state.changed", std::string_view(R"({"status":"failed","reason":"three model errors"})"));
    EXPECT_EQ(failed.summary, "failed: three model errors");
    EXPECT_TRUE(failed.isError);
}

TEST(EventSummary, ModelRequestResponseAndError)
{
    EXPECT_EQ(say("model.request", R"({"model":"gpt-x","attempt":2})"), "calling gpt-x, attempt 2");
    const EventLine response = describeEvent("model.response", std::string_view(
        R"({"model":"scripted","text":"Step 1 of 5","tool_calls":[{"id":"c1","name":"run_command","arguments":{}}],
            "usage":{"input_tokens":188,"output_tokens":14,"cached_tokens":0},"latency_ms":850,"attempts":1})"));
    EXPECT_EQ(response.summary, "scripted, 188 in / 14 out tokens, 850 ms, 1 tool call: Step 1 of 5");
    EXPECT_EQ(response.tokens, 202);
    EXPECT_EQ(response.latencyMs, 850);
    EXPECT_TRUE(response.hasDetails);
    const EventLine error = describeEvent("model.error", std::string_view(R"({"error":"HTTP 503","code":"unavailable"})"));
    EXPECT_EQ(error.summary, "model error (unavailable): HTTP 503");
    EXPECT_TRUE(error.isError);
}

TEST(EventSummary, ToolCall)
{
    EXPECT_EQ(say("tool.call", R"({"call_id":"c1","name":"run_command","arguments":{"command":"make -j2"}})"),
              "run_command: make -j2");
    // OpenAI's spelling: the arguments as a JSON string.
    EXPECT_EQ(say("tool.call", R"({"call_id":"c2","name":"write_file","arguments":"{\"path\":\"a.txt\",\"content\":\"xyz\"}"})"),
              "write_file: a.txt (3 B)");
    EXPECT_EQ(say("tool.call", R"({"name":"finish","arguments":{"status":"succeeded","summary":"all done"}})"),
              "finish: succeeded: all done");
    EXPECT_EQ(say("tool.call", R"({"name":"request_environment","arguments":{"tier":"heavy","reason":"a big build"}})"),
              "request_environment: heavy: a big build");
    EXPECT_EQ(say("tool.call", R"({"name":"custom","arguments":{"n":3,"mode":"fast lane"}})"), "custom: mode=\"fast lane\" n=3");
}

TEST(EventSummary, ToolResultOfACommand)
{
    const EventLine ok = describeEvent("tool.result", std::string_view(
        R"({"call_id":"c1","name":"run_command","command":"make -j2","exit_code":0,"signal":0,"stdout":"cc a.c\n",
            "stderr":"","duration_ms":1200,"timed_out":false,"replayed":false})"));
    EXPECT_EQ(ok.summary, "exit 0 in 1.2 s: make -j2");
    EXPECT_FALSE(ok.isError);
    EXPECT_TRUE(ok.hasDetails);
    EXPECT_EQ(ok.latencyMs, 1200);
    const EventLine oom = describeEvent("tool.result", std::string_view(
        R"({"name":"run_command","command":"./eat","exit_code":137,"signal":9,"reason":"oom_killed","duration_ms":80,
            "stdout_clipped":true,"replayed":true,"post_mortem":{"pool":"local","sandbox_id":"sb-1"}})"));
    EXPECT_EQ(oom.summary, "killed by signal 9 (oom_killed) in 80 ms, replayed, output clipped: ./eat; post-mortem kept");
    EXPECT_TRUE(oom.isError);
    EXPECT_EQ(oom.postMortemPool, "local");
    EXPECT_EQ(oom.postMortemSandbox, "sb-1");
    EXPECT_EQ(say("tool.result", R"({"command":"sleep 99","exit_code":-1,"timed_out":true,"reason":"timeout","duration_ms":30000})"),
              "timed out after 30 s: sleep 99");
}

TEST(EventSummary, ToolResultOfTheOtherTools)
{
    EXPECT_EQ(say("tool.result", R"({"name":"write_file","path":"hello.c","bytes":199})"), "wrote 199 B to hello.c");
    const EventLine read = describeEvent("tool.result", std::string_view(R"({"name":"read_file","path":"hello.c","content":"int main;"})"));
    EXPECT_EQ(read.summary, "read hello.c (9 B)");
    EXPECT_TRUE(read.hasDetails);
    EXPECT_EQ(say("tool.result", R"({"name":"read_records","agent":"ci","records":{},"count":3,"missing":1})"),
              "read 3 records of agent ci (1 missing)");
    EXPECT_EQ(say("tool.result", R"({"name":"request_environment","decision_id":"d-1","requested_tier":"heavy","tier":"heavy",
        "granted":true,"reason":"within the agent's tiers"})"), "tier heavy granted: within the agent's tiers");
    EXPECT_EQ(say("tool.result", R"({"name":"request_environment","requested_tier":"heavy","granted":false,"review_id":"r-1",
        "approved":false,"reason":"too dear"})"), "tier heavy not granted, rejected in review r-1: too dear");
    const EventLine failed = describeEvent("tool.result", std::string_view(R"({"name":"read_file","error":"no such file"})"));
    EXPECT_EQ(failed.summary, "read_file error: no such file");
    EXPECT_TRUE(failed.isError);
    EXPECT_EQ(say("tool.result", R"({"call_id":"c9","name":"finish","ok":true})"), "finish ok");
}

TEST(EventSummary, ToolOutput)
{
    const EventLine chunk = describeEvent("tool.output", std::string_view(R"({"call_id":"c1","stream":"stdout","text":"line 1\nline 2\n"})"));
    EXPECT_EQ(chunk.summary, "stdout: line 1\\nline 2\\n");
    EXPECT_TRUE(chunk.hasDetails);
}

TEST(EventSummary, EnvDecisionAndOutcome)
{
    EXPECT_EQ(say("env.decision", R"({"id":"d-s-2","trigger":"session_start","agent":"default","requested_tier":"",
        "chosen_tier":"lite","chooser":"default","rule":"","reason":"agent default's default tier","verdict":"granted"})"),
              "tier lite chosen by default: agent default's default tier");
    EXPECT_EQ(say("env.decision", R"({"trigger":"request_environment","requested_tier":"heavy","chosen_tier":"lite",
        "chooser":"platform","rule":"bound","reason":"past the bound","verdict":"needs_review"})"),
              "tier heavy needs review by platform, rule bound, on request_environment: past the bound");
    EXPECT_EQ(say("env.decision", R"({"trigger":"override","chosen_tier":"heavy","chooser":"human","who":"ana",
        "reason":"needs RAM","verdict":"granted"})"), "tier heavy chosen by ana, on override: needs RAM");
    const EventLine outcome = describeEvent("env.outcome", std::string_view(R"({"decision_id":"d-1","outcome":"over_allocated",
        "tier":"standard","peak_memory_bytes":44040192,"memory_limit_bytes":4294967296,"mean_cpu_fraction":0.034,
        "fitting_tier":"lite"})"));
    EXPECT_EQ(outcome.summary, "standard over-allocated, peak memory 42 MiB of 4.0 GiB, mean CPU 3%, lite would fit");
    EXPECT_TRUE(describeEvent("env.outcome", std::string_view(R"({"outcome":"oom","tier":"lite"})")).isError);
}

TEST(EventSummary, TierOverride)
{
    EXPECT_EQ(say("tier.override", R"({"chooser":"human","who":"operator ana","reason":"OOM twice","from":"lite","to":"standard"})"),
              "tier lite → standard by operator ana: OOM twice");
}

TEST(EventSummary, CostOfEachKindWithItsAmount)
{
    EXPECT_EQ(say("cost", R"({"kind":"model","agent":"default","tier":"lite","model":"scripted","input_tokens":188,
        "output_tokens":14,"cached_tokens":0,"input_per_million":3.0,"output_per_million":15.0})", 774),
              "model scripted, 188 in / 14 out tokens, $0.0008");
    EXPECT_EQ(say("cost", R"({"kind":"sandbox","agent":"default","tier":"lite","model":"","pool":"local","sandbox_id":"sb-1",
        "seconds":0.8,"price_per_hour":0.0,"from_unix_ms":1796337957354,"until_unix_ms":1796337957430})", 0),
              "lite sandbox 0.8 s, $0.0000");
    EXPECT_EQ(say("cost", R"({"kind":"sandbox","tier":"heavy","seconds":90,"price_per_hour":0.4})", 10000),
              "heavy sandbox 1 min 30 s at $0.4000/h, $0.0100");
    EXPECT_EQ(say("cost", R"({"kind":"storage","bytes":16207,"seconds":0.02,"per_gib_month":0.02})", 0),
              "storage of 16 KiB for 20 ms, $0.0000");
    // No raw JSON, whatever the kind.
    EXPECT_EQ(say("cost", R"({"kind":"sandbox","tier":"lite","seconds":1.5})").find('{'), std::string::npos);
}

TEST(EventSummary, Budgets)
{
    EXPECT_EQ(say("budget.warning", R"({"scope":"session","budget_micros":1000000,"spent_micros":812000,"percent":81})"),
              "81% of the session budget spent: $0.8120 of $1.0000");
    EXPECT_EQ(say("budget.exceeded", R"({"scope":"agent_day","budget_micros":5000000,"spent_micros":5010000,"agent":"ci"})"),
              "Agent ci's daily budget is spent: $5.0100 of $5.0000; waiting for an extension");
}

TEST(EventSummary, Reviews)
{
    const EventLine requested = describeEvent("approval.requested", std::string_view(
        R"({"review_id":"r-12","kind":"bulk_change","summary":"rename 40 files","change":"--- a\n+++ b\n","risk":"high"})"));
    EXPECT_EQ(requested.summary, "review r-12 requested (bulk_change, high risk): rename 40 files");
    EXPECT_TRUE(requested.hasDetails);
    EXPECT_EQ(say("approval.fetched", R"({"review_id":"r-12","principal":"bob","change_hash":"sha256:ab"})"),
              "review r-12 opened by bob");
    EXPECT_EQ(say("approval.decided", R"({"review_id":"r-12","kind":"budget_extension","approved":true,"decider":"bob",
        "reason":"worth it","budget_increase_micros":2000000,"scope":"session"})"),
              "review r-12 approved by bob (budget +$2.0000): worth it");
    EXPECT_EQ(say("approval.decided", R"({"review_id":"r-13","approved":false,"decider":"","reason":"expired"})"),
              "review r-13 expired unanswered");
}

TEST(EventSummary, AKindWithoutWordsShowsItsFieldsAndPayloadsThatAreNotObjectsTheirText)
{
    EXPECT_EQ(say("custom.kind", R"({"a":1,"b":"two words","c":[1,2],"d":""})"), "a=1 b=\"two words\" c=[1,2]");
    EXPECT_EQ(say("x", "not json"), "not json");
    EXPECT_EQ(say("x", "line\n\x1b[2J"), "line\\n\\x1b[2J");
}

TEST(EventSummary, UntrustedTextInAnyFieldIsMadeSafe)
{
    // JSON escapes decode to the real bytes: the summary must escape them again.
    const std::string hostile = summarize("tool.result",
        std::string_view(R"({"name":"run_command","command":"printf '\u001b]0;pwned\u0007'\nrm -rf /","exit_code":0})"));
    EXPECT_EQ(hostile, "exit 0: printf '\\x1b]0;pwned\\x07'\\nrm -rf /");
    const std::string error = summarize("model.error", std::string_view(R"({"error":"\u009b2J bad \u202egnp.exe"})"));
    EXPECT_EQ(error, "model error: \\u009b2J bad \\u202egnp.exe");
    // A long field is cut, and the line stays within its bound.
    const std::string longGoal = summarize("session.created", json{{"goal", std::string(5000, 'g')}, {"tier", "lite"}});
    EXPECT_NE(longGoal.find("…; tier lite"), std::string::npos) << longGoal;
    EXPECT_LE(charCount(summarize("model.response", json{{"text", std::string(100000, 'w')}, {"model", std::string(100000, 'm')}})),
              kMaxSummaryChars);
}

TEST(EventSummary, AModelDeltaShowsItsTextOrItsArguments)
{
    EXPECT_EQ(describeEvent("model.delta", std::string_view(R"({"after_seq":4,"attempt":1,"text":"Writing the fi"})")).summary,
              "attempt 1: Writing the fi");
    EXPECT_EQ(describeEvent("model.delta", std::string_view(R"({"attempt":2,"supersedes":1,"tool_calls":[{"index":0,"name":"write_file","arguments":"{\"pa"}]})")).summary,
              "attempt 2 (replaces attempt 1): args write_file: {\"pa");
}

} // namespace
} // namespace paddock::trace
