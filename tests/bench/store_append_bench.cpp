// Event append + stream throughput of the SQLite store, against raw batched SQLite inserts of the
// same rows on the same machine. Prints figures; not a test.
//
//   store_append_bench [--seconds 5] [--rounds 2] [--producers 4] [--inflight 8] [--sessions 500]
//                      [--batch 20] [--raw-batch 1000] [--dir /tmp] [--postgres CONNINFO]
//
// --postgres runs the store on PostgreSQL (postgres_event_store.h) at CONNINFO instead; the raw
// figure stays SQLite's for now (issue 17's benchmark adds raw PostgreSQL inserts).
//
// Raw and store runs alternate for --rounds rounds and the best of each is compared, so a burst of
// load from something else on the machine does not decide the ratio. The ARCHITECTURE.md budget
// is for 60 s: --seconds 60.
//
// Producers append batches of ~150-byte JSON events to many sessions (each keeps --inflight appends
// outstanding, like that many step workers); a commit listener hands every committed event to a
// consumer thread (a stand-in for the live stream to consoles).

#include "broker/store/postgres_event_store.h"
#include "broker/store/sqlite_event_store.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace paddock;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    double seconds = 5;
    int rounds = 2;
    int producers = 4;
    int inflight = 8;
    int sessions = 500;
    int batch = 20;
    int rawBatch = 1000;
    std::filesystem::path dir = std::filesystem::temp_directory_path();
    std::string postgres;   // a libpq connection string: the store on PostgreSQL
};

double cpuSeconds()
{
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

const char *const kKinds[] = {"model.response", "tool.call", "tool.result", "cost"};

std::string payloadFor(uint64_t n)
{
    std::string payload = R"({"tool":"run_command","args":{"cmd":"make -j2 test"},"exit_code":0,"n":)"
        + std::to_string(n) + R"(,"note":")";
    while (payload.size() < 146)
        payload.push_back('x');
    payload += "\"}";
    return payload;   // about 150 bytes
}

double percentile(std::vector<double> &values, double p)
{
    if (values.empty())
        return 0;
    const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())));
    std::nth_element(values.begin(), values.begin() + static_cast<long>(index), values.end());
    return values[index];
}

// The stand-in for the live stream: the listener only swaps a vector in under a short lock.
class StreamConsumer {
public:
    void push(const store::CommitNotice &notice)
    {
        {
            std::lock_guard lock(m_mutex);
            m_pending.insert(m_pending.end(), notice.events.begin(), notice.events.end());
        }
        m_cv.notify_one();
    }
    void run()
    {
        std::vector<core::Event> batch;
        for (;;) {
            {
                std::unique_lock lock(m_mutex);
                m_cv.wait(lock, [&] { return m_stop || !m_pending.empty(); });
                if (m_pending.empty() && m_stop)
                    return;
                batch.swap(m_pending);
            }
            for (const auto &event : batch)
                m_bytes += event.payload.size();
            m_events += batch.size();
            batch.clear();
        }
    }
    void stop()
    {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_cv.notify_one();
    }
    uint64_t events() const { return m_events; }

private:
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::vector<core::Event> m_pending;
    bool m_stop = false;
    uint64_t m_events = 0;
    uint64_t m_bytes = 0;
};

struct StoreFigures {
    double eventsPerSecond = 0;
    double p50Ms = 0, p99Ms = 0, maxMs = 0;
    double coresUsed = 0;
    uint64_t streamed = 0, appended = 0;
};

