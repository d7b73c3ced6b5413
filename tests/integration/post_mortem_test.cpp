// Post-mortems end to end: the real pool and broker, sessions that fail in lite sandboxes, and
// everything read back through paddockctl the way an operator would, without touching the pool's
// files: the OOM kill (named, memory curve up to the limit, the snapshot's files listed, printed
// and downloaded), a timeout (named, with the processes that were running), a debug shell in a
// restored copy whose every command lands in the failed session's log, and a corrupt snapshot
// that is refused with a clear error while the post-mortem stays readable.
#include "tests/integration/daemons_fixture.h"

#include <fstream>
#include <pwd.h>
#include <unistd.h>

namespace paddock::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int64_t kLiteMemory = 64ll << 20;

class PostMortems : public DaemonsTest {
protected:
    // A lite tier small enough to fill.
    std::map<std::string, std::string> configFiles() const override
    {
        return {{"pool.toml", "[[tier]]\n"
                              "name = \"lite\"\n"
                              "runtime = \"bwrap\"\n"
                              "warm_count = 2\n"
                              "memory_mb = 64\n"
                              "cpu = 1.0\n"}};
    }

    // The post_mortem reference of the session's failed tool.result: "POOL/SANDBOX".
    std::string failedCommand(const json &events, const std::string &reason)
    {
        for (const auto &e : events) {
            if (e.value("kind", "") != "tool.result" || !e["payload"].contains("post_mortem"))
                continue;
            const auto &p = e["payload"];
            EXPECT_EQ(p.value("reason", ""), reason) << p.dump();
            return p["post_mortem"].value("pool", "") + "/" + p["post_mortem"].value("sandbox_id", "");
        }
        ADD_FAILURE() << "no tool.result carries a post_mortem: " << events.dump();
        return {};
    }

    json showJson(const std::string &id)
    {
        const CliResult show = cli({"postmortems", "show", id, "--output", "json"});
        EXPECT_EQ(show.exitCode, 0) << show.err;
        return json::parse(show.out, nullptr, false);
    }
};

bool isRoot()
{
    return ::geteuid() == 0;
}

} // namespace

