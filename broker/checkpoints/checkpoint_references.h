#pragma once
// What keeps a checkpoint from collection (checkpoint_collector.h): the manifests named by the
// sessions whose checkpoints are kept, and by archived post-mortems.
//
// A session keeps the manifests its log names while it is live (not succeeded, failed or
// cancelled), and for retentionMs after it ended, counted from its last event (a debug shell on a
// failed session, say, starts the count again). Its log names a manifest in the `manifest` field
// of checkpoint, sandbox.released, sandbox.moved and sandbox.restored events (docs/events.md);
// the session's own last checkpoint is counted too. Sessions are read a page at a time, and only
// the logs of kept sessions are read, also a page at a time, and only past what the walk before
// read of them (a log only grows; ReferenceCache remembers): memory grows with the kept sessions
// and the manifests they name, not with all sessions.
//
// A post-mortem archived under "post-mortems/" is a JSON object whose string field "manifest"
// names the checkpoint of its workspace; every such manifest is kept.
//
// Threads: free functions; call from any thread (the stores are thread-safe). `stopping` is read
// between pages: when it turns true the walk ends with Unavailable.

#include "broker/checkpoints/blob_store.h"
#include "broker/store/event_store.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace paddock::checkpoints {

inline constexpr const char *kPostMortemPrefix = "post-mortems/";

// What each kept session's log has named so far, so that the next walk reads only what was
// appended since.
struct SessionManifests {
    int64_t readToSeq = 0;
    std::vector<std::string> manifests;
};
using ReferenceCache = std::unordered_map<std::string, SessionManifests>;
// The manifest each archived post-mortem names ("" for none), by its key, size and time: one is
// read once.
using PostMortemCache = std::unordered_map<std::string, std::string>;

struct References {
    std::unordered_set<std::string> manifests;
    int64_t liveSessions = 0;
    int64_t retainedSessions = 0;   // ended less than retention ago
    int64_t expiredSessions = 0;    // ended before: their manifests are not kept for them
    int64_t postMortems = 0;        // archived post-mortems that name a manifest
};

// The manifests kept sessions name. retentionMs 0: every ended session is kept. cache: what the
// walk before learnt; left holding the kept sessions only. Errors: the event store's (nothing may
// be collected without knowing every reference).
Result<References> sessionReferences(store::EventStore &events, int64_t nowUnixMs, int64_t retentionMs,
                                     const std::atomic<bool> &stopping, ReferenceCache &cache);

// Adds the manifests archived post-mortems name; cache is left holding the ones listed now. A
// post-mortem that cannot be read or parsed is an error (DataLoss naming its key): it may name a
// manifest, so nothing may be collected.
Status addPostMortemReferences(BlobStore &blobs, References &references, PostMortemCache &cache);

// The manifest id an event's payload names in its "manifest" field; "" for none.
std::string manifestNamedBy(const core::Event &event);

} // namespace paddock::checkpoints
