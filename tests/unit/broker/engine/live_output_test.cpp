// A running command's output reaches the log as tool.output events while it runs
// (broker/engine/output_recorder.h): before the command ends, redacted across chunks, cut at the
// limit with the cut said, resumed after an earlier attempt without repeating it, and stepped
// over people's events (a pause) but stopped by a cancel. The real store and scripted model; a fake
// pool whose exec hook plays the output and waits for the test between chunks.

#include "tests/support/engine_fixture.h"
#include "tests/support/fake_pool_client.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace paddock::engine {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char *kPlaybook = R"(
goal = "build"
[[step]]
tool = "run_command"
command = "make"
)";

// Opened by the test once it has seen what it waits for; the exec hook waits on it.
class Gate {
public:
    void open()
    {
        std::lock_guard lock(m_mutex);
        m_open = true;
        m_changed.notify_all();
    }
    bool waitOpen()
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, 60s, [&] { return m_open; });
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_changed;
    bool m_open = false;
};

class LiveOutputTest : public test::EngineFixture {
protected:
    void SetUp() override
    {
        EngineFixture::SetUp();
        auto pool = std::make_unique<test::FakePoolClient>("fake");
        m_pool = pool.get();
        m_pool->setTier("lite", 1, 0, 4);
        m_pools.add(std::move(pool), false);
    }

    // The exec hook (streams as OutputSink numbers them: 1 stdout, 2 stderr): plays `before`, waits for the gate, plays `after`; the outcome holds both.
    void playOutput(std::vector<std::pair<int, std::string>> before, std::vector<std::pair<int, std::string>> after)
    {
        m_pool->setExecHook([this, before, after](const pool_client::ExecSpec &,
                                                  const pool_client::OutputSink &sink) -> Result<pool_client::ExecOutcome> {
            pool_client::ExecOutcome outcome;
            auto play = [&](const std::vector<std::pair<int, std::string>> &chunks) {
                for (const auto &[stream, chunk] : chunks) {
                    sink(stream, chunk);
                    (stream == 1 ? outcome.stdoutData : outcome.stderrData) += chunk;
                }
            };
            play(before);
            if (!after.empty() && !m_gate.waitOpen())
                return fail(ErrorCode::DeadlineExceeded, "the test never opened the gate");
            play(after);
            return outcome;
        });
    }

    // Steps the session to its end on a thread of its own, as a broker's step would; joined by
    // stepsDone() or, when the test failed before, by TearDown.
    void runInBackground(StepEngine &engine)
    {
        m_steps = std::thread([this, &engine] { runUntilIdle(engine); });
    }
    void stepsDone()
    {
        m_gate.open();
        if (m_steps.joinable())
            m_steps.join();
    }
    void TearDown() override
    {
        stepsDone();
        EngineFixture::TearDown();
    }

    // Until a tool.output holding `text` is in the log (up to 30 s): its seq, or 0.
    int64_t waitForOutput(const std::string &id, const std::string &text)
    {
        for (int round = 0; round < 3000; ++round) {
            for (const auto &e : events(id)) {
                if (e.kind == core::kind::ToolOutput && json::parse(e.payload).value("text", "").find(text) != std::string::npos)
                    return e.seq;
            }
            std::this_thread::sleep_for(10ms);
        }
        return 0;
    }

    // The text recorded live for one stream, in log order; offsets checked to be dense.
    static std::string liveText(const std::vector<core::Event> &log, const std::string &stream, int64_t from = 0)
    {
        std::string text;
        int64_t next = from;
        for (const auto &p : payloadsOf(log, core::kind::ToolOutput)) {
            if (p["stream"] != stream || p["offset"].get<int64_t>() < from)
                continue;
            EXPECT_EQ(p["offset"].get<int64_t>(), next) << p.dump();
            next = p["offset"].get<int64_t>() + p["bytes"].get<int64_t>();
            text += p["text"].get<std::string>();
        }
        return text;
    }

    static int64_t seqOf(const std::vector<core::Event> &log, const char *kind)
    {
        for (const auto &e : log) {
            if (e.kind == kind)
                return e.seq;
        }
        return 0;
    }

    test::FakePoolClient *m_pool = nullptr;
    Gate m_gate;
    std::thread m_steps;
};

