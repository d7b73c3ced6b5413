// SubmitSession at fleet rate: one client keeps 16 submits in flight against a real paddockd on a
// unix socket, against the raw mechanism on the same machine: the same rows (session.created,
// env.decision and the audit record of each submit) appended through the store's own path
// (EventStore::append, 16 in flight, no gRPC). Prints figures; not a test.
//
//   submit_bench [--sessions 5000] [--inflight 16] [--rounds 2] [--playbook hello-c] [--workers 1]
//                [--log-level warn]
//
// The broker gets a pool address that nothing listens on, so every session stays queued (waiting
// for a pool) and the engine's work stays small: one step worker, whose claim fails at once and
// backs off. Raw and gRPC runs alternate for --rounds rounds and the best of each is compared, so a
// burst of load from something else on the machine does not decide the ratio. The budget
// (ARCHITECTURE.md): at least 1,000 submits/s with 16 in flight from one client.

#include "broker/store/auth_tables.h"
#include "broker/store/sqlite_event_store.h"
#include "rpc/broker_stubs.h"
#include "tests/integration/harness.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

using namespace paddock;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    int sessions = 5000;
    int inflight = 16;
    int rounds = 2;
    int workers = 1;
    std::string playbook = "hello-c";
    std::string logLevel = "warn";   // the broker's; info logs the writer's figures at close
};

struct Figures {
    double perSecond = 0;
    double p50Ms = 0, p99Ms = 0, maxMs = 0;
    double brokerCores = 0;   // the broker process's CPU over the run (gRPC runs only)
    int failed = 0;
};

double percentile(std::vector<double> values, double p)
{
    if (values.empty())
        return 0;
    const size_t index = std::min(values.size() - 1, static_cast<size_t>(p * static_cast<double>(values.size())));
    std::nth_element(values.begin(), values.begin() + static_cast<long>(index), values.end());
    return values[index];
}

Figures summarize(const std::vector<double> &latenciesMs, double wallS, int done)
{
    Figures figures;
    figures.perSecond = done / wallS;
    figures.p50Ms = percentile(latenciesMs, 0.50);
    figures.p99Ms = percentile(latenciesMs, 0.99);
    figures.maxMs = latenciesMs.empty() ? 0 : *std::max_element(latenciesMs.begin(), latenciesMs.end());
    return figures;
}

