// Event append + stream throughput and ack latency of the store, each against raw batched inserts
// of the same rows into the same engine on the same machine, in one run (issue 17's benchmark):
// - the SQLite store against raw batched SQLite inserts;
// - the PostgreSQL store, one broker (one EventStore), against raw batched PostgreSQL inserts;
// - the PostgreSQL store, several brokers: --brokers EventStores opened on the same database, as
//   that many paddockd processes do, hearing each other's commits through LISTEN/NOTIFY.
// Prints figures; not a test.
//
//   store_append_bench [--seconds 5] [--rounds 2] [--producers 4] [--inflight 8] [--sessions 500]
//                      [--batch 20] [--raw-batch 1000] [--brokers 3] [--cross-every 10] [--dir /tmp]
//                      [--postgres CONNINFO]
//
// PostgreSQL: without --postgres the bench starts a throwaway PostgreSQL 15 of its own
// (tests/support/started_postgres.h: initdb in a temporary directory, a unix socket only, as nobody
// when run as root), set back to Debian's defaults where the test fixture departs from them (fsync
// and full_page_writes on, shared_buffers 128MB): commits are durable, as in production. Each
// measurement gets a fresh database, dropped after it. --postgres CONNINFO (a libpq connection
// string; use a scratch database) measures that server instead: the raw table is made and dropped
// there, and the stores' sessions are left in it.
//
// The raw mechanisms (one thread, one connection, batched transactions; why a multi-row INSERT for
// PostgreSQL) are in store_append_bench_support.h. Raw and store runs alternate for --rounds rounds
// and the best of each is compared, so a burst of load from something else on the machine does not
// decide a ratio. The ARCHITECTURE.md budget is for 60 s: --seconds 60.
//
// Producers append batches of ~150-byte JSON events to many sessions (each keeps --inflight appends
// outstanding, like that many step workers); each store's commit listener hands what it hears to a
// consumer thread of its own (a stand-in for the live stream to that broker's consoles).
//
// Several brokers: session s is created by store s % brokers, producer p appends through store
// p % brokers (so 4 producers on 3 brokers are 2/1/1), to sessions its store created, except every
// --cross-every'th append, which goes to a session another store created while that store's own
// producers append to it too: the appending store's tail of it is stale, and the two stores' inserts
// race for the same seqs. Throughput counts every event acknowledged by any store. Each listener
// counts its store's events and the state-only notices it heard of the others' commits
// (CommitNotice without events); at the end every store must have heard every session's last seq.
//
// Known limits: the server's CPU is reported only for the bench's own server (it reads /proc); with
// --postgres only the bench process's is.

#include "broker/store/postgres_event_store.h"
#include "broker/store/sqlite_event_store.h"
#include "tests/bench/store_append_bench_support.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>

using namespace paddock;
using bench::BenchPostgres;
using bench::Clock;

namespace {

struct Options {
    double seconds = 5;
    int rounds = 2;
    int producers = 4;
    int inflight = 8;
    int sessions = 500;
    int batch = 20;
    int rawBatch = 1000;
    int brokers = 3;
    int crossEvery = 10;    // every n-th append of a producer goes to another store's session; 0: none
    std::filesystem::path dir = std::filesystem::temp_directory_path();
    std::string postgres;   // a libpq connection string; empty: a server of the bench's own
};

double processCpuSeconds()
{
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

double percentile(std::vector<double> &values, double p)
{
    if (values.empty())
        return 0;
    const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())));
    std::nth_element(values.begin(), values.begin() + static_cast<long>(index), values.end());
    return values[index];
}

