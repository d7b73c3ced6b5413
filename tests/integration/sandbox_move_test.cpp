// A session's sandbox comes and goes while its workspace stays: the real broker, pool and bubblewrap
// sandboxes. A paused session gives its sandbox back after the broker's idle limit and gets a new
// one, restored from the snapshot, on resume; a session overridden to another tier mid-run moves
// there at its next step (snapshot, claim, restore); an unknown tier is refused and nothing is
// recorded. A command running when its session is paused runs once: its result is recorded before
// the sandbox is given back, also when the broker is killed during the pause.

#include "tests/integration/daemons_fixture.h"

#include <pwd.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

namespace paddock::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char *kPlaybook = R"(
name = "keeps-a-file"
goal = "write a file, wait, read it back"

[[step]]
tool = "write_file"
path = "notes.txt"
content = "written before the sandbox changed"

[[step]]
tool = "run_command"
command = "sleep 2"

[[step]]
tool = "run_command"
command = "cat notes.txt"
)";

class SandboxMove : public DaemonsTest {
protected:
    // Two tiers on one pool (both bubblewrap) to move between, and a short idle limit.
    std::map<std::string, std::string> configFiles() const override
    {
        return {{"pool.toml", "[[tier]]\nname = \"lite\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 8\n"
                              "[[tier]]\nname = \"lite2\"\nruntime = \"bwrap\"\nwarm_count = 1\nmax_count = 8\n"},
                {"broker.toml", "sandbox_idle_release_ms = 300\n"}};
    }

    std::string submit()
    {
        const CliResult submitted = cli({"submit", "--playbook", writeFile("keeps.toml", kPlaybook).string(), "--tier",
                                         "lite", "--output", "json"});
        EXPECT_EQ(submitted.exitCode, 0) << submitted.err;
        const json session = json::parse(submitted.out, nullptr, false);
        return session.is_object() ? session.value("id", std::string()) : std::string();
    }

    static std::vector<json> ofKind(const json &events, const std::string &kind)
    {
        std::vector<json> out;
        for (const auto &e : events) {
            if (e.value("kind", "") == kind)
                out.push_back(e);
        }
        return out;
    }

    // Polls the log until pred holds (or about 60 s pass); returns the last log read.
    // The pause tests' command: it appends a line, then sleeps, so a second run would show.
    static constexpr const char *kAppendOnce = "echo x >> lines.txt; sleep 3";

    // Submits "append a line (kAppendOnce), then count the lines"; the session's id.
    std::string submitAppendThenCount()
    {
        const CliResult submitted =
            cli({"submit", "--tier", "lite", "--output", "json", "--playbook",
                 writeFile("append.toml", std::string("name = \"appends-once\"\ngoal = \"append a line, then count the "
                                                      "lines\"\n[[step]]\ntool = \"run_command\"\ncommand = \"")
                                              + kAppendOnce + "\"\n[[step]]\ntool = \"run_command\"\ncommand = "
                                                              "\"wc -l < lines.txt\"\n")
                     .string()});
        EXPECT_EQ(submitted.exitCode, 0) << submitted.err;
        const json session = json::parse(submitted.out, nullptr, false);
        return session.is_object() ? session.value("id", std::string()) : std::string();
    }

    // The tool.call events of kAppendOnce, and its tool.result events.
    static int appendCalls(const json &log)
    {
        int n = 0;
        for (const auto &e : ofKind(log, "tool.call"))
            n += e["payload"].value("arguments", json::object()).value("command", "") == kAppendOnce;
        return n;
    }
    static std::vector<json> appendResults(const json &log)
    {
        std::vector<json> out;
        for (const auto &e : ofKind(log, "tool.result"))
            if (e["payload"].value("command", "") == kAppendOnce)
                out.push_back(e);
        return out;
    }
    static bool givenBackIdle(const json &log)
    {
        for (const auto &e : ofKind(log, "sandbox.released"))
            if (e["payload"].value("reason", "") == "idle")
                return true;
        return false;
    }
    // What the counting step printed.
    static std::string lineCount(const json &log)
    {
        std::string count = "(none)";
        for (const auto &e : ofKind(log, "tool.result"))
            if (e["payload"].value("command", "") == "wc -l < lines.txt")
                count = e["payload"].value("stdout", "");
        return count;
    }