StoreFigures runStore(const Options &options, const std::filesystem::path &path, int round)
{
    auto opened = options.postgres.empty() ? store::openSqliteEventStore(path)
                                           : store::openPostgresEventStore(options.postgres);
    // Every round's sessions are new: a PostgreSQL database outlives the round.
    const std::string prefix = "bench-" + std::to_string(round) + "-";
    if (!opened) {
        std::fprintf(stderr, "open failed: %s\n", opened.error().message.c_str());
        std::exit(1);
    }
    auto &eventStore = **opened;
    for (int s = 0; s < options.sessions; ++s) {
        store::AppendRequest create;
        create.sessionId = prefix + std::to_string(s);
        create.expectedLastSeq = 0;
        create.events.push_back({core::kind::SessionCreated, R"({"agent":"bench","goal":"throughput"})", 0});
        if (!eventStore.appendSync(std::move(create))) {
            std::fprintf(stderr, "create failed\n");
            std::exit(1);
        }
    }

    StreamConsumer consumer;
    std::thread consumerThread([&] { consumer.run(); });
    eventStore.addCommitListener([&](const store::CommitNotice &notice) { consumer.push(notice); });

    std::atomic<bool> stop = false;
    std::atomic<uint64_t> appended = 0;
    std::vector<std::vector<double>> latencies(static_cast<size_t>(options.producers));
    std::vector<std::thread> producers;
    const double cpuStart = cpuSeconds();
    const auto start = Clock::now();
    for (int p = 0; p < options.producers; ++p) {
        producers.emplace_back([&, p] {
            struct InFlight {
                std::future<Result<store::AppendResult>> future;
                Clock::time_point sent;
            };
            std::deque<InFlight> window;
            auto &mine = latencies[static_cast<size_t>(p)];
            uint64_t n = static_cast<uint64_t>(p) << 40;
            int session = p;
            auto collect = [&] {
                auto &front = window.front();
                auto result = front.future.get();
                mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - front.sent).count());
                if (!result) {
                    std::fprintf(stderr, "append failed: %s\n", result.error().message.c_str());
                    std::exit(1);
                }
                appended += result->events.size();
                window.pop_front();
            };
            while (!stop.load(std::memory_order_relaxed)) {
                store::AppendRequest request;
                request.sessionId = prefix + std::to_string(session);
                session = (session + options.producers) % options.sessions;
                request.events.reserve(static_cast<size_t>(options.batch));
                for (int i = 0; i < options.batch; ++i, ++n)
                    request.events.push_back({kKinds[n % 4], payloadFor(n), static_cast<int64_t>(n % 3)});
                window.push_back({{}, Clock::now()});
                window.back().future = eventStore.append(std::move(request));
                if (static_cast<int>(window.size()) >= options.inflight)
                    collect();
            }
            while (!window.empty())
                collect();
        });
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(options.seconds));
    stop = true;
    for (auto &thread : producers)
        thread.join();
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    const double cpu = cpuSeconds() - cpuStart;
    eventStore.close();
    consumer.stop();
    consumerThread.join();

    StoreFigures figures;
    std::vector<double> all;
    for (auto &list : latencies)
        all.insert(all.end(), list.begin(), list.end());
    figures.appended = appended;
    figures.streamed = consumer.events();
    figures.eventsPerSecond = static_cast<double>(appended) / wall;
    figures.coresUsed = cpu / wall;
    figures.p50Ms = percentile(all, 0.50);
    figures.p99Ms = percentile(all, 0.99);
    figures.maxMs = all.empty() ? 0 : *std::max_element(all.begin(), all.end());
    return figures;
}

void check(int rc, sqlite3 *db, const char *what)
{
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        std::fprintf(stderr, "raw %s: %s\n", what, sqlite3_errmsg(db));
        std::exit(1);
    }
}

// The raw mechanism: the same rows into a plain table, same pragmas, one prepared statement, one
// transaction per rawBatch rows, one thread, nothing else.
double runRaw(const Options &options, const std::filesystem::path &path)
{
    sqlite3 *db = nullptr;
    check(sqlite3_open(path.c_str(), &db), db, "open");
    check(sqlite3_exec(db,
                       "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY;"
                       "PRAGMA cache_size=-32768;"
                       "CREATE TABLE raw(session_id TEXT NOT NULL, seq INTEGER NOT NULL, time_unix_ms INTEGER NOT NULL,"
                       " kind TEXT NOT NULL, payload TEXT NOT NULL, cost_micros INTEGER NOT NULL)",
                       nullptr, nullptr, nullptr),
          db, "schema");
    sqlite3_stmt *insert = nullptr;
    check(sqlite3_prepare_v2(db, "INSERT INTO raw VALUES(?1, ?2, ?3, ?4, ?5, ?6)", -1, &insert, nullptr), db, "prepare");
    std::vector<std::string> ids;
    for (int s = 0; s < options.sessions; ++s)
        ids.push_back("bench-" + std::to_string(s));
    std::vector<int64_t> seqs(static_cast<size_t>(options.sessions), 1);

    uint64_t rows = 0;
    uint64_t n = 0;
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.seconds));
    size_t session = 0;
    while (Clock::now() < end) {
        check(sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr), db, "begin");
        for (int i = 0; i < options.rawBatch; ++i, ++n) {
            // Same shape as the store's appends: runs of `batch` events per session.
            if (n % static_cast<uint64_t>(options.batch) == 0)
                session = (session + 1) % ids.size();
            const std::string payload = payloadFor(n);
            const char *kind = kKinds[n % 4];
            sqlite3_bind_text(insert, 1, ids[session].data(), static_cast<int>(ids[session].size()), SQLITE_STATIC);
            sqlite3_bind_int64(insert, 2, seqs[session]++);
            sqlite3_bind_int64(insert, 3, 1'700'000'000'000 + static_cast<int64_t>(n));
            sqlite3_bind_text(insert, 4, kind, -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 5, payload.data(), static_cast<int>(payload.size()), SQLITE_STATIC);
            sqlite3_bind_int64(insert, 6, static_cast<int64_t>(n % 3));
            check(sqlite3_step(insert), db, "insert");
            sqlite3_reset(insert);
        }
        check(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), db, "commit");
        rows += static_cast<uint64_t>(options.rawBatch);
    }
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    sqlite3_finalize(insert);
    sqlite3_close(db);
    return static_cast<double>(rows) / wall;
}

} // namespace

