// Issue 15's "must show": a workspace outlives its pool's host. The broker in one network
// namespace, two pools ("east", "west") in two others (TestNetwork), TLS with a token; kSessions
// sessions of a playbook whose later steps read what earlier ones wrote and append one line each to
// lines.txt, checking the count before appending. Mid-run, east is killed with SIGKILL and its
// state directory deleted: the host is gone for good, and nothing of it may be needed. Then:
//
// - every session succeeds, and each tool call is in its log once with exactly one result;
// - lines.txt ends with exactly one line per appending step: no command's effect counted twice
//   (the repeated call ran on east, but its effect went down with east's workspace) and none lost;
// - a session moves at most once, repeating exactly the call east was running; its workspace is
//   the checkpoint recorded with its last result before the loss ("restored"), or "empty" only
//   when it had no checkpoint and no result yet: no workspace is older than its last completed step;
// - every result of a step that changed the workspace was recorded with its checkpoint.
//
// Run once with the broker's own checkpoint store and once with S3 (s3rver, run in the broker's
// namespace so that the broker reaches it on that namespace's loopback).
//
// Known limits:
// - The broker holds a step worker for as long as a command runs, so kWorkers bounds the commands
//   running at once; with fewer workers than sessions the sessions take turns.
// - Both pools run on this machine, so "east's host is gone" is its process killed and its state
//   directory deleted; its btrfs image stays attached to its loop device until the kernel lets go
//   of the pool's mount namespace.
//
// Needs root (ip netns). Skips with the reason otherwise. Without s3rver (scripts/setup-deps) the S3
// variant fails, naming it, like the S3 unit tests.

#include "tests/integration/daemons_fixture.h"
#include "tests/integration/multi_host_support.h"
#include "tests/integration/test_network.h"
#include "tests/support/started_s3rver.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <set>
#include <string_view>

namespace paddock::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kSessions = 200;
// What each appending step does with what earlier steps wrote, before it appends its line to
// lines.txt. The third appends to copy.txt too: run twice, copy.txt would say so.
constexpr std::array<std::string_view, 5> kReads{
    "cat notes/a.txt > copy.txt",
    "grep -qx alpha copy.txt",
    "cat notes/b.txt >> copy.txt",
    "test \"$(wc -l < copy.txt)\" -eq 2",
    "grep -qx beta notes/b.txt && grep -qx alpha copy.txt",
};
constexpr int kAppendSteps = static_cast<int>(kReads.size());
constexpr int kWorkers = 128;
constexpr int kWarmCount = 8;
constexpr int kMaxCount = 256;          // every session fits on west alone after the kill
constexpr int kDiskMb = 64;             // per sandbox; sizes each pool's sparse btrfs image
// Each appending command sleeps this long: longer than submitting every session takes, so that at
// the kill nearly every session is mid-run, most of them inside a command.
constexpr const char *kCommandSleepS = "2";
constexpr auto kPollInterval = 500ms;
constexpr size_t kLogTail = 4000;       // bytes of s3rver's log shown on a failure
constexpr auto kStartTimeout = 5min;    // until half the sessions have a result
constexpr auto kRunTimeout = 10min;     // until every session has ended (about 30 s here)
constexpr const char *kBucket = "paddock-checkpoints";
const std::vector<std::string> kPoolNames{"east", "west"};   // east is killed

enum class Backend { Broker, S3 };

std::string backendName(Backend backend)
{
    return backend == Backend::S3 ? "s3" : "broker";
}

// What the last command prints when every step's effect is in the workspace exactly once.
std::string expectedFinalOutput()
{
    return "lines=" + std::to_string(kAppendSteps) + "\nalpha\nbeta\n";
}