// utime + stime of a process, in seconds (/proc/PID/stat fields 14 and 15).
double processCpuSeconds(pid_t pid)
{
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos)
        return 0;
    std::vector<std::string> fields;
    std::string field;
    for (char c : text.substr(close + 2)) {
        if (c == ' ') {
            fields.push_back(field);
            field.clear();
        } else {
            field += c;
        }
    }
    // After ")": field 3 (state) is fields[0]; utime (14) and stime (15) are fields[11] and [12].
    if (fields.size() < 13)
        return 0;
    return static_cast<double>(std::stoll(fields[11]) + std::stoll(fields[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// One client, `inflight` SubmitSession calls outstanding at any time (callback API): a call that
// completes starts the next one.
class SubmitRun {
public:
    SubmitRun(rpc::BrokerStubs &stubs, const Options &options, std::string tag)
        : m_stubs(stubs), m_options(options), m_tag(std::move(tag))
    {
    }

    Figures run(pid_t brokerPid)
    {
        m_latenciesMs.reserve(static_cast<size_t>(m_options.sessions));
        const double cpuStart = processCpuSeconds(brokerPid);
        const auto start = Clock::now();
        {
            std::lock_guard lock(m_mutex);
            for (int i = 0; i < m_options.inflight && m_started < m_options.sessions; ++i)
                startOne();
        }
        std::unique_lock lock(m_mutex);
        m_done.wait(lock, [&] { return m_finished == m_options.sessions; });
        const double wall = std::chrono::duration<double>(Clock::now() - start).count();
        Figures figures = summarize(m_latenciesMs, wall, m_options.sessions - m_failed);
        figures.brokerCores = (processCpuSeconds(brokerPid) - cpuStart) / wall;
        figures.failed = m_failed;
        return figures;
    }

private:
    struct Call {
        grpc::ClientContext context;
        v1::SubmitSessionRequest request;
        v1::Session response;
        Clock::time_point sent;
    };

    // Under m_mutex.
    void startOne()
    {
        auto call = std::make_shared<Call>();
        call->context.set_deadline(std::chrono::system_clock::now() + 30s);
        call->request.set_playbook(m_options.playbook);
        call->request.set_request_id(m_tag + "-" + std::to_string(m_started));
        call->request.add_tags("submit-bench");
        call->sent = Clock::now();
        ++m_started;
        m_stubs.sessions->async()->SubmitSession(&call->context, &call->request, &call->response,
                                                 [this, call](grpc::Status status) { onDone(*call, status); });
    }

    void onDone(const Call &call, const grpc::Status &status)
    {
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - call.sent).count();
        std::lock_guard lock(m_mutex);
        if (status.ok()) {
            m_latenciesMs.push_back(ms);
        } else if (m_failed++ == 0) {
            std::fprintf(stderr, "submit failed: %s\n", status.error_message().c_str());
        }
        ++m_finished;
        if (m_started < m_options.sessions)
            startOne();
        if (m_finished == m_options.sessions)
            m_done.notify_one();
    }

    rpc::BrokerStubs &m_stubs;
    const Options &m_options;
    const std::string m_tag;
    std::mutex m_mutex;
    std::condition_variable m_done;
    int m_started = 0;
    int m_finished = 0;
    int m_failed = 0;
    std::vector<double> m_latenciesMs;
};

// What one submit writes: its events as the broker stored them, and its audit record.
struct SubmitRows {
    std::vector<core::NewEvent> events;
    store::AuditEntry audit;
};

// The rows of a session the broker just created, read back over StreamEvents.
SubmitRows rowsOf(rpc::BrokerStubs &stubs, const std::string &sessionId, const std::string &playbook)
{
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 10s);
    v1::StreamEventsRequest request;
    request.set_session_id(sessionId);
    auto reader = stubs.sessions->StreamEvents(&context, request);
    v1::EventBatch batch;
    SubmitRows rows;
    while (reader->Read(&batch)) {
        for (const auto &event : batch.events()) {
            if (event.seq() <= 2)   // session.created and env.decision; later ones are the engine's
                rows.events.push_back({event.kind(), event.payload_json(), event.cost_micros()});
        }
    }
    reader->Finish();
    rows.audit = {0, 0, "bench-user", "admin", "SubmitSession", sessionId, "OK", "playbook " + playbook};
    return rows;
}

// The raw mechanism: the same rows through the store's own group-committed append path, the same
// number in flight, no gRPC, no policy, no engine.
Figures runRaw(const Options &options, const std::filesystem::path &path, const SubmitRows &rows, int round)
{
    auto opened = store::openSqliteEventStore(path);
    if (!opened) {
        std::fprintf(stderr, "raw: cannot open the store: %s\n", opened.error().message.c_str());
        std::exit(1);
    }
    auto &eventStore = **opened;
    struct InFlight {
        std::future<Result<store::AppendResult>> future;
        Clock::time_point sent;
    };
    std::deque<InFlight> window;
    std::vector<double> latencies;
    latencies.reserve(static_cast<size_t>(options.sessions));
    auto collect = [&] {
        auto result = window.front().future.get();
        latencies.push_back(std::chrono::duration<double, std::milli>(Clock::now() - window.front().sent).count());
        window.pop_front();
        if (!result) {
            std::fprintf(stderr, "raw append failed: %s\n", result.error().message.c_str());
            std::exit(1);
        }
    };
    const auto start = Clock::now();
    for (int i = 0; i < options.sessions; ++i) {
        store::AppendRequest request;
        request.sessionId = "s-raw" + std::to_string(round) + "-" + std::to_string(i);
        request.expectedLastSeq = 0;
        request.events = rows.events;
        store::AuditEntry audit = rows.audit;
        audit.target = request.sessionId;
        request.writes.push_back(store::auditInsert(audit));
        window.push_back({eventStore.append(std::move(request)), Clock::now()});
        if (static_cast<int>(window.size()) >= options.inflight)
            collect();
    }
    while (!window.empty())
        collect();
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    eventStore.close();
    return summarize(latencies, wall, options.sessions);
}

void printFigures(const char *name, const Figures &f)
{
    std::printf("%-24s: %8.0f sessions/s, latency p50 %.2f ms, p99 %.2f ms, max %.2f ms", name, f.perSecond, f.p50Ms,
                f.p99Ms, f.maxMs);
    if (f.brokerCores > 0)
        std::printf(", broker %.2f cores (%.0f us a submit)", f.brokerCores, f.brokerCores / f.perSecond * 1e6);
    if (f.failed > 0)
        std::printf(", %d FAILED", f.failed);
    std::printf("\n");
}

} // namespace