TEST_F(PostMortems, OomInLiteIsNamedWithItsCurveAndItsSnapshotIsReadable)
{
    if (!isRoot())
        GTEST_SKIP() << "the pool needs root for cgroup limits (no OOM kill without them)";
    const auto playbook = writeFile("oom.toml", R"(name = "oom"
goal = "allocate past the tier's memory"

[[step]]
tool = "write_file"
path = "notes/plan.txt"
content = "step 1: fill the memory\n"

[[step]]
tool = "run_command"
command = "echo allocating; echo about to grow >&2; sleep 2.5; exec tail /dev/zero"

[[step]]
tool = "finish"
summary = "never reached"
)");
    const std::string session = submitAndFollow({"--playbook", playbook.string()}, 7);
    ASSERT_FALSE(session.empty());
    const std::string id = failedCommand(eventsOf(session), "oom_killed");
    ASSERT_FALSE(id.empty());

    // Listed for the session, named oom_killed.
    const CliResult ls = cli({"postmortems", "ls", "--session", session, "--output", "json"});
    ASSERT_EQ(ls.exitCode, 0) << ls.err;
    const json listed = json::parse(ls.out);
    ASSERT_EQ(listed["post_mortems"].size(), 1u) << ls.out;
    EXPECT_EQ(listed["post_mortems"][0]["reason"], "oom_killed");
    EXPECT_EQ(listed["post_mortems"][0]["pool"].get<std::string>() + "/" + listed["post_mortems"][0]["sandbox_id"].get<std::string>(), id);

    // The curve: low while it slept, at the limit when it died; the last output; what was left.
    const json pm = showJson(id);
    ASSERT_TRUE(pm.is_object());
    EXPECT_EQ(pm["reason"], "oom_killed");
    EXPECT_EQ(pm["signal"], 9);
    EXPECT_EQ(pm["limits"]["memory_bytes"], kLiteMemory);
    EXPECT_EQ(pm["last_stdout"], "allocating\n");
    EXPECT_EQ(pm["last_stderr"], "about to grow\n");
    const auto &samples = pm["samples"];
    ASSERT_GE(samples.size(), 2u) << pm.dump();
    EXPECT_LT(samples.front()["memory_bytes"].get<int64_t>(), kLiteMemory / 2);
    EXPECT_GE(samples.back()["memory_bytes"].get<int64_t>(), kLiteMemory * 9 / 10) << samples.dump();
    EXPECT_FALSE(pm["processes"].empty());
    const std::string ref = pm["snapshot_ref"];
    ASSERT_FALSE(ref.empty()) << pm.dump();

    const CliResult table = cli({"postmortems", "show", id});
    ASSERT_EQ(table.exitCode, 0) << table.err;
    EXPECT_NE(table.out.find("reason:    oom_killed"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("% of the limit"), std::string::npos) << table.out;

    // The snapshot's files, listed, printed and downloaded.
    const CliResult files = cli({"postmortems", "files", id});
    ASSERT_EQ(files.exitCode, 0) << files.err;
    EXPECT_NE(files.out.find("notes/plan.txt"), std::string::npos) << files.out;
    const CliResult snapLs = cli({"snapshot", "ls", id.substr(0, id.find('/')), ref, "notes", "--output", "json"});
    ASSERT_EQ(snapLs.exitCode, 0) << snapLs.err;
    EXPECT_EQ(json::parse(snapLs.out).size(), 2u) << snapLs.out;
    const CliResult cat = cli({"postmortems", "cat", id, "notes/plan.txt"});
    ASSERT_EQ(cat.exitCode, 0) << cat.err;
    EXPECT_EQ(cat.out, "step 1: fill the memory\n");
    const fs::path saved = *m_dir / "plan-copy.txt";
    const CliResult download = cli({"postmortems", "download", id, "notes/plan.txt", "-o", saved.string()});
    ASSERT_EQ(download.exitCode, 0) << download.err;
    std::ifstream in(saved);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "step 1: fill the memory\n");

    // Bad input is named, with the CLI's exit codes.
    const CliResult missing = cli({"postmortems", "cat", id, "notes/nothing.txt"});
    EXPECT_EQ(missing.exitCode, 3) << missing.err;
    EXPECT_NE(missing.err.find("nothing.txt"), std::string::npos) << missing.err;
    const CliResult unknown = cli({"postmortems", "show", "lite-doesnotexist"});
    EXPECT_EQ(unknown.exitCode, 3) << unknown.err;
    EXPECT_NE(unknown.err.find("postmortems ls"), std::string::npos) << unknown.err;
}

TEST_F(PostMortems, TimeoutIsNamedWithTheProcessesItLeftRunning)
{
    const auto playbook = writeFile("hang.toml", R"(name = "hang"
goal = "wait for something that never comes"

[[step]]
tool = "run_command"
command = "sleep 301 & sleep 302"
timeout_ms = 1500
)");
    const std::string session = submitAndFollow({"--playbook", playbook.string()}, 7);
    ASSERT_FALSE(session.empty());
    const std::string id = failedCommand(eventsOf(session), "timeout");
    ASSERT_FALSE(id.empty());
    const json pm = showJson(id);
    EXPECT_EQ(pm["reason"], "timeout");
    if (!isRoot())
        GTEST_SKIP() << "the timeout is named; the processes it left need the pool's cgroups (root)";
    std::string commands;
    for (const auto &p : pm["processes"])
        commands += p["command"].get<std::string>() + "\n";
    EXPECT_NE(commands.find("sleep 301"), std::string::npos) << commands;
    EXPECT_NE(commands.find("sleep 302"), std::string::npos) << commands;
    EXPECT_NE(pm["processes_note"].get<std::string>().find("before the deadline"), std::string::npos);
}

