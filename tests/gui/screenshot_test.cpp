// The console against the real daemons: a pool and a broker in a temporary directory, the demo
// playbooks submitted with paddockctl, then `paddock --screenshots DIR` offscreen. Every view's PNG
// must exist, be 1280x800 and not be blank.
//
// PADDOCK_SCREENSHOTS_OUT=dir copies the PNGs there (how docs/screenshots is refreshed).

#include "tests/integration/daemons_fixture.h"

#include <QGuiApplication>
#include <QImage>
#include <QSet>
#include <QString>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

namespace paddock::test {
namespace {

namespace fs = std::filesystem;

// Distinct colours in a sparse sample: a blank or single-colour image has one or two.
int distinctColours(const QImage &image)
{
    QSet<QRgb> colours;
    for (int y = 0; y < image.height(); y += 7) {
        for (int x = 0; x < image.width(); x += 5)
            colours.insert(image.pixel(x, y));
    }
    return int(colours.size());
}

// The demo pool of scripts/run: one tier per runtime, with prices, so the Pools view has
// something to show. A platform rule puts the inspect demo on lite (for an agent whose selection
// mode is platform), so the Decisions view and the sessions' badges show every chooser.
class ScreenshotTest : public DaemonsTest {
protected:
    std::vector<std::string> poolArgs() const override
    {
        return {"--config", (playbookDir().parent_path() / "pool-demo.toml").string()};
    }
    std::map<std::string, std::string> configFiles() const override
    {
        return {{"broker.toml", "policy_file = \"policy.toml\"\n"},
                {"policy.toml", "[[tier_rule]]\nname = \"read-only demos\"\nplaybook = \"inspect\"\ntier = \"lite\"\n"}};
    }