// The playbook: write a file, then kAppendSteps commands that each check lines.txt has one line
// per earlier append (so a command run twice, or a workspace older than the last step, fails
// there), read something an earlier step wrote, sleep (so the kill lands inside commands) and
// append their line; a second file written in the middle; then print what the workspace holds.
// Commands are TOML literal strings: no escapes, no single quotes.
std::string failoverPlaybook()
{
    std::string text = "name = \"workspace-failover\"\ngoal = \"steps that read what earlier steps wrote\"\n";
    text += "\n[[step]]\ntool = \"write_file\"\npath = \"notes/a.txt\"\ncontent = \"alpha\\n\"\n";
    for (int k = 1; k <= kAppendSteps; ++k) {
        const std::string read(kReads[static_cast<size_t>(k - 1)]);
        const std::string check = "n=$(cat lines.txt 2>/dev/null | wc -l) && test \"$n\" -eq " + std::to_string(k - 1);
        text += "\n[[step]]\ntool = \"run_command\"\ncommand = '" + check + " && " + read + " && sleep "
            + kCommandSleepS + " && echo " + std::to_string(k) + " >> lines.txt'\n";
        if (k == 2)
            text += "\n[[step]]\ntool = \"write_file\"\npath = \"notes/b.txt\"\ncontent = \"beta\\n\"\n";
    }
    text += "\n[[step]]\ntool = \"run_command\"\ncommand = 'echo \"lines=$(wc -l < lines.txt)\"; cat copy.txt'\n"
            "expect_stdout = \"lines=" + std::to_string(kAppendSteps) + "\"\n";
    text += "\n[[step]]\ntool = \"finish\"\nsummary = \"every step's effect is in the workspace once\"\n";
    return text;
}
constexpr int kPlaybookCalls = 1 + kAppendSteps + 1 + 1 + 1;   // writes, appends, final command, finish

