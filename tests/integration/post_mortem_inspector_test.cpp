// Issue 15's inspector test: a sandbox fails on pool "east", the broker copies its post-mortem off
// the host, then east is killed (-9) and its state directory deleted. The operator still lists the
// post-mortem, reads it, lists and prints its workspace files and opens a debug shell from it, all
// through paddockctl; the shell opens on "west", restored from the checkpoint. Real daemons on
// loopback: one broker and two pools, each pool with its own state directory and environment.
//
// Known limits:
// - west's port is picked before west starts (the broker is configured with both pools up front),
//   so another process could take it in between; the test then fails at west's start, naming it.
// - The console's inspector calls the same OperationsService RPCs (app/client/grpc_console_client);
//   their archive path is covered by tests/unit/broker/server/operations_service_test.cpp
//   (APostMortemOfAPoolThatIsGoneIsServedFromTheArchive), not here.

#include "tests/integration/daemons_fixture.h"
#include "tests/integration/multi_host_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <thread>

namespace paddock::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char *kPlaybook = R"(name = "leaves-notes"
goal = "write a note, then fail"

[[step]]
tool = "run_command"
command = "echo hello > notes.txt"

[[step]]
tool = "run_command"
command = "cat notes.txt; exit 3"

[[step]]
tool = "finish"
summary = "done"
)";

class PostMortemInspector : public ::testing::Test {
protected:
    void SetUp() override
    {
        PADDOCK_SKIP_IF_MISSING(kDaemonBinaries);
        m_dir = std::make_unique<TempDir>("paddock-pma");
        m_eastPort = freeLoopbackPort();
        m_westPort = freeLoopbackPort();
        ASSERT_GT(m_eastPort, 0);
        ASSERT_GT(m_westPort, 0);
        ASSERT_NE(m_eastPort, m_westPort);
        ASSERT_NO_FATAL_FAILURE(startPool("east", m_eastPort, m_east));

        // Both pools in the broker's config; west is down until east is gone.
        const fs::path brokerDir = *m_dir / "broker";
        fs::create_directories(brokerDir / "data");
        fs::create_directories(*m_dir / "run");
        m_socket = *m_dir / "run/broker.sock";
        auto broker = Daemon::start({binaryPath("paddockd").string(), "--data-dir", (brokerDir / "data").string(),
                                     "--socket", m_socket.string(), "--pool",
                                     "east=127.0.0.1:" + std::to_string(m_eastPort), "--pool",
                                     "west=127.0.0.1:" + std::to_string(m_westPort), "--playbook-dir",
                                     playbookDir().string(), "--allow-local-execution", "--workers", "2"},
                                    brokerDir / "broker.log", hermeticEnvFor(brokerDir));
        ASSERT_TRUE(broker) << broker.error().message;
        m_broker = std::make_unique<Daemon>(std::move(*broker));
        m_address = "unix:" + m_socket.string();
        auto healthy = waitForHealthy(m_address, 30s, m_broker.get());
        ASSERT_TRUE(healthy) << healthy.error().message;
    }

    void TearDown() override
    {
        if (HasFailure()) {
            if (m_broker)
                std::cerr << "---- paddockd log (tail) ----\n" << m_broker->logTail(80);
            for (const auto &[name, pool] : {std::pair{"east", m_east.get()}, std::pair{"west", m_west.get()}})
                if (pool)
                    std::cerr << "---- paddock-pool " << name << " log (tail) ----\n" << pool->logTail(60);
        }
        if (m_broker)
            m_broker->terminate();
        if (m_west)
            m_west->terminate();
        if (m_east)
            m_east->terminate();
    }