TEST_F(LiveOutputTest, TheFirstLineIsInTheLogWhileTheCommandStillRuns)
{
    playOutput({{1, "first line\n"}}, {{1, "second line\n"}, {2, "warning: late\n"}});
    const std::string id = submit(kPlaybook);
    auto engine = makeEngine();
    runInBackground(engine);

    // The command cannot end before the gate opens, so what is in the log now was recorded live.
    const int64_t firstSeq = waitForOutput(id, "first line");
    EXPECT_GT(firstSeq, 0) << "the first line never reached the log while the command ran";
    EXPECT_EQ(count(events(id), core::kind::ToolResult), 0);
    stepsDone();

    const auto log = events(id);
    EXPECT_EQ(liveText(log, "stdout"), "first line\nsecond line\n");
    EXPECT_EQ(liveText(log, "stderr"), "warning: late\n");
    const int64_t resultSeq = seqOf(log, core::kind::ToolResult);
    for (const auto &e : log) {
        if (e.kind == core::kind::ToolOutput) {
            EXPECT_LT(e.seq, resultSeq) << "output recorded after its command's result";
        }
    }
    const json result = payloadsOf(log, core::kind::ToolResult).at(0);
    EXPECT_EQ(result["stdout"], "first line\nsecond line\n");   // the result is as it always was
    EXPECT_EQ(result["stderr"], "warning: late\n");
    EXPECT_EQ(m_pool->execCount(), 1);
    EXPECT_EQ(session(id).status, core::SessionStatus::Succeeded);
}

TEST_F(LiveOutputTest, ASecretSplitAcrossTwoChunksIsStillRedacted)
{
    const std::string value = "tok-Zq81-live-Output-77";
    auto secrets = secrets::SecretStore::open(m_dir / "config" / "secrets.toml");
    ASSERT_TRUE(secrets) << secrets.error().message;
    ASSERT_TRUE((*secrets)->set("TOKEN", value));
    // The first half is printed, the first line recorded (so a flush has happened with the half
    // in hand), and only then the second half.
    playOutput({{1, "line one\nkey=" + value.substr(0, 9)}}, {{1, value.substr(9) + " done\n"}});
    const std::string id = submit(kPlaybook, {{"secrets", {"TOKEN"}}});
    EngineOptions options;
    options.secrets = secrets->get();
    auto engine = makeEngine(options);
    runInBackground(engine);
    EXPECT_GT(waitForOutput(id, "line one"), 0);
    stepsDone();

    const auto log = events(id);
    EXPECT_EQ(liveText(log, "stdout"), "line one\nkey=[REDACTED:TOKEN] done\n");
    for (const auto &e : log) {
        EXPECT_EQ(e.payload.find(value.substr(0, 9)), std::string::npos) << e.kind << " " << e.payload;
        EXPECT_EQ(e.payload.find(value.substr(9)), std::string::npos) << e.kind << " " << e.payload;
    }
}

TEST_F(LiveOutputTest, OutputPastTheLimitIsCutAndTheCutIsSaid)
{
    std::vector<std::pair<int, std::string>> chunks(10, {1, std::string(500, 'x')});
    chunks.emplace_back(2, "err\n");
    playOutput(chunks, {});
    const std::string id = submit(kPlaybook);
    EngineOptions options;
    options.output.limitBytes = 1000;
    auto engine = makeEngine(options);
    runUntilIdle(engine);

    const auto log = events(id);
    EXPECT_EQ(liveText(log, "stdout"), std::string(1000, 'x'));
    EXPECT_EQ(liveText(log, "stderr"), "err\n");
    int cuts = 0;
    int64_t dropped = 0;
    for (const auto &p : payloadsOf(log, core::kind::ToolOutput)) {
        if (p.value("cut", false)) {
            ++cuts;
            EXPECT_EQ(p["limit_bytes"], 1000);
            EXPECT_EQ(p["stream"], "stdout");
        }
        dropped += p.value("dropped_bytes", int64_t{0});
    }
    EXPECT_EQ(cuts, 1);
    EXPECT_EQ(dropped, 4000);
    EXPECT_EQ(payloadsOf(log, core::kind::ToolResult).at(0)["stdout"], std::string(5000, 'x'));
}

TEST_F(LiveOutputTest, ARepeatRecordsOnlyWhatTheEarlierAttemptDidNot)
{
    const std::string id = submit(kPlaybook);
    auto engine = makeEngine();
    // Up to the tool.call: an earlier broker then recorded the first 4 bytes of its output and died.
    int64_t callSeq = 0;
    for (int step = 0; step < 5 && callSeq == 0; ++step) {
        takeSteps(engine, 1);
        callSeq = seqOf(events(id), core::kind::ToolCall);
    }
    ASSERT_GT(callSeq, 0);
    const std::string callId = payloadsOf(events(id), core::kind::ToolCall).at(0)["call_id"];
    store::AppendRequest earlier;
    earlier.sessionId = id;
    earlier.events.push_back({core::kind::ToolOutput,
                              json{{"call_id", callId}, {"stream", "stdout"}, {"offset", 0}, {"bytes", 4}, {"text", "aaa\n"}}.dump()});
    ASSERT_TRUE(m_store->appendSync(earlier));

    // The pool replays the run from its start.
    playOutput({{1, "aa"}, {1, "a\nbbb\n"}, {2, "e\n"}}, {});
    runUntilIdle(engine);

    const auto log = events(id);
    EXPECT_EQ(liveText(log, "stdout"), "aaa\nbbb\n");
    EXPECT_EQ(liveText(log, "stderr"), "e\n");
    ASSERT_EQ(m_pool->execCount(), 1);
    // The call's key comes from its tool.call: the output recorded since does not make it a new run.
    EXPECT_EQ(m_pool->execs()[0].idempotencyKey, id + ":" + std::to_string(callSeq + 1));
}

