// Events appended durably through the broker's store and streamed to followers over the real gRPC
// StreamEvents call (unix socket), against raw batched SQLite inserts of the same rows on the same
// machine. Prints figures; not a test.
//
//   broker_stream_bench [seconds=5]
//
// Phases, each `seconds` long:
//   max       2 producers, each appending batches of 20 events to its own session as fast as the
//             store acknowledges, one follower each: the throughput figure
//   paced     the same at 50,000 events/s in all (the budget's rate): the CPU baseline
//   watchers  paced, plus 4 more followers on those sessions: their extra CPU is the figure
//   stalled   paced, plus one follower that never reads: appends must not slow down
// CPU is the whole process's (producers, broker and gRPC clients alike), so it overstates the
// broker's share.

#include "tests/support/in_process_broker.h"

#include "rpc/broker_stubs.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <future>
#include <thread>
#include <vector>

using namespace paddock;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kBatch = 20;
constexpr int kInflight = 8;
const std::string kPayload =
    R"({"call_id":"call-17","name":"run_command","exit_code":0,"stdout":"ok\n","stderr":"","duration_ms":3.2,"timed_out":false,"replayed":false,"pad":"xxxxxxxxxxxx"})";

double cpuSeconds()
{
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

double percentile(std::vector<double> values, double p)
{
    if (values.empty())
        return 0;
    std::sort(values.begin(), values.end());
    return values[std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())))];
}

// Raw SQLite: the same rows, prepared statement, one transaction per 1,000 rows, WAL + NORMAL.
double rawInsertsPerSecond(const std::filesystem::path &dir, double seconds)
{
    const auto path = dir / "raw.db";
    sqlite3 *db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                     "CREATE TABLE events(session_id TEXT, seq INTEGER, time_ms INTEGER, kind TEXT, payload TEXT,"
                     " cost INTEGER, PRIMARY KEY(session_id, seq)) WITHOUT ROWID;",
                 nullptr, nullptr, nullptr);
    sqlite3_stmt *insert = nullptr;
    sqlite3_prepare_v2(db, "INSERT INTO events VALUES(?,?,?,?,?,?)", -1, &insert, nullptr);
    int64_t rows = 0;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
        sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
        for (int i = 0; i < 1000; ++i, ++rows) {
            sqlite3_bind_text(insert, 1, "s-bench", -1, SQLITE_STATIC);
            sqlite3_bind_int64(insert, 2, rows + 1);
            sqlite3_bind_int64(insert, 3, 1796000000000 + rows);
            sqlite3_bind_text(insert, 4, "tool.result", -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 5, kPayload.c_str(), static_cast<int>(kPayload.size()), SQLITE_STATIC);
            sqlite3_bind_int64(insert, 6, 0);
            sqlite3_step(insert);
            sqlite3_reset(insert);
        }
        sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    sqlite3_finalize(insert);
    sqlite3_close(db);
    std::filesystem::remove(path);
    return static_cast<double>(rows) / elapsed;
}

struct PhaseResult {
    double appendedPerSecond = 0;
    double streamedPerSecond = 0;
    double ackP50Ms = 0;
    double ackP99Ms = 0;
    double cores = 0;
    double eventsPerMessage = 0;
};

class Bench {
public:
    explicit Bench(const std::filesystem::path &dir) : m_broker(dir)
    {
        if (auto started = m_broker.start(); !started) {
            std::fprintf(stderr, "%s\n", started.error().message.c_str());
            std::exit(1);
        }
        m_channel = m_broker.newChannel();
    }

    std::string newSession()
    {
        store::AppendRequest request;
        request.sessionId = "s-bench-" + std::to_string(m_sessions++);
        request.expectedLastSeq = 0;
        request.events.push_back({"session.created", R"({"goal":"bench","model":"scripted"})"});
        return m_broker.store().appendSync(std::move(request))->state.id;
    }

    // ratePerSecond 0: as fast as acknowledged.
    PhaseResult run(double seconds, int extraFollowers, bool stalled, double ratePerSecond)
    {
        const std::vector<std::string> sessions{newSession(), newSession()};
        std::atomic<bool> stop{false};
        std::atomic<int64_t> streamed{0};
        std::atomic<int64_t> messages{0};
        std::atomic<int64_t> appended{0};

        // Followers read until told to stop; the stalled one opens its stream and never reads.
        std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
        std::vector<std::thread> followers;
        auto stub = std::make_unique<rpc::BrokerStubs>(m_channel);
        const int followerCount = 2 + extraFollowers;
        for (int i = 0; i < followerCount; ++i) {
            contexts.push_back(std::make_unique<grpc::ClientContext>());
            followers.emplace_back([&, i, ctx = contexts.back().get()] {
                v1::StreamEventsRequest request;
                request.set_session_id(sessions[i % 2]);
                request.set_follow(true);
                auto reader = stub->sessions->StreamEvents(ctx, request);
                v1::EventBatch batch;
                while (reader->Read(&batch)) {
                    if (i < 2)   // the two primary followers are the measured stream
                        streamed += batch.events_size(), ++messages;
                }
                reader->Finish();
            });
        }
        std::unique_ptr<grpc::ClientContext> stalledContext;
        std::unique_ptr<grpc::ClientReader<v1::EventBatch>> stalledReader;
        if (stalled) {
            stalledContext = std::make_unique<grpc::ClientContext>();
            v1::StreamEventsRequest request;
            request.set_session_id(sessions[0]);
            request.set_follow(true);
            stalledReader = stub->sessions->StreamEvents(stalledContext.get(), request);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));