    // paddock-pool NAME on 127.0.0.1:port with its state in <tmp>/NAME/state (0711, see harness).
    void startPool(const std::string &name, int port, std::unique_ptr<Daemon> &out)
    {
        const fs::path home = *m_dir / name;
        fs::create_directories(home / "state");
        fs::permissions(home, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
        const std::string endpoint = "127.0.0.1:" + std::to_string(port);
        auto pool = Daemon::start({binaryPath("paddock-pool").string(), "--listen", endpoint, "--state-dir",
                                   (home / "state").string(), "--warm", "1"},
                                  home / "pool.log", hermeticEnvFor(home));
        ASSERT_TRUE(pool) << pool.error().message;
        out = std::make_unique<Daemon>(std::move(*pool));
        auto healthy = waitForHealthy(endpoint, 30s, out.get());
        ASSERT_TRUE(healthy) << name << ": " << healthy.error().message;
    }

    CliResult cli(std::vector<std::string> args)
    {
        args.insert(args.begin(), {"--broker", m_address});
        return runCli(args);
    }

    json cliJson(const std::vector<std::string> &args)
    {
        const CliResult result = cli(args);
        std::string line;
        for (const auto &a : args)
            line += " " + a;
        EXPECT_EQ(result.exitCode, 0) << "paddockctl" << line << ": " << result.err;
        json value = json::parse(result.out, nullptr, false);
        EXPECT_FALSE(value.is_discarded()) << "not JSON: " << result.out << "\nstderr: " << result.err;
        return value;
    }

    std::vector<json> events(const std::string &session)
    {
        std::vector<json> out;
        const CliResult result = cli({"events", session, "--output", "json"});
        EXPECT_EQ(result.exitCode, 0) << result.err;
        for (const auto &line : splitLines(result.out)) {
            auto value = json::parse(line, nullptr, false);
            if (!value.is_discarded())
                out.push_back(std::move(value));
        }
        return out;
    }

    // Polls pred every 100 ms for up to timeout; whether it held.
    static bool eventually(const std::function<bool()> &pred, std::chrono::milliseconds timeout = 30s)
    {
        const auto until = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < until) {
            if (pred())
                return true;
            std::this_thread::sleep_for(100ms);
        }
        return pred();
    }

    std::unique_ptr<TempDir> m_dir;
    int m_eastPort = 0;
    int m_westPort = 0;
    std::unique_ptr<Daemon> m_east;
    std::unique_ptr<Daemon> m_west;
    std::unique_ptr<Daemon> m_broker;
    fs::path m_socket;
    std::string m_address;
};

} // namespace

