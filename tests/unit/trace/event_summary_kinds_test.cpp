// The sandbox kinds in words (claims, releases, failures, moves, waits, restores, checkpoints,
// egress, debug shells), and the check that every kind the broker writes has words of its own:
// the kinds are read from broker/core/event.h and docs/events.md, so a new kind without a summary
// fails here.

#include "trace/event_summary.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace paddock::trace {
namespace {

std::string say(std::string_view kind, const char *payload) { return summarize(kind, std::string_view(payload)); }

std::string readSource(const std::string &path)
{
    std::ifstream file(std::string(PADDOCK_SOURCE_DIR) + "/" + path);
    std::ostringstream text;
    text << file.rdbuf();
    return text.str();
}

std::set<std::string> matches(const std::string &text, const std::regex &pattern)
{
    std::set<std::string> out;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern); it != std::sregex_iterator(); ++it)
        out.insert((*it)[1].str());
    return out;
}

TEST(EventSummaryKinds, EveryKindTheBrokerWritesHasWordsOfItsOwn)
{
    const std::set<std::string> declared =
        matches(readSource("broker/core/event.h"), std::regex(R"re(inline constexpr const char \*\w+ = "([a-z_.]+)";)re"));
    const std::set<std::string> documented =
        matches(readSource("docs/events.md"), std::regex(R"re(\n\| `([a-z_.]+)` \|)re"));
    ASSERT_GE(declared.size(), 25u) << "broker/core/event.h was not read, or its kinds moved";
    ASSERT_GE(documented.size(), 25u) << "docs/events.md was not read, or its table changed shape";
    for (const auto &kind : declared)
        EXPECT_TRUE(hasOwnSummary(kind)) << kind << " (broker/core/event.h) has no summary in trace/event_summary*.cpp";
    for (const auto &kind : documented)
        EXPECT_TRUE(hasOwnSummary(kind)) << kind << " (docs/events.md) has no summary in trace/event_summary*.cpp";
    // And each says something without JSON, even from an empty payload.
    for (const auto kind : kindsWithSummaries())
        EXPECT_EQ(say(kind, "{}").find('{'), std::string::npos) << kind;
}

TEST(EventSummaryKinds, SandboxClaimedAndReleased)
{
    const EventLine claimed = describeEvent("sandbox.claimed", std::string_view(
        R"({"pool":"local","sandbox_id":"lite-1979","tier":"lite","runtime":"bwrap","host":"h","warm":true,"claim_ms":0.4,"price_per_hour":0.05})"));
    EXPECT_EQ(claimed.summary, "lite-1979 (lite, bwrap) from pool local, warm, claim 0.4 ms, $0.0500/h");
    EXPECT_EQ(say("sandbox.released", R"({"sandbox_id":"lite-1979","pool":"local","note":""})"),
              "released lite-1979 from pool local");
    EXPECT_EQ(say("sandbox.released", R"({"sandbox_id":"sb-1","pool":"p","reason":"idle","idle_limit_ms":300000,
        "manifest":"9e62e7b565efbd7b2a3209","checkpoint":"new","files":12,"size_bytes":49152,"sent_bytes":4096,"checkpoint_ms":35})"),
              "released sb-1 from pool p, idle for 5 min 00 s, workspace kept in checkpoint 9e62e7b565ef "
              "(taken now: 12 files, 48 KiB, 4.0 KiB sent, 35 ms)");
}

TEST(EventSummaryKinds, SandboxFailedAndLost)
{
    const EventLine failed = describeEvent("sandbox.failed", std::string_view(R"({"sandbox_id":"sb-1","reason":"crashed","error":"init died"})"));
    EXPECT_EQ(failed.summary, "sandbox sb-1 failed: crashed, init died");
    EXPECT_TRUE(failed.isError);
    const EventLine lost = describeEvent("sandbox.lost", std::string_view(
        R"({"sandbox_id":"sb-9","pool":"east","reason":"pool_lost","interrupted_call":"c4","error":"unhealthy for 10 s"})"));
    EXPECT_EQ(lost.summary, "lost sb-9 from pool east with its pool, interrupted call c4: unhealthy for 10 s");
    EXPECT_TRUE(lost.isError);
}

TEST(EventSummaryKinds, SandboxMoved)
{
    EXPECT_EQ(say("sandbox.moved", R"({"from_pool":"east","from_sandbox_id":"sb-1","to_pool":"west","to_sandbox_id":"sb-2",
        "manifest":"3f2a9c0d1e2f99","workspace":"restored","restored_files":14,"restored_bytes":49152,"restore_ms":41,
        "repeats_call":"c4"})"),
              "moved from east sb-1 to west sb-2, restored checkpoint 3f2a9c0d1e2f: 14 files, 48 KiB in 41 ms, repeats call c4");
    EXPECT_EQ(say("sandbox.moved", R"({"reason":"tier_override","from_tier":"lite","from_pool":"a","to_tier":"standard",
        "to_pool":"a","manifest":"","workspace":"empty"})"),
              "moved from tier lite to standard from a to a, empty workspace (no checkpoint yet)");
}

