#pragma once
// Retention of checkpoints: deletes what no session needs any more, and counts what the checkpoint
// store holds (docs/checkpoints.md, "Retention and collection").
//
// A pass is a mark and sweep over the store's keys:
//   1. list the chunks;
//   2. mark the manifests kept sessions and archived post-mortems name (checkpoint_references.h);
//   3. list the manifests; keep those marked, and those stored or used by a checkpoint less than
//      kCollectGraceMs ago (a checkpoint stores its chunks, then its manifest, and appends its event
//      last; GuardedBlobStore remembers the chunks it found already stored);
//   4. read every kept manifest and keep the chunks it names;
//   5. delete the manifests not kept, then the chunks not kept that were neither stored nor used
//      within the grace period.
// What never leads to a deletion: a kept manifest that cannot be read (damaged, or the store does
// not answer) keeps every chunk in that pass, and the report names it; a reference that cannot be
// known (the event store or an archived post-mortem does not answer) ends the pass before anything
// is deleted. Only chunks listed in step 1 can go: one stored during the pass stays.
//
// Figures: bytes and counts of chunks and manifests, the workspaces' file bytes summed over every
// manifest stored (logical bytes), the deduplication ratio (logical bytes / chunk bytes) and what a
// collection now would free (a dry run).
//
// Known limits: a pass holds the list of every chunk in memory (about 150 bytes each) and reads
// every kept manifest; figures read every manifest once (their file bytes are kept by id).
//
// Threads: the collector's own thread runs a pass firstPassDelayMs after start() and then every
// intervalMs, and the requests queued by collectLater() and figuresLater() (the gRPC service's),
// one at a time. Passes never overlap: collect() and figures() (tests) run theirs on the caller's
// thread after any under way. stop() ends a pass at its next step, answers what is still queued
// with Unavailable and joins; the destructor calls it.

#include "broker/checkpoints/checkpoint_references.h"
#include "broker/checkpoints/checkpoint_store.h"
#include "broker/checkpoints/guarded_blob_store.h"
#include "broker/store/event_store.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

namespace paddock::checkpoints {

inline constexpr int64_t kCollectGraceMs = 60 * 60 * 1000;
inline constexpr int64_t kCollectIntervalMs = 60 * 60 * 1000;
inline constexpr int64_t kFirstCollectionDelayMs = 60 * 1000;
inline constexpr int64_t kStorageFiguresMaxAgeMs = 60 * 1000;

struct CollectorOptions {
    int64_t retentionHours = 168;    // ended sessions' checkpoints kept this long; 0: forever
    int64_t intervalMs = kCollectIntervalMs;
    int64_t firstPassDelayMs = kFirstCollectionDelayMs;
    int64_t figuresMaxAgeMs = kStorageFiguresMaxAgeMs;   // figuresLater() answers figures this fresh
    std::function<int64_t()> clock;  // the wall clock in Unix ms; empty: the system's
};

// One pass: what it deleted or, for a dry run, would delete.
struct CollectionReport {
    bool dryRun = false;
    int64_t atUnixMs = 0;            // the pass's "now"
    int64_t durationMs = 0;
    int64_t chunksFreed = 0;
    int64_t chunkBytesFreed = 0;
    int64_t manifestsFreed = 0;
    int64_t manifestBytesFreed = 0;
    int64_t chunksKept = 0;          // named by a kept manifest
    int64_t manifestsKept = 0;       // named by a kept session or an archived post-mortem
    int64_t keptForGrace = 0;        // named by neither, but stored or used within the grace period
    int64_t missingManifests = 0;    // named by a kept session, not in the store
    int64_t liveSessions = 0;
    int64_t retainedSessions = 0;    // ended within the retention
    int64_t expiredSessions = 0;     // ended before: their checkpoints are not kept for them
    bool chunksSwept = true;         // false: a kept manifest could not be read, no chunk was deleted
    std::string problem;             // what kept the pass from freeing all it could, and the fix