TEST_F(LiveOutputTest, APauseMeanwhileIsSteppedOver)
{
    playOutput({{1, "one\n"}}, {{1, "two\n"}});
    const std::string id = submit(kPlaybook);
    auto engine = makeEngine();
    runInBackground(engine);
    EXPECT_GT(waitForOutput(id, "one"), 0);
    store::AppendRequest pause;
    pause.sessionId = id;
    pause.events.push_back({core::kind::StateChanged, R"({"status":"paused","reason":"a person looks"})"});
    auto paused = m_store->appendSync(pause);
    stepsDone();
    ASSERT_TRUE(paused) << paused.error().message;

    const auto log = events(id);
    const int64_t twoSeq = waitForOutput(id, "two");
    EXPECT_GT(twoSeq, paused->events.back().seq);
    EXPECT_EQ(liveText(log, "stdout"), "one\ntwo\n");
    EXPECT_GT(seqOf(log, core::kind::ToolResult), twoSeq);   // the command's result is kept, not run again
    EXPECT_EQ(m_pool->execCount(), 1);
}

TEST_F(LiveOutputTest, ACancelMeanwhileStopsTheRecording)
{
    playOutput({{1, "one\n"}}, {{1, "two\n"}});
    const std::string id = submit(kPlaybook);
    auto engine = makeEngine();
    runInBackground(engine);
    EXPECT_GT(waitForOutput(id, "one"), 0);
    store::AppendRequest cancel;
    cancel.sessionId = id;
    cancel.events.push_back({core::kind::StateChanged, R"({"status":"cancelled","reason":"stop"})"});
    auto cancelled = m_store->appendSync(cancel);
    stepsDone();
    ASSERT_TRUE(cancelled) << cancelled.error().message;

    const auto log = events(id);
    for (const auto &e : log) {
        if (e.seq > cancelled->events.back().seq) {
            EXPECT_TRUE(e.kind != core::kind::ToolOutput && e.kind != core::kind::ToolResult) << "after the cancel: " << e.kind;
        }
    }
    EXPECT_EQ(liveText(log, "stdout"), "one\n");
    EXPECT_EQ(count(log, core::kind::ToolResult), 0);
}

TEST_F(LiveOutputTest, EveryCloseIsAnsweredHoweverCloseAndTheFlusherInterleave)
{
    // Commands that print one line and end at once, from four threads: each close must hand its
    // step the log's end, never be left waiting for a wake-up the flusher missed.
    constexpr int kThreads = 4;
    constexpr int kPerThread = 50;
    std::vector<std::string> sessions;
    for (int i = 0; i < kThreads * kPerThread; ++i)
        sessions.push_back(submit(kPlaybook));
    OutputRecorderOptions options;
    options.flushMs = 1000;   // a missed wake-up would not be covered by the next flush
    OutputRecorder recorder(*m_store, options);
    std::atomic<int> answered = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kPerThread; ++i) {
                const std::string &id = sessions[static_cast<size_t>(t * kPerThread + i)];
                auto command = recorder.open({id, "call-1", 1, {}, nullptr});
                if (i % 2 == 0)   // half print nothing: only close's wake-up brings them to the flusher
                    recorder.add(*command, 1, "one line\n");
                recorder.close(command, [&](int64_t) { ++answered; });
            }
        });
    }
    for (auto &thread : threads)
        thread.join();
    for (int round = 0; round < 3000 && answered < kThreads * kPerThread; ++round)
        std::this_thread::sleep_for(10ms);
    EXPECT_EQ(answered.load(), kThreads * kPerThread);
    int recorded = 0;
    for (const auto &id : sessions)
        recorded += count(events(id), core::kind::ToolOutput);
    EXPECT_EQ(recorded, kThreads * kPerThread / 2) << "each line is in its command's log once";
}

} // namespace
} // namespace paddock::engine