TEST(EventSummaryKinds, SandboxWaitingSaysItsReasonInWords)
{
    EXPECT_EQ(say("sandbox.waiting", R"({"tier":"lite","code":"resource_exhausted","in_use":32,"max":32,"ahead":3,"waiting":4,
        "reason":"waiting for a lite sandbox: 32 of 32 in use on every pool; 3 sessions ahead of this one"})"),
              "waiting for a lite sandbox: 32 of 32 in use on every pool; 3 sessions ahead of this one");
    EXPECT_EQ(say("sandbox.waiting", R"({"tier":"heavy","code":"resource_exhausted","in_use":2,"max":2,"ahead":1})"),
              "waiting for a heavy sandbox: 2 of 2 in use, 1 session ahead (resource_exhausted)");
}

TEST(EventSummaryKinds, CheckpointWaiting)
{
    EXPECT_EQ(say("checkpoint.waiting", R"({"store":"s3","code":"unavailable","reason":"s3 at minio:9000 refused the connection",
        "after_call":"c2"})"), "waiting for the checkpoint store (s3) to save call c2: s3 at minio:9000 refused the connection");
}

TEST(EventSummaryKinds, SandboxRestored)
{
    const EventLine restored = describeEvent("sandbox.restored", std::string_view(R"({"manifest":"3f2a9c0d1e2f00","pool":"local",
        "sandbox_id":"sb-2","tier":"lite","after":"idle","restored_files":14,"restored_bytes":2048,"restore_ms":41})"));
    EXPECT_EQ(restored.summary,
              "restored checkpoint 3f2a9c0d1e2f into sb-2 (lite) from pool local: 14 files, 2.0 KiB in 41 ms, "
              "after the last sandbox went (idle)");
    EXPECT_EQ(restored.latencyMs, 41);
}

TEST(EventSummaryKinds, Checkpoint)
{
    const EventLine checkpoint = describeEvent("checkpoint", std::string_view(R"({"manifest":"718d32","store":"broker","base":"9e62",
        "pool":"local","sandbox_id":"sb","after_call":"call-2","files":12,"size_bytes":16207,"changed":3,"removed":1,
        "new_chunks":3,"sent_bytes":49152,"stored_bytes":49152,"scan_ms":1.1,"duration_ms":35})"));
    EXPECT_EQ(checkpoint.summary, "checkpoint 12 files, 3 changed, 1 removed, 48 KiB sent, 35 ms");
    EXPECT_EQ(checkpoint.latencyMs, 35);
    EXPECT_EQ(say("checkpoint", R"({"files":1,"changed":1,"removed":0,"sent_bytes":900,"store":"s3","duration_ms":5.3})"),
              "checkpoint 1 file, 1 changed, 0 removed, 900 B sent, 5.3 ms, to S3");
}

TEST(EventSummaryKinds, Egress)
{
    EXPECT_EQ(say("egress.allowed", R"({"call_id":"c1","host":"pypi.org","port":443,"address":"151.101.0.223","method":"CONNECT",
        "bytes_out":512,"bytes_in":4096,"duration_ms":120,"review_id":"r-3","detail":"approved in review r-3"})"),
              "allowed CONNECT pypi.org:443 (151.101.0.223), 512 B out / 4.0 KiB in, 120 ms, approved in review r-3");
    const EventLine refused = describeEvent("egress.refused", std::string_view(
        R"({"host":"169.254.169.254","port":80,"address":"169.254.169.254","method":"GET","reason":"metadata","detail":"the cloud metadata service"})"));
    EXPECT_EQ(refused.summary, "refused GET 169.254.169.254:80, metadata: the cloud metadata service");
    EXPECT_FALSE(refused.isError) << "a refusal is the policy working";
}

TEST(EventSummaryKinds, DebugShell)
{
    EXPECT_EQ(say("debug_shell.opened", R"({"shell_id":"sh-1","pool":"local","sandbox_id":"sb-3","tier":"lite",
        "post_mortem_sandbox_id":"sb-1","snapshot_ref":"x","restored_files":14,"by":"operator","client_user":"ana"})"),
              "debug shell sh-1 opened in sb-3 (lite) from pool local, from the post-mortem of sb-1, 14 files restored, by operator");
    const EventLine exec = describeEvent("debug_shell.exec", std::string_view(R"({"shell_id":"sh-1","argv":["/bin/sh","-c","ls -la"],
        "exit_code":2,"signal":0,"duration_ms":12,"by":"operator"})"));
    EXPECT_EQ(exec.summary, "$ ls -la, exit 2 in 12 ms, by operator");
    EXPECT_TRUE(exec.isError);
    EXPECT_EQ(say("debug_shell.closed", R"({"shell_id":"sh-1","pool":"local","sandbox_id":"sb-3","reason":"idle","by":"broker"})"),
              "debug shell sh-1 closed (idle), by broker");
}

} // namespace
} // namespace paddock::trace
