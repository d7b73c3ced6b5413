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

#include <filesystem>

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
// something to show.
class ScreenshotTest : public DaemonsTest {
protected:
    std::vector<std::string> poolArgs() const override
    {
        return {"--config", (playbookDir().parent_path() / "pool-demo.toml").string()};
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