int main(int argc, char **argv)
{
    Options options;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        const char *value = argv[i + 1];
        if (flag == "--sessions")
            options.sessions = std::max(1, std::stoi(value));
        else if (flag == "--inflight")
            options.inflight = std::max(1, std::stoi(value));
        else if (flag == "--rounds")
            options.rounds = std::max(1, std::stoi(value));
        else if (flag == "--workers")
            options.workers = std::max(1, std::stoi(value));
        else if (flag == "--playbook")
            options.playbook = value;
        else if (flag == "--log-level")
            options.logLevel = value;
        else {
            std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
            return 2;
        }
    }
    spdlog::set_level(spdlog::level::warn);
    test::TempDir dir("paddock-submit-bench");
    // Nothing listens at the pool's address: sessions wait for a pool, the engine stays out of the way.
    const std::string pool = "127.0.0.1:" + std::to_string(test::freeLoopbackPort());
    const std::string socket = (dir / "run" / "broker.sock").string();
    auto broker = test::Daemon::start({test::binaryPath("paddockd").string(), "--data-dir", (dir / "data").string(),
                                       "--socket", socket, "--pool", "local=" + pool, "--allow-local-execution",
                                       "--playbook-dir", test::playbookDir().string(), "--workers",
                                       std::to_string(options.workers), "--log-level", options.logLevel},
                                      dir / "broker.log",
                                      {{"XDG_CONFIG_HOME", (dir / "xdg/config").string()},
                                       {"XDG_DATA_HOME", (dir / "xdg/data").string()},
                                       {"XDG_RUNTIME_DIR", (dir / "xdg/run").string()}});
    if (!broker || !test::waitForHealthy("unix:" + socket, 20s, &*broker)) {
        std::fprintf(stderr, "paddockd did not start; log in %s\n", (dir / "broker.log").c_str());
        return 1;
    }
    rpc::BrokerStubs stubs(grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));

    // One submit first: the connection is up, and its rows are what the raw run appends.
    v1::SubmitSessionRequest first;
    first.set_playbook(options.playbook);
    first.add_tags("submit-bench");
    v1::Session created;
    {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + 10s);
        if (auto status = stubs.sessions->SubmitSession(&context, first, &created); !status.ok()) {
            std::fprintf(stderr, "the first submit failed: %s\n", status.error_message().c_str());
            return 1;
        }
    }
    const SubmitRows rows = rowsOf(stubs, created.id(), options.playbook);
    size_t bytes = 0;
    for (const auto &event : rows.events)
        bytes += event.payload.size();
    std::printf("submit_bench: %d sessions per run, %d in flight from one client, playbook %s, %d step worker(s), "
                "%zu events of %zu bytes + 1 audit row per session\n",
                options.sessions, options.inflight, options.playbook.c_str(), options.workers, rows.events.size(),
                bytes);

    Figures raw, grpcBest;
    for (int round = 0; round < options.rounds; ++round) {
        const auto rawDir = dir / ("raw" + std::to_string(round));
        std::filesystem::create_directories(rawDir);
        const Figures rawRound = runRaw(options, rawDir / "store.db", rows, round);
        std::filesystem::remove_all(rawDir);
        SubmitRun submits(stubs, options, "bench" + std::to_string(round));
        const Figures grpcRound = submits.run(broker->pid());
        std::printf("round %d:\n", round + 1);
        printFigures("  raw store append", rawRound);
        printFigures("  gRPC SubmitSession", grpcRound);
        if (rawRound.perSecond > raw.perSecond)
            raw = rawRound;
        if (grpcRound.perSecond > grpcBest.perSecond)
            grpcBest = grpcRound;
    }
    const int exitStatus = broker->terminate();

    std::printf("best of %d rounds:\n", options.rounds);
    printFigures("raw store append", raw);
    printFigures("gRPC SubmitSession", grpcBest);
    const double ratio = grpcBest.perSecond / raw.perSecond;
    std::printf("gRPC submit / raw store append: %.2f\n", ratio);
    std::printf("submits/s: %.0f (budget >= 1000) %s\n", grpcBest.perSecond,
                grpcBest.perSecond >= 1000 ? "ok" : "MISSED");
    if (exitStatus != 0)
        std::printf("WARNING: paddockd exited with %d; log in %s\n", exitStatus, (dir / "broker.log").c_str());
    return 0;
}
