#pragma once
// Step workers: each leases one runnable session, derives its next action from the log (decide.h),
// performs that one action, compare-and-appends the result and lets the lease go. Workers hold
// nothing between steps; a worker that dies leaves a lease that expires, and the next worker derives
// the same action from the same log.
//
// Threads: start() spawns `workers` worker threads and one lease keeper that renews the leases of
// steps in progress. stop() may be called from any thread; it lets each worker finish its current
// step and joins them. runOneStep() is for tests and may be called from any thread. One more thread
// gives back the sandboxes of sessions paused (or waiting for a review) past the idle limit
// (compare-and-append, no lease: such sessions are not leased).

#include "broker/checkpoints/checkpointer.h"
#include "broker/cost/budgets.h"
#include "broker/cost/prices.h"
#include "broker/engine/decide.h"
#include "broker/engine/environment_decider.h"
#include "broker/review/review_policy.h"
#include "broker/llm/model_adapter.h"
#include "broker/placement/pool_set.h"
#include "broker/secrets/secret_store.h"
#include "broker/store/event_store.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace paddock::engine {

struct EngineOptions {
    int workers = 4;
    int64_t leaseMs = 30000;
    int64_t idleWaitMs = 200;                     // how long acquireLease waits before re-checking stop
    int64_t defaultCommandTimeoutMs = 300000;
    int64_t retryAfterUnavailableMs = 1000;       // back-off when a pool or model is unreachable
    int64_t drainMs = 2000;                       // stop(): how long steps in progress may finish
    std::string workerPrefix = "worker";
    // A paused session that still holds a sandbox gives it back after this long (checkpoint
    // first); the claim on resume restores the checkpoint. 0: never.
    int64_t sandboxIdleReleaseMs = 60000;
    // Where checkpoints go after each step and come back from after a move, an idle release or a
    // lost pool (docs/checkpoints.md). nullptr: none are taken (tests of other things).
    checkpoints::Checkpointer *checkpointer = nullptr;
    // Granted secrets go into each command's environment, and every event the engine appends is
    // redacted for every value this store holds. nullptr: no secrets (tests that need none).
    const secrets::SecretStore *secrets = nullptr;
    // Model tokens and snapshot storage are priced from this table; sandbox time at the price the
    // pool reports for the tier (recorded in sandbox.claimed).
    cost::PriceTable prices = cost::defaultPriceTable();
    // Agents' budgets and today's spending; nullptr: only the session's own budget applies.
    const cost::BudgetSource *budgets = nullptr;
    // When propose_change needs a review, and how risky it is.
    review::ReviewPolicy reviewPolicy;
    // Writes an agent's durable records ({key, value} pairs) for propose_change with records.
    // Empty: this broker keeps no records, and such changes are refused with that reason.
    std::function<Status(const std::string &agent, const nlohmann::json &records)> writeRecords;
    // Agents, tiers and tier rules: read_records, request_environment and the outcome of each tier
    // decision at release. nullptr: those tools answer with an error, and no outcome is recorded.
    const EnvironmentDecider *decider = nullptr;
};

// Finds the adapter for a session's model name; nullptr when none is configured.
using ModelLookup = std::function<llm::ModelAdapter *(const std::string &name)>;

// Bytes of each output stream kept in a recorded tool.result (head and tail kept, middle elided).
inline constexpr size_t kMaxRecordedOutputBytes = 64 * 1024;

struct StepOutcome {
    ActionKind action = ActionKind::None;
    bool appended = false;            // false: nothing to do, lost the race, or must retry later
    int64_t retryAfterMs = 0;
    std::string note;                 // why nothing was appended, for logs and tests
};

class StepEngine {
public:
    StepEngine(store::EventStore &store, const placement::PoolSet &pools, ModelLookup models,
               EngineOptions options = {});
    ~StepEngine();

    StepEngine(const StepEngine &) = delete;
    StepEngine &operator=(const StepEngine &) = delete;

    void start();
    // Lets steps in progress finish for up to drainMs, then cancels the pool calls they still wait
    // on (nothing is appended for those; the pool keeps their work under its idempotency key), and
    // joins the workers.
    void stop();

    // Takes one step of the session the lease is for.
    StepOutcome runOneStep(const store::Lease &lease);

private:
    void workerLoop(int index);
    void keeperLoop();

