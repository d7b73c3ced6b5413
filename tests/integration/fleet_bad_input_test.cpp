// Issue 16's bad input, against the real daemons on loopback and a unix socket: a model endpoint
// that hangs, a pool that accepts connections and never answers, and 10,000 submits in a burst.
// Each is bounded by its deadline and named in the session's log, nothing acknowledged is lost
// (kill -9 included), and the other sessions are unaffected. Only the model API is faked (cpp-httplib,
// tests/unit/broker/llm/chat_test_support.h); the silent pool is a bare TCP listener, mute from the
// first byte or after an HTTP/2 handshake.
//
// Known limits:
// - "Unaffected" is checked as an order of events (the other sessions end before the hanging
//   session fails, about 15 s of hang later), not as a latency: on a loaded machine a plain session
//   slower than the whole hang would fail the check.
// - The figures printed (burst rate, each submit's time beside a silent pool) are not asserted:
//   no wall-clock assertions here.
//
// Threads: the test's main thread, but the burst's paddockctl runs on a thread of its own so that
// other submits can be made while it runs; the fake servers answer on their own threads.

#include "tests/integration/harness.h"
#include "tests/integration/multi_host_support.h"
#include "tests/unit/broker/llm/chat_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace paddock::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// broker/engine/decide.h's kMaxConsecutiveModelErrors: the session fails at the third in a row.
constexpr int kModelErrorsBeforeFailing = 3;

// A scripted session that needs a sandbox and a command, and little else.
constexpr const char *kShortPlaybook = R"toml(
name = "short"
goal = "Write a file, read it back, finish"

[[step]]
tool = "write_file"
path = "note.txt"
content = "fleet\n"

[[step]]
tool = "run_command"
command = "cat note.txt"
expect_stdout = "fleet"

[[step]]
tool = "finish"
summary = "wrote a file and read it back"
)toml";

