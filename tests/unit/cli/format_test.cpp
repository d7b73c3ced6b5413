#include "cli/format.h"

#include <gtest/gtest.h>

#include <regex>

namespace paddock::cli {
namespace {

using nlohmann::json;

constexpr int64_t kNowMs = 1'700'000'000'000;

v1::Session sampleSession()
{
    v1::Session session;
    session.set_id("s-0001");
    session.set_agent("default");
    session.set_goal("compile and run a small C program in the sandbox and check that it prints hello");
    session.set_model("scripted");
    session.set_playbook("hello-c");
    session.set_status(v1::SESSION_STATUS_SUCCEEDED);
    session.set_tier("lite");
    session.set_pool("local");
    session.set_sandbox_id("sb-7");
    session.set_steps(4);
    session.set_cost_micros(1234);
    session.set_created_unix_ms(kNowMs - 125'000);
    session.set_updated_unix_ms(kNowMs - 5'000);
    session.set_last_seq(17);
    session.set_last_event_kind("state.changed");
    session.add_tags("demo");
    return session;
}

v1::Event event(int64_t seq, std::string kind, json payload)
{
    v1::Event e;
    e.set_session_id("s-0001");
    e.set_seq(seq);
    e.set_time_unix_ms(kNowMs + 1234);
    e.set_kind(std::move(kind));
    e.set_payload_json(payload.dump());
    return e;
}

TEST(Format, CostHasFourDecimals)
{
    EXPECT_EQ(formatCost(0), "$0.0000");
    EXPECT_EQ(formatCost(1234), "$0.0012");
    EXPECT_EQ(formatCost(150), "$0.0002");   // rounds half up, exactly
    EXPECT_EQ(formatCost(12'345'678), "$12.3457");
    EXPECT_EQ(formatCost(-1'000'000), "-$1.0000");
}

TEST(Format, AgeUsesTheLargestWholeUnit)
{
    EXPECT_EQ(formatAge(kNowMs - 42'000, kNowMs), "42s");
    EXPECT_EQ(formatAge(kNowMs - 125'000, kNowMs), "2m");
    EXPECT_EQ(formatAge(kNowMs - 3 * 3'600'000, kNowMs), "3h");
    EXPECT_EQ(formatAge(kNowMs - 2 * 86'400'000LL, kNowMs), "2d");
    EXPECT_EQ(formatAge(0, kNowMs), "-");
    EXPECT_EQ(formatAge(kNowMs + 5'000, kNowMs), "0s");   // clock skew is not negative age
}

TEST(Format, ASpanIsNotAnAge)
{
    EXPECT_EQ(formatSpan(549), "0s");
    EXPECT_EQ(formatSpan(0), "0s") << "a span of nothing is a length, not 'no time'";
    EXPECT_EQ(formatSpan(125'000), "2m");
    EXPECT_EQ(formatSpan(2 * 86'400'000LL), "2d");
}

TEST(Format, TruncateCountsCharactersNotBytes)
{
    EXPECT_EQ(truncateText("short", 10), "short");
    EXPECT_EQ(truncateText("abcdefghijkl", 8), "abcde...");
    EXPECT_EQ(truncateText("line one\nline two", 40), "line one line two");
    // "é" is two bytes; a cut must never split it.
    EXPECT_EQ(truncateText("ééééééééé", 6), "ééé...");
}

TEST(Format, StatusNamesRoundTrip)
{
    for (auto status : {v1::SESSION_STATUS_QUEUED, v1::SESSION_STATUS_RUNNING, v1::SESSION_STATUS_WAITING_APPROVAL,
                        v1::SESSION_STATUS_PAUSED, v1::SESSION_STATUS_SUCCEEDED, v1::SESSION_STATUS_FAILED,
                        v1::SESSION_STATUS_CANCELLED})
        EXPECT_EQ(statusFromName(statusName(status)), status);
    EXPECT_EQ(statusName(v1::SESSION_STATUS_UNSPECIFIED), "unknown");
    EXPECT_FALSE(statusFromName("done"));
    EXPECT_TRUE(isFinal(v1::SESSION_STATUS_CANCELLED));
    EXPECT_FALSE(isFinal(v1::SESSION_STATUS_PAUSED));
}

TEST(Format, SessionTableHasTheColumnsAligned)
{
    std::vector<v1::Session> sessions{sampleSession(), sampleSession()};
    sessions[1].set_id("s-2");
    sessions[1].set_status(v1::SESSION_STATUS_RUNNING);
    sessions[1].set_steps(12);
    sessions[1].set_goal("");
    const std::string table = formatSessionTable(sessions, kNowMs);

    std::vector<std::string> lines;
    std::string line;
    std::istringstream in(table);
    while (std::getline(in, line))
        lines.push_back(line);
    ASSERT_EQ(lines.size(), 3u) << table;
    EXPECT_TRUE(std::regex_match(lines[0], std::regex("ID +STATUS +AGENT +TIER +STEPS +COST +AGE +GOAL"))) << lines[0];
    EXPECT_TRUE(std::regex_search(lines[1], std::regex("^s-0001 +succeeded +default +lite +4 +\\$0\\.0012 +2m +compile")))
        << lines[1];
    // Goals are cut to keep one session on one line.
    EXPECT_NE(lines[1].find("..."), std::string::npos);
    EXPECT_LT(lines[1].size(), 120u);
    // Without a goal the playbook says what the session does.
    EXPECT_NE(lines[2].find("playbook hello-c"), std::string::npos) << lines[2];
    // Columns line up: STATUS starts at the same offset on every line.
    EXPECT_EQ(lines[0].find("STATUS"), lines[1].find("succeeded"));
    EXPECT_EQ(lines[0].find("STATUS"), lines[2].find("running"));
    // STEPS is right-aligned: its last character lines up with the header's.
    EXPECT_EQ(lines[0].find("STEPS") + 4, lines[1].find(" 4 ") + 1);
    EXPECT_EQ(lines[0].find("STEPS") + 4, lines[2].find("12") + 1);
}

TEST(Format, SessionJsonIsMachineReadable)
{
    const json j = sessionToJson(sampleSession());
    EXPECT_EQ(j["id"], "s-0001");
    EXPECT_EQ(j["status"], "succeeded");   // a name, not an enum number
    EXPECT_EQ(j["steps"], 4);              // a number, not proto3-JSON's int64 string
    EXPECT_EQ(j["cost_micros"], 1234);
    EXPECT_EQ(j["tags"], json::array({"demo"}));
    EXPECT_EQ(j["playbook"], "hello-c");
}

TEST(Format, SessionDetailNamesEveryField)
{
    const std::string detail = formatSessionDetail(sampleSession(), kNowMs);
    for (const char *needle : {"ID:", "s-0001", "Status:", "succeeded", "Playbook:", "hello-c", "Cost:", "$0.0012",
                               "Last event:", "17 state.changed", "2m ago"})
        EXPECT_NE(detail.find(needle), std::string::npos) << needle << "\n" << detail;
}

TEST(Format, EventLineHasSeqTimeKindAndSummary)
{
    const std::string line =
        formatEvent(event(5, "tool.call", {{"call_id", "c1"}, {"name", "run_command"},
                                           {"arguments", {{"command", "cc -o hello hello.c"}}}}),
                    true);
    EXPECT_TRUE(std::regex_match(line, std::regex(" +5  \\d\\d:\\d\\d:\\d\\d\\.234  tool\\.call +run_command: cc -o hello hello\\.c\n")))
        << line;
}

TEST(Format, ToolResultShowsExitCodeAndIndentedOutput)
{
    const std::string text = formatEvent(
        event(6, "tool.result", {{"name", "run_command"}, {"exit_code", 0}, {"stdout", "Hello, world!\nbye\n"},
                                 {"stderr", "warning: x\n"}, {"duration_ms", 12.4}}),
        true);
    EXPECT_NE(text.find("tool.result"), std::string::npos);
    EXPECT_NE(text.find("exit 0 in 12 ms"), std::string::npos) << text;
    EXPECT_NE(text.find("\n        Hello, world!\n        bye\n"), std::string::npos) << text;
    EXPECT_NE(text.find("        stderr:\n        warning: x\n"), std::string::npos) << text;
}

TEST(Format, LongToolOutputIsCutWithAPointerToJson)
{
    std::string output;
    for (int i = 0; i < 100; ++i)
        output += "line " + std::to_string(i) + "\n";
    const std::string text = formatEvent(event(6, "tool.result", {{"exit_code", 1}, {"stdout", output}}), true);
    EXPECT_NE(text.find("line 39\n"), std::string::npos);
    EXPECT_EQ(text.find("line 40\n"), std::string::npos);
    EXPECT_NE(text.find("60 more lines (--output json shows all)"), std::string::npos) << text;
}

TEST(Format, SummariesOfOtherKinds)
{
    EXPECT_EQ(eventSummary("state.changed", R"({"status":"failed","reason":"step 2 expected exit 0"})"),
              "failed: step 2 expected exit 0");
    EXPECT_EQ(eventSummary("tool.result", R"({"name":"read_file","error":"no such file"})"),
              "read_file error: no such file");
    // The console's words (trace/event_summary.h; tests/unit/trace has every kind).
    EXPECT_EQ(eventSummary("sandbox.claimed", R"({"pool":"local","sandbox_id":"sb-1","tier":"lite","runtime":"bwrap",)"
                                              R"("warm":true,"claim_ms":0.42})"),
              "sb-1 (lite, bwrap) from pool local, warm, claim 0.4 ms");
    EXPECT_EQ(eventSummary("session.created", R"({"goal":"say hi"})"), "say hi");
    // A submitted playbook's text stays out of the one-line summary.
    EXPECT_EQ(eventSummary("session.created", R"({"model":"scripted","playbook_toml":"name = \"x\"\n"})"),
              "a submitted playbook (11 B); model scripted");
    EXPECT_EQ(eventSummary("model.error", R"({"code":"Unavailable","error":"HTTP 503"})"), "model error (Unavailable): HTTP 503");
    EXPECT_EQ(eventSummary("cost", R"({"kind":"model","model":"m","input_tokens":188,"output_tokens":14})", 774),
              "model m, 188 in / 14 out tokens, $0.0008");
    EXPECT_EQ(eventSummary("x", "not json"), "not json");
}

// What a terminal running `paddockctl events -f` gets from an agent that prints escape sequences
// and invalid UTF-8: the bytes shown, never run.
TEST(Format, AnAgentsBytesNeverReachTheTerminalAsCommands)
{
    const std::string hostile = "\x1b[2J\x1b]0;owned\x07\xc2\x9b" "31m";
    const std::string text = formatEvent(
        event(6, "tool.result", {{"name", "run_command"}, {"command", "cat evil"}, {"exit_code", 0},
                                 {"stdout", hostile + "\r\nnext line\n"}, {"stderr", hostile}}),
        true);
    for (const char raw : {'\x1b', '\x07', '\r'})
        EXPECT_EQ(text.find(raw), std::string::npos) << static_cast<int>(raw) << "\n" << text;
    EXPECT_EQ(text.find("\xc2\x9b"), std::string::npos) << "a C1 CSI";
    EXPECT_NE(text.find("        \\x1b[2J\\x1b]0;owned\\x07\\u009b31m\n        next line\n"), std::string::npos) << text;
    // A 10 MB line with no newline is one cut line.
    const std::string flood = formatEvent(event(7, "tool.result", {{"exit_code", 0}, {"stdout", std::string(10'000'000, 'x')}}), true);
    EXPECT_LT(flood.size(), 2000u);
    EXPECT_NE(flood.find("x…\n"), std::string::npos);
    // The one-line summary of any kind, and a payload that is not even JSON (invalid UTF-8).
    EXPECT_EQ(eventSummary("model.error", R"({"error":"\u001b[31mred"})"), "model error: \\x1b[31mred");
    EXPECT_EQ(eventSummary("x", "\x1b[2J\xff"), "\\x1b[2J\xEF\xBF\xBD");
}

// `paddockctl events -f` on a streamed answer: each model.delta's text under its line, made safe
// like output, a retry said on the line, and each tool call's fragment of arguments.
TEST(Format, AStreamedAnswerIsPrintedAsItsTextUnderEachDelta)
{
    const std::string first = formatEvent(
        event(8, "model.delta", {{"after_seq", 7}, {"attempt", 1}, {"text", "I will build\nthe \x1b[2Jproject"}, {"text_offset", 0}}),
        true);
    EXPECT_TRUE(std::regex_search(first, std::regex("  model\\.delta +attempt 1\n"))) << first;
    EXPECT_NE(first.find("\n        I will build\n        the \\x1b[2Jproject\n"), std::string::npos) << first;
    EXPECT_EQ(first.find('\x1b'), std::string::npos) << first;

    const std::string retried = formatEvent(
        event(9, "model.delta", {{"after_seq", 7}, {"attempt", 2}, {"supersedes", 1}, {"text", "Building."},
                                 {"tool_calls", {{{"index", 0}, {"offset", 0}, {"id", "call_1"}, {"name", "run_command"},
                                                  {"arguments", "{\"command\":\"ma"}}}}}),
        true);
    EXPECT_NE(retried.find("attempt 2 (the stream was retried: attempt 1's text above is void)\n"), std::string::npos) << retried;
    EXPECT_NE(retried.find("        Building.\n        tool call 0 (run_command) arguments:\n        {\"command\":\"ma\n"),
              std::string::npos) << retried;
}

TEST(Format, EventJsonEmbedsThePayloadAsAnObject)
{
    const json j = eventToJson(event(6, "tool.result", {{"exit_code", 0}, {"stdout", "Hello\n"}}));
    EXPECT_EQ(j["seq"], 6);
    EXPECT_EQ(j["kind"], "tool.result");
    EXPECT_EQ(j["payload"]["stdout"], "Hello\n");
    EXPECT_EQ(j["time"], "2023-11-14T22:13:21.234Z");

    v1::Event broken;
    broken.set_payload_json("{oops");
    EXPECT_EQ(eventToJson(broken)["payload"], "{oops");
}

TEST(Format, PoolsTableMarksLocalExecution)
{
    v1::ListPoolsResponse pools;
    pools.set_local_execution(true);
    auto *pool = pools.add_pools();
    pool->set_name("local");
    pool->set_endpoint("127.0.0.1:7001");
    pool->set_healthy(true);
    pool->set_local(true);
    auto *tier = pool->add_tiers();
    tier->mutable_tier()->set_name("lite");
    tier->set_warm(2);
    tier->set_claimed(1);
    tier->set_max(8);
    pool->set_disk_limits("none (the pool does not run as root, and mounting the workspace filesystem needs root)");
    pool->set_cgroups("v1 (not writable: no limits enforced)");
    const std::string table = formatPoolsTable(pools);
    EXPECT_NE(table.find("\nlocal: cgroups: v1 (not writable: no limits enforced)\n"), std::string::npos) << table;
    EXPECT_NE(table.find("lite 2 warm/1 claimed/8 max"), std::string::npos) << table;
    EXPECT_NE(table.find("\nlocal: disk limits: none (the pool does not run as root"), std::string::npos) << table;
    EXPECT_NE(table.find("development mode"), std::string::npos);
    const json j = poolsToJson(pools);
    EXPECT_EQ(j["pools"][0]["tiers"][0]["warm"], 2);
    EXPECT_EQ(j["pools"][0]["disk_limits"], pool->disk_limits());
    EXPECT_EQ(j["pools"][0]["cgroups"], pool->cgroups());
    EXPECT_EQ(j["local_execution"], true);
}

TEST(Format, PoolsSayExecutionTransportAndHealthOverTime)
{
    v1::ListPoolsResponse pools;
    auto *east = pools.add_pools();
    east->set_name("east");
    east->set_endpoint("10.250.0.2:7701");
    east->set_healthy(false);
    east->set_error("pool 'east' at 10.250.0.2:7701: TLS handshake failed");
    east->set_transport("tls");
    east->set_token(true);
    east->set_unhealthy_since_unix_ms(1700000000000);
    auto *ok = east->add_history();
    ok->set_time_unix_ms(1699999999000);
    ok->set_healthy(true);
    ok->set_claimed(3);
    auto *bad = east->add_history();
    bad->set_time_unix_ms(1700000000000);
    bad->set_error("TLS handshake failed");
    auto *local = pools.add_pools();
    local->set_name("dev");
    local->set_endpoint("127.0.0.1:7701");
    local->set_healthy(true);
    local->set_local(true);
    pools.set_local_execution(true);

    local->set_disk_limits("btrfs qgroups");
    const std::string table = formatPoolsTable(pools);
    EXPECT_NE(table.find("EXECUTION"), std::string::npos) << table;
    EXPECT_NE(table.find("dev: disk limits: btrfs qgroups\n"), std::string::npos) << table;
    EXPECT_EQ(table.find("east: disk limits"), std::string::npos) << "an unhealthy pool's limits are unknown: no line";
    EXPECT_EQ(table.find("east: cgroups"), std::string::npos);
    EXPECT_NE(table.find("tls+token"), std::string::npos) << table;
    EXPECT_NE(table.find("remote"), std::string::npos) << table;
    EXPECT_NE(table.find("local execution"), std::string::npos) << table;
    EXPECT_NE(table.find("TLS handshake failed"), std::string::npos) << table;

    const json j = poolsToJson(pools);
    EXPECT_EQ(j["pools"][0]["execution"], "remote");
    EXPECT_EQ(j["pools"][1]["execution"], "local execution");
    EXPECT_EQ(j["pools"][0]["transport"], "tls");
    EXPECT_EQ(j["pools"][0]["token"], true);
    ASSERT_EQ(j["pools"][0]["history"].size(), 2u);
    EXPECT_EQ(j["pools"][0]["history"][0]["claimed"], 3);
    EXPECT_EQ(j["pools"][0]["history"][1]["healthy"], false);
    EXPECT_EQ(j["pools"][0]["history"][1]["error"], "TLS handshake failed");
    EXPECT_FALSE(j["pools"][0]["history"][0].contains("error")) << "a healthy check carries no error";
}

} // namespace
} // namespace paddock::cli