TEST_F(PostMortemInspector, APostMortemOfAKilledPoolIsStillReadAndDebuggedFromTheArchive)
{
    // 1. The session fails a command on east (west is down): the pool keeps a post-mortem.
    const fs::path playbook = *m_dir / "leaves-notes.toml";
    std::ofstream(playbook) << kPlaybook;
    const CliResult submitted = cli({"submit", "--playbook", playbook.string(), "-f", "--output", "json"});
    const auto lines = splitLines(submitted.out);
    ASSERT_FALSE(lines.empty()) << submitted.err;
    const json first = json::parse(lines.front(), nullptr, false);
    ASSERT_TRUE(first.is_object() && first.contains("id")) << submitted.out << submitted.err;
    const std::string session = first["id"];
    // A failed command ends the session (exit 7, as in post_mortem_test): the finish step is not reached.
    EXPECT_EQ(submitted.exitCode, 7) << submitted.err;

    std::string reference;   // POOL/SANDBOX
    for (const auto &e : events(session)) {
        if (e.value("kind", "") == "tool.result" && e["payload"].contains("post_mortem")) {
            const auto &pm = e["payload"]["post_mortem"];
            reference = pm.value("pool", "") + "/" + pm.value("sandbox_id", "");
            EXPECT_EQ(e["payload"].value("exit_code", -1), 3) << e.dump();
        }
    }
    ASSERT_FALSE(reference.empty()) << "no tool.result carries a post_mortem";
    ASSERT_EQ(reference.rfind("east/", 0), 0u) << reference;
    const std::string sandbox = reference.substr(reference.find('/') + 1);

    // 2. Listed while east lives (from east), and copied into the broker's archive.
    const json live = cliJson({"postmortems", "ls", "--session", session, "--output", "json"});
    ASSERT_EQ(live["post_mortems"].size(), 1u) << live.dump();
    EXPECT_EQ(live["post_mortems"][0]["pool"], "east");
    EXPECT_EQ(live["post_mortems"][0]["reason"], "nonzero_exit");
    EXPECT_EQ(live["post_mortems"][0]["archived"], false) << "east answers for itself while it lives";
    const fs::path archiveDir = *m_dir / "broker/data/checkpoints/post-mortems/east";
    const auto archivedFile = [&] {
        std::error_code ec;
        for (const auto &entry : fs::directory_iterator(archiveDir, ec))
            if (entry.path().filename().string().rfind(sandbox, 0) == 0)
                return true;
        return false;
    };
    ASSERT_TRUE(eventually(archivedFile)) << "nothing for " << sandbox << " in " << archiveDir;

    // 3. East goes, with everything it had on disk; west comes up.
    m_east->kill9();
    fs::remove_all(*m_dir / "east/state");
    const auto healthy = [&](const std::string &pool) {
        return findPool(listPools(m_address), pool).value("healthy", false);
    };
    ASSERT_TRUE(eventually([&] { return !healthy("east"); })) << "the broker still sees east healthy";

    // With no pool to open it on, the shell is refused as that (not as a lost broker), exit 6.
    const CliResult nowhere = cli({"debug-shell", reference, "-c", "true"});
    EXPECT_EQ(nowhere.exitCode, 6) << nowhere.err;
    EXPECT_NE(nowhere.err.find("no pool can take a sandbox of tier 'lite' now"), std::string::npos) << nowhere.err;
    EXPECT_EQ(nowhere.err.find("lost the broker"), std::string::npos) << nowhere.err;

    ASSERT_NO_FATAL_FAILURE(startPool("west", m_westPort, m_west));
    ASSERT_TRUE(eventually([&] { return healthy("west"); })) << "the broker does not see west healthy";

    // 4. Everything the operator had is still there, read from the archive.
    const json listed = cliJson({"postmortems", "ls", "--session", session, "--output", "json"});
    ASSERT_EQ(listed["post_mortems"].size(), 1u) << listed.dump();
    EXPECT_EQ(listed["post_mortems"][0]["pool"], "east");
    EXPECT_EQ(listed["post_mortems"][0]["sandbox_id"], sandbox);
    EXPECT_EQ(listed["post_mortems"][0]["archived"], true) << listed.dump();

    const json shown = cliJson({"postmortems", "show", reference, "--output", "json"});
    EXPECT_EQ(shown["reason"], "nonzero_exit") << shown.dump();
    EXPECT_EQ(shown["exit_code"], 3) << shown.dump();
    EXPECT_EQ(shown["archived"], true);
    EXPECT_EQ(shown.value("snapshot_ref", "").rfind("checkpoint:", 0), 0u) << shown.dump();
    const CliResult table = cli({"postmortems", "show", reference});
    EXPECT_EQ(table.exitCode, 0) << table.err;
    EXPECT_NE(table.out.find("archived:  the pool did not answer"), std::string::npos) << table.out;

    const CliResult files = cli({"postmortems", "files", reference});
    EXPECT_EQ(files.exitCode, 0) << files.err;
    EXPECT_NE(files.out.find("notes.txt"), std::string::npos) << files.out;
    const CliResult cat = cli({"postmortems", "cat", reference, "notes.txt"});
    EXPECT_EQ(cat.exitCode, 0) << cat.err;
    EXPECT_EQ(cat.out, "hello\n");

    const CliResult shell = cli({"debug-shell", reference, "-c", "cat notes.txt", "--output", "json"});
    ASSERT_EQ(shell.exitCode, 0) << shell.err << shell.out;
    const json opened = json::parse(shell.out, nullptr, false);
    ASSERT_TRUE(opened.is_object()) << shell.out;
    EXPECT_EQ(opened["pool"], "west") << shell.out;
    EXPECT_EQ(opened["session_id"], session);
    ASSERT_EQ(opened["commands"].size(), 1u) << shell.out;
    EXPECT_EQ(opened["commands"][0]["exit_code"], 0);
    EXPECT_EQ(opened["commands"][0]["stdout"], "hello\n") << shell.out;

    // The session's log says the shell was opened on west from the archived copy.
    bool audited = false;
    for (const auto &e : events(session)) {
        if (e.value("kind", "") != "debug_shell.opened")
            continue;
        audited = true;
        EXPECT_EQ(e["payload"]["pool"], "west") << e.dump();
        EXPECT_EQ(e["payload"]["archived"], true) << e.dump();
        EXPECT_EQ(e["payload"]["post_mortem_sandbox_id"], sandbox) << e.dump();
    }
    EXPECT_TRUE(audited) << "no debug_shell.opened in the session's log";
}

} // namespace paddock::test