    // The environment decisions the broker lists (decisions ls --output json), one object each.
    std::vector<nlohmann::json> decisions()
    {
        const CliResult listed = cli({"decisions", "ls", "--limit", "200", "--output", "json"});
        EXPECT_EQ(listed.exitCode, 0) << listed.err;
        return jsonLines(listed.out);
    }
};

TEST_F(ScreenshotTest, EveryViewIsSavedAt1280x800WithContent)
{
    PADDOCK_SKIP_IF_MISSING(std::vector<std::string>{"paddock"});
    for (const char *playbook : {"hello-c", "inspect", "data-pipeline", "failing-build"}) {
        const CliResult submitted = cli({"submit", "--playbook", playbook});
        ASSERT_EQ(submitted.exitCode, 0) << playbook << ": " << submitted.err;
    }
    // The governance demos (review items of each kind, decisions of each outcome), for the Review
    // queue, Decisions and Cost views: those the broker ships.
    for (const char *playbook : {"bulk-rename", "records-bulk", "egress-request", "secret-request", "budget-small"}) {
        if (!fs::exists(playbookDir() / (std::string(playbook) + ".toml")))
            continue;
        const CliResult submitted = cli({"submit", "--playbook", playbook});
        ASSERT_EQ(submitted.exitCode, 0) << playbook << ": " << submitted.err;
    }

    // The decision demos (resources/playbooks/decision-*.toml), each ending with its outcome from
    // the sandbox's real samples: chosen by a human (--tier), the default, and an agent that moves
    // itself within its allowed tiers, and the platform's rule for an agent that leaves it the choice.
    const CliResult agent = cli({"agents", "create", "demo-agent", "--mode", "agent", "--allow", "lite,oci",
                                 "--default-tier", "lite"});
    ASSERT_EQ(agent.exitCode, 0) << agent.err;
    const CliResult platform = cli({"agents", "create", "demo-platform", "--mode", "platform", "--default-tier", "oci"});
    ASSERT_EQ(platform.exitCode, 0) << platform.err;
    ASSERT_EQ(cli({"agents", "records", "set", "demo-agent", "repos/paddock", R"({"branch": "main"})"}).exitCode, 0);
    std::vector<std::string> decisionSessions;
    for (const std::vector<std::string> &args : std::vector<std::vector<std::string>>{
             {"decision-ok", "--tier", "lite"},
             {"decision-oom", "--tier", "lite"},
             {"decision-timeout"},
             {"decision-over-allocated", "--tier", "standard"},
             {"decision-under-allocated", "--tier", "lite"},
             {"decision-request", "--agent", "demo-agent"},
             {"inspect", "--agent", "demo-platform"}}) {
        std::vector<std::string> submit{"submit", "--playbook"};
        submit.insert(submit.end(), args.begin(), args.end());
        submit.insert(submit.end(), {"--output", "json"});
        const CliResult submitted = cli(submit);
        ASSERT_EQ(submitted.exitCode, 0) << args.front() << ": " << submitted.err;
        const auto session = nlohmann::json::parse(submitted.out, nullptr, false);
        ASSERT_TRUE(session.is_object() && session.contains("id")) << submitted.out;
        decisionSessions.push_back(session["id"].get<std::string>());
    }
    // They end within seconds (their own time limits); the console looks after that, when each
    // tier's release has filled in its decision's outcome.
    // (Following exits with the session's outcome: failed ones, like the oom demo, are not 0.)
    for (const std::string &id : decisionSessions)
        cli({"events", id, "--follow"}, 120s);
    const std::set<std::string> wanted{"ok", "oom", "timeout", "over_allocated"};
    std::set<std::string> outcomes;
    std::set<std::string> choosers;
    for (int i = 0; i < 60 && !std::ranges::includes(outcomes, wanted); ++i) {
        outcomes.clear();
        choosers.clear();
        for (const auto &decision : decisions()) {
            outcomes.insert(decision.value("outcome", ""));
            choosers.insert(decision.value("chooser", ""));
        }
        std::this_thread::sleep_for(500ms);
    }
    for (const char *outcome : {"ok", "oom", "timeout", "over_allocated"})
        EXPECT_TRUE(outcomes.contains(outcome)) << "no decision with outcome " << outcome;
    for (const char *chooser : {"default", "human", "agent", "platform"})
        EXPECT_TRUE(choosers.contains(chooser)) << "no decision chosen by " << chooser;

    // Last, a command that runs for a minute and a half, through the screenshots: the session view
    // shows it running (the runner prefers a session whose command is running).
    if (fs::exists(playbookDir() / "long-build.toml")) {
        const CliResult submitted = cli({"submit", "--playbook", "long-build"});
        ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
    }

    const fs::path shots = *m_dir / "shots";
    auto console = Daemon::start({binaryPath("paddock").string(), "--broker", m_broker->address, "--screenshots",
                                  shots.string()},
                                 *m_dir / "paddock.log", {{"QT_QPA_PLATFORM", "offscreen"}});
    ASSERT_TRUE(console) << console.error().message;
    const auto status = console->waitExit(150s);
    ASSERT_TRUE(status.has_value()) << "paddock --screenshots did not finish:\n" << console->logTail();
    EXPECT_EQ(*status, 0) << "some view was saved without its data:\n" << console->logTail();

    for (const char *name : {"sessions.png", "sessions-grouped.png", "session.png", "session-dark.png", "pools.png",
                             "pools-dark.png", "inspector.png"}) {
        const fs::path file = shots / name;
        ASSERT_TRUE(fs::exists(file)) << file << "\n" << console->logTail();
        QImage image;
        ASSERT_TRUE(image.load(QString::fromStdString(file.string()))) << file;
        EXPECT_EQ(image.width(), 1280) << name;
        EXPECT_EQ(image.height(), 800) << name;
        EXPECT_GT(distinctColours(image), 20) << name << " looks blank";
    }
    for (const char *name : {"submit-dialog.png", "connection-dialog.png"})
        EXPECT_TRUE(fs::exists(shots / name)) << name;
    // failing-build's non-zero exit left a post-mortem: the inspector read it, a file of its
    // snapshot and ran a command in a debug shell restored from it (the runner says on stderr
    // when any of that did not come).
    const std::string log = console->logTail();
    for (const char *missing : {"is refused by the broker", "did not come", "gave up waiting"})
        EXPECT_EQ(log.find(missing), std::string::npos) << log;
    for (const char *name : {"inspector-files.png", "inspector-shell.png", "inspector-dark.png"})
        EXPECT_TRUE(fs::exists(shots / name)) << name << "\n" << log;
    for (const char *name : {"reviews.png", "decisions.png", "cost.png", "override-dialog.png"})
        EXPECT_TRUE(fs::exists(shots / name)) << name << "\n" << log;

    if (const char *out = std::getenv("PADDOCK_SCREENSHOTS_OUT"); out && *out) {
        fs::create_directories(out);
        for (const auto &entry : fs::directory_iterator(shots))
            fs::copy_file(entry.path(), fs::path(out) / entry.path().filename(), fs::copy_options::overwrite_existing);
    }
}

} // namespace
} // namespace paddock::test
