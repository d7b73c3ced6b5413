#include "broker/otlp/otlp_exporter.h"

#include "broker/otlp/export_cursor.h"
#include "broker/otlp/otlp_http.h"
#include "broker/otlp/span_mapping.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <deque>
#include <random>

namespace paddock::otlp {

namespace {

constexpr int kReadPage = 1000;
constexpr int kCandidatePage = 256;
constexpr int64_t kMinLeaseMs = 30000;
constexpr size_t kMaxStatusMessage = 1024;

int64_t wallMs()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

int64_t steadyMs()
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::string hostName()
{
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    return host;
}

std::string defaultOwner()
{
    std::random_device random;
    char suffix[9];
    std::snprintf(suffix, sizeof suffix, "%08x", static_cast<unsigned>(random()));
    return hostName() + ":" + std::to_string(::getpid()) + ":" + suffix;
}

// What to do about a failure, for the one line an outage gets.
std::string hint(const PostResult &result, bool traces)
{
    if (!result.answered)
        return "check that the receiver runs and [otlp] endpoint names it";
    switch (result.status) {
    case 401:
    case 403:
        return "the receiver refuses our credentials: check the header in [otlp] header_files or header_env";
    case 404:
    case 405:
        return traces ? std::string("check [otlp] endpoint: the receiver's base URL, without /v1/traces")
                      : std::string("a receiver that takes traces only (Langfuse, Jaeger) answers so to metrics: set "
                                    "metrics = false in [otlp]");
    case 408:
    case 429:
    case 503:
        return "the receiver is busy: waiting as long as it asks";
    default:
        return "the receiver failed: see its own logs";
    }
}

} // namespace

struct OtlpExporter::Tracked {
    explicit Tracked(const CursorRow &row) : mapper(row.sessionId), stored(row), lastSeq(row.lastSeq) {}

    SessionSpanMapper mapper;
    CursorRow stored;                 // the row as in the store: what the next compare-and-set compares
    int64_t lastSeq = 0;              // the session's last seq, as the last pass read it
    std::deque<ExportSpan> spans;     // ended, past the stored span cursor, not yet acknowledged
    std::deque<ModelCall> calls;      // likewise for metrics
    bool readFailed = false;          // the last read of its events failed: try again next pass

