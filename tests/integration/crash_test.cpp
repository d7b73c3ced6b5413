// kill -9 of the broker at random moments while 20 sessions run, several cycles, restarting it each
// time: every session finishes, every log has dense seqs without duplicates, and a side-effect
// marker (each step appends a line to a workspace file) shows that per crash at most one step per
// session ran twice.

#include "tests/integration/daemons_fixture.h"
#include "tests/integration/marker_sessions.h"

#include <iostream>
#include <map>
#include <random>
#include <thread>

namespace paddock::test {
namespace {

constexpr int kSessions = 20;
constexpr int kMarkedSteps = 12;
constexpr int kCrashCycles = 8;

// The 1 s sleep of each step widens the window in which a kill lands in the middle of a command,
// and keeps the sessions (all running at once: a running command holds no step thread) alive for
// about 12 s, through every kill.
constexpr int kCommandSeconds = 1;

class CrashRecovery : public DaemonsTest {
protected:
    void restartBroker()
    {
        auto broker = startBroker(*m_dir, m_pool->endpoint);
        ASSERT_TRUE(broker) << "the broker did not come back after kill -9: " << broker.error().message;
        m_broker = std::make_unique<BrokerProcess>(std::move(*broker));
    }

    std::vector<nlohmann::json> sessions()
    {
        const CliResult result = cli({"ls", "--all", "--output", "json"});
        EXPECT_EQ(result.exitCode, 0) << result.err;
        auto list = nlohmann::json::parse(result.out, nullptr, false);
        return list.is_array() ? list.get<std::vector<nlohmann::json>>() : std::vector<nlohmann::json>{};
    }
};

TEST_F(CrashRecovery, KillNineLosesNothingAndRepeatsAtMostOneStepPerCrash)
{
    const auto playbook = writeFile("crash-marker.toml", markerPlaybook("crash-marker", kMarkedSteps, kCommandSeconds));
    std::vector<std::string> ids;
    for (int i = 0; i < kSessions; ++i) {
        const CliResult submitted = cli({"submit", "--playbook", playbook.string(), "--output", "json"});
        ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
        ids.push_back(nlohmann::json::parse(submitted.out)["id"].get<std::string>());
    }

    const unsigned seed = std::random_device{}();
    std::mt19937 random(seed);
    std::uniform_int_distribution<int> pauseMs(100, 900);
    SCOPED_TRACE("random seed " + std::to_string(seed));
    int killsWhileRunning = 0;
    for (int cycle = 0; cycle < kCrashCycles; ++cycle) {
        std::this_thread::sleep_for(std::chrono::milliseconds(pauseMs(random)));
        const auto before = sessions();
        killsWhileRunning += std::any_of(before.begin(), before.end(), [](const nlohmann::json &s) {
            return s["status"] == "running" || s["status"] == "queued";
        });
        m_broker->daemon.kill9();
        ASSERT_TRUE(m_broker->daemon.waitExit(10s).has_value());
        restartBroker();
    }
    // Otherwise the test proved nothing: the kills must land while sessions are mid-flight.
    ASSERT_GE(killsWhileRunning, kCrashCycles / 2) << "the sessions finished before the broker was killed";

    // Every session finishes; bounded wait.
    std::map<std::string, std::string> status;
    for (int round = 0; round < 600; ++round) {
        status.clear();
        for (const auto &session : sessions())
            status[session["id"].get<std::string>()] = session["status"].get<std::string>();
        const bool allDone = std::all_of(ids.begin(), ids.end(), [&](const std::string &id) {
            const auto &s = status[id];
            return s == "succeeded" || s == "failed" || s == "cancelled";
        });
        if (allDone)
            break;
        std::this_thread::sleep_for(200ms);
    }

    int totalRepeats = 0;
    int replayed = 0;
    for (const auto &id : ids) {
        SCOPED_TRACE("session " + id);
        EXPECT_EQ(status[id], "succeeded");

        const CliResult events = cli({"events", id, "--output", "json"});
        ASSERT_EQ(events.exitCode, 0) << events.err;
        const auto log = jsonLines(events.out);
        ASSERT_FALSE(log.empty());

        // Dense seqs, no duplicates.
        for (size_t i = 0; i < log.size(); ++i)
            ASSERT_EQ(log[i]["seq"].get<int64_t>(), static_cast<int64_t>(i) + 1) << "seq gap or duplicate";

        // The marker as the final `cat` saw it.
        std::string marker;
        for (const auto &event : log) {
            if (event["kind"] == "tool.result" && event["payload"].value("command", "") == "cat marker.txt")
                marker = event["payload"].value("stdout", "");
        }
        std::map<std::string, int> seen;
        for (const auto &line : splitLines(marker))
            ++seen[line];
        int repeats = 0;
        for (int step = 1; step <= kMarkedSteps; ++step) {
            const int count = seen["step-" + std::to_string(step)];
            EXPECT_GE(count, 1) << "step " << step << " never ran";
            repeats += std::max(0, count - 1);
        }
        EXPECT_LE(repeats, kCrashCycles) << "more steps repeated than there were crashes:\n" << marker;
        totalRepeats += repeats;
        for (const auto &event : log)
            replayed += event["kind"] == "tool.result" && event["payload"].value("replayed", false);
    }
    std::cout << kCrashCycles << " kills (" << killsWhileRunning << " mid-flight): " << totalRepeats
              << " steps ran twice, " << replayed << " commands answered from the pool's idempotency record\n";
}

} // namespace
} // namespace paddock::test
