#pragma once
// The step engine: takes one step of a runnable session at a time. A step leases the session,
// derives its next action from the log (decide.h), performs that one action, compare-and-appends
// the result and lets the lease go. Nothing is held between steps; a broker that dies leaves
// leases that expire, and the next one derives the same action from the same log.
//
// A step whose action waits on something slow (a command in its sandbox, a model, a claim) parks:
// the call goes out asynchronously (PoolClient::execAsync, ModelAdapter::nextAsync) and the step
// keeps its session's lease but no thread; when the call is done, its result is queued for a worker,
// which records it. So the number of sessions running commands at once is bounded by the pools, not
// by the broker's threads.
//
// Threads: start() spawns one leaser (it takes leases on runnable sessions and queues their steps),
// `workers` step threads (they decide, finish parked steps and append: CPU and the store's
// commit), one lease keeper that renews the leases of steps in progress, parked ones included, and
// one idle releaser that gives back the sandboxes of sessions paused (or waiting for a review) past
// the idle limit (compare-and-append, no lease: such sessions are not leased). stop() may be called
// from any thread. runOneStep() is for tests and may be called from any thread: it waits for the
// step's calls on the calling thread.

#include "broker/checkpoints/checkpointer.h"
#include "broker/cost/budgets.h"
#include "broker/cost/prices.h"
#include "broker/engine/claim_queue.h"
#include "broker/engine/decide.h"
#include "broker/engine/environment_decider.h"
#include "broker/engine/fold_cache.h"
#include "broker/engine/output_recorder.h"
#include "broker/review/review_policy.h"
#include "broker/llm/model_adapter.h"
#include "broker/placement/pool_set.h"
#include "broker/policy/outcome.h"
#include "broker/secrets/secret_store.h"
#include "broker/store/event_store.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace paddock::engine {

// Step threads when EngineOptions::workers is 0: enough to keep the store's commits and the
// decisions busy on this machine (two per core, at least 4). Commands and model calls hold none.
int defaultStepWorkers();

struct EngineOptions {
    int workers = 0;                              // step threads; 0: defaultStepWorkers()
    int64_t leaseMs = 30000;
    int64_t idleWaitMs = 200;                     // how long the leaser waits for a lease before re-checking stop
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
    // A running command's output into the log as tool.output events (output_recorder.h).
    OutputRecorderOptions output;
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
    bool parked = false;              // a call is in flight; its completion finishes the step
};

// The step in progress: the lease it holds, and how it waits for a call in flight. A worker's
// step parks (the call's completion is queued for a worker, the step returns parked); otherwise
// (runOneStep, the idle releaser) the calling thread waits for the call.
struct StepRun {
    store::Lease lease;
    bool park = false;
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

    // Takes one step of the session the lease is for, waiting for its calls on this thread.
    StepOutcome runOneStep(const store::Lease &lease);

private:
    // A unit of work for the step threads: a new step of a leased session, or the rest of a
    // parked one (`resume`, run once its call is done).
    struct Task {
        store::Lease lease;
        std::function<StepOutcome()> resume;
    };

    void leaserLoop();
    void workerLoop();
    void keeperLoop();
    StepOutcome step(const StepRun &run);
    // A step that did not park is over: its lease goes back (after retryAfterMs, if any).
    void finishStep(const store::Lease &lease, const StepOutcome &outcome);
    // Queues the rest of a parked step for a worker. Any thread (gRPC's, the model's event loop).
    void resume(const store::Lease &lease, std::function<StepOutcome()> rest);