    // Where the cursors may go: up to the first thing not acknowledged, or everything read.
    CursorRow target(bool metrics) const
    {
        CursorRow to = stored;
        const int64_t read = mapper.lastSeq();
        to.spanSeq = std::max(stored.spanSeq, spans.empty() ? read : spans.front().emitSeq - 1);
        if (!metrics)
            to.metricSeq = std::max(stored.metricSeq, to.spanSeq);
        else
            to.metricSeq = std::max(stored.metricSeq, calls.empty() ? read : calls.front().emitSeq - 1);
        return to;
    }
    bool complete() const { return mapper.ended() && spans.empty() && calls.empty() && mapper.lastSeq() >= lastSeq; }
};

struct OtlpExporter::Signal {
    bool traces = true;
    std::string url;
    int failures = 0;
    int64_t nextAttemptSteadyMs = 0;
    bool down = false;
    int64_t downSinceSteadyMs = 0;
    size_t splitLimit = 0;            // after a 413: at most this many per post
    std::unique_ptr<OtlpHttp> http;
};

OtlpExporter::OtlpExporter(store::EventStore &store, ExporterOptions options)
    : m_store(store), m_options(std::move(options))
{
    while (!m_options.endpoint.empty() && m_options.endpoint.back() == '/')
        m_options.endpoint.pop_back();
    if (m_options.owner.empty())
        m_options.owner = defaultOwner();
    if (m_options.leaseMs <= 0)
        m_options.leaseMs = std::max(kMinLeaseMs, 3 * m_options.timeoutMs + m_options.intervalMs);
    m_options.batchSize = std::max(m_options.batchSize, 1);
    m_options.intervalMs = std::max<int64_t>(m_options.intervalMs, 1);
    m_options.initialBackoffMs = std::max<int64_t>(m_options.initialBackoffMs, 1);
    m_options.maxBackoffMs = std::max(m_options.maxBackoffMs, m_options.initialBackoffMs);
    m_options.maxSessions = std::max(m_options.maxSessions, 1);
    if (m_options.serviceVersion.empty())
        m_options.serviceVersion = PADDOCK_VERSION;

    m_producer.resource.push_back(textAttribute("service.name", m_options.serviceName));
    if (!m_options.serviceVersion.empty())
        m_producer.resource.push_back(textAttribute("service.version", m_options.serviceVersion));
    m_producer.resource.push_back(textAttribute("service.instance.id", m_options.owner));
    m_producer.resource.push_back(textAttribute("host.name", hostName()));
    m_producer.scopeVersion = m_options.serviceVersion;

    m_traces = std::make_unique<Signal>();
    m_traces->url = m_options.endpoint + "/v1/traces";
    m_traces->http = std::make_unique<OtlpHttp>(m_options.headers, m_options.timeoutMs);
    m_metrics = std::make_unique<Signal>();
    m_metrics->traces = false;
    m_metrics->url = m_options.endpoint + "/v1/metrics";
    m_metrics->http = std::make_unique<OtlpHttp>(m_options.headers, m_options.timeoutMs);
}

OtlpExporter::~OtlpExporter()
{
    stop();
}

void OtlpExporter::start()
{
    if (m_started)
        return;
    m_started = true;
    m_stop = false;
    spdlog::info("otlp: exporting sessions' traces{} to {} in batches of up to {}, as {}",
                 m_options.metrics ? " and GenAI metrics" : "", m_options.endpoint, m_options.batchSize,
                 m_options.owner);
    m_thread = std::thread([this] { run(); });
}

void OtlpExporter::stop()
{
    if (!m_started)
        return;
    m_started = false;
    {
        std::lock_guard lock(m_wakeMutex);
        m_stop = true;
    }
    m_wake.notify_all();
    if (m_thread.joinable())
        m_thread.join();
    // Another broker on the same database need not wait our leases out. What this one acknowledged
    // is in the cursors already; what it had not is sent again by whoever exports next.
    (void)runWrites(m_store, {releaseAllStatement(m_options.owner)});
    m_tracked.clear();
}

OtlpExporter::Stats OtlpExporter::stats() const
{
    return {m_spansDelivered.load(), m_callsDelivered.load(), m_failedPosts.load(), m_outages.load(), m_dropped.load(),
            m_passes.load()};
}

void OtlpExporter::run()
{
    while (!m_stop) {
        const bool more = pass();
        ++m_passes;
        int64_t waitMs = more ? 0 : m_options.intervalMs;
        // A receiver in backoff is tried again when its wait ends, even within an interval.
        for (const Signal *signal : {m_traces.get(), m_metrics.get()}) {
            if (signal->down && !more)
                waitMs = std::min(waitMs, std::max<int64_t>(signal->nextAttemptSteadyMs - steadyMs(), 0));
        }
        if (waitMs > 0) {
            std::unique_lock lock(m_wakeMutex);
            m_wake.wait_for(lock, std::chrono::milliseconds(waitMs), [this] { return m_stop.load(); });
        }
    }
}

bool OtlpExporter::pass()
{
    const int64_t startMs = wallMs();
    bool more = false;
    claimAndCatchUp(startMs, more);
    if (m_stop)
        return false;
    const bool tracesFlowing = deliver(*m_traces, true, startMs);
    // Metrics wait while traces fail: one outage, one line.
    if (tracesFlowing && m_options.metrics && !m_stop)
        deliver(*m_metrics, false, startMs);
    if (m_stop)
        return false;
    advance({});
    const int64_t now = steadyMs();
    for (const auto &[id, tracked] : m_tracked) {
        if ((!tracked->spans.empty() && now >= m_traces->nextAttemptSteadyMs)
            || (m_options.metrics && !tracked->calls.empty() && now >= m_metrics->nextAttemptSteadyMs && !m_traces->down))
            more = true;
        if (!tracked->readFailed && tracked->mapper.lastSeq() < tracked->lastSeq
            && tracked->spans.size() < 4 * static_cast<size_t>(m_options.batchSize))
            more = true;   // a long log read in parts
    }
    return more;
}

void OtlpExporter::claimAndCatchUp(int64_t nowMs, bool &more)
{
    auto storeProblem = [this](const Error &error) {
        if (!m_storeFailing)
            spdlog::warn("otlp: cannot read or write the export cursor in the store: {}; the export waits and tries "
                         "again every pass",
                         error.message);
        m_storeFailing = true;
    };

    std::vector<std::string> claims;
    const int room = m_options.maxSessions - static_cast<int>(m_tracked.size());
    if (room > 0) {
        const int limit = std::min(room, kCandidatePage);
        auto found = exportCandidates(m_store, m_options.owner, m_afterOrd,
                                      m_options.exclusiveStore ? INT64_MAX : nowMs, limit);
        if (!found) {
            storeProblem(found.error());
            return;
        }
        // Round robin over the sessions, so busy old ones do not starve new ones.
        if (static_cast<int>(found->size()) < limit) {
            m_afterOrd = 0;
        } else {
            m_afterOrd = found->back().ord;
            more = true;
        }
        for (const auto &candidate : *found) {
            if (!m_tracked.count(candidate.sessionId))
                claims.push_back(candidate.sessionId);
        }
    }
    if (claims.empty() && m_tracked.empty())
        return;

    // Leases are renewed a third of the way through (and whenever a session is claimed): a pass
    // with nothing new writes nothing.
    if (!claims.empty() || nowMs - m_renewedMs >= m_options.leaseMs / 3) {
        const int64_t leaseUntil = nowMs + m_options.leaseMs;
        std::vector<store::SqlStatement> writes;
        writes.push_back(renewStatement(m_options.owner, leaseUntil));
        for (auto &claim : claimStatements(m_options.owner, claims, nowMs, leaseUntil, m_options.exclusiveStore))
            writes.push_back(std::move(claim));
        if (auto written = runWrites(m_store, std::move(writes)); !written) {
            storeProblem(written.error());
            return;
        }
        m_renewedMs = nowMs;
    }
    auto owned = ownedRows(m_store, m_options.owner);
    if (!owned) {
        storeProblem(owned.error());
        return;
    }
    if (m_storeFailing)
        spdlog::info("otlp: the store answers again; the export goes on");
    m_storeFailing = false;

    // Sessions another exporter took (our lease ran out) are theirs now, spans in memory included.
    std::erase_if(m_tracked, [&](const auto &entry) {
        if (owned->count(entry.first))
            return false;
        spdlog::debug("otlp: session {} is exported by another broker now", entry.first);
        return true;
    });
    for (const auto &[id, row] : *owned) {
        auto it = m_tracked.find(id);
        if (it == m_tracked.end()) {
            if (static_cast<int>(m_tracked.size()) >= m_options.maxSessions)
                continue;
            it = m_tracked.emplace(id, std::make_unique<Tracked>(row)).first;
        } else if (!(it->second->stored == row)) {
            // Someone moved the cursor under us: start this session over from what the store says.
            it->second = std::make_unique<Tracked>(row);
        }
        it->second->lastSeq = row.lastSeq;
    }
    for (auto &[id, tracked] : m_tracked) {
        if (m_stop)
            return;
        if (tracked->mapper.lastSeq() < tracked->lastSeq)
            catchUp(*tracked);
    }
}

void OtlpExporter::catchUp(Tracked &tracked)
{
    // Bounded per pass: a session of a million events is mapped a few batches at a time.
    const size_t cap = 4 * static_cast<size_t>(m_options.batchSize);
    while (!m_stop && tracked.spans.size() < cap && tracked.calls.size() < cap
           && tracked.mapper.lastSeq() < tracked.lastSeq) {
        auto events = m_store.readEvents(tracked.mapper.sessionId(), tracked.mapper.lastSeq() + 1, kReadPage);
        tracked.readFailed = !events;
        if (!events) {
            spdlog::debug("otlp: reading session {}: {}", tracked.mapper.sessionId(), events.error().message);
            return;
        }
        if (events->empty())
            return;
        for (const auto &event : *events) {
            Completed done;
            tracked.mapper.apply(event, done);
            for (auto &span : done.spans) {
                if (span.emitSeq <= tracked.stored.spanSeq)
                    continue;   // acknowledged before (a replay after a restart)
                if (span.statusMessage.size() > kMaxStatusMessage)
                    span.statusMessage.resize(kMaxStatusMessage);
                tracked.spans.push_back(std::move(span));
            }
            if (m_options.metrics) {
                for (auto &call : done.calls) {
                    if (call.emitSeq > tracked.stored.metricSeq)
                        tracked.calls.push_back(std::move(call));
                }
            }
        }
        if (static_cast<int>(events->size()) < kReadPage)
            tracked.lastSeq = std::max(tracked.lastSeq, tracked.mapper.lastSeq());
    }
}

bool OtlpExporter::deliver(Signal &signal, bool traces, int64_t passStartMs)
{
    if (steadyMs() < signal.nextAttemptSteadyMs)
        return !signal.down;
    const size_t limit = static_cast<size_t>(m_options.batchSize);
    while (!m_stop) {
        // Leases are renewed at the start of a pass: a long run of posts gives way to the next pass.
        if (wallMs() - passStartMs > m_options.leaseMs / 3)
            return true;
        const size_t max = signal.splitLimit > 0 ? std::min(signal.splitLimit, limit) : limit;
        // A batch: whole groups of one session's items that end at the same event, up to max.
        std::vector<ExportSpan> spans;
        std::vector<ModelCall> calls;
        std::vector<std::pair<std::string, size_t>> taken;
        for (auto &[id, tracked] : m_tracked) {
            size_t n = 0;
            if (traces) {
                while (n < tracked->spans.size()) {
                    const int64_t seq = tracked->spans[n].emitSeq;
                    size_t group = 0;
                    while (n + group < tracked->spans.size() && tracked->spans[n + group].emitSeq == seq)
                        ++group;
                    if (!spans.empty() && spans.size() + group > max)
                        break;
                    for (size_t i = 0; i < group; ++i)
                        spans.push_back(tracked->spans[n + i]);
                    n += group;
                }
            } else {
                while (n < tracked->calls.size() && calls.size() < max)
                    calls.push_back(tracked->calls[n++]);
            }
            if (n > 0)
                taken.emplace_back(tracked->mapper.sessionId(), n);
            if ((traces ? spans.size() : calls.size()) >= max)
                break;
        }
        const size_t count = traces ? spans.size() : calls.size();
        if (count == 0)
            return true;

        const std::string body = traces ? encodeTraces(m_producer, spans) : encodeMetrics(m_producer, calls);
        const PostResult result = signal.http->post(signal.url, body, m_stop);
        if (m_stop)
            return false;
        switch (verdictOf(result)) {
        case Verdict::Delivered: {
            if (signal.down)
                spdlog::info("otlp: {} accepts again after {} failed attempts in {} s; catching up", signal.url,
                             signal.failures, (steadyMs() - signal.downSinceSteadyMs) / 1000);
            signal.down = false;
            signal.failures = 0;
            const auto answer = nlohmann::json::parse(result.body, nullptr, false);
            if (answer.is_object() && answer.contains("partialSuccess") && answer["partialSuccess"].is_object()) {
                const auto &partial = answer["partialSuccess"];
                const auto rejected = partial.value(traces ? "rejectedSpans" : "rejectedDataPoints", nlohmann::json());
                const bool any = (rejected.is_string() && rejected.get<std::string>() != "0")
                    || (rejected.is_number() && rejected.get<int64_t>() != 0);
                if (any)
                    spdlog::warn("otlp: {} took the batch but rejected {} of it: {}", signal.url, rejected.dump(),
                                 partial.value("errorMessage", std::string()));
            }
            (traces ? m_spansDelivered : m_callsDelivered) += static_cast<int64_t>(count);
            acknowledge(taken, traces);
            break;
        }
        case Verdict::Split:
            if (count > 1) {
                signal.splitLimit = std::max<size_t>(count / 2, 1);
                spdlog::info("otlp: {} found {} items in one post too large (HTTP 413); sending at most {} per post",
                             signal.url, count, signal.splitLimit);
                break;
            }
            [[fallthrough]];
        case Verdict::Drop:
            spdlog::error("otlp: {} refused {} {} for good ({}); they are skipped (sessions {}{}). If this repeats, "
                          "report it with the receiver's message",
                          signal.url, count, traces ? "spans" : "model calls", describeFailure(result),
                          taken.front().first, taken.size() > 1 ? " and others" : "");
            m_dropped += static_cast<int64_t>(count);
            acknowledge(taken, traces);
            break;
        case Verdict::Retry: {
            ++m_failedPosts;
            ++signal.failures;
            int64_t waitMs = m_options.initialBackoffMs;
            for (int i = 1; i < signal.failures && waitMs < m_options.maxBackoffMs; ++i)
                waitMs *= 2;
            waitMs = std::min(waitMs, m_options.maxBackoffMs);
            static thread_local std::minstd_rand jitter{std::random_device{}()};
            waitMs = waitMs * (80 + static_cast<int64_t>(jitter() % 41)) / 100;
            if (auto asked = retryAfterMs(result.retryAfter, wallMs()))
                waitMs = *asked;
            signal.nextAttemptSteadyMs = steadyMs() + waitMs;
            outage(signal, result);
            return false;
        }
        }
    }
    return false;
}

void OtlpExporter::outage(Signal &signal, const PostResult &result)
{
    if (signal.down)
        return;   // one line per outage, not per retry
    signal.down = true;
    signal.downSinceSteadyMs = steadyMs();
    ++m_outages;
    const int64_t most = m_options.maxBackoffMs;
    spdlog::warn("otlp: cannot export {} to {}: {}. The {} wait in the store (the export cursor stays) and are sent "
                 "when it accepts them, retried with backoff up to {}: {}",
                 signal.traces ? "spans" : "metrics", signal.url, describeFailure(result),
                 signal.traces ? "spans" : "model calls",
                 most % 1000 == 0 ? std::to_string(most / 1000) + " s" : std::to_string(most) + " ms",
                 hint(result, signal.traces));
}

void OtlpExporter::acknowledge(std::vector<std::pair<std::string, size_t>> &taken, bool traces)
{
    auto popFront = [](auto &queue, size_t n) {
        queue.erase(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(std::min(n, queue.size())));
    };
    std::vector<std::string> ids;
    for (const auto &[id, count] : taken) {
        if (auto it = m_tracked.find(id); it != m_tracked.end()) {
            if (traces)
                popFront(it->second->spans, count);
            else
                popFront(it->second->calls, count);
        }
        ids.push_back(id);
    }
    advance(ids);
}

void OtlpExporter::advance(const std::vector<std::string> &sessionIds)
{
    struct Move {
        Tracked *tracked;
        CursorRow to;
        bool release;
    };
    std::vector<Move> moves;
    std::vector<store::SqlStatement> writes;
    const int64_t now = wallMs();
    std::vector<Tracked *> which;
    if (sessionIds.empty()) {
        for (auto &[id, tracked] : m_tracked)
            which.push_back(tracked.get());
    } else {
        for (const auto &id : sessionIds) {
            if (auto it = m_tracked.find(id); it != m_tracked.end())
                which.push_back(it->second.get());
        }
    }
    for (Tracked *tracked : which) {
        const CursorRow to = tracked->target(m_options.metrics);
        const bool release = tracked->complete();
        if (to == tracked->stored && !release)
            continue;
        writes.push_back(advanceStatement(m_options.owner, tracked->stored, to, release, now));
        moves.push_back({tracked, to, release});
    }
    if (writes.empty())
        return;
    if (auto written = runWrites(m_store, std::move(writes)); !written) {
        // Acknowledged but not recorded: the next pass writes these cursors again (from memory); only
        // a crash before then sends the batch a second time.
        if (!m_storeFailing)
            spdlog::warn("otlp: cannot record the export cursor in the store: {}; trying again next pass",
                         written.error().message);
        m_storeFailing = true;
        return;
    }
    std::vector<std::string> gone;
    for (const auto &move : moves) {
        std::string owner;
        auto row = cursorRow(m_store, move.tracked->mapper.sessionId(), &owner);
        if (!row)
            continue;   // read again next pass
        const bool ours = row->spanSeq == move.to.spanSeq && row->metricSeq == move.to.metricSeq
            && (owner == m_options.owner || (move.release && owner.empty()));
        if (ours)
            move.tracked->stored = move.to;
        if (!ours)
            spdlog::debug("otlp: session {}'s cursor was moved by another exporter; leaving it to them",
                          move.tracked->mapper.sessionId());
        if (!ours || move.release)
            gone.push_back(move.tracked->mapper.sessionId());
    }
    for (const auto &id : gone)
        m_tracked.erase(id);
}

} // namespace paddock::otlp
