// console_model_bench: the console models at the rates the budgets name (ARCHITECTURE.md, "Budgets").
//
//  1. TraceModel: 1,000,000 events appended in batches of 2,500 (50,000 events/s arriving in 50 ms
//     ticks): time per batch p50/p99, total, and RSS growth, against the raw mechanism (the same
//     batches appended to a std::vector<EventRecord> and a QList<EventRecord>) in the same run.
//     Each phase runs in its own forked process so RSS growth is its own.
//  2. The cost of a first paint of the 1M-event trace: every role a table view asks for, for the
//     60 rows at the tail (cold summary cache).
//  3. SessionTableModel: 500 sessions, 200 batches of 500 updates, alone and under the filter
//     proxy and the group-by-status model a window puts over it.
//
// Prints figures; not a ctest.

#include "models/session_filter_proxy.h"
#include "models/session_group_model.h"
#include "models/session_table_model.h"
#include "models/trace_model.h"

#include <QElapsedTimer>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace paddock::console;

namespace {

constexpr int kEvents = 1'000'000;
constexpr int kBatch = 2'500;

long rssKb()
{
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0)
            return std::stol(line.substr(6));
    }
    return -1;
}

// What a broker sends, with realistic payload sizes: a step is a model response, a tool call and
// its result. Kinds are shared strings, as the client's interner makes them.
class EventFactory {
public:
    QList<EventRecord> batch(qint64 firstSeq, int n)
    {
        QList<EventRecord> out;
        out.reserve(n);
        for (int i = 0; i < n; ++i) {
            const qint64 seq = firstSeq + i;
            EventRecord e;
            e.seq = seq;
            e.timeUnixMs = 1'700'000'000'000 + seq;
            switch (seq % 3) {
            case 0:
                e.kind = m_response;
                e.payloadJson = QByteArrayLiteral(R"({"model":"scripted","text":"","tool_calls":[{"id":"c)")
                    + QByteArray::number(seq)
                    + QByteArrayLiteral(R"(","name":"run_command","arguments":{"command":"make -j2 test"}}],"usage":{"input_tokens":1234,"output_tokens":56,"cached_tokens":0},"latency_ms":850,"attempts":1})");
                e.costMicros = 1200;
                break;
            case 1:
                e.kind = m_call;
                e.payloadJson = QByteArrayLiteral(R"({"call_id":"c)") + QByteArray::number(seq)
                    + QByteArrayLiteral(R"(","name":"run_command","arguments":{"command":"make -j2 test"}})");
                break;
            default:
                e.kind = m_result;
                e.payloadJson = QByteArrayLiteral(R"({"call_id":"c)") + QByteArray::number(seq)
                    + QByteArrayLiteral(R"(","name":"run_command","command":"make -j2 test","exit_code":0,"signal":0,"stdout":"cc -O2 -c a.c\ncc -O2 -c b.c\nld -o app a.o b.o\nall 12 tests passed\n","stderr":"","stdout_clipped":false,"stderr_clipped":false,"duration_ms":1200,"timed_out":false,"replayed":false})");
                break;
            }
            out.append(std::move(e));
        }
        return out;
    }

private:
    QString m_response = QStringLiteral("model.response");
    QString m_call = QStringLiteral("tool.call");
    QString m_result = QStringLiteral("tool.result");
};

struct Figures {
    double p50Us = 0;
    double p99Us = 0;
    double maxUs = 0;
    double totalMs = 0;
    long rssDeltaKb = 0;
};

Figures summarise(std::vector<double> &us, double totalMs, long rssDeltaKb)
{
    std::sort(us.begin(), us.end());
    return Figures{us[us.size() / 2], us[us.size() * 99 / 100], us.back(), totalMs, rssDeltaKb};
}

// Appends kEvents in batches with `append`, timing only the append; the batch is dropped after it,
// as the console drops what it took from the client.
template <typename Append>
Figures run(Append append)
{
    EventFactory factory;
    const long before = rssKb();
    std::vector<double> us;
    us.reserve(kEvents / kBatch);
    double total = 0;
    QElapsedTimer timer;
    for (qint64 seq = 1; seq <= kEvents; seq += kBatch) {
        QList<EventRecord> batch = factory.batch(seq, kBatch);
        timer.start();
        append(batch);
        const double elapsed = static_cast<double>(timer.nsecsElapsed()) / 1000.0;
        us.push_back(elapsed);
        total += elapsed / 1000.0;
    }
    return summarise(us, total, rssKb() - before);
}

void print(const char *name, const Figures &f)
{
    std::printf("  %-34s p50 %8.1f us  p99 %8.1f us  max %8.1f us  total %8.1f ms  RSS +%6.1f MB\n", name, f.p50Us,
                f.p99Us, f.maxUs, f.totalMs, static_cast<double>(f.rssDeltaKb) / 1024.0);
}

// Runs fn in a child process so that its RSS growth is its own; the child writes its figures to a
// pipe.
template <typename Fn>
Figures isolated(Fn fn)
{
    int fds[2];
    if (::pipe(fds) != 0)
        return {};
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        const Figures f = fn();
        const ssize_t written = ::write(fds[1], &f, sizeof f);
        ::_exit(written == sizeof f ? 0 : 1);
    }
    ::close(fds[1]);
    Figures f;
    if (::read(fds[0], &f, sizeof f) != sizeof f)
        std::printf("  (child failed)\n");
    ::close(fds[0]);
    ::waitpid(pid, nullptr, 0);
    return f;
}