    json waitFor(const std::string &id, const std::function<bool(const json &)> &pred)
    {
        json events;
        for (int i = 0; i < 600; ++i) {
            events = eventsOf(id);
            if (pred(events))
                return events;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        ADD_FAILURE() << "gave up waiting; the log: " << events.dump(1);
        return events;
    }

    static bool hasWriteResult(const json &events)
    {
        for (const auto &e : ofKind(events, "tool.result")) {
            if (e["payload"].value("name", "") == "write_file")
                return true;
        }
        return false;
    }

    static bool ended(const json &events)
    {
        for (const auto &e : ofKind(events, "state.changed")) {
            const std::string status = e["payload"].value("status", "");
            if (status == "succeeded" || status == "failed" || status == "cancelled")
                return true;
        }
        return false;
    }

    // stdout of the `cat notes.txt` result, or "(none)".
    static std::string catOutput(const json &events)
    {
        for (const auto &e : ofKind(events, "tool.result")) {
            if (e["payload"].value("command", "") == "cat notes.txt")
                return e["payload"].value("stdout", "");
        }
        return "(none)";
    }

    static int64_t seqOf(const json &event) { return event.value("seq", int64_t{0}); }
};

TEST_F(SandboxMove, PausedSessionGivesItsSandboxBackAndGetsItsFilesBackOnResume)
{
    const std::string id = submit();
    ASSERT_FALSE(id.empty());
    waitFor(id, hasWriteResult);
    const CliResult paused = cli({"pause", id, "--reason", "lunch"});
    ASSERT_EQ(paused.exitCode, 0) << paused.err;

    json events = waitFor(id, givenBackIdle);
    const auto released = ofKind(events, "sandbox.released");
    ASSERT_EQ(released.size(), 1u) << events.dump(1);
    const json idle = released[0]["payload"];
    const std::string ref = idle.value("manifest", "");
    EXPECT_FALSE(ref.empty()) << idle.dump();
    const auto claimsBefore = ofKind(events, "sandbox.claimed");
    ASSERT_EQ(claimsBefore.size(), 1u);
    EXPECT_EQ(idle.value("sandbox_id", ""), claimsBefore[0]["payload"].value("sandbox_id", ""));
    const CliResult shown = cli({"show", id, "--output", "json"});
    ASSERT_EQ(shown.exitCode, 0) << shown.err;
    EXPECT_EQ(json::parse(shown.out).value("sandbox_id", ""), "") << shown.out;

    const CliResult resumed = cli({"resume", id});
    ASSERT_EQ(resumed.exitCode, 0) << resumed.err;
    events = waitFor(id, ended);
    EXPECT_EQ(ofKind(events, "state.changed").back()["payload"].value("status", ""), "succeeded") << events.dump(1);

    const auto claims = ofKind(events, "sandbox.claimed");
    ASSERT_EQ(claims.size(), 2u) << events.dump(1);
    EXPECT_NE(claims[1]["payload"].value("sandbox_id", ""), claims[0]["payload"].value("sandbox_id", ""));
    const auto restored = ofKind(events, "sandbox.restored");
    ASSERT_EQ(restored.size(), 1u) << events.dump(1);
    EXPECT_EQ(restored[0]["payload"].value("manifest", ""), ref);
    EXPECT_EQ(restored[0]["payload"].value("after", ""), "idle");
    EXPECT_EQ(restored[0]["payload"].value("sandbox_id", ""), claims[1]["payload"].value("sandbox_id", ""));
    EXPECT_GT(seqOf(restored[0]), seqOf(released[0]));
    EXPECT_EQ(catOutput(events), "written before the sandbox changed");
    std::cout << "idle give-back: checkpoint " << idle.value("checkpoint", "") << ", restore "
              << restored[0]["payload"].value("restore_ms", 0.0) << " ms, "
              << restored[0]["payload"].value("restored_files", 0) << " file(s)\n";
}

// Paused while a command runs: the command finishes in its sandbox and its result is recorded
// before the sandbox is given back; on resume it is not run again. The command appends a line, so
// a second run would show in the count the next step reads.
TEST_F(SandboxMove, PausedWhileACommandRunsTheCommandRunsOnce)
{
    const std::string id = submitAppendThenCount();
    ASSERT_FALSE(id.empty());
    waitFor(id, [](const json &log) { return appendCalls(log) > 0; });
    const CliResult paused = cli({"pause", id, "--reason", "while the command runs"});
    ASSERT_EQ(paused.exitCode, 0) << paused.err;
    json events = waitFor(id, givenBackIdle);
    const auto firstResults = appendResults(events);
    ASSERT_EQ(firstResults.size(), 1u) << "the command's result is recorded before its sandbox is given back:\n"
                                       << events.dump(1);
    EXPECT_EQ(firstResults[0]["payload"].value("exit_code", -1), 0) << firstResults[0].dump();
    EXPECT_GT(seqOf(ofKind(events, "sandbox.released").back()), seqOf(firstResults[0]));

    const CliResult resumed = cli({"resume", id});
    ASSERT_EQ(resumed.exitCode, 0) << resumed.err;
    events = waitFor(id, ended);
    EXPECT_EQ(ofKind(events, "state.changed").back()["payload"].value("status", ""), "succeeded") << events.dump(1);
    EXPECT_EQ(appendCalls(events), 1) << events.dump(1);
    EXPECT_EQ(appendResults(events).size(), 1u) << events.dump(1);
    EXPECT_EQ(lineCount(events), "1\n") << "the appending command ran more than once:\n" << events.dump(1);
}

// The same with the broker killed (kill -9) right after the pause, while the command still runs:
// the broker that starts next finds the command's call without a result and a paused session. It
// asks the pool for that run's result only (nothing new is started), records it with its
// checkpoint, then gives the sandbox back; resumed, the session does not run the command again.
TEST_F(SandboxMove, PausedWhileACommandRunsAndTheBrokerKilledTheCommandRunsOnce)
{
    const std::string id = submitAppendThenCount();
    ASSERT_FALSE(id.empty());
    waitFor(id, [](const json &log) { return appendCalls(log) > 0; });
    // Into the command's sleep: its line is written; its result is seconds away.
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    const CliResult paused = cli({"pause", id, "--reason", "while the command runs"});
    ASSERT_EQ(paused.exitCode, 0) << paused.err;
    ASSERT_TRUE(appendResults(eventsOf(id)).empty()) << "the command ended before the broker was killed; the test "
                                                        "proves nothing then";
    m_broker->daemon.kill9();
    auto restarted = startBroker(*m_dir, m_pool->endpoint);
    ASSERT_TRUE(restarted) << restarted.error().message;
    m_broker = std::make_unique<BrokerProcess>(std::move(*restarted));

    json events = waitFor(id, givenBackIdle);
    const auto firstResults = appendResults(events);
    ASSERT_EQ(firstResults.size(), 1u) << "the command's result is recorded before its sandbox is given back:\n"
                                       << events.dump(1);
    EXPECT_EQ(firstResults[0]["payload"].value("exit_code", -1), 0) << firstResults[0].dump();
    EXPECT_TRUE(firstResults[0]["payload"].value("replayed", false)) << "answered from the pool's record of the run";
    EXPECT_GT(seqOf(ofKind(events, "sandbox.released").back()), seqOf(firstResults[0]));

    const CliResult resumed = cli({"resume", id});
    ASSERT_EQ(resumed.exitCode, 0) << resumed.err;
    events = waitFor(id, ended);
    EXPECT_EQ(ofKind(events, "state.changed").back()["payload"].value("status", ""), "succeeded") << events.dump(1);
    EXPECT_EQ(appendResults(events).size(), 1u) << events.dump(1);
    EXPECT_EQ(lineCount(events), "1\n") << "the appending command ran more than once:\n" << events.dump(1);
}

TEST_F(SandboxMove, OverriddenSessionContinuesInTheNewTierWithItsFiles)
{
    const std::string id = submit();
    ASSERT_FALSE(id.empty());
    waitFor(id, hasWriteResult);
    const CliResult moved = cli({"override", id, "lite2", "--reason", "needs its own tier", "--output", "json"});
    ASSERT_EQ(moved.exitCode, 0) << moved.err;
    const json decision = json::parse(moved.out);
    EXPECT_EQ(decision.value("chosen_tier", ""), "lite2");
    EXPECT_EQ(decision.value("requested_tier", ""), "lite2");
    EXPECT_EQ(decision.value("chooser", ""), "human");

    const json events = waitFor(id, ended);
    EXPECT_EQ(ofKind(events, "state.changed").back()["payload"].value("status", ""), "succeeded") << events.dump(1);
    const auto overrides = ofKind(events, "tier.override");
    ASSERT_EQ(overrides.size(), 1u);
    EXPECT_EQ(overrides[0]["payload"].value("chooser", ""), "human");
    EXPECT_EQ(overrides[0]["payload"].value("from", ""), "lite");
    EXPECT_EQ(overrides[0]["payload"].value("to", ""), "lite2");
    EXPECT_EQ(overrides[0]["payload"].value("reason", ""), "needs its own tier");

    const auto moves = ofKind(events, "sandbox.moved");
    ASSERT_EQ(moves.size(), 1u) << events.dump(1);
    const json move = moves[0]["payload"];
    const auto claims = ofKind(events, "sandbox.claimed");
    ASSERT_EQ(claims.size(), 2u);
    EXPECT_EQ(move.value("from_tier", ""), "lite");
    EXPECT_EQ(move.value("to_tier", ""), "lite2");
    EXPECT_EQ(move.value("from_sandbox_id", ""), claims[0]["payload"].value("sandbox_id", ""));
    EXPECT_EQ(move.value("to_sandbox_id", ""), claims[1]["payload"].value("sandbox_id", ""));
    EXPECT_EQ(claims[1]["payload"].value("tier", ""), "lite2");
    EXPECT_FALSE(move.value("manifest", "").empty());
    EXPECT_EQ(move.value("workspace", ""), "restored");
    EXPECT_GT(seqOf(moves[0]), seqOf(overrides[0]));
    // The old sandbox was given back with the move.
    bool releasedOld = false;
    for (const auto &e : ofKind(events, "sandbox.released"))
        releasedOld |= e["payload"].value("reason", "") == "tier_move"
            && e["payload"].value("sandbox_id", "") == claims[0]["payload"].value("sandbox_id", "");
    EXPECT_TRUE(releasedOld) << events.dump(1);
    // Every command after the move ran in the new sandbox, and the file was there.
    EXPECT_EQ(catOutput(events), "written before the sandbox changed");
    for (const auto &e : ofKind(events, "tool.result")) {
        if (e["payload"].value("command", "") == "cat notes.txt") {
            EXPECT_GT(seqOf(e), seqOf(moves[0]));
        }
    }
    // The override is an environment decision made by a human; the tier it left got its outcome.
    const auto decisions = ofKind(events, "env.decision");
    ASSERT_EQ(decisions.size(), 2u) << events.dump(1);
    EXPECT_EQ(decisions[0]["payload"].value("trigger", ""), "session_start");
    const json &human = decisions[1]["payload"];
    EXPECT_EQ(human.value("trigger", ""), "override");
    EXPECT_EQ(human.value("chooser", ""), "human");
    EXPECT_EQ(human.value("who", ""), ::getpwuid(::geteuid())->pw_name) << "the caller (peer credentials)";
    EXPECT_EQ(human.value("chosen_tier", ""), "lite2");
    EXPECT_EQ(human.value("id", ""), decision.value("id", "")) << "the override prints the decision it recorded";
    EXPECT_GT(seqOf(moves[0]), seqOf(decisions[1]));
    const auto outcomes = ofKind(events, "env.outcome");
    ASSERT_FALSE(outcomes.empty()) << events.dump(1);
    EXPECT_EQ(outcomes[0]["payload"].value("decision_id", ""), decisions[0]["payload"].value("id", ""));
    EXPECT_EQ(outcomes[0]["payload"].value("tier", ""), "lite");
    EXPECT_LT(seqOf(outcomes[0]), seqOf(moves[0]));
    const CliResult listed = cli({"decisions", "ls", "--session", id, "--chooser", "human", "--output", "json"});
    ASSERT_EQ(listed.exitCode, 0) << listed.err;
    const auto rows = jsonLines(listed.out);
    // Newest first: the override, then the submitter's own pick of lite (also a human's).
    ASSERT_EQ(rows.size(), 2u) << listed.out;
    EXPECT_EQ(rows[0].value("trigger", ""), "override");
    EXPECT_EQ(rows[1].value("trigger", ""), "session_start");
    const CliResult shown = cli({"show", id, "--output", "json"});
    ASSERT_EQ(shown.exitCode, 0) << shown.err;
    EXPECT_EQ(json::parse(shown.out).value("tier", ""), "lite2") << shown.out;
    EXPECT_EQ(json::parse(shown.out).value("tier_chooser", ""), "human") << shown.out;
    std::cout << "tier move: " << move.value("restored_files", 0) << " file(s) restored; override at seq "
              << seqOf(overrides[0]) << ", moved at seq " << seqOf(moves[0]) << "\n";
}

TEST_F(SandboxMove, UnknownTierIsRefusedAndNothingIsRecorded)
{
    const std::string id = submit();
    ASSERT_FALSE(id.empty());
    // The sandbox goes back after the session's end (env.outcome, cost, sandbox.released): wait
    // for that too, or those events land between the two reads of the log below.
    json before = waitFor(id, [](const json &log) { return ended(log) && !ofKind(log, "sandbox.released").empty(); });
    const CliResult refused = cli({"override", id, "gigantic", "--reason", "more power"});
    EXPECT_EQ(refused.exitCode, 5);
    EXPECT_NE(refused.err.find("unknown tier 'gigantic'"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("lite, lite2"), std::string::npos) << refused.err;
    // Ended sessions take no more steps: the override is refused, naming why.
    const CliResult late = cli({"override", id, "lite2", "--reason", "too late"});
    EXPECT_EQ(late.exitCode, 6);
    EXPECT_NE(late.err.find("succeeded"), std::string::npos) << late.err;
    const CliResult missing = cli({"override", "s-nosuchsession", "lite2", "--reason", "r"});
    EXPECT_EQ(missing.exitCode, 3);
    EXPECT_NE(missing.err.find("no session"), std::string::npos) << missing.err;
    const json after = eventsOf(id);
    EXPECT_EQ(after.size(), before.size());
    EXPECT_TRUE(ofKind(after, "tier.override").empty());
}

} // namespace
} // namespace paddock::test