    int64_t bytesFreed() const { return chunkBytesFreed + manifestBytesFreed; }
};

struct StorageFigures {
    int64_t computedUnixMs = 0;
    int64_t chunks = 0;
    int64_t chunkBytes = 0;
    int64_t manifests = 0;
    int64_t manifestBytes = 0;
    int64_t logicalBytes = 0;        // file bytes of every manifest stored, summed
    int64_t unreadableManifests = 0; // left out of logicalBytes
    CollectionReport wouldFree;      // a dry run at computedUnixMs

    int64_t bytesStored() const { return chunkBytes + manifestBytes; }
    // logicalBytes / chunkBytes: how many bytes of workspaces each stored byte holds; 0 without chunks.
    double dedupRatio() const { return chunkBytes > 0 ? double(logicalBytes) / double(chunkBytes) : 0.0; }
};

class CheckpointCollector {
public:
    // blobs is store's blob store (the broker wraps its backend in one); all three outlive this.
    CheckpointCollector(CheckpointStore &store, GuardedBlobStore &blobs, store::EventStore &events,
                        CollectorOptions options);
    ~CheckpointCollector();

    CheckpointCollector(const CheckpointCollector &) = delete;
    CheckpointCollector &operator=(const CheckpointCollector &) = delete;

    void start();
    void stop();

    CheckpointStore &store() { return m_store; }
    int64_t retentionHours() const { return m_options.retentionHours; }

    // One pass now on the caller's thread. Errors: the stores' (the event store, a listing, an
    // archived post-mortem), before anything was deleted; Unavailable when stopping.
    Result<CollectionReport> collect(int64_t nowUnixMs, bool dryRun);
    // Counts the store and runs a dry run, on the caller's thread.
    Result<StorageFigures> figures(int64_t nowUnixMs);
    // The last collection that was not a dry run (the background's or a requested one).
    std::optional<CollectionReport> lastCollection() const;

    // The same on the collector's thread; done runs there, or at once (answering Unavailable when
    // the collector is not running, or the cached figures when fresh enough).
    void collectLater(bool dryRun, std::function<void(Result<CollectionReport>)> done);
    void figuresLater(std::function<void(Result<StorageFigures>)> done);

private:
    struct Pass;
    using Job = std::function<void(bool run)>;   // run false: the collector stopped first

    Result<CollectionReport> runPass(int64_t nowUnixMs, bool dryRun, StorageFigures *figures);
    Status markManifests(Pass &pass, const References &references);
    void markChunks(Pass &pass);
    void countFigures(Pass &pass, StorageFigures &figures);
    void sweepManifests(Pass &pass);
    void sweepChunks(Pass &pass);
    bool recentlyUsed(const BlobInfo &blob, int64_t nowUnixMs) const;
    bool removeBlob(Pass &pass, const BlobInfo &blob);
    void post(Job job);
    void run();
    int64_t now() const { return m_options.clock(); }

    CheckpointStore &m_store;
    GuardedBlobStore &m_blobs;
    store::EventStore &m_events;
    CollectorOptions m_options;

    std::mutex m_passMutex;                                 // one pass at a time
    std::unordered_map<std::string, int64_t> m_fileBytes;   // manifest id -> file bytes; m_passMutex
    ReferenceCache m_referenceCache;                        // m_passMutex
    PostMortemCache m_postMortemCache;                      // m_passMutex

    mutable std::mutex m_mutex;
    std::condition_variable m_wake;
    std::deque<Job> m_jobs;                                 // guarded by m_mutex
    std::optional<StorageFigures> m_figures;                // guarded by m_mutex
    std::optional<CollectionReport> m_lastCollection;       // guarded by m_mutex
    bool m_running = false;                                 // guarded by m_mutex
    std::atomic<bool> m_stopping{false};
    std::thread m_thread;
};

} // namespace paddock::checkpoints