void traceBench()
{
    std::printf("TraceModel: %d events in batches of %d (50,000 events/s in 50 ms ticks)\n", kEvents, kBatch);
    const Figures vec = isolated([] {
        std::vector<EventRecord> all;
        return run([&](const QList<EventRecord> &batch) { all.insert(all.end(), batch.begin(), batch.end()); });
    });
    print("raw std::vector<EventRecord>", vec);
    const Figures list = isolated([] {
        QList<EventRecord> all;
        return run([&](const QList<EventRecord> &batch) { all.append(batch); });
    });
    print("raw QList<EventRecord>", list);
    const Figures model = isolated([] {
        TraceModel trace;
        return run([&](const QList<EventRecord> &batch) { trace.appendEvents(batch); });
    });
    print("TraceModel::appendEvents", model);
    std::printf("  ratio TraceModel / vector: time %.2fx (p99 %.2fx), memory %.2fx; GUI-thread budget per 50 ms "
                "tick: 50 ms, used p99 %.2f ms\n",
                model.totalMs / vec.totalMs, model.p99Us / vec.p99Us,
                static_cast<double>(model.rssDeltaKb) / static_cast<double>(std::max(1L, vec.rssDeltaKb)),
                model.p99Us / 1000.0);

    // First paint at the tail of a full model: all the roles a QTableView asks for, 60 rows.
    const Figures paint = isolated([] {
        TraceModel trace;
        EventFactory factory;
        for (qint64 seq = 1; seq <= kEvents; seq += kBatch)
            trace.appendEvents(factory.batch(seq, kBatch));
        const long rss = rssKb();
        std::vector<double> us;
        QElapsedTimer timer;
        for (int pass = 0; pass < 20; ++pass) {
            const int top = trace.rowCount() - 60 - pass * 60;   // a different, cold screen each pass
            timer.start();
            for (int row = top; row < top + 60; ++row) {
                for (int column = 0; column < TraceModel::ColumnCount; ++column) {
                    const QModelIndex index = trace.index(row, column);
                    for (int role : {int(Qt::DisplayRole), int(Qt::TextAlignmentRole), int(Qt::FontRole),
                                     int(Qt::ForegroundRole), int(Qt::BackgroundRole), int(Qt::DecorationRole),
                                     int(TraceModel::IsErrorRole)})
                        (void)index.data(role);
                }
            }
            us.push_back(static_cast<double>(timer.nsecsElapsed()) / 1000.0);
        }
        Figures f = summarise(us, 0, 0);
        f.rssDeltaKb = rss;
        return f;
    });
    std::printf("  first paint of 60 tail rows x %d columns (cold cache): p50 %.2f ms, max %.2f ms; process RSS "
                "with 1M events: %.1f MB (budget: 500 MB for the console)\n",
                TraceModel::ColumnCount, paint.p50Us / 1000.0, paint.maxUs / 1000.0,
                static_cast<double>(paint.rssDeltaKb) / 1024.0);
}

SessionInfo session(int i, int version)
{
    SessionInfo s;
    s.id = QStringLiteral("session-%1").arg(i, 4, 10, QLatin1Char('0'));
    s.agent = QStringLiteral("agent-%1").arg(i % 7);
    s.goal = QStringLiteral("goal number %1: fix the build and run the tests").arg(i);
    s.model = QStringLiteral("scripted");
    s.tier = QStringLiteral("lite");
    s.pool = QStringLiteral("local");
    s.status = static_cast<SessionStatus>(1 + (i + version) % 7);
    s.steps = version;
    s.costMicros = static_cast<qint64>(version) * 1000 + i;
    s.createdUnixMs = 1'700'000'000'000;
    s.updatedUnixMs = s.createdUnixMs + version * 50;
    s.lastSeq = version;
    s.lastEventKind = QStringLiteral("tool.result");
    return s;
}

void sessionBench(bool withProxies)
{
    SessionTableModel table;
    SessionFilterProxy proxy;
    SessionGroupModel groups;
    if (withProxies) {
        proxy.setSourceModel(&table);
        proxy.sort(SessionTableModel::Cost, Qt::DescendingOrder);
        groups.setSourceModel(&proxy);
    }
    constexpr int kSessions = 500;
    QList<SessionInfo> initial;
    for (int i = 0; i < kSessions; ++i)
        initial << session(i, 1);
    table.applyChanges(initial);
    std::vector<double> us;
    double total = 0;
    QElapsedTimer timer;
    for (int version = 2; version < 202; ++version) {
        QList<SessionInfo> batch;
        for (int i = 0; i < kSessions; ++i)
            batch << session(i, version);
        timer.start();
        table.applyChanges(batch);
        const double elapsed = static_cast<double>(timer.nsecsElapsed()) / 1000.0;
        us.push_back(elapsed);
        total += elapsed / 1000.0;
    }
    const Figures f = summarise(us, total, 0);
    std::printf("  %-44s p50 %8.1f us  p99 %8.1f us  max %8.1f us\n",
                withProxies ? "table + filter proxy (sorted) + group model" : "SessionTableModel alone", f.p50Us,
                f.p99Us, f.maxUs);
}

} // namespace

int main()
{
    traceBench();
    std::printf("SessionTableModel: 500 sessions, 200 batches of 500 updates (every session changes, statuses "
                "move between groups)\n");
    sessionBench(false);
    sessionBench(true);
    return 0;
}