int main(int argc, char **argv)
{
    Options options;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        const char *value = argv[i + 1];
        if (flag == "--seconds")
            options.seconds = std::stod(value);
        else if (flag == "--rounds")
            options.rounds = std::max(1, std::stoi(value));
        else if (flag == "--producers")
            options.producers = std::stoi(value);
        else if (flag == "--inflight")
            options.inflight = std::stoi(value);
        else if (flag == "--sessions")
            options.sessions = std::stoi(value);
        else if (flag == "--batch")
            options.batch = std::stoi(value);
        else if (flag == "--raw-batch")
            options.rawBatch = std::stoi(value);
        else if (flag == "--dir")
            options.dir = value;
        else if (flag == "--postgres")
            options.postgres = value;
        else {
            std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
            return 2;
        }
    }
    spdlog::set_level(spdlog::level::info);
    const auto dir = options.dir / ("paddock-store-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);

    std::printf("store_append_bench: %.1f s, %d producers x %d in flight, %d sessions, %d events per append, "
                "payload %zu bytes\n",
                options.seconds, options.producers, options.inflight, options.sessions, options.batch,
                payloadFor(0).size());
    double raw = 0;
    StoreFigures store;
    for (int round = 0; round < options.rounds; ++round) {
        const auto roundDir = dir / std::to_string(round);
        std::filesystem::create_directories(roundDir);
        const double rawRound = runRaw(options, roundDir / "raw.db");
        const StoreFigures storeRound = runStore(options, roundDir / "store.db", round);
        std::printf("round %d: raw %.0f rows/s, store %.0f events/s, ack p99 %.2f ms, %.2f cores\n", round + 1, rawRound,
                    storeRound.eventsPerSecond, storeRound.p99Ms, storeRound.coresUsed);
        raw = std::max(raw, rawRound);
        if (storeRound.eventsPerSecond > store.eventsPerSecond)
            store = storeRound;
        std::filesystem::remove_all(roundDir);
    }
    std::filesystem::remove_all(dir);

    const double ratio = store.eventsPerSecond / raw;
    std::printf("best of %d rounds:\n", options.rounds);
    std::printf("raw batched inserts   : %10.0f rows/s (%d rows per transaction)\n", raw, options.rawBatch);
    std::printf("store append + stream : %10.0f events/s (%llu appended, %llu streamed)\n", store.eventsPerSecond,
                static_cast<unsigned long long>(store.appended), static_cast<unsigned long long>(store.streamed));
    std::printf("ratio store / raw     : %10.2f   (budget >= 0.25)  %s\n", ratio, ratio >= 0.25 ? "ok" : "MISSED");
    std::printf("events/s              : %10.0f   (budget >= 50000) %s\n", store.eventsPerSecond,
                store.eventsPerSecond >= 50000 ? "ok" : "MISSED");
    std::printf("append ack p50 / p99  : %7.2f / %.2f ms (max %.2f)  (budget p99 <= 25 ms) %s\n", store.p50Ms,
                store.p99Ms, store.maxMs, store.p99Ms <= 25 ? "ok" : "MISSED");
    std::printf("CPU used              : %10.2f cores (whole process: producers, writer, consumer)\n", store.coresUsed);
    if (store.streamed != store.appended)
        std::printf("WARNING: streamed %llu of %llu events\n", static_cast<unsigned long long>(store.streamed),
                    static_cast<unsigned long long>(store.appended));
    return 0;
}