double secondsSince(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// A TCP listener on 127.0.0.1 that accepts every connection and never answers: a host whose port is
// open but whose service has hung. Silent: not a byte, ever (the broker's gRPC never gets past its
// handshake). Http2Settings: an empty HTTP/2 SETTINGS frame first, then nothing, so the broker's
// calls are sent and wait for their deadlines (a pool process whose handlers are wedged). Whatever
// the broker sends is never read. The connections stay open until stop().
class SilentListener {
public:
    enum class Greeting { Silent, Http2Settings };

    explicit SilentListener(Greeting greeting) : m_greeting(greeting)
    {
        m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        if (m_fd < 0 || ::bind(m_fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0
            || ::listen(m_fd, 128) != 0 || ::getsockname(m_fd, reinterpret_cast<sockaddr *>(&address), &length) != 0)
            return;
        m_port = ntohs(address.sin_port);
        m_thread = std::thread([this] { acceptLoop(); });
    }

    ~SilentListener() { stop(); }
    SilentListener(const SilentListener &) = delete;
    SilentListener &operator=(const SilentListener &) = delete;

    int port() const { return m_port; }
    std::string endpoint() const { return "127.0.0.1:" + std::to_string(m_port); }
    int accepted() const { return m_accepted.load(); }

    void stop()
    {
        m_stopping = true;
        if (m_thread.joinable())
            m_thread.join();
        for (int fd : m_connections)
            ::close(fd);
        m_connections.clear();
        if (m_fd >= 0)
            ::close(m_fd);
        m_fd = -1;
    }

private:
    void acceptLoop()
    {
        // A frame header (RFC 9113 4.1): length 0, type 4 (SETTINGS), no flags, stream 0.
        static constexpr char kEmptySettings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
        while (!m_stopping) {
            pollfd listening{m_fd, POLLIN, 0};
            if (::poll(&listening, 1, 100) <= 0)
                continue;
            const int connection = ::accept4(m_fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (connection < 0)
                continue;
            if (m_greeting == Greeting::Http2Settings)
                (void)!::send(connection, kEmptySettings, sizeof kEmptySettings, MSG_NOSIGNAL);
            m_connections.push_back(connection);
            ++m_accepted;
        }
    }

    const Greeting m_greeting;
    int m_fd = -1;
    int m_port = 0;
    std::thread m_thread;
    std::atomic<bool> m_stopping{false};
    std::atomic<int> m_accepted{0};
    std::vector<int> m_connections;   // the accept thread's until it is joined
};

// A chat completion that calls finish: the session of a model that answers ends at its next step.
std::string finishResponse()
{
    const json arguments{{"status", "succeeded"}, {"summary", "nothing to do"}};
    return json{{"id", "chatcmpl-fleet"},
                {"object", "chat.completion"},
                {"model", "fake-ok"},
                {"choices",
                 {{{"index", 0},
                   {"finish_reason", "tool_calls"},
                   {"message",
                    {{"role", "assistant"},
                     {"content", "Done."},
                     {"tool_calls",
                      {{{"id", "call_finish"},
                        {"type", "function"},
                        {"function", {{"name", "finish"}, {"arguments", arguments.dump()}}}}}}}}}}},
                {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 5}, {"total_tokens", 15}}}}
        .dump();
}

class FleetBadInput : public ::testing::Test {
protected:
    void SetUp() override
    {
        const auto missing = missingBinaries({"paddockd", "paddock-pool", "paddock-sandbox-init", "paddockctl"});
        if (!missing.empty())
            GTEST_SKIP() << "not built: " << binaryPath(missing.front()).string();
        m_dir = std::make_unique<TempDir>("paddock-fleet-bad-input");
    }

    void TearDown() override
    {
        if (HasFailure()) {
            if (m_broker)
                std::cerr << "---- paddockd log (tail) ----\n" << m_broker->daemon.logTail(80);
            if (m_pool)
                std::cerr << "---- paddock-pool log (tail) ----\n" << m_pool->daemon.logTail(40);
        }
        if (m_broker)
            m_broker->daemon.terminate();
        if (m_pool)
            m_pool->daemon.terminate();
    }

    std::filesystem::path writeFile(std::string_view name, std::string_view text)
    {
        const auto path = *m_dir / name;
        std::ofstream(path) << text;
        return path;
    }

    // A real paddock-pool; poolToml, when given, is its config file.
    void startRealPool(const std::string &poolToml = {})
    {
        std::vector<std::string> args;
        if (!poolToml.empty())
            args = {"--config", writeFile("pool.toml", poolToml).string()};
        auto pool = startPool(*m_dir, 30s, args);
        ASSERT_TRUE(pool) << "cannot start paddock-pool: " << pool.error().message;
        m_pool = std::make_unique<PoolProcess>(std::move(*pool));
    }

    // paddockd as the harness starts it, with args for its pools and configuration (the harness's
    // startBroker takes one pool only). The log file is appended to across restarts.
    void startBrokerWith(const std::vector<std::string> &args)
    {
        const auto socket = *m_dir / "run/broker.sock";
        std::vector<std::string> argv{binaryPath("paddockd").string(), "--data-dir", (*m_dir / "broker").string(),
                                      "--socket", socket.string(), "--playbook-dir", playbookDir().string(),
                                      "--allow-local-execution", "--workers", "4"};
        argv.insert(argv.end(), args.begin(), args.end());
        auto daemon = Daemon::start(argv, *m_dir / "broker.log", hermeticEnvFor(m_dir->path()));
        ASSERT_TRUE(daemon) << "cannot start paddockd: " << daemon.error().message;
        const std::string address = "unix:" + socket.string();
        auto healthy = waitForHealthy(address, 30s, &*daemon);
        ASSERT_TRUE(healthy) << "paddockd did not become healthy: " << healthy.error().message;
        m_broker = std::make_unique<BrokerProcess>(BrokerProcess{std::move(*daemon), socket, address});
    }

    CliResult cli(std::vector<std::string> args, std::chrono::milliseconds timeout = 120s)
    {
        args.insert(args.begin(), {"--broker", m_broker->address});
        return runCli(args, {}, timeout);
    }

    // Submits one session; its id, or "" (with a failure recorded).
    std::string submit(const std::vector<std::string> &submitArgs)
    {
        std::vector<std::string> args{"submit"};
        args.insert(args.end(), submitArgs.begin(), submitArgs.end());
        const CliResult result = cli(args);
        EXPECT_EQ(result.exitCode, 0) << result.err;
        const auto lines = splitLines(result.out);
        EXPECT_EQ(lines.size(), 1u) << result.out;
        return result.exitCode == 0 && lines.size() == 1 ? lines.front() : std::string();
    }

    // Every session the broker lists, by id (ls --all follows the pages to the end).
    std::map<std::string, json> sessions()
    {
        const CliResult listed = cli({"ls", "--all", "--output", "json"});
        EXPECT_EQ(listed.exitCode, 0) << listed.err;
        std::map<std::string, json> out;
        const json array = json::parse(listed.out, nullptr, false);
        EXPECT_TRUE(array.is_array()) << listed.out.substr(0, 500);
        if (!array.is_array())
            return out;
        for (const auto &session : array) {
            const std::string id = session.value("id", std::string());
            EXPECT_FALSE(out.contains(id)) << "ls --all listed " << id << " twice";
            out[id] = session;
        }
        return out;
    }

    // Ended, and its sandbox given back: nothing more is appended to its log. (The final status comes
    // a step before the release, so status alone is not the end of the log.)
    static bool settled(const json &session)
    {
        const std::string status = session.value("status", std::string());
        const bool ended = status == "succeeded" || status == "failed" || status == "cancelled";
        return ended && session.value("sandbox_id", std::string()).empty();
    }

    // Waits until every one of ids has settled, at most `timeout`; the sessions as last listed.
    std::map<std::string, json> waitUntilSettled(const std::vector<std::string> &ids, std::chrono::seconds timeout)
    {
        const auto until = Clock::now() + timeout;
        std::map<std::string, json> listed;
        while (true) {
            listed = sessions();
            const bool all = std::all_of(ids.begin(), ids.end(), [&](const std::string &id) {
                return listed.contains(id) && settled(listed.at(id));
            });
            if (all || Clock::now() >= until)
                break;
            std::this_thread::sleep_for(250ms);
        }
        for (const auto &id : ids) {
            EXPECT_TRUE(listed.contains(id) && settled(listed.at(id)))
                << "session " << id << " has not ended (and given its sandbox back) after " << timeout.count()
                << " s: " << (listed.contains(id) ? listed.at(id).dump() : std::string("not listed"));
        }
        return listed;
    }

    // A session's whole log: seqs 1..last_seq with no gap, opened by session.created.
    std::vector<json> denseLog(const std::string &id, const json &session)
    {
        const std::vector<json> events = sessionEvents(m_broker->address, id);
        EXPECT_FALSE(events.empty()) << id;
        for (size_t i = 0; i < events.size(); ++i) {
            EXPECT_EQ(events[i].value("seq", int64_t{-1}), static_cast<int64_t>(i + 1))
                << id << ": " << events[i].dump();
        }
        EXPECT_EQ(session.value("last_seq", int64_t{-1}), static_cast<int64_t>(events.size())) << id;
        if (!events.empty()) {
            EXPECT_EQ(events.front().value("kind", std::string()), "session.created") << id;
        }
        return events;
    }

    static std::vector<json> ofKind(const std::vector<json> &events, const std::string &kind)
    {
        std::vector<json> out;
        std::copy_if(events.begin(), events.end(), std::back_inserter(out),
                     [&](const json &event) { return event.value("kind", std::string()) == kind; });
        return out;
    }

    std::unique_ptr<TempDir> m_dir;
    std::unique_ptr<PoolProcess> m_pool;
    std::unique_ptr<BrokerProcess> m_broker;
};

// A model endpoint that reads every request and never answers. The session on it records each
// timed-out call as model.error naming the endpoint, and fails at the third in a row quoting the
// last; scripted sessions, and a session on a model endpoint that answers, finish meanwhile.
TEST_F(FleetBadInput, AHangingModelEndpointTimesOutInItsSessionAndNobodyElseWaits)
{
    // Every request is held (no count of open requests is ever reached): the endpoint hangs. A held
    // request is let go after FakeChatServer::kMaxHold with a 504 that nobody reads any more.
    llm::test::FakeChatServer hanging(16);
    hanging.holdUntilOpen(INT_MAX);
    llm::test::FakeChatServer answering(4);
    answering.respond({{200, finishResponse(), {}}});

    // 2 s per attempt and one retry: each model.error comes about 4 s after its call.
    const std::string config = "[models.openai]\n"
                               "api_key_env = \"\"\n"
                               "timeout_ms = 2000\n"
                               "max_retries = 1\n"
                               "initial_backoff_ms = 100\n"
                               "max_backoff_ms = 200\n"
                               "\n[models.openai.hang]\n"
                               "base_url = \"" + hanging.baseUrl() + "\"\n"
                               "\n[models.openai.ok]\n"
                               "base_url = \"" + answering.baseUrl() + "\"\n";
    ASSERT_NO_FATAL_FAILURE(startRealPool());
    ASSERT_NO_FATAL_FAILURE(startBrokerWith(
        {"--config", writeFile("broker.toml", config).string(), "--pool", "local=" + m_pool->endpoint}));

    const auto start = Clock::now();
    const std::string hung = submit({"--goal", "wait for a model that never answers", "--model", "openai:hang"});
    ASSERT_FALSE(hung.empty());
    ASSERT_TRUE(hanging.waitUntilHeld(1)) << "the hanging endpoint never got the session's request";

    // While that call hangs: scripted sessions and one on the answering endpoint.
    const auto playbook = writeFile("short.toml", kShortPlaybook);
    constexpr int kScripted = 4;
    std::vector<std::string> others;
    for (int i = 0; i < kScripted; ++i)
        others.push_back(submit({"--playbook", playbook.string(), "--tag", "beside-the-hang"}));
    others.push_back(submit({"--goal", "finish at once", "--model", "openai:ok"}));
    for (const auto &id : others)
        ASSERT_FALSE(id.empty());

    auto listed = waitUntilSettled(others, 60s);
    const double othersDoneS = secondsSince(start);
    const int errorsSoFar = static_cast<int>(ofKind(sessionEvents(m_broker->address, hung), "model.error").size());
    int64_t othersEndedUnixMs = 0;
    for (const auto &id : others) {
        ASSERT_TRUE(listed.contains(id));
        EXPECT_EQ(listed.at(id).value("status", std::string()), "succeeded") << listed.at(id).dump();
        const auto events = denseLog(id, listed.at(id));
        EXPECT_TRUE(ofKind(events, "model.error").empty()) << id;
        if (!events.empty())
            othersEndedUnixMs = std::max(othersEndedUnixMs, events.back().value("time_unix_ms", int64_t{0}));
    }

    listed = waitUntilSettled({hung}, 60s);
    const double hungDoneS = secondsSince(start);
    ASSERT_TRUE(listed.contains(hung));
    const json &session = listed.at(hung);
    EXPECT_EQ(session.value("status", std::string()), "failed") << session.dump();
    const auto events = denseLog(hung, session);
    const auto errors = ofKind(events, "model.error");
    ASSERT_EQ(errors.size(), static_cast<size_t>(kModelErrorsBeforeFailing)) << json(events).dump(1);
    for (const auto &error : errors) {
        const std::string message = error["payload"].value("error", std::string());
        // openai_model.cpp's words over curl's: the URL, the attempts and what the last one saw.
        EXPECT_NE(message.find(hanging.chatUrl()), std::string::npos) << message;
        EXPECT_NE(message.find("still failed after 2 attempt(s)"), std::string::npos) << message;
        EXPECT_NE(message.find("timed out"), std::string::npos) << message;
        EXPECT_EQ(error["payload"].value("code", std::string()), "unavailable") << error.dump();
    }
    EXPECT_TRUE(ofKind(events, "model.response").empty()) << "a model that never answered has a response";

    // The failure quotes the last error, and comes after it.
    const std::string lastError = errors.back()["payload"].value("error", std::string());
    const std::string expectedReason = "the model failed 3 times in a row; last error: " + lastError;
    EXPECT_EQ(session.value("status_reason", std::string()), expectedReason);
    const auto changes = ofKind(events, "state.changed");
    ASSERT_FALSE(changes.empty());
    const json &failed = changes.back();
    EXPECT_EQ(failed["payload"].value("status", std::string()), "failed") << failed.dump();
    EXPECT_EQ(failed["payload"].value("reason", std::string()), expectedReason);
    EXPECT_GT(failed.value("seq", int64_t{0}), errors.back().value("seq", int64_t{0}));
    // It held a sandbox through the hang (claimed beside the first call) and gave it back.
    EXPECT_EQ(ofKind(events, "sandbox.claimed").size(), 1u);
    EXPECT_EQ(ofKind(events, "sandbox.released").size(), 1u);

    // Each call was one request and one retry, every one under the session's idempotency keys.
    size_t hungRequests = 0;
    for (const auto &request : hanging.requests()) {
        if (request.idempotencyKey.starts_with(hung + ":"))
            ++hungRequests;
    }
    EXPECT_EQ(hungRequests, static_cast<size_t>(2 * kModelErrorsBeforeFailing));
    EXPECT_EQ(hanging.requests().size(), hungRequests) << "another session's call reached the hanging endpoint";

    // Unaffected: everything else had ended before the hanging session failed.
    EXPECT_LT(othersEndedUnixMs, failed.value("time_unix_ms", int64_t{0}))
        << "the other sessions ended only after the hanging one had failed";

    std::cout << "hanging model: " << others.size() << " other sessions done " << othersDoneS
              << " s after the hanging one was submitted (it had " << errorsSoFar
              << " model.error(s) by then); it failed after " << hungDoneS << " s with " << errors.size()
              << " model.error(s) and " << hungRequests << " requests\n"
              << "  last error: " << lastError << "\n";
}

// A second pool beside a real one, listed first, that accepts the broker's connections and never
// answers. Every session runs on the real pool; the pools list says the silent one is unhealthy and
// names it; a session that waits for room names it among the pools passed over.
class FleetBadInputSilentPool : public FleetBadInput {
protected:
    void runBeside(SilentListener::Greeting greeting, const std::string &what)
    {
        SilentListener silent(greeting);
        ASSERT_GT(silent.port(), 0) << "cannot listen on 127.0.0.1";
        // Two sandboxes at a time: the sessions beyond them wait for room, and say why.
        ASSERT_NO_FATAL_FAILURE(startRealPool("[[tier]]\nname = \"lite\"\nmax_count = 2\nwarm_count = 2\n"));
        ASSERT_NO_FATAL_FAILURE(
            startBrokerWith({"--pool", "silent=" + silent.endpoint(), "--pool", "local=" + m_pool->endpoint}));

        // Submitted one by one from the moment the broker is up, while its first check of the
        // silent pool is still waiting.
        const auto playbook = writeFile("short.toml", kShortPlaybook);
        constexpr int kSessions = 6;
        std::vector<std::string> ids;
        std::vector<double> submitS;
        for (int i = 0; i < kSessions; ++i) {
            const auto sent = Clock::now();
            ids.push_back(submit({"--playbook", playbook.string(), "--tag", "beside-a-silent-pool"}));
            ASSERT_FALSE(ids.back().empty());
            submitS.push_back(secondsSince(sent));
        }

        const auto listed = waitUntilSettled(ids, 90s);
        int waitingEvents = 0;
        int waitingNamingPools = 0;
        for (const auto &id : ids) {
            ASSERT_TRUE(listed.contains(id));
            const json &session = listed.at(id);
            EXPECT_EQ(session.value("status", std::string()), "succeeded") << session.dump();
            EXPECT_EQ(session.value("pool", std::string()), "local") << session.dump();
            const auto events = denseLog(id, session);
            for (const auto &claimed : ofKind(events, "sandbox.claimed"))
                EXPECT_EQ(claimed["payload"].value("pool", std::string()), "local") << claimed.dump();
            for (const auto &waiting : ofKind(events, "sandbox.waiting")) {
                ++waitingEvents;
                const std::string reason = waiting["payload"].value("reason", std::string());
                // A wait that lists the pools passed over lists the silent one, with its error.
                if (reason.find("local (") != std::string::npos) {
                    ++waitingNamingPools;
                    EXPECT_NE(reason.find("silent (pool 'silent'"), std::string::npos) << reason;
                }
            }
        }

        // The silent pool's first check ends at its deadline: a bounded wait for it to be recorded.
        json silentPool;
        json localPool;
        const auto until = Clock::now() + 30s;
        do {
            const json pools = listPools(m_broker->address);
            silentPool = findPool(pools, "silent");
            localPool = findPool(pools, "local");
            if (!silentPool.value("error", std::string()).empty())
                break;
            std::this_thread::sleep_for(250ms);
        } while (Clock::now() < until);
        ASSERT_TRUE(silentPool.is_object()) << "paddockctl pools does not list the silent pool";
        EXPECT_FALSE(silentPool.value("healthy", true)) << silentPool.dump();
        const std::string error = silentPool.value("error", std::string());
        EXPECT_NE(error.find("pool 'silent'"), std::string::npos) << error;
        EXPECT_TRUE(error.find("did not answer") != std::string::npos || error.find("unreachable") != std::string::npos)
            << error;
        EXPECT_TRUE(localPool.value("healthy", false)) << localPool.dump();
        EXPECT_GT(silent.accepted(), 0) << "the broker never dialled the silent pool";

        std::cout << what << ": " << kSessions << " sessions succeeded on the other pool; submits took";
        for (double s : submitS)
            std::cout << " " << s;
        std::cout << " s; " << waitingEvents << " sandbox.waiting event(s), " << waitingNamingPools
                  << " naming the pools passed over; " << silent.accepted()
                  << " connection(s) accepted by the silent pool\n  its error: " << error << "\n";
    }
};

// Not a byte back: the broker's gRPC never completes its handshake.
TEST_F(FleetBadInputSilentPool, APoolThatNeverAnswersIsNamedUnhealthyAndSessionsRunOnTheOther)
{
    runBeside(SilentListener::Greeting::Silent, "silent pool");
}

// The HTTP/2 handshake, then nothing: the broker's calls are sent and wait for their deadlines.
TEST_F(FleetBadInputSilentPool, APoolThatShakesHandsThenNeverAnswersIsNamedUnhealthyAndSessionsRunOnTheOther)
{
    runBeside(SilentListener::Greeting::Http2Settings, "pool silent after its handshake");
}

// 10,000 sessions from one JSON Lines file, and a few single submits from another paddockctl at the
// same time; then kill -9 of the broker the moment the burst is acknowledged, and a restart. Nothing
// listens at the pool's address, so the sessions stay queued and the engine stays small.
TEST_F(FleetBadInput, TenThousandSubmitsInABurstAreAllKeptThroughAKill9)
{
    constexpr int kBurst = 10000;
    constexpr int kBeside = 5;
    const std::string nowhere = "127.0.0.1:" + std::to_string(freeLoopbackPort());
    ASSERT_NO_FATAL_FAILURE(startBrokerWith({"--pool", "local=" + nowhere}));

    std::string lines;
    for (int i = 1; i <= kBurst; ++i)
        lines += json{{"playbook", "hello-c"}, {"tags", {"burst", "n" + std::to_string(i)}}}.dump() + "\n";
    const auto file = writeFile("burst.jsonl", lines);

    std::atomic<bool> burstDone{false};
    const auto start = Clock::now();
    auto burst = std::async(std::launch::async, [&] {
        CliResult result = cli({"submit", "--file", file.string()}, 180s);
        burstDone = true;
        return result;
    });

    // The others once the burst is under way (bounded: the burst may also be over by then).
    const auto until = Clock::now() + 30s;
    while (!burstDone && Clock::now() < until && cli({"ls", "--limit", "1"}).out.find("s-") == std::string::npos)
        std::this_thread::sleep_for(20ms);
    std::vector<std::string> beside;
    for (int i = 0; i < kBeside; ++i)
        beside.push_back(submit({"--playbook", "inspect", "--tag", "beside-the-burst"}));
    const bool overlapped = !burstDone;

    const CliResult burstResult = burst.get();
    const double burstS = secondsSince(start);
    // The moment the burst is acknowledged: no time for a checkpoint or a clean shutdown.
    m_broker->daemon.kill9();
    ASSERT_TRUE(m_broker->daemon.waitExit(10s).has_value());

    ASSERT_EQ(burstResult.exitCode, 0) << burstResult.err.substr(0, 2000);
    const auto burstIds = splitLines(burstResult.out);
    ASSERT_EQ(burstIds.size(), static_cast<size_t>(kBurst)) << burstResult.err.substr(0, 2000);
    const std::set<std::string> distinct(burstIds.begin(), burstIds.end());
    EXPECT_EQ(distinct.size(), static_cast<size_t>(kBurst)) << "the burst got duplicate ids";
    for (const auto &id : beside)
        ASSERT_FALSE(id.empty());

    m_broker.reset();
    const auto restarting = Clock::now();
    ASSERT_NO_FATAL_FAILURE(startBrokerWith({"--pool", "local=" + nowhere}));
    const double restartS = secondsSince(restarting);
    const auto listing = Clock::now();
    const auto held = sessions();
    const double listS = secondsSince(listing);

    EXPECT_EQ(held.size(), static_cast<size_t>(kBurst + kBeside));
    int missing = 0;
    for (size_t i = 0; i < burstIds.size(); ++i) {
        const auto found = held.find(burstIds[i]);
        if (found == held.end()) {
            if (++missing <= 5)
                ADD_FAILURE() << "burst session " << burstIds[i] << " (line " << i + 1 << ") is lost";
            continue;
        }
        // In line order, with what its line said.
        EXPECT_EQ(found->second.value("tags", json()), json({"burst", "n" + std::to_string(i + 1)}))
            << found->second.dump();
    }
    EXPECT_EQ(missing, 0) << "of " << kBurst << " acknowledged sessions";
    for (const auto &id : beside) {
        EXPECT_TRUE(held.contains(id)) << "the submit beside the burst " << id << " is lost";
        EXPECT_FALSE(distinct.contains(id)) << id << " was given to two sessions";
    }

    std::cout << "burst: " << kBurst << " submits from one file in " << burstS << " s ("
              << static_cast<int>(kBurst / burstS) << " a second, paddockctl's start and checks included); "
              << kBeside << " submits beside it " << (overlapped ? "while it ran" : "after it had ended")
              << "; restart after kill -9 healthy in " << restartS << " s; ls --all of " << held.size()
              << " sessions in " << listS << " s\n";
}

} // namespace
} // namespace paddock::test