        std::vector<std::vector<double>> acks(2);
        const double cpuBefore = cpuSeconds();
        const auto start = Clock::now();
        std::vector<std::thread> producers;
        for (int p = 0; p < 2; ++p) {
            producers.emplace_back([&, p] {
                std::deque<std::pair<Clock::time_point, std::future<Result<store::AppendResult>>>> inflight;
                const auto interval = ratePerSecond > 0
                    ? std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kBatch * 2 / ratePerSecond))
                    : Clock::duration::zero();
                auto next = Clock::now();
                while (!stop) {
                    while (static_cast<int>(inflight.size()) < kInflight) {
                        if (ratePerSecond > 0) {
                            std::this_thread::sleep_until(next);
                            next += interval;
                        }
                        store::AppendRequest request;
                        request.sessionId = sessions[p];
                        request.events.assign(kBatch, core::NewEvent{"tool.result", kPayload, 0});
                        inflight.emplace_back(Clock::now(), m_broker.store().append(std::move(request)));
                    }
                    auto [sent, future] = std::move(inflight.front());
                    inflight.pop_front();
                    if (future.get())
                        appended += kBatch;
                    acks[p].push_back(std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
                }
                for (auto &entry : inflight)
                    entry.second.get(), appended += kBatch;
            });
        }
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
        stop = true;
        for (auto &producer : producers)
            producer.join();
        const double appendSeconds = std::chrono::duration<double>(Clock::now() - start).count();
        // Let the followers drain what was appended, then measure the stream over the whole span.
        const int64_t target = appended.load();
        const auto drainDeadline = Clock::now() + std::chrono::seconds(30);
        while (streamed.load() < target && Clock::now() < drainDeadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const double streamSeconds = std::chrono::duration<double>(Clock::now() - start).count();
        const double cpu = cpuSeconds() - cpuBefore;

        for (auto &ctx : contexts)
            ctx->TryCancel();
        for (auto &follower : followers)
            follower.join();
        if (stalledContext) {
            stalledContext->TryCancel();
            stalledReader->Finish();
        }

        std::vector<double> all;
        for (auto &a : acks)
            all.insert(all.end(), a.begin(), a.end());
        PhaseResult result;
        result.appendedPerSecond = static_cast<double>(target) / appendSeconds;
        result.streamedPerSecond = static_cast<double>(streamed.load()) / streamSeconds;
        result.ackP50Ms = percentile(all, 0.50);
        result.ackP99Ms = percentile(all, 0.99);
        result.cores = cpu / streamSeconds;
        result.eventsPerMessage = messages ? static_cast<double>(streamed.load()) / static_cast<double>(messages.load()) : 0;
        if (streamed.load() < target)
            std::printf("  (followers received %lld of %lld events)\n", static_cast<long long>(streamed.load()),
                        static_cast<long long>(target));
        return result;
    }

private:
    test::InProcessBroker m_broker;
    std::shared_ptr<grpc::Channel> m_channel;
    int m_sessions = 0;
};

void print(const char *name, const PhaseResult &r, double raw)
{
    std::printf("%-9s appended %9.0f ev/s  streamed %9.0f ev/s (%.3f of raw)  ack p50 %6.2f ms  p99 %6.2f ms  "
                "%.2f cores  %.0f events/message\n",
                name, r.appendedPerSecond, r.streamedPerSecond, r.streamedPerSecond / raw, r.ackP50Ms, r.ackP99Ms,
                r.cores, r.eventsPerMessage);
}

} // namespace

int main(int argc, char **argv)
{
    const double seconds = argc > 1 ? std::atof(argv[1]) : 5.0;
    spdlog::set_level(spdlog::level::warn);
    const auto dir = std::filesystem::temp_directory_path() / ("paddock-stream-bench-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);

    const double raw = rawInsertsPerSecond(dir, seconds);
    std::printf("raw batched SQLite inserts: %.0f rows/s\n", raw);
    constexpr double kBudgetRate = 50000;
    PhaseResult plain;
    PhaseResult paced;
    PhaseResult watchers;
    PhaseResult stalled;
    {
        Bench bench(dir);
        plain = bench.run(seconds, 0, false, 0);
        print("max", plain, raw);
        paced = bench.run(seconds, 0, false, kBudgetRate);
        print("paced", paced, raw);
        watchers = bench.run(seconds, 4, false, kBudgetRate);
        print("watchers", watchers, raw);
        stalled = bench.run(seconds, 0, true, kBudgetRate);
        print("stalled", stalled, raw);
    }
    std::filesystem::remove_all(dir);

    std::printf("\nbudget: >= 50,000 ev/s streamed: %s (%.0f)\n", plain.streamedPerSecond >= 50000 ? "met" : "MISSED",
                plain.streamedPerSecond);
    std::printf("budget: streamed >= 0.25 of raw inserts: %s (%.3f)\n",
                plain.streamedPerSecond / raw >= 0.25 ? "met" : "MISSED", plain.streamedPerSecond / raw);
    std::printf("budget: append ack p99 <= 25 ms: %s (%.2f ms)\n", plain.ackP99Ms <= 25 ? "met" : "MISSED", plain.ackP99Ms);
    std::printf("budget: at 50,000 ev/s, at most one core: %s (%.2f cores, whole process)\n",
                paced.cores <= 1.0 ? "met" : "MISSED", paced.cores);
    std::printf("budget: 4 watchers add <= 0.3 core at 50,000 ev/s: %s (+%.2f cores, whole process)\n",
                watchers.cores - paced.cores <= 0.3 ? "met" : "MISSED", watchers.cores - paced.cores);
    std::printf("budget: a stalled watcher slows appends by nothing: appends %.0f vs %.0f ev/s (%.3f), ack p99 %.2f vs "
                "%.2f ms\n",
                stalled.appendedPerSecond, paced.appendedPerSecond, stalled.appendedPerSecond / paced.appendedPerSecond,
                stalled.ackP99Ms, paced.ackP99Ms);
    return 0;
}