double median(std::vector<double> values)
{
    if (values.empty())
        return 0.0;
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

// Every session's row of `paddockctl ls --all`, by id.
std::map<std::string, json> listSessions(const std::string &broker)
{
    std::map<std::string, json> out;
    const CliResult listed = runCli({"--broker", broker, "ls", "--all", "--output", "json"});
    auto value = json::parse(listed.out, nullptr, false);
    if (listed.exitCode != 0 || !value.is_array())
        return out;
    for (const auto &row : value)
        out[row.value("id", std::string())] = row;
    return out;
}

bool ended(const std::string &status)
{
    // A paused session does not go on by itself: here it means something failed.
    return status == "succeeded" || status == "failed" || status == "cancelled" || status == "paused";
}

// Files of s3rver's data directory under bucket that hold an object.
int s3rverObjects(const std::filesystem::path &bucketDir, const std::string &under = {})
{
    int n = 0;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(bucketDir / under, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        n += it->is_regular_file() && it->path().filename().string().ends_with("._S3rver_object");
    }
    return n;
}

// What one session's log shows, and what is wrong with it.
struct SessionCheck {
    std::string firstPool;
    bool moved = false;
    std::string workspace;   // of the move: "restored" or "empty"
    std::string manifest;    // the checkpoint the move restored
    std::vector<std::string> problems;
};

// Numbers from every session's log, for the summary.
struct RunFigures {
    std::vector<double> checkpointMs;
    std::vector<double> checkpointBytes;
    std::vector<double> restoreMs;
};

// The events of one session (row: its line of `paddockctl ls`) against the claims in the file's
// opening comment.
SessionCheck checkSession(const json &row, const std::vector<json> &events, Backend backend, RunFigures &figures)
{
    SessionCheck check;
    auto problem = [&](std::string text) { check.problems.push_back(std::move(text)); };
    const std::string status = row.value("status", std::string());
    if (status != "succeeded")
        problem("status " + status + " (" + row.value("status_reason", std::string()) + ")");

    std::map<std::string, json> calls;             // call id -> tool.call payload
    std::map<std::string, int> callCount;
    std::map<std::string, std::vector<int64_t>> resultSeqs;
    std::map<std::string, int> checkpointsAfter;   // call id -> checkpoint events naming it
    std::vector<json> lost;
    std::vector<json> moves;
    int64_t lostSeq = -1;
    int64_t movedSeq = -1;
    int resultsBeforeLoss = 0;
    std::string lastCheckpointBeforeLoss;
    std::string finalOutput;
    bool sawFinal = false;
    for (const auto &event : events) {
        const std::string kind = event.value("kind", std::string());
        const json payload = event.value("payload", json::object());
        const int64_t seq = event.value("seq", int64_t{0});
        if (kind == "sandbox.claimed" && check.firstPool.empty()) {
            check.firstPool = payload.value("pool", std::string());
        } else if (kind == "tool.call") {
            const std::string id = payload.value("call_id", std::string());
            calls[id] = payload;
            ++callCount[id];
        } else if (kind == "tool.result") {
            resultSeqs[payload.value("call_id", std::string())].push_back(seq);
            resultsBeforeLoss += lost.empty();
            if (payload.value("command", std::string()).starts_with("echo \"lines=")) {
                sawFinal = true;
                finalOutput = payload.value("stdout", std::string());
            }
        } else if (kind == "checkpoint") {
            ++checkpointsAfter[payload.value("after_call", std::string())];
            if (lost.empty())
                lastCheckpointBeforeLoss = payload.value("manifest", std::string());
            if (payload.value("store", std::string()) != backendName(backend))
                problem("checkpoint " + payload.value("manifest", std::string()) + " went to store '"
                        + payload.value("store", std::string()) + "', not '" + backendName(backend) + "'");
            figures.checkpointMs.push_back(payload.value("duration_ms", 0.0));
            figures.checkpointBytes.push_back(payload.value("sent_bytes", 0.0));
        } else if (kind == "sandbox.lost") {
            lost.push_back(payload);
            lostSeq = seq;
        } else if (kind == "sandbox.moved") {
            moves.push_back(payload);
            movedSeq = seq;
        }
    }

    // Each step asked once, answered once.
    if (calls.size() != static_cast<size_t>(kPlaybookCalls))
        problem(std::to_string(calls.size()) + " tool calls, not " + std::to_string(kPlaybookCalls));
    for (const auto &[id, payload] : calls) {
        if (callCount[id] != 1)
            problem(id + " asked of the model " + std::to_string(callCount[id]) + " times");
        if (resultSeqs[id].size() != 1)
            problem(id + " has " + std::to_string(resultSeqs[id].size()) + " results");
        // A step that changed the workspace is recorded with the checkpoint holding its effect.
        const std::string name = payload.value("name", std::string());
        const std::string command = payload.value("arguments", json::object()).value("command", std::string());
        const bool changes = name == "write_file" || command.find(">> lines.txt") != std::string::npos;
        if (changes && checkpointsAfter[id] != 1)
            problem(id + " (" + name + ") has " + std::to_string(checkpointsAfter[id]) + " checkpoints, not 1");
    }
    // Every effect once: the line count and the copy say so.
    if (!sawFinal)
        problem("no result of the final command");
    else if (finalOutput != expectedFinalOutput())
        problem("the final command printed '" + finalOutput + "', not '" + expectedFinalOutput() + "'");

    if (lost.size() > 1 || moves.size() > 1 || lost.size() != moves.size()) {
        problem(std::to_string(lost.size()) + " sandbox.lost and " + std::to_string(moves.size())
                + " sandbox.moved; at most one move, each after its loss");
        return check;
    }
    if (lost.empty())
        return check;   // on west all along, or done on east before it was lost
    check.moved = true;
    const json &loss = lost[0];
    const json &move = moves[0];
    check.workspace = move.value("workspace", std::string());
    check.manifest = move.value("manifest", std::string());
    if (check.firstPool != kPoolNames[0])
        problem("moved although it was placed on " + check.firstPool);
    if (loss.value("pool", std::string()) != kPoolNames[0] || loss.value("reason", std::string()) != "pool_lost")
        problem("sandbox.lost " + loss.dump());
    if (move.value("from_pool", std::string()) != kPoolNames[0]
        || move.value("to_pool", std::string()) != kPoolNames[1])
        problem("sandbox.moved " + move.dump());
    if (movedSeq < lostSeq)
        problem("sandbox.moved before its sandbox.lost");
    // The one repeated call is the one east was running, and its only result came from west.
    const std::string repeated = move.value("repeats_call", std::string());
    if (repeated.empty() || repeated != loss.value("interrupted_call", std::string()))
        problem("repeats_call '" + repeated + "' is not the interrupted call " + loss.dump());
    else if (resultSeqs[repeated].size() == 1 && resultSeqs[repeated][0] < movedSeq)
        problem("the repeated call " + repeated + " has a result from before the move");
    // The workspace after the move is the last checkpoint recorded before the loss.
    if (check.workspace == "restored") {
        if (check.manifest != lastCheckpointBeforeLoss || lastCheckpointBeforeLoss.empty())
            problem("restored checkpoint " + check.manifest + ", but the last one recorded before the loss is '"
                    + lastCheckpointBeforeLoss + "'");
        figures.restoreMs.push_back(move.value("restore_ms", 0.0));
    } else if (check.workspace == "empty") {
        if (!lastCheckpointBeforeLoss.empty() || resultsBeforeLoss > 0)
            problem("moved with an empty workspace after " + std::to_string(resultsBeforeLoss)
                    + " results and checkpoint '" + lastCheckpointBeforeLoss + "'");
    } else {
        problem("sandbox.moved workspace '" + check.workspace + "'");
    }
    if (move.value("note", std::string()).empty())
        problem("sandbox.moved without a note");
    return check;
}

class WorkspaceFailover : public ::testing::Test {
protected:
    void SetUp() override
    {
        PADDOCK_SKIP_IF_MISSING(kDaemonBinaries);
        if (const std::string why = namespacesUnavailable("the failover test"); !why.empty())
            GTEST_SKIP() << why;
        m_dir = std::make_unique<TempDir>("paddock-failover");
        m_net = std::make_unique<TestNetwork>(m_dir->path());
        if (const std::string error = m_net->create(); !error.empty()) {
            m_net.reset();
            GTEST_SKIP() << "network namespaces are not available here: " << error;
        }
        m_env = hermeticEnvFor(m_dir->path());
    }

    void TearDown() override
    {
        if (HasFailure()) {
            if (m_broker)
                std::cerr << "---- paddockd log (tail) ----\n" << m_broker->logTail(120);
            for (auto &pool : m_pools)
                std::cerr << "---- paddock-pool log (tail) ----\n" << pool.logTail(40);
            if (m_s3rver) {
                const std::string log = m_s3rver->log();
                std::cerr << "---- s3rver log (tail) ----\n" << log.substr(log.size() - std::min(log.size(), kLogTail));
            }
        }
        if (m_broker)
            m_broker->terminate();
        for (auto &pool : m_pools)
            pool.terminate();
        m_s3rver.reset();
        m_net.reset();   // deletes the namespaces, whatever happened above
    }

    // The [checkpoints] table for backend; starts s3rver in the broker's namespace for S3.
    std::string checkpointsConfig(Backend backend)
    {
        if (backend == Backend::Broker)
            return "\n[checkpoints]\nstore = \"broker\"\n";
        m_s3rver = std::make_unique<StartedS3rver>();
        S3rverOptions options;
        options.argvPrefix = TestNetwork::in(m_net->broker(), {});
        if (const std::string error = m_s3rver->start(kBucket, options); !error.empty()) {
            ADD_FAILURE() << error;
            return {};
        }
        // Made 0600 before the keys go in: the broker refuses a credentials file others may read.
        const auto credentials = m_dir->path() / "s3.credentials";
        std::ofstream(credentials).close();
        std::filesystem::permissions(credentials,
                                     std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
        std::ofstream(credentials) << "[default]\naws_access_key_id = " << StartedS3rver::kAccessKeyId
                                   << "\naws_secret_access_key = " << StartedS3rver::kSecretAccessKey << "\n";
        return "\n[checkpoints]\nstore = \"s3\"\nendpoint = \"" + m_s3rver->endpoint() + "\"\nbucket = \"" + kBucket
            + "\"\nregion = \"us-east-1\"\npath_style = true\ncredentials_file = \"" + credentials.string() + "\"\n";
    }

    void run(Backend backend);

    std::unique_ptr<TempDir> m_dir;
    std::unique_ptr<TestNetwork> m_net;
    std::unique_ptr<StartedS3rver> m_s3rver;
    std::map<std::string, std::string> m_env;
    std::vector<Daemon> m_pools;
    std::optional<Daemon> m_broker;
};

void WorkspaceFailover::run(Backend backend)
{
    const std::string checkpoints = checkpointsConfig(backend);
    ASSERT_FALSE(checkpoints.empty());
    TestCa ca(m_dir->path() / "pki", "paddock-test-ca");
    ASSERT_TRUE(ca.ok());
    const auto token = m_dir->path() / "pool.token";
    std::ofstream(token) << "failover-token-" << ::getpid() << "\n";

    // Two pool hosts; nothing shared between them (state, snapshots, checkpoints: each its own).
    std::vector<std::filesystem::path> stateDirs;
    for (int i = 0; i < 2; ++i) {
        const std::string &name = kPoolNames[static_cast<size_t>(i)];
        auto cert = ca.issue(name, "IP:" + TestNetwork::poolAddress(i));
        ASSERT_TRUE(cert) << cert.error().message;
        const auto config = m_dir->path() / (name + ".toml");
        std::ofstream(config) << "pool_id = \"" << name << "\"\n[[tier]]\nname = \"lite\"\nruntime = \"bwrap\"\n"
                              << "warm_count = " << kWarmCount << "\nmax_count = " << kMaxCount
                              << "\ndisk_mb = " << kDiskMb << "\n";
        stateDirs.push_back(m_dir->path() / ("state-" + name));
        auto pool = Daemon::start(TestNetwork::in(m_net->pool(i),
                                                  {binaryPath("paddock-pool").string(), "--config", config.string(),
                                                   "--listen", TestNetwork::poolAddress(i) + ":7701", "--state-dir",
                                                   stateDirs.back().string(), "--tls-cert", cert->first.string(),
                                                   "--tls-key", cert->second.string(), "--token-file", token.string()}),
                                  m_dir->path() / (name + ".log"), m_env);
        ASSERT_TRUE(pool) << pool.error().message;
        m_pools.push_back(std::move(*pool));
        auto ready = waitForPoolLog(m_pools.back());
        ASSERT_TRUE(ready) << ready.error().message;
    }

    std::string config = "pool_health_interval_ms = 250\npool_lost_after_ms = 2000\n";
    for (int i = 0; i < 2; ++i)
        config += "\n[[pool]]\nname = \"" + kPoolNames[static_cast<size_t>(i)] + "\"\nendpoint = \""
            + TestNetwork::poolAddress(i) + ":7701\"\ntls_ca = \"" + ca.pem().string() + "\"\ntoken_file = \""
            + token.string() + "\"\n";
    config += checkpoints;
    const auto configFile = m_dir->path() / "broker.toml";
    std::ofstream(configFile) << config;
    const auto brokerData = m_dir->path() / "broker";
    const auto socket = m_dir->path() / "run/broker.sock";
    auto broker = Daemon::start(TestNetwork::in(m_net->broker(),
                                                {binaryPath("paddockd").string(), "--config", configFile.string(),
                                                 "--data-dir", brokerData.string(), "--socket", socket.string(),
                                                 "--playbook-dir", playbookDir().string(), "--workers",
                                                 std::to_string(kWorkers)}),
                                m_dir->path() / "broker.log", m_env);
    ASSERT_TRUE(broker) << broker.error().message;
    m_broker.emplace(std::move(*broker));
    const std::string address = "unix:" + socket.string();
    ASSERT_TRUE(waitForHealthy(address, 30s, &*m_broker));
    for (int i = 0; i < 200; ++i) {
        const json pools = listPools(address);
        if (findPool(pools, kPoolNames[0]).value("healthy", false)
            && findPool(pools, kPoolNames[1]).value("healthy", false))
            break;
        ASSERT_LT(i, 199) << "the pools did not both become healthy: " << pools.dump(2);
        std::this_thread::sleep_for(100ms);
    }

    const auto playbookFile = m_dir->path() / "workspace-failover.toml";
    std::ofstream(playbookFile) << failoverPlaybook();
    const auto started = Clock::now();
    std::vector<std::string> ids;
    for (int i = 0; i < kSessions; ++i) {
        const CliResult submitted =
            runCli({"--broker", address, "submit", "--playbook", playbookFile.string(), "--output", "json"});
        ASSERT_EQ(submitted.exitCode, 0) << submitted.err;
        ids.push_back(json::parse(submitted.out)["id"].get<std::string>());
    }
    const double submittedAtS = std::chrono::duration<double>(Clock::now() - started).count();

    // kill -9 of east once about half the sessions have a result (those on east mid-run, some
    // without a result yet), then its state directory goes: the host is gone for good.
    std::map<std::string, json> rows;
    for (;;) {
        rows = listSessions(address);
        const auto withResults = std::count_if(rows.begin(), rows.end(),
                                               [](const auto &row) { return row.second.value("steps", 0) >= 1; });
        if (withResults >= kSessions / 2)
            break;
        ASSERT_LT(Clock::now() - started, kStartTimeout) << withResults << " sessions with a result so far";
        std::this_thread::sleep_for(kPollInterval);
    }
    int onEastAtKill = 0;
    int runningOnEastAtKill = 0;
    for (const auto &[id, row] : rows) {
        if (row.value("pool", std::string()) == kPoolNames[0]) {
            ++onEastAtKill;
            runningOnEastAtKill += row.value("status", std::string()) == "running";
        }
    }
    const double killAtS = std::chrono::duration<double>(Clock::now() - started).count();
    m_pools[0].kill9();
    ASSERT_TRUE(m_pools[0].waitExit(10s).has_value());
    std::error_code removeError;
    std::filesystem::remove_all(stateDirs[0], removeError);
    ASSERT_FALSE(removeError) << "cannot delete " << stateDirs[0] << ": " << removeError.message();
    ASSERT_FALSE(std::filesystem::exists(stateDirs[0]));

    for (;;) {
        rows = listSessions(address);
        const bool allEnded = rows.size() == ids.size()
            && std::all_of(rows.begin(), rows.end(),
                           [](const auto &row) { return ended(row.second.value("status", std::string())); });
        if (allEnded)
            break;
        if (Clock::now() - started > kRunTimeout) {
            ADD_FAILURE() << "not every session ended within "
                          << std::chrono::duration_cast<std::chrono::seconds>(kRunTimeout).count() << " s";
            break;
        }
        std::this_thread::sleep_for(kPollInterval);
    }
    const double runS = std::chrono::duration<double>(Clock::now() - started).count();

    RunFigures figures;
    std::map<std::string, int> firstOn;
    int moved = 0;
    int restored = 0;
    int movedEmpty = 0;
    int badSessions = 0;
    std::set<std::string> restoredManifests;
    for (const auto &id : ids) {
        const SessionCheck check = checkSession(rows[id], sessionEvents(address, id), backend, figures);
        ++firstOn[check.firstPool];
        moved += check.moved;
        restored += check.moved && check.workspace == "restored";
        movedEmpty += check.moved && check.workspace == "empty";
        if (check.moved && check.workspace == "restored")
            restoredManifests.insert(check.manifest);
        if (!check.problems.empty()) {
            ++badSessions;
            std::string text;
            for (const auto &problem : check.problems)
                text += "\n  " + problem;
            // The first few in full; the count says how many more.
            if (badSessions <= 10)
                ADD_FAILURE() << "session " << id << " (first on " << check.firstPool << "):" << text;
        }
    }
    EXPECT_EQ(badSessions, 0) << "sessions with problems (the first 10 are above)";
    EXPECT_GT(firstOn[kPoolNames[0]], 0) << "placement put nothing on east";
    EXPECT_GT(firstOn[kPoolNames[1]], 0) << "placement put nothing on west";
    EXPECT_GT(moved, 0) << "east held no session when it was killed; the test proved nothing";
    EXPECT_GT(restored, 0) << "no session moved with a restored workspace; the test proved nothing about restores";

    // The checkpoints the moves restored are in the store the config names (and only there).
    for (const auto &manifest : restoredManifests) {
        if (backend == Backend::Broker)
            EXPECT_TRUE(std::filesystem::exists(brokerData / "checkpoints/manifests" / manifest)) << manifest;
        else
            EXPECT_TRUE(std::filesystem::exists(m_s3rver->dataDir() / kBucket / "manifests"
                                                / (manifest + "._S3rver_object")))
                << manifest;
    }
    int objects = 0;
    if (backend == Backend::S3) {
        objects = s3rverObjects(m_s3rver->dataDir() / kBucket);
        EXPECT_GT(s3rverObjects(m_s3rver->dataDir() / kBucket, "manifests"), 0);
        EXPECT_GT(s3rverObjects(m_s3rver->dataDir() / kBucket, "chunks"), 0);
        EXPECT_FALSE(std::filesystem::exists(brokerData / "checkpoints/manifests"))
            << "store = \"s3\", yet the broker kept manifests in its own directory";
    }

    const std::string log = m_broker->logText();
    EXPECT_NE(log.find("pool 'east' at " + TestNetwork::poolAddress(0) + ":7701 is unhealthy"), std::string::npos);
    const json pools = listPools(address);
    EXPECT_FALSE(findPool(pools, kPoolNames[0]).value("healthy", true));
    EXPECT_TRUE(findPool(pools, kPoolNames[1]).value("healthy", false));

    std::cout << "workspace-failover (" << backendName(backend) << "): " << kSessions << " sessions ("
              << firstOn[kPoolNames[0]] << " first on east, " << firstOn[kPoolNames[1]] << " on west), "
              << kWorkers << " workers, submitted in " << submittedAtS << " s; kill -9 of east at " << killAtS
              << " s with " << onEastAtKill << " sessions on it (" << runningOnEastAtKill << " running); " << moved
              << " moved (" << restored << " restored, " << movedEmpty << " empty); checkpoint median "
              << median(figures.checkpointMs) << " ms, " << median(figures.checkpointBytes) << " bytes sent, over "
              << figures.checkpointMs.size() << " checkpoints; restore median " << median(figures.restoreMs)
              << " ms; all ended at " << runS << " s";
    if (backend == Backend::S3)
        std::cout << "; " << objects << " objects in the bucket";
    std::cout << "\n";
}

TEST_F(WorkspaceFailover, SessionsOutliveAKilledPoolWithTheBrokerStore)
{
    run(Backend::Broker);
}

TEST_F(WorkspaceFailover, SessionsOutliveAKilledPoolWithS3)
{
    run(Backend::S3);
}

} // namespace
} // namespace paddock::test
