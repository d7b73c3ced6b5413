// DeadlineWatcher: the process list is taken before an exec's deadline whether the watch is armed
// while the watcher waits out its idle tick (no wake-up: the deadline is beyond the tick) or
// while it waits for a later deadline (an earlier one wakes it), and a dropped watch never fires.
// The "cgroup" is a directory whose cgroup.procs names this test's own process.

#include "pool/core/post_mortem_capture.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using paddock::pool::DeadlineWatcher;

namespace {

class DeadlineWatcherTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/paddock-deadline-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        m_dir = tmpl;
        std::ofstream(m_dir / "cgroup.procs") << ::getpid() << "\n";
    }
    void TearDown() override
    {
        std::error_code ec;
        fs::remove_all(m_dir, ec);
    }

    // Waits (bounded, so a broken watcher fails instead of hanging) until the watch has fired.
    static bool firedWithin(const std::shared_ptr<DeadlineWatcher::Watch> &watch, std::chrono::seconds limit)
    {
        const auto end = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < end) {
            {
                std::lock_guard lock(watch->mutex);
                if (watch->processes)
                    return true;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    }

    static bool fired(const std::shared_ptr<DeadlineWatcher::Watch> &watch)
    {
        std::lock_guard lock(watch->mutex);
        return watch->processes.has_value();
    }

    fs::path m_dir;
};

TEST_F(DeadlineWatcherTest, AWatchArmedBeyondTheIdleTickFiresWithTheProcessList)
{
    DeadlineWatcher watcher;
    // Let the watcher settle into its idle wait first: this arm must not need a notify.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto watch = watcher.arm({m_dir}, 1500);   // margin 150 ms: fires 1.35 s from now
    ASSERT_NE(watch, nullptr);
    ASSERT_TRUE(firedWithin(watch, std::chrono::seconds(20)));
    std::lock_guard lock(watch->mutex);
    EXPECT_EQ(watch->firedBeforeDeadlineMs, 150);
    bool sawSelf = false;
    for (const auto &p : *watch->processes)
        sawSelf = sawSelf || p.pid == ::getpid();
    EXPECT_TRUE(sawSelf) << "the list names the processes of the cgroup.procs file";
}

TEST_F(DeadlineWatcherTest, AnEarlierDeadlineArmedWhileWaitingForALaterOneFiresFirst)
{
    DeadlineWatcher watcher;
    auto late = watcher.arm({m_dir}, 600000);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto early = watcher.arm({m_dir}, 300);   // margin 30 ms
    ASSERT_TRUE(firedWithin(early, std::chrono::seconds(20)));
    EXPECT_EQ(early->firedBeforeDeadlineMs, 30);
    EXPECT_FALSE(fired(late)) << "a deadline ten minutes out must not fire now";
}

TEST_F(DeadlineWatcherTest, ADroppedWatchIsForgottenAndStopReturns)
{
    auto watcher = std::make_unique<DeadlineWatcher>();
    std::weak_ptr<DeadlineWatcher::Watch> dropped = watcher->arm({m_dir}, 300);
    EXPECT_TRUE(dropped.expired()) << "the watcher holds no reference to a watch its exec dropped";
    auto kept = watcher->arm({m_dir}, 600000);
    watcher->stop();   // with a watch pending ten minutes out: must not wait for it
    watcher.reset();
    EXPECT_FALSE(fired(kept));
}

} // namespace