    // Starts a call (start(done)) and continues with its result (then(result)): parked when the
    // step's run parks, else waiting on this thread. step_engine_internal.h.
    template <typename T>
    StepOutcome awaitCall(const StepRun &run, const std::function<void(std::function<void(T)>)> &start,
                          std::function<StepOutcome(T)> then);
    // Two calls started together, answered as one pair once both are done (for awaitCall).
    template <typename A, typename B, typename StartA, typename StartB>
    static std::function<void(std::function<void(std::pair<A, B>)>)> bothCalls(StartA startA, StartB startB);
    // Ends the calls of parked steps (pools' and models') with Cancelled; stop() calls it until
    // every one has called back.
    void cancelCalls();
    // Where a step's checkpoint work runs between its pool calls (hashing, the store's writes):
    // queued for a step worker when the step parks, else on the thread waiting for the call.
    checkpoints::Executor storeWork(const StepRun &run);
    // Takes a checkpoint of the session's sandbox against its last one (parked while it is taken),
    // then `then` with the outcome. Needs EngineOptions::checkpointer.
    using Taken = checkpoints::Outcome<checkpoints::TakeResult>;
    StepOutcome takeCheckpoint(const StepRun &run, pool_client::PoolClient &pool, const core::SessionState &state,
                               std::function<StepOutcome(Taken)> then);

    // `line`: the session's place in the line for sandboxes, added to sandbox.waiting.
    StepOutcome waitForPool(const Action &action, const Error &error, const nlohmann::json &line = nullptr);
    // The session's place in its tier's line (claim_queue.h): nullopt when it may claim now, else
    // the wait, said in sandbox.waiting. poolsFull: choose() found every pool full (its error names
    // each pool): the session waits in any case.
    std::optional<StepOutcome> waitInLine(const Action &action, const Error *poolsFull);
    // What a call's answer comes to: events to append (and how long the session waits before its
    // next step), or (`instead`) the step's outcome without an append of its own.
    struct Effect {
        std::vector<core::NewEvent> events;
        int64_t retryAfterMs = 0;
        std::optional<StepOutcome> instead;
    };
    StepOutcome record(const Action &action, Effect effect);