    StepOutcome waitForPool(const Action &action, const Error &error);
    StepOutcome claimSandbox(const Action &action, std::span<const core::Event> log);
    StepOutcome callModel(const Action &action, std::span<const core::Event> events);
    StepOutcome runTool(const Action &action);
    // What a pool's failure means for the step, when it is not the tool's own failure: the pool
    // is lost (sandbox.lost, the call repeats elsewhere), it did not answer (retry later) or the
    // sandbox is gone (sandbox.failed, the next step claims a new one). nullopt: the tool failed.
    std::optional<StepOutcome> poolTrouble(const Action &action, pool_client::PoolClient &pool, const Error &error);
    // propose_change: applied at once within policy, else opens a review; once decided, applies
    // the approved change or records the rejection as the tool's result.
    StepOutcome proposeChange(const Action &action);
    // A checkpoint of the workspace after a step that may have changed it, recorded with the
    // step's result once it is durable in the checkpoint store: if the pool is lost later, the
    // session resumes from here. Nothing is added when the workspace did not change.
    checkpoints::Outcome<void> addCheckpoint(const Action &action, pool_client::PoolClient &pool,
                                             std::vector<core::NewEvent> &events);
    // What a failed checkpoint after a step means: pool trouble (poolTrouble decides), a store
    // that did not answer (retry later), anything else pauses the session with the reason.
    StepOutcome checkpointFailed(const Action &action, pool_client::PoolClient &pool, const checkpoints::Failure &failure);
    // The checkpoint for giving a sandbox back (idle, tier move): the session's last when nothing
    // changed since, else a new one. {manifest, checkpoint ("current" or "new"), sizes}.
    checkpoints::Outcome<nlohmann::json> checkpointWorkspace(pool_client::PoolClient &pool, const core::SessionState &state);
    // Restores checkpoint `manifest` into a claimed sandbox; "" restores nothing (an empty workspace).
    checkpoints::Outcome<checkpoints::RestoreResult> restoreWorkspace(pool_client::PoolClient &pool,
                                                                      const std::string &sandboxId,
                                                                      const std::string &manifest);
    // The checkpoint store did not answer: checkpoint.waiting (what + store, code, reason) once,
    // then the step is retried.
    StepOutcome waitForStore(const Action &action, nlohmann::json what, const Error &error);
    // A claim whose restore failed: retried later, or (the checkpoint is damaged or gone from the
    // store) the session pauses with the reason.
    StepOutcome restoreFailed(const Action &action, pool_client::PoolClient &pool, const std::string &manifest,
                              const checkpoints::Failure &failure);
    // Applies an approved (or within-policy) change; fills the tool result.
    Status applyChange(const Action &action, pool_client::PoolClient *pool, const nlohmann::json &arguments,
                       nlohmann::json &result);
    // Cost events for the sandbox time and snapshot storage since they were last billed, and the
    // budget events the step's cost calls for, added to a step's events.
    void addCosts(const Action &action, std::vector<core::NewEvent> &events);
    StepOutcome releaseSandbox(const Action &action, std::span<const core::Event> log);
    // read_records and request_environment: answered by the broker, no sandbox involved.
    StepOutcome runBrokerTool(const Action &action);
    // request_environment whose tier_escalation review was decided: approved, a granted decision
    // with chooser human (the session moves at the next step); rejected or expired, the refusal.
    StepOutcome tierEscalationDecided(const Action &action, const EnvironmentDecider &decider,
                                      const agents::Agent &agent);
    // The env.outcome of the decision that gave the held sandbox its tier, from the pool's samples
    // and how the claim's commands ended; nullopt when there is none to record. Call before the
    // release (the pool forgets the samples then).
    std::optional<core::NewEvent> tierOutcome(pool_client::PoolClient *pool, const core::SessionState &state,
                                              std::span<const core::Event> log) const;
    StepOutcome moveTier(const Action &action, std::span<const core::Event> log);
    // Gives back the sandboxes of sessions paused for longer than sandboxIdleReleaseMs.
    void idleLoop();
    void releaseIdle(const std::string &sessionId);
    // Whether a worker is in a step of this session now (it holds the session's lease).
    bool hasActiveStep(const std::string &sessionId) const;
    StepOutcome appendResult(const Action &action, std::vector<core::NewEvent> events);

    store::EventStore &m_store;
    const placement::PoolSet &m_pools;
    ModelLookup m_models;
    EngineOptions m_options;

    std::atomic<bool> m_stopping{false};
    std::vector<std::thread> m_workers;
    std::thread m_keeper;
    std::thread m_idleReleaser;

    mutable std::mutex m_leasesMutex;             // guards m_activeLeases, m_keeperWake, m_idle
    std::condition_variable m_keeperWake;
    std::condition_variable m_idle;               // m_activeLeases became empty
    std::map<int, store::Lease> m_activeLeases;   // worker index -> lease of its step in progress
};

} // namespace paddock::engine