TEST_F(PostMortems, DebugShellRunsInARestoredCopyAndEveryCommandIsAudited)
{
    const std::string session = submitAndFollow({"--playbook", "failing-build"}, 7);
    ASSERT_FALSE(session.empty());
    const std::string id = failedCommand(eventsOf(session), "");
    ASSERT_FALSE(id.empty());
    EXPECT_EQ(showJson(id)["reason"], "nonzero_exit");

    const CliResult shell = cli({"debug-shell", id, "--tier", "lite", "--command", "grep -c semicolon broken.c && echo host=$(hostname)",
                                 "--output", "json"});
    ASSERT_EQ(shell.exitCode, 0) << shell.err << shell.out;
    const json opened = json::parse(shell.out);
    ASSERT_EQ(opened["commands"].size(), 1u);
    EXPECT_EQ(opened["commands"][0]["exit_code"], 0);
    EXPECT_NE(opened["commands"][0]["stdout"].get<std::string>().find("1\n"), std::string::npos) << shell.out;
    const std::string failedSandbox = id.substr(id.find('/') + 1);
    EXPECT_NE(opened["sandbox_id"], failedSandbox) << "a fresh sandbox, not the failed one";
    EXPECT_EQ(opened["session_id"], session);

    // Interactive: lines from stdin, one command each.
    const CliResult interactive = runCliWithInput({"--broker", m_broker->address, "debug-shell", id},
                                                  std::string("ls\nexit 3\n"));
    EXPECT_EQ(interactive.exitCode, 1) << "the last command failed: " << interactive.err;
    EXPECT_NE(interactive.out.find("broken.c"), std::string::npos) << interactive.out;
    EXPECT_NE(interactive.err.find("[exit 3]"), std::string::npos) << interactive.err;

    // The failed session's log says who opened what, ran what with which exit, and closed it.
    std::vector<json> audit;
    for (const auto &e : eventsOf(session))
        if (e.value("kind", "").rfind("debug_shell.", 0) == 0)
            audit.push_back(e);
    ASSERT_EQ(audit.size(), 7u) << json(audit).dump(2);   // open, exec, close; open, exec, exec, close
    EXPECT_EQ(audit[0]["kind"], "debug_shell.opened");
    EXPECT_EQ(audit[0]["payload"]["post_mortem_sandbox_id"], failedSandbox);
    // paddockd names the caller by its peer credentials: this test's OS user.
    EXPECT_EQ(audit[0]["payload"]["by"], ::getpwuid(::getuid())->pw_name);
    EXPECT_EQ(audit[1]["kind"], "debug_shell.exec");
    EXPECT_EQ(audit[1]["payload"]["argv"].back(), "grep -c semicolon broken.c && echo host=$(hostname)");
    EXPECT_EQ(audit[1]["payload"]["exit_code"], 0);
    EXPECT_EQ(audit[2]["kind"], "debug_shell.closed");
    EXPECT_EQ(audit[5]["kind"], "debug_shell.exec");
    EXPECT_EQ(audit[5]["payload"]["argv"].back(), "exit 3");
    EXPECT_EQ(audit[5]["payload"]["exit_code"], 3);
    EXPECT_EQ(audit[6]["kind"], "debug_shell.closed");
    // The session stays failed: audit events do not wake it.
    const CliResult show = cli({"show", session, "--output", "json"});
    EXPECT_EQ(json::parse(show.out)["status"], "failed") << show.out;
}

TEST_F(PostMortems, CorruptSnapshotIsRefusedClearlyAndLosesNothing)
{
    const std::string session = submitAndFollow({"--playbook", "failing-build"}, 7);
    const std::string id = failedCommand(eventsOf(session), "");
    ASSERT_FALSE(id.empty());
    const std::string ref = showJson(id)["snapshot_ref"];
    ASSERT_FALSE(ref.empty());
    const fs::path archive = *m_dir / "pool/snapshots" / (ref + ".tar.zst");
    ASSERT_TRUE(fs::exists(archive)) << archive;
    fs::resize_file(archive, fs::file_size(archive) / 2);

    const CliResult shell = cli({"debug-shell", id, "--command", "true"});
    EXPECT_EQ(shell.exitCode, 6) << shell.err;
    EXPECT_NE(shell.err.find("snapshot '" + ref + "' is damaged"), std::string::npos) << shell.err;
    // Nothing recorded is lost: the post-mortem and the session's log are as they were.
    const json pm = showJson(id);
    EXPECT_EQ(pm["reason"], "nonzero_exit");
    EXPECT_EQ(pm["snapshot_ref"], ref);
    for (const auto &e : eventsOf(session))
        EXPECT_NE(e.value("kind", ""), "debug_shell.opened") << "a shell that was not opened is not in the log";
}

} // namespace paddock::test