    // What a claim needs from the log before it: the loss it recovers from (null: none), why the
    // sandbox before it went, and a pool snapshot an earlier broker recorded ("" if none).
    struct ClaimHistory {
        nlohmann::json lost;
        std::string after;
        std::string legacySnapshot;
    };
    // Claims a sandbox; with action.withModelCall (and the model's context) asks the model at the
    // same time. step_engine_claims.cpp.
    StepOutcome claimSandbox(const StepRun &run, const Action &action, std::span<const core::Event> log,
                             std::optional<llm::ModelContext> context);
    using Claimed = Result<pool_client::ClaimedSandbox>;
    using Restored = checkpoints::Outcome<checkpoints::RestoreResult>;
    // A claimed sandbox gets the workspace of checkpoint `manifest` (restoreWorkspace), then `then`
    // goes on with both answers; a failed claim goes on at once.
    StepOutcome restoreInto(const StepRun &run, const std::string &manifest, pool_client::PoolClient &pool,
                            Claimed claim, std::function<StepOutcome(Claimed, Restored)> then);
    // The claim's answer and its restore: sandbox.claimed and the rest.
    Effect claimEffect(const Action &action, pool_client::PoolClient &pool, const ClaimHistory &history,
                       Claimed claim, Restored restored);
    // Both answers of a claim made beside a model call, recorded in one append.
    StepOutcome claimedWithTurn(const Action &action, pool_client::PoolClient &pool, const ClaimHistory &history,
                                Claimed claim, Restored restored, Result<llm::ModelTurn> turn);
    // record(), and the Pools view told of a session that moved away from a lost pool.
    StepOutcome record(const Action &action, Effect effect, const ClaimHistory &history);
    // The session's model adapter (noted, so that stop() can cancel its calls); nullptr if none.
    llm::ModelAdapter *adapterFor(const Action &action);
    StepOutcome noSuchModel(const Action &action);
    StepOutcome callModel(const StepRun &run, const Action &action, llm::ModelContext context);
    // A model's turn and the seq the log ends at after its streamed answer (model.delta) was
    // recorded: the step appends its model.response after that.
    using AskedTurn = std::pair<Result<llm::ModelTurn>, int64_t>;
    // Starts the model's call (for awaitCall) with its streamed answer recorded as it comes.
    std::function<void(std::function<void(AskedTurn)>)> askModel(const Action &action, llm::ModelAdapter *adapter,
                                                                 llm::ModelContext context);
    // The model's answer: model.response, its cost and its tool calls (or the end of the session).
    Effect modelEffect(const Action &action, Result<llm::ModelTurn> turn);
    StepOutcome runTool(const StepRun &run, const Action &action);
    // The rest of run_command once the pool answered.
    StepOutcome commandDone(const StepRun &run, const Action &action, pool_client::PoolClient &pool,
                            std::shared_ptr<const secrets::SecretsSnapshot> secrets, Result<pool_client::ExecOutcome> ran);
    // The end of every sandbox tool's step: a failed call's meaning (poolTrouble), the checkpoint
    // after a step that may have changed the workspace (parked while it is taken), the append.
    StepOutcome toolDone(const StepRun &run, const Action &action, pool_client::PoolClient &pool, Status done,
                         nlohmann::json result, std::vector<core::NewEvent> events);
    // Takes the checkpoint after a step that may have changed the workspace, then appends `events`
    // with it (checkpointFailed when it could not be kept).
    StepOutcome checkpointThenAppend(const StepRun &run, const Action &action, pool_client::PoolClient &pool,
                                     std::vector<core::NewEvent> events);
    // What a pool's failure means for the step, when it is not the tool's own failure: the pool
    // is lost (sandbox.lost, the call repeats elsewhere), it did not answer (retry later) or the
    // sandbox is gone (sandbox.failed, the next step claims a new one). nullopt: the tool failed.
    std::optional<StepOutcome> poolTrouble(const Action &action, pool_client::PoolClient &pool, const Error &error);
    // propose_change: applied at once within policy, else opens a review; once decided, applies
    // the approved change or records the rejection as the tool's result.
    StepOutcome proposeChange(const StepRun &run, const Action &action);
    // A checkpoint of the workspace after a step that may have changed it, recorded with the
    // step's result once it is durable in the checkpoint store: if the pool is lost later, the
    // session resumes from here. Nothing is added when the workspace did not change.
    checkpoints::Outcome<void> addCheckpoint(const Action &action, pool_client::PoolClient &pool, Taken taken,
                                             std::vector<core::NewEvent> &events);
    // What a failed checkpoint after a step means: pool trouble (poolTrouble decides), a store
    // that did not answer (retry later), anything else pauses the session with the reason.
    StepOutcome checkpointFailed(const Action &action, pool_client::PoolClient &pool, const checkpoints::Failure &failure);
    // The checkpoint for giving a sandbox back (idle, tier move): the session's last when nothing
    // changed since, else a new one. {manifest, checkpoint ("current" or "new"), sizes}.
    checkpoints::Outcome<nlohmann::json> checkpointWorkspace(pool_client::PoolClient &pool, const core::SessionState &state);
    // The same, parked while it is taken (tier moves): `then` gets what checkpointWorkspace returns.
    using Workspace = checkpoints::Outcome<nlohmann::json>;
    StepOutcome checkpointWorkspaceThen(const StepRun &run, pool_client::PoolClient &pool,
                                        const core::SessionState &state, std::function<StepOutcome(Workspace)> then);
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
    // Applies an approved (or within-policy) change that needs no pool call (an egress exception,
    // a secret's grant, records) and fills the tool result; nullopt for a diff (applyDiff).
    std::optional<Status> applyChange(const Action &action, pool_client::PoolClient *pool,
                                      const nlohmann::json &arguments, nlohmann::json &result);
    // A diff, applied by `patch` in the sandbox (the step parks on each call), then changeApplied.
    StepOutcome applyDiff(const StepRun &run, const Action &action, pool_client::PoolClient &pool,
                          const nlohmann::json &arguments, nlohmann::json result);
    // An applied (or refused) change's tool.result, with the checkpoint after it, appended.
    StepOutcome changeApplied(const StepRun &run, const Action &action, pool_client::PoolClient *pool, Status applied,
                              nlohmann::json result);
    // Cost events for the sandbox time and snapshot storage since they were last billed, and the
    // budget events the step's cost calls for, added to a step's events.
    void addCosts(const Action &action, std::vector<core::NewEvent> &events);
    StepOutcome releaseSandbox(const StepRun &run, const Action &action, std::span<const core::Event> log);
    // Gives the session's sandbox back, then appends `events` and sandbox.released (`payload`).
    StepOutcome releaseThenAppend(const StepRun &run, const Action &action, pool_client::PoolClient &pool,
                                  nlohmann::json payload, std::vector<core::NewEvent> events);
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
    // The same, parked while the pool's samples are read: `then` gets the event.
    StepOutcome tierOutcomeThen(const StepRun &run, pool_client::PoolClient *pool, const core::SessionState &state,
                                std::span<const core::Event> log,
                                std::function<StepOutcome(std::optional<core::NewEvent>)> then);
    // What tierOutcome reads from the log (everything but the pool's samples): nullopt when there
    // is no outcome to record.
    struct PendingOutcome {
        policy::OutcomeInput input;
        std::string decisionId;
        std::string heldTier;
        int64_t claimUnixMs = 0;   // the held sandbox's sandbox.claimed
    };
    std::optional<PendingOutcome> pendingOutcome(pool_client::PoolClient *pool, const core::SessionState &state,
                                                 std::span<const core::Event> log) const;
    core::NewEvent outcomeEvent(PendingOutcome pending, const core::SessionState &state,
                                const Result<std::vector<pool_client::ResourcePoint>> &samples) const;
    StepOutcome moveTier(const StepRun &run, const Action &action, std::span<const core::Event> log);
    // A tier move's checkpoint, claim and restore, once the outcome of the tier left is known.
    StepOutcome moveWorkspace(const StepRun &run, const Action &action, pool_client::PoolClient &from,
                              pool_client::PoolClient &to, const std::string &fromTier,
                              std::optional<core::NewEvent> leftTier);
    // The end of a tier move once the new sandbox is claimed and restored: the append, and the
    // sandbox that lost (the old one, or the new one on a lost race) given back.
    StepOutcome moved(const Action &action, pool_client::PoolClient &from, pool_client::PoolClient &to,
                      const std::string &fromTier, const std::optional<core::NewEvent> &leftTier,
                      const nlohmann::json &snapshot, Claimed claimed, Restored restored);
    // Gives back the sandboxes of sessions paused for longer than sandboxIdleReleaseMs.
    void idleLoop();
    void releaseIdle(const std::string &sessionId);
    // Whether a step of this session is in progress now, parked or not (it holds the session's lease).
    bool hasActiveStep(const std::string &sessionId) const;
    StepOutcome appendResult(const Action &action, std::vector<core::NewEvent> events);