// The stand-in for one broker's live stream: the listener only moves what a notice says in under a
// short lock; the consumer thread counts the events and keeps the last seq heard of each session.
class StreamConsumer {
public:
    void push(const store::CommitNotice &notice)
    {
        {
            std::lock_guard lock(m_mutex);
            m_pending.insert(m_pending.end(), notice.events.begin(), notice.events.end());
            if (notice.events.empty())
                m_remoteStates += notice.sessions.size();
            for (const auto &session : notice.sessions)
                m_pendingTails.emplace_back(session.id, session.lastSeq);
        }
        m_cv.notify_one();
    }
    void run()
    {
        std::vector<core::Event> batch;
        std::vector<std::pair<std::string, int64_t>> tails;
        for (;;) {
            {
                std::unique_lock lock(m_mutex);
                m_cv.wait(lock, [&] { return m_stop || !m_pending.empty() || !m_pendingTails.empty(); });
                if (m_pending.empty() && m_pendingTails.empty() && m_stop)
                    return;
                batch.swap(m_pending);
                tails.swap(m_pendingTails);
            }
            for (const auto &event : batch) {
                if (event.kind != core::kind::SessionCreated)
                    ++m_events;   // the runs' figures count appends, not the sessions made before them
            }
            std::lock_guard lock(m_heardMutex);
            for (auto &[id, seq] : tails) {
                auto &heard = m_heard[id];
                heard = std::max(heard, seq);
            }
            batch.clear();
            tails.clear();
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
    uint64_t remoteStates() const { return m_remoteStates; }
    int64_t heardLastSeq(const std::string &sessionId)
    {
        std::lock_guard lock(m_heardMutex);
        auto it = m_heard.find(sessionId);
        return it == m_heard.end() ? 0 : it->second;
    }

private:
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::vector<core::Event> m_pending;
    std::vector<std::pair<std::string, int64_t>> m_pendingTails;
    bool m_stop = false;
    std::atomic<uint64_t> m_events = 0;
    std::atomic<uint64_t> m_remoteStates = 0;
    std::mutex m_heardMutex;
    std::unordered_map<std::string, int64_t> m_heard;
};

struct BrokerFigures {
    int producers = 0;
    uint64_t acknowledged = 0;   // events its appends committed
    uint64_t streamed = 0;       // events its listener heard (its own commits)
    uint64_t remoteStates = 0;   // session states heard of other stores' commits
};

struct StoreFigures {
    double eventsPerSecond = 0;
    double p50Ms = 0, p99Ms = 0, maxMs = 0;
    double coresUsed = 0;          // this process: producers, writers, feeds, consumers
    double serverCores = -1;       // the PostgreSQL server's processes; < 0 when not known
    uint64_t appended = 0, streamed = 0;
    uint64_t appends = 0, crossAppends = 0;   // acknowledged append calls; those to another store's session
    uint64_t failed = 0;
    std::string firstFailure;
    std::vector<BrokerFigures> brokers;
    size_t sessionsHeardEverywhere = 0;   // sessions whose last seq every store heard (several stores)
    double heardAfterMs = 0;              // how long after the last acknowledgement they all had
};

// Runs the producers for options.seconds over stores (one per broker), then closes them.
StoreFigures runStores(const Options &options, std::vector<std::unique_ptr<store::EventStore>> stores,
                       const std::string &prefix, const std::function<double()> &serverCpu)
{
    const size_t brokers = stores.size();
    std::vector<std::vector<std::string>> created(brokers);   // each store's sessions
    std::vector<std::string> all;
    for (int s = 0; s < options.sessions; ++s) {
        all.push_back(prefix + std::to_string(s));
        created[static_cast<size_t>(s) % brokers].push_back(all.back());
    }
    std::vector<StreamConsumer> consumers(brokers);
    std::vector<std::thread> consumerThreads;
    for (size_t k = 0; k < brokers; ++k) {
        consumerThreads.emplace_back([&consumers, k] { consumers[k].run(); });
        stores[k]->addCommitListener([&consumers, k](const store::CommitNotice &notice) { consumers[k].push(notice); });
    }
    std::vector<std::future<Result<store::AppendResult>>> creating;
    for (size_t k = 0; k < brokers; ++k) {
        for (const auto &id : created[k]) {
            store::AppendRequest create;
            create.sessionId = id;
            create.expectedLastSeq = 0;
            create.events.push_back({core::kind::SessionCreated, R"({"agent":"bench","goal":"throughput"})", 0});
            creating.push_back(stores[k]->append(std::move(create)));
        }
    }
    for (auto &future : creating) {
        if (auto result = future.get(); !result) {
            std::fprintf(stderr, "creating a session failed: %s\n", result.error().message.c_str());
            std::exit(1);
        }
    }

    struct ProducerFigures {
        std::vector<double> latenciesMs;
        uint64_t events = 0, appends = 0, crossAppends = 0, failed = 0;
        std::string firstFailure;
    };
    std::vector<ProducerFigures> results(static_cast<size_t>(options.producers));
    std::atomic<bool> stop = false;
    std::vector<std::thread> producers;
    const double cpuStart = processCpuSeconds();
    const double serverStart = serverCpu();
    const auto start = Clock::now();
    for (int p = 0; p < options.producers; ++p) {
        producers.emplace_back([&, p] {
            const size_t k = static_cast<size_t>(p) % brokers;
            auto &eventStore = *stores[k];
            const auto &own = created[k];
            const size_t step = (static_cast<size_t>(options.producers) - k + brokers - 1) / brokers;   // producers on k
            size_t ownCursor = static_cast<size_t>(p) / brokers;
            size_t crossCursor = static_cast<size_t>(p);
            uint64_t count = 0;
            uint64_t n = static_cast<uint64_t>(p) << 40;
            auto &mine = results[static_cast<size_t>(p)];
            struct InFlight {
                std::future<Result<store::AppendResult>> future;
                Clock::time_point sent;
                bool cross = false;
            };
            std::deque<InFlight> window;
            auto collect = [&] {
                auto &front = window.front();
                auto result = front.future.get();
                mine.latenciesMs.push_back(std::chrono::duration<double, std::milli>(Clock::now() - front.sent).count());
                if (result) {
                    mine.events += result->events.size();
                    ++mine.appends;
                    mine.crossAppends += front.cross ? 1 : 0;
                } else if (mine.failed++ == 0) {
                    mine.firstFailure = result.error().message;
                }
                window.pop_front();
            };
            while (!stop.load(std::memory_order_relaxed)) {
                store::AppendRequest request;
                const bool cross = brokers > 1 && options.crossEvery > 0
                    && ++count % static_cast<uint64_t>(options.crossEvery) == 0;
                if (cross) {
                    const auto &theirs = created[(k + 1 + crossCursor % (brokers - 1)) % brokers];
                    request.sessionId = theirs[crossCursor++ % theirs.size()];
                } else {
                    request.sessionId = own[ownCursor % own.size()];
                    ownCursor += step;
                }
                request.events.reserve(static_cast<size_t>(options.batch));
                for (int i = 0; i < options.batch; ++i, ++n)
                    request.events.push_back({bench::kKinds[n % 4], bench::payloadFor(n), static_cast<int64_t>(n % 3)});
                window.push_back({{}, Clock::now(), cross});
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
    const auto lastAck = Clock::now();
    const double wall = std::chrono::duration<double>(lastAck - start).count();
    const double cpu = processCpuSeconds() - cpuStart;
    const double serverEnd = serverCpu();

    StoreFigures figures;
    figures.brokers.resize(brokers);
    std::vector<double> latencies;
    for (int p = 0; p < options.producers; ++p) {
        auto &result = results[static_cast<size_t>(p)];
        auto &broker = figures.brokers[static_cast<size_t>(p) % brokers];
        ++broker.producers;
        broker.acknowledged += result.events;
        figures.appended += result.events;
        figures.appends += result.appends;
        figures.crossAppends += result.crossAppends;
        if (result.failed && figures.failed == 0)
            figures.firstFailure = result.firstFailure;
        figures.failed += result.failed;
        latencies.insert(latencies.end(), result.latenciesMs.begin(), result.latenciesMs.end());
    }
    if (brokers > 1) {
        // Other stores' commits arrive through the feed, after their acknowledgement: wait for them.
        std::vector<int64_t> lastSeqs;
        for (const auto &id : all) {
            auto state = stores[0]->getSession(id);
            lastSeqs.push_back(state ? state->lastSeq : -1);
        }
        const auto deadline = Clock::now() + std::chrono::seconds(10);
        for (;;) {
            figures.sessionsHeardEverywhere = 0;
            for (size_t s = 0; s < all.size(); ++s) {
                bool everywhere = true;
                for (auto &consumer : consumers)
                    everywhere = everywhere && consumer.heardLastSeq(all[s]) >= lastSeqs[s];
                figures.sessionsHeardEverywhere += everywhere ? 1 : 0;
            }
            if (figures.sessionsHeardEverywhere == all.size() || Clock::now() > deadline)
                break;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        figures.heardAfterMs = std::chrono::duration<double, std::milli>(Clock::now() - lastAck).count();
    }
    for (auto &eventStore : stores)
        eventStore->close();
    for (size_t k = 0; k < brokers; ++k) {
        consumers[k].stop();
        consumerThreads[k].join();
        figures.brokers[k].streamed = consumers[k].events();
        figures.brokers[k].remoteStates = consumers[k].remoteStates();
        figures.streamed += consumers[k].events();
    }

    figures.eventsPerSecond = static_cast<double>(figures.appended) / wall;
    figures.coresUsed = cpu / wall;
    if (serverStart >= 0 && serverEnd >= 0)
        figures.serverCores = (serverEnd - serverStart) / wall;
    figures.p50Ms = percentile(latencies, 0.50);
    figures.p99Ms = percentile(latencies, 0.99);
    figures.maxMs = latencies.empty() ? 0 : *std::max_element(latencies.begin(), latencies.end());
    return figures;
}

std::unique_ptr<store::EventStore> opened(Result<std::unique_ptr<store::EventStore>> result)
{
    if (!result) {
        std::fprintf(stderr, "opening the store failed: %s\n", result.error().message.c_str());
        std::exit(1);
    }
    return std::move(*result);
}

const char *mark(bool ok)
{
    return ok ? "ok" : "MISSED";
}

void printRow(const char *name, const StoreFigures &store, double raw)
{
    const double ratio = store.eventsPerSecond / raw;
    char cores[64];
    if (store.serverCores >= 0)
        std::snprintf(cores, sizeof cores, "%.2f + %.2f", store.coresUsed, store.serverCores);
    else
        std::snprintf(cores, sizeof cores, "%.2f", store.coresUsed);
    std::printf("%-24s %9.0f %-6s %9.0f  %5.2f %-6s %6.2f / %6.2f %-6s (max %6.1f)  %s\n", name,
                store.eventsPerSecond, mark(store.eventsPerSecond >= 50000), raw, ratio, mark(ratio >= 0.25),
                store.p50Ms, store.p99Ms, mark(store.p99Ms <= 25), store.maxMs, cores);
}

void printWarnings(const char *name, const StoreFigures &store)
{
    if (store.failed)
        std::printf("WARNING: %s: %llu appends FAILED, the first: %s\n", name,
                    static_cast<unsigned long long>(store.failed), store.firstFailure.c_str());
    if (store.streamed != store.appended)
        std::printf("WARNING: %s: streamed %llu of %llu events\n", name, static_cast<unsigned long long>(store.streamed),
                    static_cast<unsigned long long>(store.appended));
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
            options.producers = std::max(1, std::stoi(value));
        else if (flag == "--inflight")
            options.inflight = std::stoi(value);
        else if (flag == "--sessions")
            options.sessions = std::stoi(value);
        else if (flag == "--batch")
            options.batch = std::stoi(value);
        else if (flag == "--raw-batch")
            options.rawBatch = std::stoi(value);
        else if (flag == "--brokers")
            options.brokers = std::max(2, std::stoi(value));
        else if (flag == "--cross-every")
            options.crossEvery = std::max(0, std::stoi(value));
        else if (flag == "--dir")
            options.dir = value;
        else if (flag == "--postgres")
            options.postgres = value;
        else {
            std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
            return 2;
        }
    }
    if (options.rawBatch < 1 || options.rawBatch > bench::kMaxRawPostgresBatch
        || options.sessions < options.brokers || options.producers < options.brokers) {
        std::fprintf(stderr, "--raw-batch must be 1..%d, and --sessions and --producers at least --brokers\n",
                     bench::kMaxRawPostgresBatch);
        return 2;
    }
    spdlog::set_level(spdlog::level::info);
    // Static: std::exit on a failure still stops the server and removes its directory.
    static BenchPostgres postgres;
    if (auto failed = postgres.start(options.postgres); !failed.empty()) {
        std::fprintf(stderr, "cannot start PostgreSQL: %s\n", failed.c_str());
        return 1;
    }
    const auto dir = options.dir / ("paddock-store-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    // Session ids and the raw table stay apart from other runs on a --postgres database.
    const std::string runId = std::to_string(::getpid()) + "_" + std::to_string(::time(nullptr));
    const auto serverCpu = [&] { return postgres.cpuSeconds(); };

    std::printf("store_append_bench: %.1f s, %d producers x %d in flight, %d sessions, %d events per append, "
                "payload %zu bytes, raw batches of %d rows\n",
                options.seconds, options.producers, options.inflight, options.sessions, options.batch,
                bench::payloadFor(0).size(), options.rawBatch);
    std::printf("PostgreSQL: %s\n", postgres.own() ? "a server of the bench's own (PostgreSQL 15, unix socket, fsync on)"
                                                   : "the one --postgres names");
    double rawSqlite = 0, rawPostgres = 0;
    StoreFigures sqlite, onePostgres, severalPostgres;
    auto keepBest = [](StoreFigures &best, StoreFigures round) {
        if (round.eventsPerSecond > best.eventsPerSecond)
            best = std::move(round);
    };
    for (int round = 0; round < options.rounds; ++round) {
        const auto roundDir = dir / std::to_string(round);
        std::filesystem::create_directories(roundDir);
        const std::string prefix = "bench-" + runId + "-" + std::to_string(round);

        const double rawSqliteRound = bench::rawSqliteRowsPerSecond(roundDir / "raw.db", options.sessions,
                                                                    options.batch, options.rawBatch, options.seconds);
        std::vector<std::unique_ptr<store::EventStore>> stores;
        stores.push_back(opened(store::openSqliteEventStore(roundDir / "store.db")));
        const StoreFigures sqliteRound = runStores(options, std::move(stores), prefix + "-sqlite-", [] { return -1.0; });
        std::filesystem::remove_all(roundDir);

        const double rawPostgresRound = bench::rawPostgresRowsPerSecond(
            postgres.open("bench_raw"), "paddock_bench_raw_" + runId, options.sessions, options.batch,
            options.rawBatch, options.seconds);
        postgres.close();

        stores.clear();
        stores.push_back(opened(store::openPostgresEventStore(postgres.open("bench_one"))));
        const StoreFigures oneRound = runStores(options, std::move(stores), prefix + "-one-", serverCpu);
        postgres.close();

        stores.clear();
        const std::string shared = postgres.open("bench_several");
        for (int k = 0; k < options.brokers; ++k) {
            store::PostgresOptions storeOptions;
            storeOptions.applicationName = "store_append_bench broker " + std::to_string(k + 1);
            stores.push_back(opened(store::openPostgresEventStore(shared, storeOptions)));
        }
        const StoreFigures severalRound = runStores(options, std::move(stores), prefix + "-several-", serverCpu);
        postgres.close();

        std::printf("round %d: SQLite raw %.0f rows/s, store %.0f events/s (p99 %.1f ms); PostgreSQL raw %.0f rows/s, "
                    "1 broker %.0f events/s (p99 %.1f ms), %d brokers %.0f events/s (p99 %.1f ms)\n",
                    round + 1, rawSqliteRound, sqliteRound.eventsPerSecond, sqliteRound.p99Ms, rawPostgresRound,
                    oneRound.eventsPerSecond, oneRound.p99Ms, options.brokers, severalRound.eventsPerSecond,
                    severalRound.p99Ms);
        rawSqlite = std::max(rawSqlite, rawSqliteRound);
        rawPostgres = std::max(rawPostgres, rawPostgresRound);
        keepBest(sqlite, sqliteRound);
        keepBest(onePostgres, oneRound);
        keepBest(severalPostgres, severalRound);
    }
    std::filesystem::remove_all(dir);

    const std::string severalName = "PostgreSQL, " + std::to_string(options.brokers) + " brokers";
    std::printf("\nbest of %d rounds; budgets: events/s >= 50000, store/raw >= 0.25, ack p99 <= 25 ms\n", options.rounds);
    std::printf("%-24s %16s %9s  %12s %30s  %s\n", "", "store events/s", "raw rows/s", "store/raw",
                "ack p50 / p99 ms", "cores (bench + server)");
    printRow("SQLite", sqlite, rawSqlite);
    printRow("PostgreSQL, 1 broker", onePostgres, rawPostgres);
    printRow(severalName.c_str(), severalPostgres, rawPostgres);

    const auto &several = severalPostgres;
    std::printf("\n%s: %llu of %llu appends (%.1f%%) to a session another broker created\n", severalName.c_str(),
                static_cast<unsigned long long>(several.crossAppends), static_cast<unsigned long long>(several.appends),
                several.appends ? 100.0 * static_cast<double>(several.crossAppends) / static_cast<double>(several.appends)
                                : 0.0);
    for (size_t k = 0; k < several.brokers.size(); ++k) {
        const auto &broker = several.brokers[k];
        std::printf("  broker %zu: %d producers, %llu events acknowledged; its listener heard %llu events of its own "
                    "and %llu session states of the others' commits\n",
                    k + 1, broker.producers, static_cast<unsigned long long>(broker.acknowledged),
                    static_cast<unsigned long long>(broker.streamed),
                    static_cast<unsigned long long>(broker.remoteStates));
    }
    std::printf("  every broker heard every session's last seq: %zu of %d sessions, %.0f ms after the last ack %s\n",
                several.sessionsHeardEverywhere, options.sessions, several.heardAfterMs,
                mark(several.sessionsHeardEverywhere == static_cast<size_t>(options.sessions)));
    printWarnings("SQLite", sqlite);
    printWarnings("PostgreSQL, 1 broker", onePostgres);
    printWarnings(severalName.c_str(), several);
    return 0;
}
