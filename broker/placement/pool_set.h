#pragma once
// The pools a broker can place sandboxes on: their health over time, placement of each claim, and
// the verdict that a pool is lost (its sessions then move to another pool).
//
// Threads: built once at start-up (add), then used from any thread: clients are thread-safe and
// the health state has its own lock. startHealthChecks() runs one checker thread per pool (a pool
// that does not answer must not delay the checks of the others); stopHealthChecks() or the
// destructor joins them.
//
// Known limits: health is the pool's Status call (which also brings the tiers' counts placement
// needs), not grpc.health.v1; a pool that answers Status but cannot start sandboxes is healthy
// here, and its claims fail with their own errors.

#include "broker/pool_client/pool_client.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace paddock::placement {


struct HealthSample {
    int64_t timeUnixMs = 0;
    bool healthy = false;
    double latencyMs = 0;
    int warm = 0;             // summed over the pool's tiers
    int claimed = 0;
    int max = 0;
    std::string error;        // when not healthy
};

struct PoolHealth {
    bool checked = false;               // at least one check has finished
    bool healthy = false;
    std::string lastError;              // of the last failed check or call
    int64_t checkedUnixMs = 0;
    int64_t unhealthySinceUnixMs = 0;   // 0 while healthy
    std::vector<HealthSample> history;  // oldest first
    bool lost = false;                  // unhealthy for lostAfterMs: its sessions move to other pools
    // Sessions that left this pool for another after it was lost, since the broker started: how
    // many, and the last kMovedAwayKept of them, oldest first.
    int64_t movedAway = 0;
    std::vector<std::string> movedAwaySessions;
};

struct PoolSetOptions {
    int64_t healthIntervalMs = 1000;    // one Status call per pool per interval
    // A pool unhealthy for this long is lost: its sessions resume on another pool. Longer than a
    // restart of the pool process, shorter than anyone would wait for a step.
    int64_t lostAfterMs = 5000;
    size_t historySize = 300;           // five minutes at one check a second
};

class PoolSet {
public:
    PoolSet() = default;
    explicit PoolSet(PoolSetOptions options) : m_options(options) {}
    ~PoolSet();
    PoolSet(const PoolSet &) = delete;
    PoolSet &operator=(const PoolSet &) = delete;

    // Before startHealthChecks() and before any other thread uses the set.
    void setOptions(PoolSetOptions options) { m_options = options; }
    // transport: "plaintext", "tls" or "mtls"; token: calls carry a bearer token.
    void add(std::unique_ptr<pool_client::PoolClient> client, bool local, std::string transport = "plaintext", bool token = false);

    void startHealthChecks();
    void stopHealthChecks();

    pool_client::PoolClient *find(const std::string &name) const;

    // The pool a new sandbox of `tier` goes to: among the healthy pools that offer the tier and
    // have room (claimed < max, or a warm sandbox), one with a warm sandbox first, then the least
    // loaded (claimed / max, counting the claims placed here since its last Status), then the
    // configured order. Errors: ResourceExhausted when every pool offering the tier is full,
    // Unavailable when some pool does not answer (it may offer the tier), NotFound when every pool
    // answered and none offers it; each message names every pool and why it was passed over.
    Result<pool_client::PoolClient *> choose(const std::string &tier) const;
    // The price per sandbox-hour that pool `name` reports for `tier` (its latest Status), 0 when
    // unknown: what the session's sandbox time is billed at (docs/governance.md).
    double pricePerHour(const std::string &name, const std::string &tier) const;
    // A claim on `name` succeeded: counted in its load until its next Status.
    void noteClaimed(const std::string &name) const;

    // How many sandboxes of `tier` the answering pools hold and may hold, from their latest Status
    // and the claims placed since (a tier without a max counts as room for one more).
    struct TierRoom {
        int inUse = 0;
        int max = 0;
        int free = 0;
        int pools = 0;   // pools offering the tier that answered
    };
    TierRoom room(const std::string &tier) const;

    struct Entry {
        std::unique_ptr<pool_client::PoolClient> client;
        bool local = false;   // runs on the broker's own host
        std::string transport = "plaintext";
        bool token = false;
    };
    const std::vector<Entry> &entries() const { return m_entries; }
    // "a, b" (or "(none)"): the pools' names, for errors that name an unknown pool.
    std::string names() const;
    bool anyLocal() const;
    // The tiers offered by the pools that answer; nullopt when none answers (nothing is known).
    std::optional<std::set<std::string>> offeredTiers() const;
    // Each offered tier once, as the first pool (in configured order) that answers describes it:
    // limits and price, for environment decisions. Empty when no pool answers.
    std::vector<pool_client::TierStatus> tierCatalogue() const;
    void cancelInFlight() const;

    // Entry `index`'s Status: the health checker's latest while it runs, otherwise at most
    // kStatusMaxAgeMs old. Placement, submit-time tier checks and ListPools all ask for it.
    Result<pool_client::PoolStatus> statusOf(size_t index) const;
    static constexpr int64_t kStatusMaxAgeMs = 1000;
    // How long a caller waits for the checker's first Status of a pool before that pool counts
    // as unavailable (a pool that shook hands and went quiet must not stall submits for the
    // Status deadline).
    static constexpr int64_t kFirstCheckWaitMs = 500;

    PoolHealth health(size_t index) const;
    // A call to `name` failed with Unavailable: it counts as a failed check (the pool is marked
    // unhealthy at once instead of at its next check).
    void reportUnavailable(const std::string &name, const std::string &error) const;
    // True when `name` has been unhealthy for at least lostAfterMs. Unknown names are lost.
    bool isLost(const std::string &name) const;
    // A session left pool `name` (lost) for another: counted in its health (movedAway).
    void noteMovedAway(const std::string &name, const std::string &sessionId) const;
    static constexpr size_t kMovedAwayKept = 50;
    const PoolSetOptions &options() const { return m_options; }

private:
    struct State {
        int64_t fetchedAtUs = -1;
        Result<pool_client::PoolStatus> status = std::unexpected(Error{});
        int pendingClaims = 0;              // noteClaimed since the status was fetched
        PoolHealth health;
        int64_t unhealthySinceUs = -1;      // monotonic; -1 while healthy
        std::deque<HealthSample> history;
        bool firstCheckOverdue = false;     // a caller waited kFirstCheckWaitMs for it in vain
    };

    Result<pool_client::PoolStatus> fetch(size_t index) const;
    void record(size_t index, const Result<pool_client::PoolStatus> &status, double latencyMs) const;
    void markFailure(size_t index, const std::string &error) const;
    std::optional<size_t> indexOf(const std::string &name) const;
    void checkerLoop(size_t index);

    PoolSetOptions m_options;
    std::vector<Entry> m_entries;
    mutable std::mutex m_mutex;                 // guards m_states
    mutable std::vector<State> m_states;        // parallel to m_entries
    mutable std::condition_variable m_recorded; // a status was recorded (with m_mutex)

    std::atomic<bool> m_checking{false};
    std::mutex m_stopMutex;                     // with m_stopWake: wakes the checkers at stop
    std::condition_variable m_stopWake;
    std::vector<std::thread> m_checkers;
};

} // namespace paddock::placement