    store::EventStore &m_store;
    const placement::PoolSet &m_pools;
    ModelLookup m_models;
    EngineOptions m_options;

    std::atomic<bool> m_stopping{false};
    std::vector<std::thread> m_workers;
    std::thread m_leaser;
    std::thread m_keeper;
    std::thread m_idleReleaser;

    mutable std::mutex m_leasesMutex;             // guards everything below
    std::condition_variable m_keeperWake;
    std::condition_variable m_idle;               // m_activeLeases or m_callsInFlight became empty
    std::condition_variable m_taskReady;          // a task was queued, or the workers are to quit
    std::condition_variable m_taskSpace;          // a new step was taken off m_fresh
    std::map<uint64_t, store::Lease> m_activeLeases;   // lease token -> lease of a step in progress (parked too)
    std::deque<Task> m_resumed;                   // parked steps whose call is done: go first
    std::deque<Task> m_fresh;                     // leased sessions whose step has not started
    int m_callsInFlight = 0;                      // calls of parked steps that have not called back
    bool m_cancelling = false;                    // stop() is ending calls: no new ones start
    bool m_workersQuit = false;                   // the queues are drained: workers exit
    std::set<llm::ModelAdapter *> m_adapters;     // adapters with calls made through this engine

    // Session -> when this broker's append of its latest tool.call was acknowledged (wall clock,
    // us): run_command's start_after_ms is measured from it. Taken by the command's step.
    std::unordered_map<std::string, int64_t> m_callRecordedUnixUs;
    FoldCache m_folds;                            // each live session's log folded so far
    ClaimQueue m_claimQueue;                      // sessions waiting for a sandbox, per tier
    OutputRecorder m_output;                      // running commands' output, as printed
};

} // namespace paddock::engine
