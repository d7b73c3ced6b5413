#pragma once
// Exports every session's trace from the store to an OTLP/HTTP receiver (JSON encoding): POST
// {endpoint}/v1/traces with the spans of span_mapping.h, and {endpoint}/v1/metrics with the GenAI
// client histograms (otlp_json.h). docs/observability.md is the user's side of it.
//
// How it goes, on a thread of its own that only reads the store and writes its cursor table: each
// pass looks for sessions with events past their export cursor (export_cursor.h), claims them (a
// lease in the cursor row), reads their new events and maps them to spans, and posts the spans that
// have ended in batches of batchSize. A batch's cursors advance (a compare-and-set, in one
// transaction) only after the receiver acknowledged it, so a crash of the broker loses nothing, and
// repeats at most the batch in flight, with the same ids (a receiver that dedups by id sees no
// change). The engine never waits for it: nothing on the append path calls it.
//
// A receiver that fails: 408, 429, 5xx, no answer, or a refusal an operator must fix (401, 403,
// 404) keep the cursor and are retried with exponential backoff up to maxBackoffMs, or after the
// receiver's Retry-After. The first failure of an outage is logged (warn) naming the URL, what came
// back and what to do; the retries are not; the first success after it is logged (info). A 413
// splits the batch; a 400 (a payload the receiver will never take) drops it, logged as an error.
// Metrics wait while traces fail.
//
// Known limits: a session whose spans are in memory (at most maxSessions at once) holds its lease
// and its mapper until its export is complete; the rest wait. A crashed broker's leases on a shared
// PostgreSQL database are taken over only once they run out (leaseMs); on SQLite (one broker per
// file) a restart takes them at once.
//
// Threads: start() and stop() from the owner's thread; stats() from any. The exporter's own thread
// does everything else.

#include "broker/otlp/otlp_json.h"
#include "broker/otlp/otlp_span.h"
#include "broker/store/event_store.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace paddock::otlp {

struct ExporterOptions {
    std::string endpoint;                                        // base URL: /v1/traces and /v1/metrics are added
    std::vector<std::pair<std::string, std::string>> headers;    // sent with every post (never logged)
    int64_t timeoutMs = 10000;          // per post
    int batchSize = 512;                // spans (model calls, for metrics) per post
    int64_t intervalMs = 1000;          // a pass at least this often
    int64_t initialBackoffMs = 500;     // the first retry's wait, doubled up to maxBackoffMs
    int64_t maxBackoffMs = 30000;
    bool metrics = true;
    std::string serviceName = "paddockd";
    std::string serviceVersion;         // empty: this build's version
    std::string owner;                  // this exporter's name in the cursor rows; empty: host:pid:random
    // No other exporter can use this store (SQLite: one broker per file): rows another owner holds
    // are taken without waiting out their lease (theirs was a crashed broker's).
    bool exclusiveStore = false;
    int64_t leaseMs = 0;                // 0: the larger of 30 s and three posts' timeout
    int maxSessions = 4096;             // sessions mapped in memory at once
};

class OtlpExporter {
public:
    struct Stats {
        int64_t spansDelivered = 0;     // acknowledged by the receiver
        int64_t callsDelivered = 0;     // model calls counted in acknowledged metric posts
        int64_t failedPosts = 0;
        int64_t outages = 0;            // failures logged (one per outage)
        int64_t dropped = 0;            // spans or calls the receiver refused with 400
        int64_t passes = 0;             // passes over the store made so far
    };

    OtlpExporter(store::EventStore &store, ExporterOptions options);
    ~OtlpExporter();
    OtlpExporter(const OtlpExporter &) = delete;
    OtlpExporter &operator=(const OtlpExporter &) = delete;

    void start();
    // Ends the post in flight, joins the thread and gives back this exporter's leases. Idempotent.
    void stop();

    Stats stats() const;
    const std::string &owner() const { return m_options.owner; }

private:
    struct Tracked;
    struct Signal;

    void run();
    // One pass; true when there is more to do at once.
    bool pass();
    void claimAndCatchUp(int64_t nowMs, bool &more);
    void catchUp(Tracked &tracked);
    // Posts batches of one signal while the receiver takes them; false when it failed.
    bool deliver(Signal &signal, bool traces, int64_t passStartMs);
    void acknowledge(std::vector<std::pair<std::string, size_t>> &taken, bool traces);
    // Writes the cursors of the sessions named (all when empty) that moved; drops the sessions that
    // are done or that another exporter took.
    void advance(const std::vector<std::string> &sessionIds);
    void outage(Signal &signal, const struct PostResult &result);

    store::EventStore &m_store;
    ExporterOptions m_options;
    Producer m_producer;

    std::thread m_thread;
    std::atomic<bool> m_stop{false};
    std::mutex m_wakeMutex;
    std::condition_variable m_wake;
    bool m_started = false;

    // The exporter thread's own.
    std::unique_ptr<Signal> m_traces;
    std::unique_ptr<Signal> m_metrics;
    std::map<std::string, std::unique_ptr<Tracked>> m_tracked;   // by session id
    int64_t m_afterOrd = 0;
    int64_t m_renewedMs = 0;          // when the leases were last renewed (wall clock)
    bool m_storeFailing = false;

    std::atomic<int64_t> m_spansDelivered{0}, m_callsDelivered{0}, m_failedPosts{0}, m_outages{0}, m_dropped{0},
        m_passes{0};
};

} // namespace paddock::otlp
